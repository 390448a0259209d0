#include "src/server/downsample.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

namespace kwatt::server::internal::downsample_test {
namespace {

constexpr int64_t kS = kNanosPerSecond;

struct Rows {
  StringInterner interner;
  RowBatch batch;
  void Add(std::string_view device, std::string_view metric, UnixNanos t, double v,
           std::string_view labels = "{}") {
    batch.time.push_back(t);
    batch.utc_offset.push_back(3600);
    batch.device.push_back(interner.Intern(device));
    batch.metric.push_back(interner.Intern(metric));
    batch.labels.push_back(interner.Intern(labels));
    batch.value.push_back(v);
  }
};

Downsampler::Options Window(UnixNanos start, int64_t step, size_t buckets, bool rates = false) {
  Downsampler::Options options;
  options.start = start;
  options.step = step;
  options.buckets = buckets;
  options.counter_rates = rates;
  return options;
}

TEST(DownsampleTest, StepCoversTheWindow) {
  EXPECT_EQ(BucketStepFor(0, 10 * kS - 1, 10), kS);
  EXPECT_EQ(BucketStepFor(0, 10 * kS, 10), kS + 1);  // end is inclusive
  EXPECT_EQ(BucketStepFor(5, 5, 100), 1);
  EXPECT_EQ(BucketStepFor(0, 3600 * kS, 0), 3600 * kS + 1);
}

TEST(DownsampleTest, ExactMinMaxMeanPerBucket) {
  Rows rows;
  // Bucket 0: 1, 5, 3; bucket 1: 10; bucket 2: empty; bucket 3: -2, 4.
  rows.Add("nova-1", "power", 0, 1);
  rows.Add("nova-1", "power", kS / 2, 5);
  rows.Add("nova-1", "power", kS - 1, 3);  // the last instant of bucket 0
  rows.Add("nova-1", "power", kS, 10);     // the first of bucket 1
  rows.Add("nova-1", "power", 3 * kS, -2);
  rows.Add("nova-1", "power", 4 * kS - 1, 4);
  Downsampler d(Window(0, kS, 4));
  d.Add(rows.batch, rows.interner);
  auto series = d.SortedSeries();
  ASSERT_EQ(series.size(), 1u);
  const auto& b = series[0]->buckets;
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[0].count, 3);
  EXPECT_EQ(b[0].min, 1);
  EXPECT_EQ(b[0].max, 5);
  EXPECT_EQ(b[0].mean(), 3);
  EXPECT_EQ(b[1].count, 1);
  EXPECT_EQ(b[1].min, 10);
  EXPECT_EQ(b[1].max, 10);
  EXPECT_EQ(b[2].count, 0);
  EXPECT_EQ(b[3].count, 2);
  EXPECT_EQ(b[3].min, -2);
  EXPECT_EQ(b[3].max, 4);
  EXPECT_EQ(b[3].mean(), 1);
  EXPECT_EQ(series[0]->rows, 6);
  EXPECT_EQ(d.rows(), 6);

