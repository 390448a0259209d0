// FeedSource with other archives of the same experiment (`kwatt energy --with-archive`): real
// archives written by ArchiveWriter in a temporary directory, read back through FeedArchive.
#include "kwatt/rows/source.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "kwatt/archive/format.h"
#include "kwatt/archive/writer.h"
#include "kwatt/core/row_parser.h"
#include "kwatt/core/time.h"
#include "kwatt/energy/energy.h"
#include "src/testing/small_archive.h"
#include "src/testing/temp_dir.h"

namespace kwatt::rows::source_test {
namespace {

using testing_archive::WriteArchive;

constexpr UnixNanos kT0 = 1744977600LL * kNanosPerSecond;  // 2025-04-18T12:00:00Z
constexpr UnixNanos kMinute = 60 * kNanosPerSecond;

// One row a minute of `metric` for each node uid over [from, to), lyon.
std::string Rows(const std::vector<std::string>& uids, const std::string& metric, UnixNanos from,
                 UnixNanos to) {
  std::string text;
  for (const std::string& uid : uids) {
    for (UnixNanos t = from; t < to; t += kMinute) {
      text += R"({"timestamp":")" + FormatParisTimestamp(t) + R"(","device_id":")" + uid +
              R"(","metric_id":")" + metric + R"(","value":10,"labels":{}})" + "\n";
    }
  }
  return text;
}

// What a sink is given: its Begins, and each row as (device, metric, time).
class Collected : public RowSink {
 public:
  Status Begin(const RowsReport& resolved) override {
    ++begins;
    return Status::OK();
  }
  Status Write(std::string_view site, const RowBatch& batch,
               const StringInterner& interner) override {
    for (size_t i = 0; i < batch.size(); ++i) {
      rows.emplace_back(std::string(interner.Get(batch.device[i])),
                        std::string(interner.Get(batch.metric[i])), batch.time[i]);
    }
    return Status::OK();
  }
  int Count(const std::string& device, const std::string& metric) const {
    int n = 0;
    for (const auto& [d, m, t] : rows) n += d == device && m == metric;
    return n;
  }
  int begins = 0;
  std::vector<std::tuple<std::string, std::string, UnixNanos>> rows;
};

// FeedSource refuses `source` (InvalidArgument) saying `what`.
void ExpectRefused(const RowSource& source, const std::string& what) {
  Collected sink;
  Result<RowsReport> report = FeedSource(source, {}, &sink);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(report.status().message().find(what), std::string::npos) << report.status().ToString();
}

// A kwatt meter recording of `uid`'s domains over [from, to).
void WriteRecording(const std::string& dir, const std::string& uid, UnixNanos from, UnixNanos to) {
  WriteArchive(dir, {uid}, from, to, Rows({uid}, "kwatt_meter_domain_power_watt", from, to));
}

class WithArchives : public ::testing::Test {
 protected:
  WithArchives() {
    backup_ = (temp_.root() / "backup").string();
    meter_ = (temp_.root() / "meter").string();
    // The job's backup: nova-1 and nova-4's wattmeters over 10 minutes.
    WriteArchive(backup_, {"nova-1", "nova-4"}, kT0, kT0 + 10 * kMinute,
                 Rows({"nova-1", "nova-4"}, "wattmetre_power_watt", kT0, kT0 + 10 * kMinute));
  }
  // The backup, read with the meter's recording.
  RowSource BackupWithMeter() const {
    RowSource source;
    source.from = FromArchive{backup_};
    source.with_archives = {meter_};
    return source;
  }
  kwatt::testing::TempDir temp_{"kwatt_row_source_test"};
  std::string backup_, meter_;
};

// A margin reads the archive's rows beyond the window asked, as far as it holds them; the report's
// window is the one asked.
TEST_F(WithArchives, AMarginReadsTheArchivesRowsAroundTheWindowAsked) {
  RowSource source;
  source.from = FromArchive{backup_};
  source.query.start = kT0 + 2 * kMinute;
  source.query.end = kT0 + 5 * kMinute;
  source.query.margin = kMinute;
  Collected sink;
  Result<RowsReport> report = FeedSource(source, {}, &sink);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->start, kT0 + 2 * kMinute);
  EXPECT_EQ(report->end, kT0 + 5 * kMinute);
  EXPECT_EQ(sink.Count("nova-1", "wattmetre_power_watt"), 6);  // minutes 1 to 6
  // At the archive's start, nothing before it.
  source.query.start = kT0;
  Collected from_start;
  report = FeedSource(source, {}, &from_start);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->start, kT0);
  EXPECT_EQ(from_start.Count("nova-1", "wattmetre_power_watt"), 7);  // minutes 0 to 6
}

