// influxdb: against Debian's influxd 1.6, started by each test on 127.0.0.1: write, then query
// back; a server stopped and started again; a buffer that overflows; credentials refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kwatt/meter/outputs/outputs.h"
#include "src/testing/influxd.h"
#include "src/testing/meter_reports.h"

namespace kwatt::meter::outputs_influxdb_test {
namespace {

using kwatt::testing::TestInfluxd;
using testing::ProcessTarget;
using testing::ReportBuilder;
using testing::TestHeader;

std::unique_ptr<TestInfluxd> StartInfluxd(TestInfluxd::Options options = {}) {
  Result<std::unique_ptr<TestInfluxd>> server = TestInfluxd::Start(options);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(*server) : nullptr;
}

// The rows of an InfluxQL answer: each series' values as objects {column: value}, with the
// series' tags (GROUP BY) merged in.
std::vector<nlohmann::json> Rows(TestInfluxd& server, const std::string& query) {
  Result<std::string> answer = server.Query(query, "kwatt");
  EXPECT_TRUE(answer.ok()) << answer.status().ToString();
  std::vector<nlohmann::json> rows;
  if (!answer.ok()) return rows;
  nlohmann::json doc = nlohmann::json::parse(*answer);
  for (const auto& result : doc["results"]) {
    EXPECT_FALSE(result.contains("error")) << *answer;
    for (const auto& series : result.value("series", nlohmann::json::array())) {
      for (const auto& values : series["values"]) {
        nlohmann::json row = series.value("tags", nlohmann::json::object());
        for (size_t i = 0; i < values.size(); ++i)
          row[series["columns"][i].get<std::string>()] = values[i];
        rows.push_back(row);
      }
    }
  }
  return rows;
}

int64_t CountPoints(TestInfluxd& server) {
  std::vector<nlohmann::json> rows = Rows(server, "SELECT count(energy_uj) FROM power_consumption");
  return rows.empty() ? 0 : rows[0]["count"].get<int64_t>();
}

OutputOptions Immediate() {
  OutputOptions options;
  options.flush_seconds = 0;  // a request per report
  options.retry_seconds = 0;  // and after a failure, again at the next report
  options.timeout_seconds = 5;
  options.finish_seconds = 10;
  return options;
}

TEST(InfluxdbOutput, WritesPowerApisMeasurementThatQueriesBackExactly) {
  std::unique_ptr<TestInfluxd> server = StartInfluxd();
  ASSERT_TRUE(server);
  Result<std::unique_ptr<OutputSink>> output =
      OpenOutput("influxdb:" + server->url() + "/kwatt", Immediate());
  ASSERT_TRUE(output.ok()) << output.status().ToString();
  ASSERT_EQ((*output)->Notes().size(), 1u);
  EXPECT_NE((*output)->Notes()[0].find("created the database kwatt"), std::string::npos);
  MeterHeader header = TestHeader();
  ReportBuilder reports(header);
  Target python = ProcessTarget(7, "python3"), odd = ProcessTarget(8, "a b,c=d\\");
  std::vector<IntervalReport> written;
  written.push_back(reports.Next({35.5, 4.25}, {{python, 600'000}, {odd, 100'000}}, -1, {9, 1}));
  written.push_back(reports.Next({41.0, 4.5}, {{python, 800'000}}, -1, {9, 1}));
  written.push_back(reports.Next({0.0, 4.0}, {{python, 800'000}}, -1, {9, 1}, {kUnreadable, 0}));
  ASSERT_TRUE((*output)->Begin(header).ok());
  for (const IntervalReport& report : written) ASSERT_TRUE((*output)->Write(report).ok());
  ASSERT_TRUE((*output)->Finish().ok());
  EXPECT_EQ((*output)->Stats().rows_pending, 0);
  EXPECT_EQ((*output)->Stats().rows_dropped, 0);
  EXPECT_EQ((*output)->SaveState(), "");

  // 2 domains x (measured, idle, unattributed, 2 targets), 2 x 4, then dram only (package is a
  // gap): 4.
  EXPECT_EQ(CountPoints(*server), 10 + 8 + 4);
  EXPECT_EQ((*output)->Stats().rows_written, 22);
  std::vector<nlohmann::json> measured =
      Rows(*server,
           "SELECT power, energy, energy_uj, scope, socket, sensor, kind FROM "
           "power_consumption WHERE target = 'rapl' AND domain = 'package-0'");
  ASSERT_EQ(measured.size(), 2u);
  EXPECT_EQ(measured[0]["power"], 35.5);
  EXPECT_EQ(measured[0]["energy_uj"], 35'500'000);
  EXPECT_EQ(measured[0]["scope"], "cpu");
  EXPECT_EQ(measured[0]["socket"], "0");
  EXPECT_EQ(measured[0]["sensor"], "nova-1");
  EXPECT_EQ(measured[0]["kind"], "package");
  // The shares of each interval add up to what was measured, to the microjoule.
  for (const char* domain : {"package-0", "dram-0"}) {
    std::vector<nlohmann::json> sums =
        Rows(*server, std::string("SELECT sum(energy_uj) FROM power_consumption WHERE domain = '") +
                          domain + "' AND target != 'rapl' GROUP BY time(1s) fill(none)");
    std::vector<nlohmann::json> totals =
        Rows(*server, std::string("SELECT sum(energy_uj) FROM power_consumption WHERE domain = '") +
                          domain + "' AND target = 'rapl' GROUP BY time(1s) fill(none)");
    ASSERT_EQ(sums.size(), totals.size()) << domain;
    for (size_t i = 0; i < sums.size(); ++i) EXPECT_EQ(sums[i]["sum"], totals[i]["sum"]);
  }
  // Targets by their name (PowerAPI's target), told apart by their key; tags escaped.
  std::vector<nlohmann::json> targets =
      Rows(*server,
           "SELECT energy_uj, target_key, target FROM power_consumption WHERE kind = 'process' AND "
           "domain = 'package-0'");
  ASSERT_EQ(targets.size(), 3u);
  std::set<std::string> names;
  for (const auto& row : targets)
    names.insert(row["target"].get<std::string>() + "|" + row["target_key"].get<std::string>());
  EXPECT_EQ(names, (std::set<std::string>{"python3|" + python.key, "a b,c=d?|" + odd.key}));
  std::vector<nlohmann::json> times =
      Rows(*server,
           "SELECT energy_uj FROM power_consumption WHERE target = 'idle' AND domain = "
           "'dram-0' ORDER BY time");
  ASSERT_EQ(times.size(), 3u);
  EXPECT_EQ(times[0]["time"], "2025-04-18T18:13:21Z");  // each interval at its end
}

TEST(InfluxdbOutput, AServerDownThenBackLosesNothingWithinTheBuffer) {
  std::unique_ptr<TestInfluxd> server = StartInfluxd();
  ASSERT_TRUE(server);
  Result<std::unique_ptr<OutputSink>> output =
      OpenOutput("influxdb:" + server->url() + "/kwatt", Immediate());
  ASSERT_TRUE(output.ok()) << output.status().ToString();
  MeterHeader header = TestHeader();
  ReportBuilder reports(header);
  Target python = ProcessTarget(7, "python3");
  ASSERT_TRUE((*output)->Begin(header).ok());
  auto next = [&] { return reports.Next({30.0, 4.0}, {{python, 500'000}}); };  // 8 points each
  for (int i = 0; i < 2; ++i) ASSERT_TRUE((*output)->Write(next()).ok());
  EXPECT_EQ((*output)->Stats().rows_written, 16);

  server->Stop();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*output)->Write(next()).ok());  // kept, not lost
  OutputStats down = (*output)->Stats();
  EXPECT_EQ(down.rows_pending, 24);
  EXPECT_GE(down.failed_requests, 3);
  EXPECT_NE(down.last_error.find("cannot reach"), std::string::npos) << down.last_error;

  ASSERT_TRUE(server->Restart().ok());
  ASSERT_TRUE((*output)->Write(next()).ok());  // the next report sends what waited
  EXPECT_EQ((*output)->Stats().rows_pending, 0);
  server->Stop();
  ASSERT_TRUE((*output)->Write(next()).ok());
  ASSERT_TRUE(server->Restart().ok());
  ASSERT_TRUE((*output)->Finish().ok());  // Finish sends the rest
  EXPECT_EQ(CountPoints(*server), 7 * 8);
  EXPECT_EQ((*output)->Stats().rows_dropped, 0);
}

TEST(InfluxdbOutput, ABufferThatOverflowsDropsTheOldestAndSaysSo) {
  std::unique_ptr<TestInfluxd> server = StartInfluxd();
  ASSERT_TRUE(server);
  OutputOptions options = Immediate();
  options.max_buffered_rows = 20;
  options.finish_seconds = 0.5;
  Result<std::unique_ptr<OutputSink>> output =
      OpenOutput("influxdb:" + server->url() + "/kwatt", options);
  ASSERT_TRUE(output.ok()) << output.status().ToString();
  MeterHeader header = TestHeader();
  ReportBuilder reports(header);
  ASSERT_TRUE((*output)->Begin(header).ok());
  server->Stop();
  auto next = [&] { return reports.Next({30.0, 4.0}); };                   // 6 points each
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*output)->Write(next()).ok());  // 18 kept
  Status dropped = (*output)->Write(next());                               // 24 > 20
  EXPECT_EQ(dropped.code(), Status::Code::kUnavailable);
  EXPECT_NE(dropped.message().find("4 rows dropped, the oldest"), std::string::npos)
      << dropped.ToString();
  EXPECT_EQ((*output)->Stats().rows_dropped, 4);
  // Still down at the end: what is left is lost, and Finish says how much.
  Status finished = (*output)->Finish();
  EXPECT_EQ(finished.code(), Status::Code::kUnavailable);
  EXPECT_NE(finished.message().find("20 rows could not be sent"), std::string::npos)
      << finished.ToString();
  EXPECT_EQ((*output)->Stats().rows_dropped, 24);
}

TEST(InfluxdbOutput, RefusedCredentialsAreAConfigurationErrorThatShowsNoPassword) {
  TestInfluxd::Options with_auth;
  with_auth.auth = true;
  std::unique_ptr<TestInfluxd> server = StartInfluxd(with_auth);
  ASSERT_TRUE(server);
  std::string origin = server->url().substr(std::string("http://").size());
  Result<std::unique_ptr<OutputSink>> wrong =
      OpenOutput("influxdb:http://admin:hunter2@" + origin + "/kwatt", Immediate());
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), Status::Code::kUnauthenticated);
  EXPECT_EQ(wrong.status().message().find("hunter2"), std::string::npos);
  EXPECT_NE(wrong.status().message().find("credentials of admin"), std::string::npos)
      << wrong.status().ToString();
  Result<std::unique_ptr<OutputSink>> none =
      OpenOutput("influxdb:" + server->url() + "/kwatt", Immediate());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("without credentials"), std::string::npos);
  Result<std::unique_ptr<OutputSink>> right =
      OpenOutput("influxdb:http://admin:secret@" + origin + "/kwatt", Immediate());
  ASSERT_TRUE(right.ok()) << right.status().ToString();
  MeterHeader header = TestHeader();
  ASSERT_TRUE((*right)->Begin(header).ok());
  ASSERT_TRUE((*right)->Write(ReportBuilder(header).Next({10.0, 1.0})).ok());
  ASSERT_TRUE((*right)->Finish().ok());
  EXPECT_EQ(CountPoints(*server), 6);
}

TEST(InfluxdbOutput, AServerThatDoesNotAnswerAtOpenIsANoteAndRowsWaitForIt) {
  std::unique_ptr<TestInfluxd> server = StartInfluxd();
  ASSERT_TRUE(server);
  std::string url = server->url();
  server->Stop();
  OutputOptions options = Immediate();
  options.finish_seconds = 0.3;
  Result<std::unique_ptr<OutputSink>> output = OpenOutput("influxdb:" + url + "/kwatt", options);
  ASSERT_TRUE(output.ok()) << output.status().ToString();
  ASSERT_EQ((*output)->Notes().size(), 1u);
  EXPECT_NE((*output)->Notes()[0].find("does not answer"), std::string::npos);
  MeterHeader header = TestHeader();
  ASSERT_TRUE((*output)->Begin(header).ok());
  ASSERT_TRUE((*output)->Write(ReportBuilder(header).Next({10.0, 1.0})).ok());
  EXPECT_EQ((*output)->Stats().rows_pending, 6);
  EXPECT_EQ((*output)->Finish().code(), Status::Code::kUnavailable);
}

}  // namespace
}  // namespace kwatt::meter::outputs_influxdb_test
