#include "kwatt/meter/pipeline/replay.h"

#include <gtest/gtest.h>

#include <numeric>
#include <thread>

#include "src/testing/manual_clock.h"
#include "src/testing/meter_sources.h"
#include "src/testing/temp_dir.h"

namespace kwatt::meter::replay_test {
namespace {

using std::chrono::milliseconds;
using testing::LateSource;
using testing::RateActivity;

constexpr int64_t kMs = kNanosPerMilli;

class ReplayTest : public ::testing::Test {
 protected:
  std::string Record(int64_t seconds, int64_t period_ms = 1000) {
    std::string path = (dir_.root() / "activity.jsonl").string();
    Status recorded = testing::RecordRateActivity(path, clock_, dir_.root().string(), seconds,
                                                  milliseconds(period_ms));
    EXPECT_TRUE(recorded.ok()) << recorded.ToString();
    return path;
  }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>(5000 * kMs);
  kwatt::testing::TempDir dir_{"kwatt_replay"};
};

TEST_F(ReplayTest, ARecordedExperimentsEnergyIsSharedByItsCpuTimes) {
  std::string path = Record(10);
  auto record = ActivityRecordReader::Open(path);
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  LateSource wattmeter(120'000'000, 0);  // 120 W, every interval known
  wattmeter.known_until = INT64_MAX;
  ReplayOptions options;
  options.idle_policy = IdlePolicy::kNone;
  options.idle_watts = {{"node", 40.0}};
  ReportBuffer reports;
  auto result = ReplayActivity(**record, wattmeter, options, &reports);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->intervals, 10);
  EXPECT_EQ(result->gap_intervals, 0);
  EXPECT_TRUE(result->record_complete);
  EXPECT_EQ(result->header.sensor, "nova-1.lyon.grid5000.fr");
  const MeterTotals& totals = result->totals;
  EXPECT_EQ(totals.measured_microjoules[0], 1'200'000'000);
  EXPECT_EQ(totals.idle_microjoules[0], 400'000'000);
  // 80 W dynamic over 2 busy CPUs: 40 W for the worker on 1 CPU, 20 W for the one on half.
  ASSERT_EQ(totals.targets.size(), 2u);
  EXPECT_EQ(totals.targets[0].microjoules[0], 400'000'000);
  EXPECT_EQ(totals.targets[1].microjoules[0], 200'000'000);
  EXPECT_EQ(totals.unattributed_microjoules[0], 200'000'000);
  EXPECT_EQ(reports.Take().size(), 10u);
  EXPECT_EQ(reports.header().domains[0].source, "kwollect");
}

TEST_F(ReplayTest, WhatTheSourceDoesNotCoverIsAGap) {
  std::string path = Record(6);
  auto record = ActivityRecordReader::Open(path);
  ASSERT_TRUE(record.ok());
  LateSource wattmeter(100'000'000, 0);
  // The archive covers the first 4 s only.
  wattmeter.known_until = clock_->WallNanos() - 2 * kNanosPerSecond;
  auto result = ReplayActivity(**record, wattmeter, ReplayOptions{});
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->intervals, 6);
  EXPECT_EQ(result->gap_intervals, 2);
  EXPECT_EQ(result->totals.measured_microjoules[0], 400'000'000);
  EXPECT_EQ(result->totals.flags[0], uint32_t(kUnreadable));
}

TEST_F(ReplayTest, ASingleSnapshotHasNothingToShare) {
  std::string path = (dir_.root() / "short.jsonl").string();
  MeterEnvironment environment;
  environment.clock = clock_;
  environment.procfs_root = (dir_.root() / "no-procfs").string();
  auto writer = ActivityRecordWriter::Create(
      path, MakeActivityRecordHeader(environment, TargetSelection{}, "kwatt test"));
  ASSERT_TRUE(writer.ok());
  RateActivity activity(clock_, {1.0}, 0, 2);
  ASSERT_TRUE((*writer)->Write(*activity.Read()).ok());
  ASSERT_TRUE((*writer)->Finish().ok());
  auto record = ActivityRecordReader::Open(path);
  ASSERT_TRUE(record.ok());
  LateSource wattmeter(1, 0);
  auto result = ReplayActivity(**record, wattmeter, ReplayOptions{});
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("single snapshot"), std::string::npos);
}

TEST_F(ReplayTest, RecordingSkipsTheTicksASlowReadOutlivedAndEndsWithASnapshot) {
  std::string path = Record(5, 500);
  auto record = ReadActivityRecord(path);
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  EXPECT_TRUE(record->complete);
  // The first read and one every 500 ms for 5 s (the stop came at the last tick's instant: no
  // empty interval after it).
  EXPECT_EQ(record->snapshots.size(), 1u + 10u);
  EXPECT_EQ(record->snapshots[1].monotonic_nanos - record->snapshots[0].monotonic_nanos, 500 * kMs);
}

}  // namespace
}  // namespace kwatt::meter::replay_test
