#include "src/server/store_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kwatt/core/null_value.h"
#include "kwatt/store/sqlite_store.h"
#include "src/server/pushed.h"
#include "src/server/row_stream.h"
#include "src/testing/postgres.h"
#include "src/testing/temp_dir.h"

namespace kwatt::server::internal::store_rows_test {
namespace {

TEST(SummaryAccumulator, SkipsNullsAsSqlsAvgAndMaxDo) {
  SummaryAccumulator nulls;
  nulls.Add(NullValue());
  nulls.Add(NullValue());
  EXPECT_EQ(nulls.count(), 2);                   // the bucket has a row...
  EXPECT_TRUE(IsNullValue(nulls.Value(false)));  // ...whose value is null
  EXPECT_TRUE(IsNullValue(nulls.Value(true)));
  SummaryAccumulator mixed;
  for (double v : {NullValue(), 4.0, 6.0}) mixed.Add(v);
  EXPECT_EQ(mixed.Value(false), 5);
  EXPECT_EQ(mixed.Value(true), 6);
  SummaryAccumulator nan;  // "NaN" is a value: it is averaged, as PostgreSQL does
  for (double v : {4.0, std::numeric_limits<double>::quiet_NaN()}) nan.Add(v);
  EXPECT_TRUE(std::isnan(nan.Value(false)) && !IsNullValue(nan.Value(false)));
}

constexpr UnixNanos kT0 = 1713441600LL * kNanosPerSecond;  // 2024-04-18T14:00:00+02:00
constexpr UnixNanos kLater = kT0 + 7200 * kNanosPerSecond;

std::string Drain(MetricsAnswer& answer, size_t piece = 1 << 16) {
  std::string out;
  while (answer.Next(&out, piece)) {
  }
  EXPECT_TRUE(answer.status().ok()) << answer.status().ToString();
  EXPECT_TRUE(answer.finished());
  return out;
}

// An answer read with NextRows, its rows rendered as the text Next() gives.
std::string Render(MetricsAnswer& answer, size_t max_rows) {
  std::string out = "[";
  RowBatch batch;
  const StringInterner* interner = nullptr;
  int64_t rows = 0;
  while (answer.NextRows(&batch, &interner, max_rows)) {
    EXPECT_GE(batch.size(), 1u);
    EXPECT_LE(batch.size(), max_rows);
    EXPECT_TRUE(batch.raw.empty());
    for (size_t i = 0; i < batch.size(); ++i) {
      if (rows++ > 0) out += ",\n";
      AppendRowText(&out, batch, i, *interner);
    }
  }
  EXPECT_TRUE(answer.status().ok()) << answer.status().ToString();
  EXPECT_TRUE(batch.empty());
  EXPECT_EQ(answer.rows_written(), rows);
  return out + "]";
}

// The same rows in a store and in the simulated server's memory (pushed custom metrics), so that
// both answers can be compared.
class StoreRowsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (dir_.root() / "store.kwatt").string();
    Result<std::unique_ptr<StorePool>> pool = StorePool::Open(path_, 2);
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    pool_ = std::move(*pool);
  }

  void Add(const std::vector<PushedRow>& rows) {
    ASSERT_TRUE(pushed_.Add("lyon", rows).ok());
    StringInterner interner;
    RowBatch batch = ToRowBatch(rows, &interner);
    Result<StorePool::Lease> lease = pool_->Acquire();
    ASSERT_TRUE(lease.ok());
    ASSERT_TRUE((*lease)->Append(batch, interner).ok());
    ASSERT_TRUE((*lease)->Flush().ok());
  }

  // What the simulated server answers for these rows.
  std::string Simulated(const std::vector<std::string>& devices,
                        const std::vector<std::string>& metrics, UnixNanos start, UnixNanos end,
                        bool summary, UnixNanos now = kLater, bool as_rate = false) {
    std::vector<simulate::OutputSeries> series;
    for (const std::string& device : devices) {
      for (simulate::OutputSeries& s : pushed_.SeriesOf("lyon", device, metrics)) {
        series.push_back(std::move(s));
      }
    }
    RowStream stream(std::move(series), start, end, now, summary, as_rate);
    return Drain(stream);
  }

  std::unique_ptr<RowStream> SimulatedStream(const std::vector<std::string>& devices,
                                             UnixNanos start, UnixNanos end) {
    std::vector<simulate::OutputSeries> series;
    for (const std::string& device : devices) {
      for (simulate::OutputSeries& s : pushed_.SeriesOf("lyon", device, {}))
        series.push_back(std::move(s));
    }
    return std::make_unique<RowStream>(std::move(series), start, end, kLater, false);
  }

