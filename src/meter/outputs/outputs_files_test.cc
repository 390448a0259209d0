// textfile: read by kwatt's Prometheus text reader and served by Debian's
// prometheus-node-exporter, then scraped as Kwollect does (kwatt's Prometheus driver). archive:
// read back by `kwatt inspect --verify`, `kwatt cat` and `kwatt energy`.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "kwatt/collect/config.h"
#include "kwatt/collect/device.h"
#include "kwatt/collect/prometheus_text.h"
#include "kwatt/http/client.h"
#include "kwatt/meter/outputs/outputs.h"
#include "src/testing/archive_files.h"
#include "src/testing/kwatt_binary.h"
#include "src/testing/meter_reports.h"
#include "src/testing/node_exporter.h"
#include "src/testing/ports.h"
#include "src/testing/temp_dir.h"

namespace kwatt::meter::outputs_files_test {
namespace {

using kwatt::testing::RunKwatt;
using kwatt::testing::TempDir;
using testing::ProcessTarget;
using testing::ReportBuilder;
using testing::TestHeader;

using archive::test_files::ReadFile;

// -- csv, jsonl ---------------------------------------------------------------------------------

// The file size limit for this process, its signal ignored (a write beyond fails with EFBIG, as
// on a full disk), for as long as it lives.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = old_;
    small.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &small);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  struct rlimit old_;
  void (*old_handler_)(int);
};

