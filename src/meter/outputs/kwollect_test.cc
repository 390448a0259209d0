// kwollect: pushes to the real `kwatt serve --auth` (the binary, on loopback), read back with
// `kwatt fetch` as a user would; the server's refusals.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kwatt/meter/outputs/outputs.h"
#include "src/testing/kwatt_binary.h"
#include "src/testing/meter_reports.h"

namespace kwatt::meter::outputs_kwollect_test {
namespace {

using kwatt::testing::KwattServer;
using kwatt::testing::RunKwatt;
using testing::ProcessTarget;
using testing::ReportBuilder;
using testing::TestHeader;

OutputOptions Options() {
  OutputOptions options;
  options.node = "nova-1";
  options.flush_seconds = 0;
  options.retry_seconds = 0;
  options.finish_seconds = 5;
  options.credentials_file = "/nonexistent/python-grid5000.yaml";  // not the user's
  return options;
}

std::unique_ptr<KwattServer> Serve(std::vector<std::string> args) {
  Result<std::unique_ptr<KwattServer>> server = KwattServer::Start(std::move(args));
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(*server) : nullptr;
}

// The rows `kwatt fetch` gives for nova-1.lyon over the reports' window.
std::vector<nlohmann::json> Fetch(const KwattServer& server, const std::string& metrics) {
  Result<collect::RunResult> run =
      RunKwatt({"fetch", "--api", server.UrlWith("alice:s3cret"), "--config", "/nonexistent.yaml",
                "--nodes", "nova-1.lyon", "--metrics", metrics, "--custom-metrics", "--start",
                std::to_string(testing::kTestStart / kNanosPerSecond), "--end",
                std::to_string(testing::kTestStart / kNanosPerSecond + 60), "--quiet"});
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  std::vector<nlohmann::json> rows;
  if (!run.ok()) return rows;
  EXPECT_TRUE(run->exit.ok()) << run->err;
  std::istringstream lines(run->out);
  std::string line;
  while (std::getline(lines, line)) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

TEST(KwollectOutput, PushesWhatKwattFetchReadsBack) {
  std::unique_ptr<KwattServer> server = Serve({"--auth", "alice:s3cret"});
  ASSERT_TRUE(server);
  Result<std::unique_ptr<OutputSink>> output =
      OpenOutput("kwollect:" + server->UrlWith("alice:s3cret") + "/sites/lyon", Options());
  ASSERT_TRUE(output.ok()) << output.status().ToString();
  EXPECT_EQ((*output)->Name(), "kwollect:" + server->url() + "/sites/lyon");  // no password
  EXPECT_TRUE((*output)->Notes().empty());
  MeterHeader header = TestHeader();
  ReportBuilder reports(header);
  Target python = ProcessTarget(7, "python3");
  ASSERT_TRUE((*output)->Begin(header).ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE((*output)->Write(reports.Next({30.0 + i, 4.0}, {{python, 500'000}})).ok());
  }
  ASSERT_TRUE((*output)->Finish().ok());
  OutputStats stats = (*output)->Stats();
  EXPECT_EQ(stats.rows_dropped, 0);
  EXPECT_EQ(stats.requests, 3);

  std::vector<nlohmann::json> energy = Fetch(*server, "kwatt_meter_domain_energy_joules_total");
  ASSERT_EQ(energy.size(), 6u);  // 2 domains x 3 intervals
  std::map<std::string, double> last;
  for (const auto& row : energy) {
    EXPECT_EQ(row["device_id"], "nova-1");
    last[row["labels"]["domain"].get<std::string>()] = row["value"].get<double>();
    EXPECT_EQ(row["labels"]["source"], "rapl");
  }
  EXPECT_EQ(last["package-0"], 30.0 + 31.0 + 32.0);  // the counter after the last interval
  EXPECT_EQ(last["dram-0"], 12.0);
  EXPECT_EQ(energy.back()["timestamp"], "2025-04-18T20:13:23+02:00");  // the last interval's end
  std::vector<nlohmann::json> shares = Fetch(*server, "kwatt_meter_power_watt");
  ASSERT_EQ(shares.size(), 2u * 3u * 3u);  // idle, unattributed, python3 per domain and interval
  int targets = 0;
  for (const auto& row : shares) {
    if (row["labels"]["kind"] != "process") continue;
    ++targets;
    EXPECT_EQ(row["labels"]["target"], python.key);
    EXPECT_EQ(row["labels"]["name"], "python3");
  }
  EXPECT_EQ(targets, 6);
  std::vector<nlohmann::json> health = Fetch(*server, "kwatt_meter_ticks_total");
  ASSERT_EQ(health.size(), 3u);
  EXPECT_EQ(health.back()["value"], 3);
}

TEST(KwollectOutput, TheServersRefusalsAtOpenAndAtPush) {
  std::unique_ptr<KwattServer> server = Serve({"--auth", "alice:s3cret"});
  ASSERT_TRUE(server);
  Result<std::unique_ptr<OutputSink>> wrong =
      OpenOutput("kwollect:" + server->UrlWith("alice:hunter2") + "/sites/lyon", Options());
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), Status::Code::kUnauthenticated);
  EXPECT_EQ(wrong.status().message().find("hunter2"), std::string::npos);
  Result<std::unique_ptr<OutputSink>> nowhere =
      OpenOutput("kwollect:" + server->UrlWith("alice:s3cret") + "/sites/atlantis", Options());
  ASSERT_FALSE(nowhere.ok());
  EXPECT_EQ(nowhere.status().code(), Status::Code::kNotFound);
  EXPECT_NE(nowhere.status().message().find("no such site"), std::string::npos)
      << nowhere.status().ToString();

  // A server that takes no pushes (no --auth): each refused push is dropped, and said.
  std::unique_ptr<KwattServer> open = Serve({});
  ASSERT_TRUE(open);
  OutputOptions options = Options();
  options.site = "lyon";
  Result<std::unique_ptr<OutputSink>> output = OpenOutput("kwollect:" + open->url(), options);
  ASSERT_TRUE(output.ok()) << output.status().ToString();
  MeterHeader header = TestHeader();
  ASSERT_TRUE((*output)->Begin(header).ok());
  Status refused = (*output)->Write(ReportBuilder(header).Next({10.0, 1.0}));
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("rows refused and dropped"), std::string::npos)
      << refused.ToString();
  EXPECT_NE(refused.message().find("takes no pushed metrics"), std::string::npos)
      << refused.ToString();
  EXPECT_GT((*output)->Stats().rows_dropped, 0);
  EXPECT_TRUE((*output)->Finish().ok());
}

}  // namespace
}  // namespace kwatt::meter::outputs_kwollect_test