  std::unique_ptr<StoreRowStream> Stored(const std::vector<std::string>& devices,
                                         const std::vector<std::string>& metrics, UnixNanos start,
                                         UnixNanos end, bool summary, size_t slice_rows = 65536,
                                         UnixNanos now = kLater, bool as_rate = false) {
    Result<StorePool::Lease> lease = pool_->Acquire();
    EXPECT_TRUE(lease.ok());
    return std::make_unique<StoreRowStream>(std::move(*lease), devices, metrics, start, end, now,
                                            summary, slice_rows, as_rate);
  }

  kwatt::testing::TempDir dir_;
  std::string path_;
  std::unique_ptr<StorePool> pool_;
  PushedMetrics pushed_;
};

TEST_F(StoreRowsTest, AnswersAsTheSimulatedServerDoesForTheSameRows) {
  // Three devices, a gauge and a counter, two label sets, ties within and across devices, NaN.
  std::mt19937_64 random(7);
  std::vector<PushedRow> rows;
  const char* devices[] = {"nova-2", "nova-10", "nova-1"};
  const char* labels[] = {"{}", "{\"psu\": 1}"};
  for (int i = 0; i < 3000; ++i) {
    PushedRow row;
    row.device_id = devices[random() % 3];
    row.metric_id = random() % 2 ? "my_power" : "my_bytes_total";
    row.labels_json = labels[random() % 2];
    // Microseconds over 40 minutes, many on whole seconds so that rows share instants.
    int64_t us = int64_t(random() % (2400 * 1'000'000ull));
    if (random() % 2) us -= us % 1'000'000;
    row.t = kT0 + us * kNanosPerMicro;
    row.value = random() % 50 == 0 ? std::nan("") : double(random() % 100000) / 8;
    rows.push_back(row);
  }
  // Distinct instants within each series, as a store's series and a recorded one agree only on
  // the order of distinct instants.
  std::sort(rows.begin(), rows.end(), [](const PushedRow& a, const PushedRow& b) {
    return std::tie(a.device_id, a.metric_id, a.labels_json, a.t) <
           std::tie(b.device_id, b.metric_id, b.labels_json, b.t);
  });
  rows.erase(std::unique(rows.begin(), rows.end(),
                         [](const PushedRow& a, const PushedRow& b) {
                           return std::tie(a.device_id, a.metric_id, a.labels_json, a.t) ==
                                  std::tie(b.device_id, b.metric_id, b.labels_json, b.t);
                         }),
             rows.end());
  Add(rows);

  std::vector<std::string> asked = {"nova-10", "nova-1", "nova-2", "nova-404"};
  UnixNanos start = kT0 + 100 * kNanosPerSecond, end = kT0 + 2000 * kNanosPerSecond;
  for (auto [summary, as_rate] : {std::pair{false, false}, std::pair{true, false},
                                  std::pair{false, true}, std::pair{true, true}}) {
    for (const std::vector<std::string>& metrics :
         {std::vector<std::string>{}, std::vector<std::string>{"my_bytes_total"}}) {
      SCOPED_TRACE(::testing::Message() << "summary " << summary << ", as_rate " << as_rate << ", "
                                        << metrics.size() << " metrics");
      std::string expected = Simulated(asked, metrics, start, end, summary, kLater, as_rate);
      ASSERT_GT(expected.size(), 1000u);
      // Whatever the slices the window is read in, and however the answer is cut in pieces.
      for (size_t slice_rows : {size_t(1), size_t(7), size_t(100), size_t(65536)}) {
        auto stored = Stored(asked, metrics, start, end, summary, slice_rows, kLater, as_rate);
        EXPECT_EQ(Drain(*stored, 1000), expected) << "slice_rows " << slice_rows;
        auto counted = Stored(asked, metrics, start, end, summary, slice_rows, kLater, as_rate);
        Result<int64_t> rows_counted = counted->CountRows();
        ASSERT_TRUE(rows_counted.ok());
        EXPECT_EQ(*rows_counted, stored->rows_written());
        EXPECT_EQ(Drain(*counted), expected) << "after counting";
      }
    }
  }
}