// A disk full midway through a report: the report is refused whole and taken back, the file keeps
// whole lines, and the next report starts a line of its own (pandas reads the file).
TEST(TextOutput, AReportThatDoesNotFitIsTakenBackAndTheFileKeepsWholeLines) {
  for (const std::string kind : {"csv", "jsonl"}) {
    TempDir dir;
    const std::filesystem::path file = dir.root() / ("meter." + kind);
    Result<std::unique_ptr<OutputSink>> output = OpenOutput(kind + ":" + file.string(), {});
    ASSERT_TRUE(output.ok()) << output.status().ToString();
    MeterHeader header = TestHeader();
    ReportBuilder reports(header);
    Target python = ProcessTarget(7, "python3");
    ASSERT_TRUE((*output)->Begin(header).ok());
    ASSERT_TRUE((*output)->Write(reports.Next({30.0, 4.0}, {{python, 500'000}})).ok());
    const uintmax_t size = std::filesystem::file_size(file);
    Status refused;
    {
      FileSizeLimit full(size + 40);
      refused = (*output)->Write(reports.Next({31.0, 4.0}, {{python, 500'000}}));
    }
    EXPECT_EQ(refused.code(), Status::Code::kIOError) << kind;
    EXPECT_NE(refused.message().find("this report is not in the file, which holds whole lines"),
              std::string::npos)
        << refused.message();
    EXPECT_EQ(std::filesystem::file_size(file), size) << kind;
    ASSERT_TRUE((*output)->Write(reports.Next({32.0, 4.0}, {{python, 500'000}})).ok());
    ASSERT_TRUE((*output)->Finish().ok());
    std::istringstream lines(ReadFile(file));
    std::string line, header_line;
    int count = 0;
    while (std::getline(lines, line)) {
      ++count;
      if (kind == "csv") {
        if (header_line.empty()) header_line = line;
        EXPECT_EQ(std::count(line.begin(), line.end(), ','),
                  std::count(header_line.begin(), header_line.end(), ','))
            << line;
        EXPECT_EQ(line.find("31"), std::string::npos) << "the refused report: " << line;
      } else {
        EXPECT_FALSE(nlohmann::json::parse(line, nullptr, false).is_discarded()) << line;
      }
    }
    EXPECT_GT(count, 2) << kind;
  }
}

// -- textfile -----------------------------------------------------------------------------------

TEST(TextfileOutput, KwollectCustomLinesWrittenWholeAtEachReportAndRemovedAtTheEnd) {
  TempDir dir;
  Result<std::unique_ptr<OutputSink>> output = OpenOutput("textfile:" + dir.root().string(), {});
  ASSERT_TRUE(output.ok()) << output.status().ToString();
  MeterHeader header = TestHeader();
  ReportBuilder reports(header);
  Target python = ProcessTarget(7, "py \"3\"");
  ASSERT_TRUE((*output)->Begin(header).ok());
  std::filesystem::path file = dir.root() / "kwatt_meter.prom";
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE((*output)->Write(reports.Next({30.0, 4.0}, {{python, 500'000}})).ok());
    // Only the file itself: the temporary one was renamed over it.
    int files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir.root())) {
      ++files;
      EXPECT_EQ(entry.path(), file);
    }
    EXPECT_EQ(files, 1);
  }
  std::string text = ReadFile(file);
  std::map<std::string, double> values;  // metric id + labels -> value
  Status read = collect::ReadPrometheusText(text, [&](const collect::PrometheusSample& sample) {
    EXPECT_EQ(sample.name, "kwollect_custom");
    std::string id, stamp;
    for (const auto& [key, value] : sample.labels) {
      if (key == "_timestamp") {
        stamp = value;
      } else {
        id += key + "=" + value + ";";
      }
    }
    EXPECT_EQ(stamp, "1745000002.000000");  // the second interval's end
    values[id] = sample.value;
    return Status::OK();
  });
  ASSERT_TRUE(read.ok()) << read.ToString() << text;
  EXPECT_EQ(values["_metric_id=kwatt_meter_domain_energy_joules_total;source=rapl;domain=package-"
                   "0;kind=package;"],
            60.0);
  EXPECT_NEAR(values["_metric_id=kwatt_meter_power_watt;source=rapl;domain=dram-0;kind=process;"
                     "target=" +
                     python.key + ";name=py \"3\";"],
              4.0 * 500'000 / 550'000, 1e-6);
  EXPECT_EQ(values["_metric_id=kwatt_meter_reports_total;"], 2);
  ASSERT_TRUE((*output)->Finish().ok());
  EXPECT_FALSE(std::filesystem::exists(file));  // a stopped meter's rows are not scraped again
}

TEST(TextfileOutput, ANodeExporterServesItAndKwollectsScrapeReadsTheMetersRows) {
  TempDir dir;
  auto exporter = kwatt::testing::TestNodeExporter::Start(
      {.textfile_dir = dir.root(), .default_collectors = false});
  ASSERT_TRUE(exporter.ok()) << exporter.status().ToString();
  const int port = (*exporter)->port();

  Result<std::unique_ptr<OutputSink>> output = OpenOutput("textfile:" + dir.root().string(), {});
  ASSERT_TRUE(output.ok());
  MeterHeader header = TestHeader();
  ReportBuilder reports(header);
  Target python = ProcessTarget(7, "python3");
  ASSERT_TRUE((*output)->Begin(header).ok());
  ASSERT_TRUE((*output)->Write(reports.Next({30.0, 4.0}, {{python, 500'000}})).ok());

  // Kwollect's scrape of the node exporter, as kwatt collect does it.
  Result<std::vector<collect::MetricDescription>> descriptions = collect::ParseMetricDescriptions(
      "{name: custom, device_id: nova-1, url: \"prometheus://127.0.0.1:" + std::to_string(port) +
          "/kwollect_custom\"}",
      "test");
  ASSERT_TRUE(descriptions.ok()) << descriptions.status().ToString();
  Result<std::unique_ptr<collect::Device>> device = collect::MakeDevice(*descriptions, {});
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  collect::PollRequest request;
  request.sent_at = WallClockNow();
  request.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  request.active = {true};
  std::vector<collect::Reading> readings;
  ASSERT_TRUE((*device)->Poll(request, &readings).ok());
  std::map<std::string, collect::Reading> by_id;
  for (const collect::Reading& reading : readings) {
    EXPECT_EQ(reading.time, testing::kTestStart + kNanosPerSecond);  // the row's own time
    EXPECT_EQ(reading.device_id, "nova-1");
    std::string labels = collect::LabelsText(reading.labels);
    by_id[reading.metric_id + " " + labels.substr(0, labels.find(",\"_metric"))] = reading;
  }
  // 2 domains x (measured, idle, unattributed, python3) x (power, energy) + 8 health rows.
  EXPECT_EQ(readings.size(), 2u * 4u * 2u + 8u) << [&] {
    std::string all;
    for (const auto& [id, reading] : by_id) all += id + "\n";
    return all;
  }();
  // Labels a row lacks, the node exporter gives empty (it makes every line of a family carry the
  // family's label names): Kwollect keeps them so.
  auto it = by_id.find(
      R"(kwatt_meter_domain_energy_joules_total {"kind":"package","name":"","domain":"package-0","source":"rapl","target":"")");
  ASSERT_NE(it, by_id.end()) << [&] {
    std::string all;
    for (const auto& [id, reading] : by_id) all += id + "\n";
    return all;
  }();
  EXPECT_EQ(it->second.value, 30.0);
  ASSERT_TRUE((*output)->Finish().ok());
}

// -- archive ------------------------------------------------------------------------------------

TEST(ArchiveOutput, KwattInspectVerifiesItAndKwattEnergyReadsItsPower) {
  TempDir dir;
  std::string archive = (dir.root() / "run").string();
  OutputOptions options;
  options.node = "nova-1";
  options.site = "lyon";
  Result<std::unique_ptr<OutputSink>> output = OpenOutput("archive:" + archive, options);
  ASSERT_TRUE(output.ok()) << output.status().ToString();
  MeterHeader header = TestHeader();
  ReportBuilder reports(header);
  Target python = ProcessTarget(7, "python3");
  ASSERT_TRUE((*output)->Begin(header).ok());
  const int intervals = 120;
  int64_t measured = 0;
  for (int i = 0; i < intervals; ++i) {
    IntervalReport report = reports.Next({40.0, 5.0}, {{python, 500'000}});
    measured += report.domains[0].measured_microjoules + report.domains[1].measured_microjoules;
    ASSERT_TRUE((*output)->Write(report).ok());
  }
  ASSERT_TRUE((*output)->Finish().ok());

  Result<collect::RunResult> verify = RunKwatt({"inspect", archive, "--verify"});
  ASSERT_TRUE(verify.ok()) << verify.status().ToString();
  EXPECT_TRUE(verify->exit.ok()) << verify->out << verify->err;
  EXPECT_NE(verify->out.find("nova-1.lyon.grid5000.fr"), std::string::npos) << verify->out;
  Result<collect::RunResult> inspect = RunKwatt({"inspect", archive});
  ASSERT_TRUE(inspect.ok());
  EXPECT_NE(inspect->out.find("from 1745000000.000000 to its stop (a recording)"),
            std::string::npos)
      << inspect->out;

  // The rows as Kwollect serves them: Paris time, labels in jsonb order.
  Result<collect::RunResult> cat =
      RunKwatt({"cat", archive, "--metrics", "kwatt_meter_domain_energy_joules_total"});
  ASSERT_TRUE(cat.ok() && cat->exit.ok()) << (cat.ok() ? cat->err : cat.status().ToString());
  std::string last = cat->out.substr(cat->out.rfind('\n', cat->out.size() - 2) + 1);
  EXPECT_EQ(last, R"({"timestamp":"2025-04-18T20:15:20+02:00","device_id":"nova-1",)"
                  R"("metric_id":"kwatt_meter_domain_energy_joules_total","value":600,)"
                  R"("labels":{"kind":"dram","domain":"dram-0","source":"rapl"}})"
                  "\n");

  // kwatt energy on the domains' power (package + dram, 45 W all along: its trapezoids are exact):
  // what the meter measured.
  Result<collect::RunResult> energy =
      RunKwatt({"energy", archive, "--metric", "kwatt_meter_domain_power_watt", "--json"});
  ASSERT_TRUE(energy.ok()) << energy.status().ToString();
  ASSERT_TRUE(energy->exit.ok()) << energy->out << energy->err;
  nlohmann::json report = nlohmann::json::parse(energy->out);
  const nlohmann::json& node = report["nodes"][0];
  EXPECT_EQ(node["metric"], "kwatt_meter_domain_power_watt");
  EXPECT_EQ(node["series"], 2);  // package-0 and dram-0
  EXPECT_NEAR(node["window"]["joules"].get<double>(), double(measured) / 1e6, 1e-6) << energy->out;
  EXPECT_EQ(node["window"]["coverage"], 1.0);
}

TEST(ArchiveOutput, AStoppedMeterGoesOnWithItsUnfinishedRecording) {
  TempDir dir;
  std::string archive = (dir.root() / "run").string();
  OutputOptions options;
  options.node = "nova-1";
  options.site = "lyon";
  MeterHeader header = TestHeader();
  ReportBuilder reports(header);
  {
    Result<std::unique_ptr<OutputSink>> output = OpenOutput("archive:" + archive, options);
    ASSERT_TRUE(output.ok());
    ASSERT_TRUE((*output)->Begin(header).ok());
    ASSERT_TRUE((*output)->Write(reports.Next({40.0, 5.0})).ok());
    // Killed: no Finish. The archive is incomplete.
  }
  Result<collect::RunResult> incomplete = RunKwatt({"inspect", archive, "--verify"});
  ASSERT_TRUE(incomplete.ok());
  EXPECT_FALSE(incomplete->exit.ok());
  // Another node's meter does not take it.
  OutputOptions other = options;
  other.node = "nova-2";
  Result<std::unique_ptr<OutputSink>> refused = OpenOutput("archive:" + archive, other);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("holds another archive"), std::string::npos)
      << refused.status().ToString();
  // This node's, restarted later, goes on with it.
  MeterHeader restarted =
      TestHeader(TestHeader().domains, reports.next_start() + 600 * kNanosPerSecond);
  ReportBuilder later(restarted);
  Result<std::unique_ptr<OutputSink>> output = OpenOutput("archive:" + archive, options);
  ASSERT_TRUE(output.ok()) << output.status().ToString();
  ASSERT_TRUE((*output)->Begin(restarted).ok());
  ASSERT_TRUE((*output)->Write(later.Next({40.0, 5.0})).ok());
  ASSERT_TRUE((*output)->Finish().ok());
  Result<collect::RunResult> verify = RunKwatt({"inspect", archive, "--verify"});
  ASSERT_TRUE(verify.ok());
  EXPECT_TRUE(verify->exit.ok()) << verify->out << verify->err;
  // A finished recording is not taken again.
  Result<std::unique_ptr<OutputSink>> finished = OpenOutput("archive:" + archive, options);
  ASSERT_FALSE(finished.ok());
  EXPECT_NE(finished.status().message().find("a finished archive"), std::string::npos);
}

}  // namespace
}  // namespace kwatt::meter::outputs_files_test