// The meter's recording of nova-1 began before the job and ended after it: its domains are read
// in the job's window, after the backup's rows, with one Begin; the wattmeter rows it holds too
// are the backup's series, taken once.
TEST_F(WithArchives, AMetersRecordingIsReadInTheSourcesWindowAndNothingTwice) {
  WriteArchive(
      meter_, {"nova-1"}, kT0 - 5 * kMinute, kT0 + 15 * kMinute,
      Rows({"nova-1"}, "kwatt_meter_domain_power_watt", kT0 - 5 * kMinute, kT0 + 15 * kMinute) +
          Rows({"nova-1"}, "wattmetre_power_watt", kT0 - 5 * kMinute, kT0 + 15 * kMinute));
  RowSource source = BackupWithMeter();
  Collected sink;
  Result<RowsReport> report = FeedSource(source, {}, &sink);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(sink.begins, 1);
  EXPECT_EQ(sink.Count("nova-1", "wattmetre_power_watt"), 10);  // the backup's only
  EXPECT_EQ(sink.Count("nova-4", "wattmetre_power_watt"), 10);
  EXPECT_EQ(sink.Count("nova-1", "kwatt_meter_domain_power_watt"), 11);  // [T0, T0 + 10 min]
  for (const auto& [device, metric, t] : sink.rows) {
    EXPECT_TRUE(t >= kT0 && t <= kT0 + 10 * kMinute) << metric << " at " << t;
  }
  EXPECT_EQ(report->rows, int64_t(sink.rows.size()));
  EXPECT_EQ(report->start, kT0);
  EXPECT_EQ(report->end, kT0 + 10 * kMinute);

  // Only the metrics asked for are read from it.
  Collected wattmeters;
  ASSERT_TRUE(FeedSource(source, {"wattmetre_power_watt"}, &wattmeters).ok());
  EXPECT_EQ(wattmeters.Count("nova-1", "kwatt_meter_domain_power_watt"), 0);
  EXPECT_EQ(wattmeters.rows.size(), 20u);
}

TEST_F(WithArchives, ARecordingOfAnotherNodeIsRefusedNamingIt) {
  WriteRecording(meter_, "nova-7", kT0, kT0 + 10 * kMinute);
  RowSource source = BackupWithMeter();
  ExpectRefused(source,
                "holds node nova-7.lyon.grid5000.fr, which is not among the nodes read "
                "(nova-1.lyon.grid5000.fr, nova-4.lyon.grid5000.fr)");

  // Narrowed to nova-4, the recording of nova-1 is refused too.
  WriteRecording((temp_.root() / "meter-1").string(), "nova-1", kT0, kT0 + 10 * kMinute);
  source.with_archives = {(temp_.root() / "meter-1").string()};
  source.query.nodes = {NodeName{"nova-4", "lyon"}};
  ExpectRefused(source, "holds node nova-1.lyon.grid5000.fr");
}

// A recording made before the job: refused when given for it; skipped when several runs share the
// recordings (kwatt report), each run then naming those it read.
TEST_F(WithArchives, ARecordingGoesWithTheRunsItMeets) {
  WriteRecording(meter_, "nova-1", kT0 - 20 * kMinute, kT0 - 10 * kMinute);
  std::string during = (temp_.root() / "during").string();
  WriteRecording(during, "nova-4", kT0, kT0 + 10 * kMinute);
  RowSource source = BackupWithMeter();
  ExpectRefused(source,
                "holds 2025-04-18T13:40:00+02:00 to 2025-04-18T13:50:00+02:00, outside the "
                "window read (2025-04-18T14:00:00+02:00 to 2025-04-18T14:10:00+02:00)");

  source.with_archives = {meter_, during};
  source.with_archives_shared = true;
  Collected shared;
  std::vector<std::string> read;
  Result<RowsReport> report = FeedSource(source, {}, &shared, {}, &read);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(read, std::vector<std::string>{during});
  EXPECT_EQ(shared.Count("nova-4", "kwatt_meter_domain_power_watt"), 10);
  EXPECT_EQ(shared.Count("nova-1", "kwatt_meter_domain_power_watt"), 0);

  // A run of nova-1 alone: the recording of nova-4 is not its own.
  source.query.nodes = {NodeName{"nova-1", "lyon"}};
  read.clear();
  Result<RowsReport> alone = FeedSource(source, {}, &shared, {}, &read);
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_TRUE(read.empty());
}