// as_rate as Kwollect's SQL computes it (tests/integration/test_kwollect_conformance.py checks it
// against that SQL): null first, the rise per second, past a wrap the highest so far - the
// previous + the value, null at a repeated instant and around a null, NaN from a NaN; and
// summaries grouped on the labels without `_metric_scrape_time`, which they drop.
TEST_F(StoreRowsTest, AsRateAndSummariesOfScrapedRowsAreKwollects) {
  const std::string eth = R"({"interface":"eth0"})";
  auto at = [](double s) { return kT0 + UnixNanos(s * 1e9); };
  Add({{"nova-1", "c_total", eth, at(0), 100},
       {"nova-1", "c_total", eth, at(5), 150},
       {"nova-1", "c_total", eth, at(10), 400},
       {"nova-1", "c_total", eth, at(15), 20},
       {"nova-1", "c_total", eth, at(20), 70},
       {"nova-1", "c_total", eth, at(25), NullValue()},
       {"nova-1", "c_total", eth, at(30), 90},
       {"nova-1", "c_total", eth, at(35), NAN},
       {"nova-1", "c_total", eth, at(40), 95},
       {"nova-1", "c_total", "{}", at(40), 1},
       {"nova-1", "load", R"({"_metric_scrape_time":"1.25"})", at(0), 1},
       {"nova-1", "load", R"({"_metric_scrape_time":"16.25"})", at(15), 3}});
  std::vector<std::string> values;
  auto stored = Stored({"nova-1"}, {"c_total"}, at(0), at(40), false, 65536, kLater, true);
  std::string text = Drain(*stored);
  for (size_t at = text.find("\"value\":"); at != std::string::npos;
       at = text.find("\"value\":", at + 1)) {
    values.push_back(text.substr(at + 8, text.find(',', at) - at - 8));
  }
  // (400 - 150) / 5 = 50; the wrap: (400 - 400 + 20) / 5 = 4; null around the null; NaN from the
  // NaN on; the other series' first row null.
  EXPECT_EQ(values, (std::vector<std::string>{"null", "10", "50", "4", "10", "null", "null",
                                              "\"NaN\"", "\"NaN\"", "null"}))
      << text;
  auto summary = Stored({"nova-1"}, {"load"}, at(0), at(299), true);
  EXPECT_EQ(Drain(*summary),
            "[{\"timestamp\":\"2024-04-18T14:00:00+02:00\",\"device_id\":\"nova-1\",\"metric_id\":"
            "\"load\",\"value\":2,\"labels\":{}}]");
}

TEST_F(StoreRowsTest, WindowEndIsInclusiveAndRowsAreKwollectsText) {
  Add({{"nova-1", "my_power", "{}", kT0, 1.5},
       {"nova-1", "my_power", "{}", kT0 + 250 * kNanosPerMilli, 2},
       {"nova-1", "my_power", "{}", kT0 + kNanosPerSecond, 3},
       {"nova-1", "my_power", "{}", kT0 + kNanosPerSecond + kNanosPerMicro, 4}});
  auto stored = Stored({"nova-1"}, {}, kT0, kT0 + kNanosPerSecond, false);
  EXPECT_EQ(Drain(*stored),
            "[{\"timestamp\":\"2024-04-18T14:00:00+02:00\",\"device_id\":\"nova-1\",\"metric_id\":"
            "\"my_power\",\"value\":1.5,\"labels\":{}},\n"
            "{\"timestamp\":\"2024-04-18T14:00:00.25+02:00\",\"device_id\":\"nova-1\","
            "\"metric_id\":\"my_power\",\"value\":2,\"labels\":{}},\n"
            "{\"timestamp\":\"2024-04-18T14:00:01+02:00\",\"device_id\":\"nova-1\",\"metric_id\":"
            "\"my_power\",\"value\":3,\"labels\":{}}]");
}

TEST_F(StoreRowsTest, EmptyAnswersAndTheEndsOfTime) {
  Add({{"nova-1", "my_power", "{}", kT0, 1}});
  // No device asked: no row (the store would take an empty list as every device).
  auto none = Stored({}, {}, kT0 - kNanosPerSecond, kT0 + kNanosPerSecond, false);
  EXPECT_EQ(Drain(*none), "[]");
  none.reset();  // a stream holds one of the pool's two stores until it goes
  constexpr UnixNanos kMin = std::numeric_limits<UnixNanos>::min();
  constexpr UnixNanos kMax = std::numeric_limits<UnixNanos>::max();
  auto all = Stored({"nova-1"}, {}, kMin, kMax, false);
  Result<int64_t> counted = all->CountRows();
  ASSERT_TRUE(counted.ok());
  EXPECT_EQ(*counted, 1);
  Drain(*all);
  EXPECT_EQ(all->rows_written(), 1);
  all.reset();
  auto other = Stored({"nova-2"}, {}, kMin, kMax, false);
  EXPECT_EQ(Drain(*other), "[]");
  other.reset();
  // Summary buckets appear once they ended 5 minutes ago.
  auto early = Stored({"nova-1"}, {}, kT0 - 600 * kNanosPerSecond, kT0 + 600 * kNanosPerSecond,
                      true, 65536, kT0 + 400 * kNanosPerSecond);
  EXPECT_EQ(Drain(*early), "[]");
  early.reset();
  auto late = Stored({"nova-1"}, {}, kT0 - 600 * kNanosPerSecond, kT0 + 600 * kNanosPerSecond, true,
                     65536, kT0 + 600 * kNanosPerSecond);
  EXPECT_EQ(Drain(*late),
            "[{\"timestamp\":\"2024-04-18T14:00:00+02:00\",\"device_id\":\"nova-1\",\"metric_id\":"
            "\"my_power\",\"value\":1,\"labels\":{}}]");
}

