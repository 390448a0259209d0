#include "kwatt/core/row_batch.h"

#include <gtest/gtest.h>

#include <string>

namespace kwatt {
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

}  // namespace
}  // namespace kwatt
