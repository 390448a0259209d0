#include "kwatt/core/row_batch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>

namespace kwatt::row_batch_test {
namespace {

TEST(StringInterner, DenseIdsInOrderOfFirstAppearance) {
  StringInterner interner;
  EXPECT_EQ(interner.Intern("ecotype-7"), 0u);
  EXPECT_EQ(interner.Intern("{}"), 1u);
  EXPECT_EQ(interner.Intern("ecotype-7"), 0u);
  EXPECT_EQ(interner.Intern(""), 2u);
  EXPECT_EQ(interner.size(), 3u);
  EXPECT_EQ(interner.Get(0), "ecotype-7");
  EXPECT_EQ(interner.Get(1), "{}");
  EXPECT_EQ(interner.Get(2), "");
}

TEST(StringInterner, ViewsStayValidAndDoNotAliasTheArgument) {
  StringInterner interner;
  std::string text = "taurus-7";
  uint32_t id = interner.Intern(text);
  std::string_view view = interner.Get(id);
  text = "overwritten";
  for (int i = 0; i < 10000; ++i) interner.Intern("device-" + std::to_string(i));
  EXPECT_EQ(view, "taurus-7");
  EXPECT_EQ(interner.Get(id).data(), view.data());
  EXPECT_EQ(interner.Intern("taurus-7"), id);
  EXPECT_EQ(interner.Intern("device-9999"), 10000u);
}

// Caches of what ids mean are keyed on the serial: an interner made where a freed one was (the
// next archive's reader) is another one, and so is one emptied by a move.
TEST(StringInterner, ASerialIsNeverReused) {
  std::optional<StringInterner> slot;
  slot.emplace();
  const StringInterner* address = &*slot;
  uint64_t first = slot->serial();
  slot.reset();
  slot.emplace();
  EXPECT_EQ(&*slot, address);
  EXPECT_NE(slot->serial(), first);

  slot->Intern("nova-1");
  uint64_t before = slot->serial();
  StringInterner moved = std::move(*slot);
  EXPECT_EQ(moved.serial(), before);
  EXPECT_EQ(moved.Get(0), "nova-1");
  EXPECT_NE(slot->serial(), before);
  EXPECT_EQ(slot->size(), 0u);
  EXPECT_EQ(slot->Intern("nova-4"), 0u);
}

RowBatch OneRowBatch(StringInterner* interner, std::string_view raw, double value) {
  RowBatch batch;
  batch.time.push_back(1745000000LL * kNanosPerSecond);
  batch.utc_offset.push_back(7200);
  batch.device.push_back(interner->Intern("d"));
  batch.metric.push_back(interner->Intern("m"));
  batch.value.push_back(value);
  batch.labels.push_back(interner->Intern("{}"));
  batch.raw.append(raw);
  batch.raw_end.push_back(uint32_t(batch.raw.size()));
  return batch;
}

TEST(RowBatch, AppendRowRawRowAndClear) {
  StringInterner interner;
  RowBatch a = OneRowBatch(&interner, "{\"a\":1}", 1);
  RowBatch b = OneRowBatch(&interner, "{\"b\":22}", 2);
  RowBatch all;
  EXPECT_TRUE(all.empty());
  all.AppendRow(a, 0);
  all.AppendRow(b, 0);
  all.AppendRow(a, 0);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all.RawRow(0), "{\"a\":1}");
  EXPECT_EQ(all.RawRow(1), "{\"b\":22}");
  EXPECT_EQ(all.RawRow(2), "{\"a\":1}");
  EXPECT_EQ(all.raw_end, (std::vector<uint32_t>{7, 15, 22}));
  EXPECT_EQ(all.value, (std::vector<double>{1, 2, 1}));
  EXPECT_EQ(all.utc_offset[1], 7200);
  EXPECT_EQ(interner.Get(all.labels[2]), "{}");
  all.Clear();
  EXPECT_TRUE(all.empty());
  EXPECT_TRUE(all.raw.empty());
  EXPECT_TRUE(all.raw_end.empty());
  EXPECT_TRUE(all.device.empty());
}

// A row without its text is written as Kwollect renders it; one with its text, as sent.
TEST(AppendRowText, FromFieldsAsKwollectRendersAndFromRawAsSent) {
  StringInterner interner;
  RowBatch batch;
  auto add = [&](UnixNanos t, int32_t offset, double value, const char* labels) {
    batch.time.push_back(t);
    batch.utc_offset.push_back(offset);
    batch.device.push_back(interner.Intern("nova-1"));
    batch.metric.push_back(interner.Intern("wattmetre_power_watt"));
    batch.value.push_back(value);
    batch.labels.push_back(interner.Intern(labels));
  };
  constexpr UnixNanos kT = 1744977600LL * 1'000'000'000;  // 2025-04-18T12:00:00Z
  add(kT + 20'000'000, 7200, 98.5, "{}");
  add(kT, 3600, 98, R"({"_device_orig":["wattmetre1-port7"]})");
  add(kT + 123'456'000, 7200, std::nan(""), "{}");
  std::string out;
  for (size_t i = 0; i < batch.size(); ++i) {
    AppendRowText(&out, batch, i, interner);
    out += '\n';
  }
  EXPECT_EQ(out,
            "{\"timestamp\":\"2025-04-18T14:00:00.02+02:00\",\"device_id\":\"nova-1\","
            "\"metric_id\":\"wattmetre_power_watt\",\"value\":98.5,\"labels\":{}}\n"
            "{\"timestamp\":\"2025-04-18T13:00:00+01:00\",\"device_id\":\"nova-1\","
            "\"metric_id\":\"wattmetre_power_watt\",\"value\":98,"
            "\"labels\":{\"_device_orig\":[\"wattmetre1-port7\"]}}\n"
            "{\"timestamp\":\"2025-04-18T14:00:00.123456+02:00\",\"device_id\":\"nova-1\","
            "\"metric_id\":\"wattmetre_power_watt\",\"value\":\"NaN\",\"labels\":{}}\n");
  batch.raw = "r0r1r2";
  batch.raw_end = {2, 4, 6};
  std::string raw;
  AppendRowText(&raw, batch, 1, interner);
  EXPECT_EQ(raw, "r1");
}

// The writer's text is AppendRowText's, byte for byte: rows that share seconds and ids or not, any
// offset, the ends of kwatt's time range, ids of two interners one after the other (Reset()).
TEST(RowTextWriter, WritesWhatAppendRowTextWrites) {
  std::mt19937_64 random(7);
  RowTextWriter writer;
  for (int round = 0; round < 2; ++round) {
    StringInterner interner;  // a new interner each round: the writer is Reset() for it
    writer.Reset();
    RowBatch batch;
    constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    std::vector<UnixNanos> times = {kMin, kMin + 999'999'999, kMax, -1, 0, 1};
    UnixNanos t = 1744977600LL * kNanosPerSecond;
    for (int i = 0; i < 2000; ++i) {
      t += int64_t(random() % 3) * int64_t(random() % 2 ? 20'000'000 : 1'000);  // ties too
      times.push_back(t);
    }
    const char* names[] = {"nova-1", "nova-\"quoted\"", "m\xc3\xa9tric", ""};
    for (UnixNanos time : times) {
      batch.time.push_back(time);
      batch.utc_offset.push_back(random() % 5 == 0 ? -12600 : (random() % 2 ? 3600 : 7200));
      batch.device.push_back(interner.Intern(names[(random() + round) % 4]));
      batch.metric.push_back(interner.Intern(names[random() % 3]));
      batch.value.push_back(random() % 7 == 0 ? std::nan("") : double(random() % 100000) / 8);
      batch.labels.push_back(interner.Intern(random() % 2 ? "{}" : R"({"a":"b"})"));
    }
    std::string expected, written;
    for (size_t i = 0; i < batch.size(); ++i) {
      AppendRowText(&expected, batch, i, interner);
      writer.Append(&written, batch, i, interner);
    }
    ASSERT_EQ(written, expected);
  }
}

}  // namespace
}  // namespace kwatt::row_batch_test