  nlohmann::json json = nlohmann::json::parse(d.Json());
  EXPECT_EQ(json["buckets"], 4);
  EXPECT_EQ(json["time"], nlohmann::json({0, 1, 2, 3}));
  EXPECT_EQ(json["series"][0]["min"], nlohmann::json::parse("[1,10,null,-2]"));
  EXPECT_EQ(json["series"][0]["max"], nlohmann::json::parse("[5,10,null,4]"));
  EXPECT_EQ(json["series"][0]["mean"], nlohmann::json::parse("[3,10,null,1]"));
  EXPECT_EQ(json["series"][0]["count"], nlohmann::json::parse("[3,1,0,2]"));
  EXPECT_EQ(json["series"][0]["device"], "nova-1");
  EXPECT_EQ(json["series"][0]["labels"], nlohmann::json::object());
}

TEST(DownsampleTest, RowsOutsideTheBucketsAreNotCounted) {
  Rows rows;
  rows.Add("a", "m", -1, 100);        // before start
  rows.Add("a", "m", 0, 1);           // first instant
  rows.Add("a", "m", 2 * kS - 1, 2);  // last instant of the last bucket
  rows.Add("a", "m", 2 * kS, 300);    // first instant after
  Downsampler d(Window(0, kS, 2));
  d.Add(rows.batch, rows.interner);
  const auto& b = d.SortedSeries()[0]->buckets;
  EXPECT_EQ(b[0].count, 1);
  EXPECT_EQ(b[0].max, 1);
  EXPECT_EQ(b[1].count, 1);
  EXPECT_EQ(b[1].max, 2);
  EXPECT_EQ(d.rows(), 2);
}

TEST(DownsampleTest, NanIsCountedApartAndHidesNoValue) {
  Rows rows;
  rows.Add("a", "m", 0, NAN);
  rows.Add("a", "m", 1, 7);
  rows.Add("a", "m", 2, NAN);
  rows.Add("a", "m", kS, NAN);  // a bucket of NaN only: empty
  Downsampler d(Window(0, kS, 2));
  d.Add(rows.batch, rows.interner);
  const Downsampler::Series& s = *d.SortedSeries()[0];
  EXPECT_EQ(s.rows, 4);
  EXPECT_EQ(s.nans, 3);
  EXPECT_EQ(s.buckets[0].count, 1);
  EXPECT_EQ(s.buckets[0].min, 7);
  EXPECT_EQ(s.buckets[0].max, 7);
  EXPECT_EQ(s.buckets[1].count, 0);
  nlohmann::json json = nlohmann::json::parse(d.Json());
  EXPECT_EQ(json["series"][0]["mean"], nlohmann::json::parse("[7,null]"));
  EXPECT_EQ(json["series"][0]["nans"], 3);
}

TEST(DownsampleTest, SeriesAreKeptApartAndSorted) {
  Rows rows;
  rows.Add("nova-2", "power", 0, 1);
  rows.Add("nova-1", "power", 0, 2, R"({"_info":"psu2"})");
  rows.Add("nova-1", "power", 0, 3, R"({"_info":"psu1"})");
  rows.Add("nova-1", "temp", 0, 4);
  Downsampler d(Window(0, kS, 1));
  d.Add(rows.batch, rows.interner);
  auto series = d.SortedSeries();
  ASSERT_EQ(series.size(), 4u);
  EXPECT_EQ(series[0]->labels, R"({"_info":"psu1"})");
  EXPECT_EQ(series[0]->buckets[0].max, 3);
  EXPECT_EQ(series[1]->labels, R"({"_info":"psu2"})");
  EXPECT_EQ(series[2]->metric, "temp");
  EXPECT_EQ(series[3]->device, "nova-2");
}

TEST(DownsampleTest, BatchesWithAnotherInternerFindTheSameSeries) {
  Rows first, second;
  second.interner.Intern("unrelated");  // other ids for the same texts
  first.Add("a", "m", 0, 1);
  second.Add("a", "m", kS, 2);
  Downsampler d(Window(0, kS, 2));
  d.Add(first.batch, first.interner);
  d.Add(second.batch, second.interner);
  ASSERT_EQ(d.SortedSeries().size(), 1u);
  EXPECT_EQ(d.SortedSeries()[0]->buckets[1].max, 2);
}

TEST(DownsampleTest, PeaksSurviveManyRowsPerBucket) {
  Rows rows;
  for (int i = 0; i < 180000; ++i) {  // 1 h at 50 Hz
    rows.Add("a", "m", int64_t(i) * 20'000'000, i == 123457 ? 900 : 100);
  }
  Downsampler d(Window(0, BucketStepFor(0, 3600 * kS - 1, 1000), 1000));
  d.Add(rows.batch, rows.interner);
  const auto& b = d.SortedSeries()[0]->buckets;
  int64_t peak_bucket = (int64_t(123457) * 20'000'000) / d.options().step;
  EXPECT_EQ(b[size_t(peak_bucket)].max, 900);
  EXPECT_EQ(b[size_t(peak_bucket)].min, 100);
  EXPECT_EQ(b[size_t(peak_bucket) + 1].max, 100);
  int64_t total = 0;
  for (const auto& bucket : b) total += bucket.count;
  EXPECT_EQ(total, 180000);
}

TEST(DownsampleTest, CounterRates) {
  Rows rows;
  rows.Add("sw", "bytes_total", 0, 1000);
  rows.Add("sw", "bytes_total", 10 * kS, 2000);  // 100/s
  rows.Add("sw", "bytes_total", 20 * kS, 500);   // reset: no value
  rows.Add("sw", "bytes_total", 30 * kS, 2500);  // 200/s
  rows.Add("sw", "power", 0, 5);                 // not a counter: as is
  Downsampler d(Window(0, 10 * kS, 4, /*rates=*/true));
  d.Add(rows.batch, rows.interner);
  auto series = d.SortedSeries();
  ASSERT_EQ(series.size(), 2u);
  const auto& b = series[0]->buckets;
  EXPECT_EQ(b[0].count, 0);
  EXPECT_EQ(b[1].max, 100);
  EXPECT_EQ(b[2].count, 0);
  EXPECT_EQ(b[3].max, 200);
  EXPECT_EQ(series[1]->buckets[0].max, 5);
}

}  // namespace
}  // namespace kwatt::server::internal::downsample_test