TEST_F(StoreRowsTest, PoolLendsEachStoreToOneBorrowerAtATime) {
  Result<StorePool::Lease> a = pool_->Acquire();
  Result<StorePool::Lease> b = pool_->Acquire();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(&**a, &**b);
  store::Store* first = &**a;
  *a = StorePool::Lease();  // given back
  Result<StorePool::Lease> c = pool_->Acquire();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(&**c, first);
}

TEST_F(StoreRowsTest, NextRowsGivesTheRowsOfTheText) {
  std::vector<PushedRow> rows;
  const char* devices[] = {"nova-1", "nova-10"};
  for (int i = 0; i < 2000; ++i) {
    PushedRow row;
    row.device_id = devices[i % 2];
    row.metric_id = i % 3 ? "my_power" : "my_bytes_total";
    row.labels_json = i % 5 ? "{}" : "{\"psu\": 2}";
    row.t = kT0 + int64_t(i) * 700 * kNanosPerMilli + (i % 2) * kNanosPerMicro;
    row.value = i % 97 == 0 ? std::nan("") : i * 0.25;
    rows.push_back(row);
  }
  Add(rows);
  std::vector<std::string> asked = {"nova-10", "nova-1"};
  UnixNanos start = kT0 + 10 * kNanosPerSecond, end = kT0 + 1000 * kNanosPerSecond;
  std::string expected = Simulated(asked, {}, start, end, false);
  ASSERT_GT(expected.size(), 10000u);
  for (size_t max_rows : {size_t(1), size_t(13), size_t(100000)}) {
    SCOPED_TRACE(::testing::Message() << "max_rows " << max_rows);
    EXPECT_EQ(Render(*SimulatedStream(asked, start, end), max_rows), expected);
    for (size_t slice_rows : {size_t(7), size_t(65536)}) {
      EXPECT_EQ(Render(*Stored(asked, {}, start, end, false, slice_rows), max_rows), expected);
    }
  }
  // A summary answer is text only in the simulator.
  std::vector<simulate::OutputSeries> series = pushed_.SeriesOf("lyon", "nova-1", {});
  RowStream summary(std::move(series), start, end, kLater, true);
  RowBatch batch;
  const StringInterner* interner = nullptr;
  EXPECT_FALSE(summary.NextRows(&batch, &interner, 10));
  EXPECT_EQ(summary.status().code(), Status::Code::kInvalidArgument);
}

// `kwatt serve --store postgresql://...` after its PostgreSQL restarts: the pool finds the
// connections the server closed and opens new ones, so that answers come again (it kept failing
// on the dead ones); while the server is down, the first read fails before any row is written.
TEST(StorePool, ReconnectsAfterPostgresqlRestarts) {
  auto postgres = kwatt::testing::TestPostgres::Start();
  ASSERT_TRUE(postgres.ok()) << postgres.status().ToString();
  Result<std::string> uri = (*postgres)->NewDatabase();
  ASSERT_TRUE(uri.ok()) << uri.status().ToString();
  Result<std::unique_ptr<StorePool>> pool = StorePool::Open(*uri, 2);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  {
    PushedRow row{"nova-1", "m", "{}", kT0, 1.0};
    StringInterner interner;
    RowBatch batch = ToRowBatch({row}, &interner);
    Result<StorePool::Lease> lease = (*pool)->Acquire();
    ASSERT_TRUE(lease.ok());
    ASSERT_TRUE((*lease)->Append(batch, interner).ok());
  }
  for (const char* mode : {"fast", "immediate"}) {
    ASSERT_TRUE((*postgres)->Restart(mode).ok()) << mode;
    Result<StorePool::Lease> lease = (*pool)->Acquire();
    ASSERT_TRUE(lease.ok()) << mode << ": " << lease.status().ToString();
    StoreRowStream rows(std::move(*lease), {"nova-1"}, {}, kT0, kT0, kLater, false);
    ASSERT_TRUE(rows.Begin().ok()) << mode << ": " << rows.status().ToString();
    std::string text;
    while (rows.Next(&text, 1 << 16)) {
    }
    EXPECT_TRUE(rows.status().ok()) << mode << ": " << rows.status().ToString();
    EXPECT_EQ(rows.rows_written(), 1) << mode;
  }
}

}  // namespace
}  // namespace kwatt::server::internal::store_rows_test