// The energy code caches what a reader's ids mean; each other archive is read by a reader of its
// own, often made where the last one was freed, whose ids mean other things (here nova-4's id in
// the recording is nova-1's in the backup). The recording's domains are nova-4's.
TEST_F(WithArchives, ARecordingsRowsGoToItsNodeInTheEnergy) {
  WriteRecording(meter_, "nova-4", kT0, kT0 + 10 * kMinute);
  std::string later = (temp_.root() / "later").string();
  WriteRecording(later, "nova-1", kT0 + 5 * kMinute, kT0 + 10 * kMinute);
  RowSource source = BackupWithMeter();
  source.with_archives.push_back(later);
  energy::EnergySink sink;
  Result<RowsReport> report = FeedSource(source, energy::EnergyInputMetrics(), &sink);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const energy::PowerCollector::Store& store = sink.power()->store();
  const std::string domain = "kwatt_meter_domain_power_watt";
  ASSERT_TRUE(store.contains("nova-4.lyon.grid5000.fr"));
  EXPECT_EQ(store.at("nova-4.lyon.grid5000.fr").at(domain).at("{}").time.size(), 10u);
  EXPECT_EQ(store.at("nova-1.lyon.grid5000.fr").at(domain).at("{}").time.size(), 5u);
  EXPECT_EQ(store.at("nova-1.lyon.grid5000.fr").at("wattmetre_power_watt").at("{}").time.size(),
            10u);
}

// Two recordings of a node, the meter started again into a new directory: both read, in time
// order whatever the order given. Two of the same time, or one archive given twice (or the one
// read), are refused.
TEST_F(WithArchives, RecordingsOneAfterTheOtherAreReadAndOverlapsRefused) {
  std::string first = (temp_.root() / "first").string();
  WriteRecording(first, "nova-1", kT0, kT0 + 4 * kMinute);
  WriteRecording(meter_, "nova-1", kT0 + 5 * kMinute, kT0 + 10 * kMinute);
  RowSource source = BackupWithMeter();
  source.with_archives.push_back(first);  // given after the later one
  energy::EnergySink sink;
  std::vector<std::string> read;
  Result<RowsReport> report = FeedSource(source, energy::EnergyInputMetrics(), &sink, {}, &read);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const std::vector<UnixNanos>& times = sink.power()
                                            ->store()
                                            .at("nova-1.lyon.grid5000.fr")
                                            .at("kwatt_meter_domain_power_watt")
                                            .at("{}")
                                            .time;
  EXPECT_EQ(times.size(), 9u);
  EXPECT_TRUE(std::is_sorted(times.begin(), times.end()));
  EXPECT_EQ(read, (std::vector<std::string>{first, meter_}));

  std::string overlapping = (temp_.root() / "overlapping").string();
  WriteRecording(overlapping, "nova-1", kT0 + 3 * kMinute, kT0 + 6 * kMinute);
  source.with_archives = {first, overlapping};
  ExpectRefused(source, "archives " + first + " and " + overlapping +
                            " both hold nova-1.lyon.grid5000.fr's kwatt_meter_domain_power_watt "
                            "from 2025-04-18T14:03:00+02:00");
  source.with_archives = {first, first};
  ExpectRefused(source, "archive " + first + " is given twice");
  source.with_archives = {backup_};
  ExpectRefused(source, "archive " + backup_ + " is the one read");
}

TEST_F(WithArchives, SummariesAreNotReadWithSamples) {
  WriteArchive(meter_, {"nova-1"}, kT0, kT0 + 10 * kMinute,
               Rows({"nova-1"}, "kwatt_meter_domain_power_watt", kT0, kT0 + 10 * kMinute),
               /*summary=*/true);
  ExpectRefused(BackupWithMeter(),
                "holds 5-minute summaries, the rows it is read with samples: "
                "give an archive of samples");
}

TEST_F(WithArchives, AnUnfinishedRecordingIsNotTakenForAWholeOne) {
  {
    archive::BackupQuery query;
    query.api = std::string(archive::kRecordingApi);
    query.nodes = {"nova-1.lyon.grid5000.fr"};
    query.start = kT0;
    Result<std::unique_ptr<archive::ArchiveWriter>> writer =
        archive::ArchiveWriter::Open(meter_, query, "test");
    ASSERT_TRUE(writer.ok());
    RowsReport resolved;
    resolved.nodes = {NodeName{"nova-1", "lyon"}};
    resolved.start = kT0;
    resolved.end = kT0 + kMinute;
    ASSERT_TRUE((*writer)->Begin(resolved).ok());
  }  // destroyed without Finish: as if killed
  RowSource source = BackupWithMeter();
  Collected sink;
  Status refused = FeedSource(source, {}, &sink).status();
  EXPECT_EQ(refused.code(), Status::Code::kIncomplete);
  EXPECT_NE(refused.message().find("is a kwatt meter recording that stopped before it was "
                                   "finished"),
            std::string::npos)
      << refused.ToString();
}

}  // namespace
}  // namespace kwatt::rows::source_test
