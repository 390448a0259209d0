// The Prometheus exposition: read by kwatt's own parser and checked by Debian's promtool, and
// served on loopback by its MetricsServer (kwatt/http/metrics_server.h).
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "kwatt/collect/prometheus_text.h"
#include "kwatt/http/client.h"
#include "kwatt/meter/outputs/outputs.h"
#include "src/collect/subprocess.h"
#include "src/testing/meter_reports.h"
#include "src/testing/temp_dir.h"

namespace kwatt::meter::outputs_prometheus_test {
namespace {

using testing::CgroupTarget;
using testing::ProcessTarget;
using testing::ReportBuilder;
using testing::TestHeader;

struct Sample {
  std::string type;
  double value = 0;
};

// name{labels} -> sample, read by kwatt's Prometheus text reader (the collector's).
std::map<std::string, Sample> Samples(const std::string& text) {
  std::map<std::string, Sample> out;
  Status status = collect::ReadPrometheusText(text, [&](const collect::PrometheusSample& s) {
    std::string id = s.name + "{";
    for (const auto& [key, value] : s.labels) id += key + "=" + value + ",";
    id += "}";
    EXPECT_EQ(out.count(id), 0u) << "twice: " << id;
    out[id] = {std::string(s.type), s.value};
    return Status::OK();
  });
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << text;
  return out;
}

// promtool check metrics on `text`: its complaints, "" when none.
std::string Promtool(const std::string& text) {
  kwatt::testing::TempDir dir;
  std::string path = (dir.root() / "metrics.prom").string();
  std::ofstream(path) << text;
  Result<collect::RunResult> run = collect::RunProgram(
      {"/bin/sh", "-c", "exec promtool check metrics < '" + path + "'"}, collect::RunOptions{});
  if (!run.ok()) return run.status().ToString();
  if (run->exit.exit_code == 127)
    return "promtool is not installed (Debian's prometheus): make deps";
  return run->exit.ok() ? run->out + run->err : run->exit.Describe() + ": " + run->out + run->err;
}

// The package-0 shares of `text`: target key (or kind for idle, unattributed, other) -> joules,
// and the domain's own counter under "measured".
std::map<std::string, double> Shares(const std::string& text) {
  std::map<std::string, double> out;
  for (const auto& [id, sample] : Samples(text)) {
    if (id.find("domain=package-0,") == std::string::npos) continue;
    if (id.starts_with("kwatt_meter_domain_energy_joules_total{")) out["measured"] = sample.value;
    if (!id.starts_with("kwatt_meter_energy_joules_total{")) continue;
    size_t at = id.find("target=");
    size_t kind = id.find("kind=") + 5;
    out[at != std::string::npos ? id.substr(at + 7, id.find(',', at) - at - 7)
                                : id.substr(kind, id.find(',', kind) - kind)] = sample.value;
  }
  return out;
}

// Issue 37, item 5: under churn, sums of rates over a real Prometheus's targets missed 5-9 % of
// the domain's. Prometheus cannot count a series' first value nor a series of one sample, and it
// reads a series that vanished as stale: so a target's series starts at 0 (its first energy in
// other's, until a scrape read that 0), stays while the meter runs, idle or ended (frozen), keeps
// the labels of its first appearance, and never goes down (a cgroup made again goes on). In every
// text the shares add up to the domain's.
TEST(PrometheusExposition, EveryTargetStartsAtZeroStaysExposedAndNoCounterGoesDown) {
  MeterHeader header = TestHeader();
  ReportBuilder reports(header);
  OutputOptions options;
  options.max_targets = 0;  // all exposed
  PrometheusExposition exposition(options);
  ASSERT_TRUE(exposition.Begin(header).ok());
  Target a = ProcessTarget(1, "busy"), b = ProcessTarget(2, "sometimes");
  Target web = CgroupTarget("/system.slice/web.service");
  std::map<std::string, double> last;
  auto read = [&] {  // a scrape; checks the sum, and that no counter went down
    std::map<std::string, double> now = Shares(exposition.Text());
    double parts = 0;
    for (const auto& [key, joules] : now) {
      if (key != "measured") parts += joules;
      if (last.count(key)) {
        EXPECT_GE(joules, last[key]) << key;
      }
    }
    EXPECT_NEAR(parts, now["measured"], 1e-6);
    EXPECT_EQ(Promtool(exposition.Text()), "");
    last = now;
    return now;
  };
  ASSERT_TRUE(
      exposition.Write(reports.Next({40.0, 6.0}, {{a, 500'000}, {b, 500'000}, {web, 500'000}}))
          .ok());
  std::map<std::string, double> first = read();
  EXPECT_EQ(first[a.key], 0);  // new: at 0, their energy in other's
  EXPECT_EQ(first[web.key], 0);
  EXPECT_GT(first["other"], 0);
  // That 0 was read: from now on they count. b idle (absent from the report): exposed, unchanged.
  ASSERT_TRUE(exposition.Write(reports.Next({40.0, 6.0}, {{a, 500'000}, {web, 500'000}})).ok());
  std::map<std::string, double> second = read();
  EXPECT_GT(second[a.key], 0);
  EXPECT_EQ(second["other"], first["other"]);
  EXPECT_EQ(second[b.key], 0);
  // b and the cgroup end: both stay, frozen.
  IntervalReport ended = reports.Next({40.0, 6.0}, {{a, 500'000}});
  ended.ended_targets = {b.key, web.key};
  ASSERT_TRUE(exposition.Write(ended).ok());
  std::map<std::string, double> third = read();
  EXPECT_EQ(third.count(b.key), 1u);
  EXPECT_EQ(third[web.key], second[web.key]);
  // The cgroup made again under the same path: its counter goes on, up.
  ASSERT_TRUE(exposition.Write(reports.Next({40.0, 6.0}, {{a, 500'000}, {web, 100'000}})).ok());
  EXPECT_GT(read()[web.key], third[web.key]);
  // A target whose 0 no scrape read stays at 0 (two reports between two scrapes), its energy in
  // other's; a renamed one keeps the name it first had.
  Target c = ProcessTarget(3, "kworker/u8:1-writeback");
  ASSERT_TRUE(exposition.Write(reports.Next({40.0, 6.0}, {{a, 500'000}, {c, 300'000}})).ok());
  Target renamed = c;
  renamed.name = "kworker/u8:1-flush-254:0";
  ASSERT_TRUE(exposition.Write(reports.Next({40.0, 6.0}, {{a, 500'000}, {renamed, 300'000}})).ok());
  std::map<std::string, double> fifth = read();
  EXPECT_EQ(fifth[c.key], 0);
  ASSERT_TRUE(exposition.Write(reports.Next({40.0, 6.0}, {{a, 500'000}, {renamed, 300'000}})).ok());
  EXPECT_GT(read()[c.key], 0);
  std::string text = exposition.Text();
  EXPECT_NE(text.find("name=\"kworker/u8:1-writeback\""), std::string::npos);
  EXPECT_EQ(text.find("flush"), std::string::npos) << text;
}

// The targets kept exposed are bounded: ten times --max-targets, those exposed longest ago going
// first.
TEST(PrometheusExposition, TheTargetsKeptExposedAreBounded) {
  MeterHeader header = TestHeader();
  ReportBuilder reports(header);
  OutputOptions options;
  options.max_targets = 1;
  PrometheusExposition exposition(options);
  ASSERT_TRUE(exposition.Begin(header).ok());
  for (int pid = 1; pid <= 15; ++pid) {
    ASSERT_TRUE(
        exposition.Write(reports.Next({40.0, 6.0}, {{ProcessTarget(pid, "p"), 500'000}})).ok());
  }
  std::set<std::string> targets;
  for (const auto& [id, sample] : Samples(exposition.Text())) {
    size_t at = id.find("target=");
    if (at != std::string::npos) targets.insert(id.substr(at, id.find(',', at) - at));
  }
  EXPECT_EQ(targets.size(), 10u);
  EXPECT_EQ(targets.count("target=" + ProcessTarget(15, "p").key), 1u);  // the latest kept
  EXPECT_EQ(targets.count("target=" + ProcessTarget(5, "p").key), 0u);   // the oldest gone
}

TEST(PrometheusExposition, FamiliesPromtoolAcceptsWithTheMetersFiguresAndHealth) {
  MeterHeader header = TestHeader();
  ReportBuilder reports(header);
  OutputOptions options;
  options.max_targets = 1;
  PrometheusExposition exposition(options);
  EXPECT_EQ(exposition.Text(), "");
  ASSERT_TRUE(exposition.Begin(header).ok());
  EXPECT_NE(exposition.Text().find("kwatt_meter_info{sensor=\"nova-1\""), std::string::npos);
  Target a = ProcessTarget(1, "python3"), b = ProcessTarget(2, "say \"hi\"\\\n");
  reports.health().dropped_reports = {{"influxdb:http://db:8086/power", 3}, {"csv:out.csv", 0}};
  ASSERT_TRUE(exposition.Write(reports.Next({40.0, 6.0}, {{a, 600'000}, {b, 100'000}})).ok());
  std::string text = exposition.Text();
  EXPECT_EQ(Promtool(text), "") << text;
  std::map<std::string, Sample> samples = Samples(text);
  auto get = [&](const std::string& id) {
    auto it = samples.find(id);
    EXPECT_NE(it, samples.end()) << id << " not in\n" << text;
    return it == samples.end() ? Sample{} : it->second;
  };
  Sample measured =
      get("kwatt_meter_domain_energy_joules_total{source=rapl,domain=package-0,kind=package,}");
  EXPECT_EQ(measured.type, "counter");
  EXPECT_EQ(measured.value, 40.0);
  EXPECT_EQ(get("kwatt_meter_domain_power_watts{source=rapl,domain=dram-0,kind=dram,}").value, 6.0);
  // a is the top target; b is in "other"; they add up to the domain's.
  double parts = 0;
  for (const char* kind : {"idle", "unattributed", "other"}) {
    parts += get(std::string("kwatt_meter_energy_joules_total{source=rapl,domain=package-0,kind=") +
                 kind + ",}")
                 .value;
  }
  parts += get("kwatt_meter_energy_joules_total{source=rapl,domain=package-0,kind=process,target=" +
               a.key + ",name=python3,}")
               .value;
  EXPECT_DOUBLE_EQ(parts, 40.0);
  EXPECT_EQ(get("kwatt_meter_dropped_reports_total{output=influxdb:http://db:8086/power,}").value,
            3);
  EXPECT_EQ(get("kwatt_meter_ticks_total{}").type, "counter");
  EXPECT_EQ(get("kwatt_meter_max_lag_seconds{}").type, "gauge");
  EXPECT_DOUBLE_EQ(get("kwatt_meter_last_report_timestamp_seconds{}").value,
                   double(testing::kTestStart) / 1e9 + 1);

  // b moves into the top 1: every counter of the text still only grows.
  ASSERT_TRUE(exposition.Write(reports.Next({40.0, 6.0}, {{a, 10'000}, {b, 900'000}})).ok());
  ASSERT_TRUE(exposition.Write(reports.Next({40.0, 6.0}, {{a, 900'000}, {b, 10'000}})).ok());
  std::map<std::string, Sample> later = Samples(exposition.Text());
  EXPECT_EQ(Promtool(exposition.Text()), "");
  for (const auto& [id, sample] : samples) {
    if (sample.type != "counter" || !later.count(id)) continue;
    EXPECT_GE(later[id].value, sample.value) << id;
  }
  // b is out of the top again: its counter stays exposed, frozen (its energy goes to other's).
  const std::string b_id =
      "kwatt_meter_energy_joules_total{source=rapl,domain=package-0,kind="
      "process,target=" +
      b.key + ",name=say \"hi\"\\\n,}";
  ASSERT_EQ(later.count(b_id), 1u);
  ASSERT_TRUE(exposition.Write(reports.Next({40.0, 6.0}, {{a, 900'000}, {b, 10'000}})).ok());
  EXPECT_EQ(Samples(exposition.Text())[b_id].value, later[b_id].value);
}

TEST(PrometheusExposition, AGapHasNoPowerButKeepsItsCounter) {
  MeterHeader header = TestHeader();
  ReportBuilder reports(header);
  PrometheusExposition exposition;
  ASSERT_TRUE(exposition.Begin(header).ok());
  ASSERT_TRUE(exposition.Write(reports.Next({40.0, 6.0})).ok());
  ASSERT_TRUE(exposition.Write(reports.Next({0.0, 6.0}, {}, -1, {}, {kReset, 0})).ok());
  std::map<std::string, Sample> samples = Samples(exposition.Text());
  EXPECT_EQ(samples.count("kwatt_meter_domain_power_watts{source=rapl,domain=package-0,kind="
                          "package,}"),
            0u);
  EXPECT_EQ(
      samples["kwatt_meter_domain_energy_joules_total{source=rapl,domain=package-0,kind=package,}"]
          .value,
      40.0);
  EXPECT_EQ(samples["kwatt_meter_source_resets_total{}"].value, 1);
}

TEST(PrometheusExposition, CountersContinueFromTheirSavedState) {
  MeterHeader header = TestHeader();
  ReportBuilder reports(header);
  PrometheusExposition first;
  ASSERT_TRUE(first.Begin(header).ok());
  ASSERT_TRUE(first.Write(reports.Next({40.0, 6.0})).ok());
  std::string state = first.SaveState();
  PrometheusExposition second;
  ASSERT_TRUE(second.RestoreState(state).ok());
  ASSERT_TRUE(second.Begin(header).ok());
  ASSERT_TRUE(second.Write(reports.Next({20.0, 6.0})).ok());
  std::map<std::string, Sample> samples = Samples(second.Text());
  EXPECT_EQ(
      samples["kwatt_meter_domain_energy_joules_total{source=rapl,domain=package-0,kind=package,}"]
          .value,
      60.0);
  EXPECT_EQ(second.RestoreState("{").code(), Status::Code::kCorruption);
}

// A restarted meter (--state) goes on with the series its text showed: other's share of the
// targets' first intervals, each target's offset and first labels. No counter goes down, and no
// target's series changes labels, across the restart.
TEST(PrometheusExposition, ARestartedMetersSeriesGoOnWhereTheyWere) {
  MeterHeader header = TestHeader();
  ReportBuilder reports(header);
  OutputOptions options;
  options.max_targets = 0;
  Target a = ProcessTarget(1, "busy"), web = CgroupTarget("/system.slice/web.service");
  PrometheusExposition first(options);
  ASSERT_TRUE(first.Begin(header).ok());
  ASSERT_TRUE(first.Write(reports.Next({40.0, 6.0}, {{a, 500'000}, {web, 500'000}})).ok());
  (void)first.Text();  // scraped: from now on they count
  ASSERT_TRUE(first.Write(reports.Next({40.0, 6.0}, {{a, 500'000}, {web, 500'000}})).ok());
  std::map<std::string, double> before = Shares(first.Text());
  std::string state = first.SaveState();
  PrometheusExposition second(options);
  ASSERT_TRUE(second.RestoreState(state).ok());
  ASSERT_TRUE(second.Begin(header).ok());
  Target renamed = a;
  renamed.name = "busier";
  ASSERT_TRUE(second.Write(reports.Next({40.0, 6.0}, {{renamed, 500'000}, {web, 500'000}})).ok());
  std::string text = second.Text();
  std::map<std::string, double> after = Shares(text);
  double parts = 0;
  for (const auto& [key, joules] : after) {
    if (key != "measured") parts += joules;
    EXPECT_GE(joules, before[key]) << key;
  }
  EXPECT_NEAR(parts, after["measured"], 1e-6);
  EXPECT_GT(after[a.key], before[a.key]);
  EXPECT_EQ(after["other"], before["other"]);
  EXPECT_EQ(text.find("busier"), std::string::npos) << text;  // its first labels
  EXPECT_EQ(Promtool(text), "");
  // A state of a kwatt before these series (no "prometheus") still restores the counters.
  nlohmann::json older = nlohmann::json::parse(state);
  older.erase("prometheus");
  PrometheusExposition third(options);
  EXPECT_TRUE(third.RestoreState(older.dump()).ok());
  nlohmann::json damaged = nlohmann::json::parse(state);
  damaged["prometheus"]["targets"][0]["labels"] = 7;
  EXPECT_EQ(PrometheusExposition(options).RestoreState(damaged.dump()).code(),
            Status::Code::kCorruption);
}

Result<http::ClientResponse> Get(const std::string& url) {
  http::ClientSettings options;
  options.timeout_s = 10;
  http::SmallClient client(options);
  return client.Get(url);
}

TEST(MeterMetricsServer, ServesTheLastTextAndAScrapeNeverMakesANewOne) {
  MeterHeader header = TestHeader();
  ReportBuilder reports(header);
  PrometheusExposition exposition;
  Result<std::unique_ptr<http::MetricsServer>> server =
      BindMetricsServer("127.0.0.1", 0, exposition);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_GT((*server)->port(), 0);
  EXPECT_EQ((*server)->url(), "http://127.0.0.1:" + std::to_string((*server)->port()) + "/metrics");
  ASSERT_TRUE((*server)->Serve().ok());
  ASSERT_TRUE(exposition.Begin(header).ok());
  ASSERT_TRUE(exposition.Write(reports.Next({40.0, 6.0}, {{ProcessTarget(1, "a"), 1000}})).ok());
  Result<http::ClientResponse> scrape = Get((*server)->url());
  ASSERT_TRUE(scrape.ok()) << scrape.status().ToString();
  EXPECT_EQ(scrape->status, 200);
  EXPECT_EQ(scrape->body, exposition.Text());
  // Scrapes read the meter's last interval: the same text, however often they come.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Get((*server)->url())->body, scrape->body);
  EXPECT_EQ(exposition.Stats().reports, 1);
  ASSERT_TRUE(exposition.Write(reports.Next({41.0, 6.0})).ok());
  EXPECT_NE(Get((*server)->url())->body, scrape->body);
  (*server)->Stop();
  EXPECT_FALSE(Get((*server)->url()).ok());
}

TEST(MeterMetricsServer, ScrapesWhileTheMeterWritesGetWholeTexts) {
  MeterHeader header = TestHeader();
  ReportBuilder reports(header);
  PrometheusExposition exposition;
  Result<std::unique_ptr<http::MetricsServer>> server =
      BindMetricsServer("127.0.0.1", 0, exposition);
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE((*server)->Serve().ok());
  ASSERT_TRUE(exposition.Begin(header).ok());
  std::vector<IntervalReport> all;
  for (int i = 0; i < 300; ++i) {
    all.push_back(reports.Next({30.0 + i % 7, 4.0}, {{ProcessTarget(1 + i % 13, "p"), 1000}}));
  }
  std::thread meter([&] {
    for (const IntervalReport& report : all) EXPECT_TRUE(exposition.Write(report).ok());
  });
  for (int i = 0; i < 40; ++i) {
    Result<http::ClientResponse> scrape = Get((*server)->url());
    ASSERT_TRUE(scrape.ok());
    std::map<std::string, Sample> samples = Samples(scrape->body);  // reads whole, or fails
    EXPECT_TRUE(samples.count("kwatt_meter_info{sensor=nova-1,formula=cputime,idle_policy=none,}"));
  }
  meter.join();
  EXPECT_EQ(Samples(Get((*server)->url())->body)["kwatt_meter_reports_total{}"].value, 300);
}

TEST(MeterMetricsServer, ABusyPortOrAnotherMachinesAddressIsAConfigurationError) {
  PrometheusExposition exposition;
  Result<std::unique_ptr<http::MetricsServer>> first =
      BindMetricsServer("127.0.0.1", 0, exposition);
  ASSERT_TRUE(first.ok());
  int port = (*first)->port();
  Result<std::unique_ptr<http::MetricsServer>> second =
      BindMetricsServer("127.0.0.1", port, exposition);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Status::Code::kIOError);
  EXPECT_NE(second.status().message().find("cannot listen on 127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << second.status().ToString();
  // Bound, never served, then dropped: the port is free again.
  first->reset();
  Result<std::unique_ptr<http::MetricsServer>> again =
      BindMetricsServer("127.0.0.1", port, exposition);
  EXPECT_TRUE(again.ok()) << again.status().ToString();
  Result<std::unique_ptr<http::MetricsServer>> elsewhere =
      BindMetricsServer("192.0.2.1", 0, exposition);
  ASSERT_FALSE(elsewhere.ok());  // TEST-NET-1: not an address of this machine
  EXPECT_EQ(elsewhere.status().code(), Status::Code::kIOError);
  EXPECT_EQ(BindMetricsServer("127.0.0.1", 70000, exposition).status().code(),
            Status::Code::kInvalidArgument);
  Result<std::unique_ptr<http::MetricsServer>> v6 = BindMetricsServer("::1", 0, exposition);
  if (v6.ok()) {  // a machine without IPv6 has no [::1] to bind
    EXPECT_NE((*v6)->url().find("http://[::1]:"), std::string::npos);
  }
}

}  // namespace
}  // namespace kwatt::meter::outputs_prometheus_test
