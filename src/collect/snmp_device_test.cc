#include "src/collect/snmp_device.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "kwatt/core/time.h"
#include "src/testing/snmpd.h"

namespace kwatt::collect::snmp_device_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using testing::TestSnmpd;

constexpr char kPass[] = "1.3.6.1.4.1.99999";   // the pass script's subtree
constexpr char kFixed[] = "1.3.6.1.4.1.99998";  // the overrides' subtree

MetricDescription Metric(const std::string& name, const std::string& path, int port,
                         const std::string& community = "public") {
  MetricDescription metric;
  metric.name = name;
  metric.device_id = "pdu-1";
  metric.url.scheme = "snmp";
  metric.url.user = community;
  metric.url.host = "127.0.0.1";
  metric.url.port = port;
  metric.url.path = path;
  metric.origin = "metrics/test.yaml, entry " + name;
  return metric;
}

std::unique_ptr<Device> Make(const std::vector<MetricDescription>& metrics) {
  Result<std::unique_ptr<Device>> device = MakeSnmpDevice(metrics, DriverEnvironment());
  EXPECT_TRUE(device.ok()) << device.status().ToString();
  return device.ok() ? std::move(device).value() : nullptr;
}

PollRequest Request(size_t metrics, milliseconds timeout = milliseconds(3000)) {
  PollRequest request;
  request.sent_at = WallClockNow();
  request.deadline = steady_clock::now() + timeout;
  request.active.assign(metrics, true);
  return request;
}

// metric id -> reading.
std::map<std::string, Reading> ByName(const std::vector<Reading>& readings) {
  std::map<std::string, Reading> by_name;
  for (const Reading& reading : readings) by_name[reading.metric_id] = reading;
  return by_name;
}

std::string Label(const Reading& reading, const std::string& key) {
  for (const auto& [k, v] : reading.labels) {
    if (k == key) return v;
  }
  return "";
}

std::unique_ptr<TestSnmpd> StartAgent(TestSnmpd::Options options = TestSnmpd::Options()) {
  Result<std::unique_ptr<TestSnmpd>> agent = TestSnmpd::Start(std::move(options));
  EXPECT_TRUE(agent.ok()) << agent.status().ToString();
  return agent.ok() ? std::move(agent).value() : nullptr;
}

TEST(SnmpPath, ParsesNumericOidsAndTemplates) {
  Result<SnmpPath> plain = ParseSnmpPath(".1.3.6.1.2.1.1.3.0");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(OidText(plain->oid), "1.3.6.1.2.1.1.3.0");
  EXPECT_FALSE(plain->has_template);

  Result<SnmpPath> port = ParseSnmpPath(
      "1.3.6.1.2.1.31.1.1.1.6.{{ 1.3.6.1.2.1.31.1.1.1.1 == TenGigabitEthernet 0/25 }}");
  ASSERT_TRUE(port.ok()) << port.status().ToString();
  EXPECT_TRUE(port->has_template);
  EXPECT_EQ(OidText(port->oid), "1.3.6.1.2.1.31.1.1.1.6");
  EXPECT_EQ(OidText(port->template_prefix), "1.3.6.1.2.1.31.1.1.1.1");
  EXPECT_EQ(port->template_value, "TenGigabitEthernet 0/25");
  EXPECT_TRUE(port->after.empty());

  Result<SnmpPath> tight = ParseSnmpPath("1.3.6.1.4.1.13742.6.5.4.3.1.4.1.{{.1.3.6.1.4.1.1==x}}.5");
  ASSERT_TRUE(tight.ok()) << tight.status().ToString();
  EXPECT_EQ(OidText(tight->template_prefix), "1.3.6.1.4.1.1");
  EXPECT_EQ(tight->template_value, "x");
  EXPECT_EQ(OidText(tight->after), "5");
}

TEST(SnmpPath, RefusesMalformedOidsAndTemplates) {
  for (const char* path :
       {"", ".", "1", "1.3.6.1.2.1.1.3.0.", "1..3", "1.3.six", "SNMPv2-MIB::sysUpTime.0",
        "1.3.6.1.4294967296", "1.3 .6", "1.3.{{ 1.3.6 == a", "1.3.{{ 1.3.6 }}", "{{ 1.3.6 == a }}",
        "1.3{{ 1.3.6 == a }}", "1.3.{{ x.y == a }}", "1.3.{{ 1.3 == a }}x", "1.3.6 == a }}",
        "1.3.{{ 1.3 == a }}.{{ 1.3 == b }}"}) {
    Result<SnmpPath> parsed = ParseSnmpPath(path);
    EXPECT_FALSE(parsed.ok()) << "'" << path << "' was accepted";
    if (!parsed.ok()) {
      EXPECT_EQ(parsed.status().code(), Status::Code::kInvalidArgument);
    }
  }
}

TEST(SnmpDevice, RefusesAMalformedOidAtConstructionNamingTheOriginAndField) {
  std::vector<MetricDescription> metrics = {Metric("good", "1.3.6.1.2.1.1.3.0", 161),
                                            Metric("bad", "1.3.6.1.2.1.1.x.0", 161)};
  Result<std::unique_ptr<Device>> device = MakeSnmpDevice(metrics, DriverEnvironment());
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(device.status().message().find("metrics/test.yaml, entry bad"), std::string::npos)
      << device.status().message();
  EXPECT_NE(device.status().message().find("url"), std::string::npos);
  EXPECT_NE(device.status().message().find("1.3.6.1.2.1.1.x.0"), std::string::npos);

  std::vector<MetricDescription> no_community = {Metric("m", "1.3.6.1.2.1.1.3.0", 161, "")};
  EXPECT_FALSE(MakeSnmpDevice(no_community, DriverEnvironment()).ok());
  std::vector<MetricDescription> bad_template = {
      Metric("t", "1.3.6.1.2.1.31.1.1.1.6.{{ 1.3.6.1.2.1.31.1.1.1.1 = lo }}", 161)};
  EXPECT_FALSE(MakeSnmpDevice(bad_template, DriverEnvironment()).ok());
}

TEST(SnmpDevice, ReadsAScalar) {
  auto agent = StartAgent();
  ASSERT_TRUE(agent);
  MetricDescription uptime = Metric("uptime", "1.3.6.1.2.1.1.3.0", agent->port());
  uptime.labels = {{"unit", "\"ticks\""}};
  MetricDescription scaled = Metric("uptime_s", ".1.3.6.1.2.1.1.3.0", agent->port());
  scaled.scale_factor = 0.01;
  auto device = Make({uptime, scaled});
  ASSERT_TRUE(device);
  PollRequest request = Request(2);
  std::vector<Reading> readings;
  Status status = device->Poll(request, &readings);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ASSERT_EQ(readings.size(), 2u);
  auto by_name = ByName(readings);
  EXPECT_GE(by_name["uptime"].value, 0);
  EXPECT_EQ(by_name["uptime"].time, request.sent_at);
  EXPECT_EQ(by_name["uptime"].device_id, "pdu-1");
  EXPECT_EQ(Label(by_name["uptime"], "unit"), "\"ticks\"");
  EXPECT_NEAR(by_name["uptime_s"].value, by_name["uptime"].value * 0.01, 1e-9);
}

TEST(SnmpDevice, ReadsPduOutletsThatChangeBetweenPolls) {
  auto agent = StartAgent();
  ASSERT_TRUE(agent);
  // A Raritan-like outlet table under the test's enterprise: OUTLET.5 is the active power.
  ASSERT_TRUE(agent->SetValue("1.1.5", "gauge", "120").ok());
  ASSERT_TRUE(agent->SetValue("1.2.5", "gauge", "95").ok());
  MetricDescription outlet1 = Metric("power1", std::string(kPass) + ".1.1.5", agent->port());
  MetricDescription outlet2 = Metric("power2", std::string(kPass) + ".1.2.5", agent->port());
  outlet1.labels = outlet2.labels = {{"_device_alias", "\"node-1\""}};
  auto device = Make({outlet1, outlet2});
  ASSERT_TRUE(device);

  PollRequest first = Request(2);
  std::vector<Reading> readings;
  ASSERT_TRUE(device->Poll(first, &readings).ok());
  auto by_name = ByName(readings);
  ASSERT_EQ(readings.size(), 2u);
  EXPECT_EQ(by_name["power1"].value, 120);
  EXPECT_EQ(by_name["power2"].value, 95);
  // One instant for the whole poll: AliasReadings sums the node's two outlets.
  EXPECT_EQ(by_name["power1"].time, first.sent_at);
  EXPECT_EQ(by_name["power2"].time, first.sent_at);

  ASSERT_TRUE(agent->SetValue("1.1.5", "gauge", "130").ok());
  ASSERT_TRUE(agent->SetValue("1.2.5", "integer", "101").ok());
  PollRequest second = Request(2);
  readings.clear();
  ASSERT_TRUE(device->Poll(second, &readings).ok());
  by_name = ByName(readings);
  EXPECT_EQ(by_name["power1"].value, 130);
  EXPECT_EQ(by_name["power2"].value, 101);

  // An outlet that is gone gives no reading; the other is kept.
  agent->RemoveValue("1.2.5");
  readings.clear();
  ASSERT_TRUE(device->Poll(Request(2), &readings).ok());
  ASSERT_EQ(readings.size(), 1u);
  EXPECT_EQ(readings[0].metric_id, "power1");

  // An inactive (optional, not promoted) metric is not read.
  PollRequest only_second = Request(2);
  only_second.active = {false, true};
  ASSERT_TRUE(agent->SetValue("1.2.5", "gauge", "77").ok());
  readings.clear();
  ASSERT_TRUE(device->Poll(only_second, &readings).ok());
  ASSERT_EQ(readings.size(), 1u);
  EXPECT_EQ(readings[0].metric_id, "power2");
  EXPECT_EQ(readings[0].value, 77);
}

TEST(SnmpDevice, ResolvesATemplateByInterfaceName) {
  auto agent = StartAgent();
  ASSERT_TRUE(agent);
  // ifIndex and ifHCInOctets of the interface named "lo" (IF-MIB ifName).
  auto device = Make({
      Metric("index", "1.3.6.1.2.1.2.2.1.1.{{ 1.3.6.1.2.1.31.1.1.1.1 == lo }}", agent->port()),
      Metric("in_octets", "1.3.6.1.2.1.31.1.1.1.6.{{1.3.6.1.2.1.31.1.1.1.1==lo}}", agent->port()),
  });
  ASSERT_TRUE(device);
  std::vector<Reading> readings;
  Status status = device->Poll(Request(2), &readings);
  ASSERT_TRUE(status.ok()) << status.ToString();
  auto by_name = ByName(readings);
  ASSERT_EQ(readings.size(), 2u);
  double index = by_name["index"].value;
  EXPECT_GE(index, 1);
  EXPECT_GE(by_name["in_octets"].value, 0);
  EXPECT_TRUE(device->Refresh().ok());

  // A number is compared as its decimal text: the ifName (an OCTET STRING, not a number: NaN and
  // value_str) of the interface whose ifIndex is lo's.
  std::string by_index = "1.3.6.1.2.1.31.1.1.1.1.{{ 1.3.6.1.2.1.2.2.1.1 == " +
                         std::to_string(static_cast<long>(index)) + " }}";
  auto names = Make({Metric("name", by_index, agent->port())});
  ASSERT_TRUE(names);
  readings.clear();
  ASSERT_TRUE(names->Poll(Request(1), &readings).ok());
  ASSERT_EQ(readings.size(), 1u);
  EXPECT_TRUE(std::isnan(readings[0].value));
  EXPECT_EQ(Label(readings[0], "value_str"), "\"lo\"");
}

TEST(SnmpDevice, AnUnresolvedTemplateGivesNoReadingAndThePollIsOk) {
  auto agent = StartAgent();
  ASSERT_TRUE(agent);
  auto device = Make({
      Metric("missing", "1.3.6.1.2.1.31.1.1.1.6.{{ 1.3.6.1.2.1.31.1.1.1.1 == no-such-port }}",
             agent->port()),
      Metric("uptime", "1.3.6.1.2.1.1.3.0", agent->port()),
  });
  ASSERT_TRUE(device);
  for (int poll = 0; poll < 2; ++poll) {
    std::vector<Reading> readings;
    Status status = device->Poll(Request(2), &readings);
    ASSERT_TRUE(status.ok()) << status.ToString();
    ASSERT_EQ(readings.size(), 1u);
    EXPECT_EQ(readings[0].metric_id, "uptime");
    EXPECT_TRUE(device->Refresh().ok());
  }
}

TEST(SnmpDevice, SplitsAPollOfMoreThan50OidsAndReadsThemAll) {
  TestSnmpd::Options options;
  constexpr int kCount = 120;
  for (int i = 1; i <= kCount; ++i) {
    options.overrides.push_back(
        {std::string(".") + kFixed + ".1." + std::to_string(i), "integer", std::to_string(i * 10)});
  }
  auto agent = StartAgent(options);
  ASSERT_TRUE(agent);
  std::vector<MetricDescription> metrics;
  for (int i = 1; i <= kCount; ++i) {
    metrics.push_back(Metric("m" + std::to_string(i),
                             std::string(kFixed) + ".1." + std::to_string(i), agent->port()));
  }
  auto device = Make(metrics);
  // The agent's count of GET requests (SNMPv2-MIB snmpInGetRequests.0), read by another device.
  auto counter = Make({Metric("gets", "1.3.6.1.2.1.11.15.0", agent->port())});
  ASSERT_TRUE(device && counter);
  std::vector<Reading> before, after, readings;
  ASSERT_TRUE(counter->Poll(Request(1), &before).ok());
  Status status = device->Poll(Request(kCount), &readings);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ASSERT_TRUE(counter->Poll(Request(1), &after).ok());
  ASSERT_EQ(readings.size(), static_cast<size_t>(kCount));
  auto by_name = ByName(readings);
  for (int i = 1; i <= kCount; ++i) EXPECT_EQ(by_name["m" + std::to_string(i)].value, i * 10);
  ASSERT_EQ(before.size(), 1u);
  ASSERT_EQ(after.size(), 1u);
  // 3 GETs of at most 50 OIDs, and the second count's own GET.
  EXPECT_EQ(after[0].value - before[0].value, 3 + 1);
}

TEST(SnmpDevice, ReadsAnOctetStringAsANumberOrAsText) {
  TestSnmpd::Options options;
  options.overrides = {{std::string(".") + kFixed + ".2.1", "octet_str", "\"on\""},
                       {std::string(".") + kFixed + ".2.2", "octet_str", "\"230.5\""}};
  auto agent = StartAgent(options);
  ASSERT_TRUE(agent);
  ASSERT_TRUE(agent->SetValue("3.1", "string", "overloaded outlet").ok());
  auto device = Make({Metric("state", std::string(kFixed) + ".2.1", agent->port()),
                      Metric("voltage", std::string(kFixed) + ".2.2", agent->port()),
                      Metric("status", std::string(kPass) + ".3.1", agent->port()),
                      Metric("absent", std::string(kFixed) + ".2.3", agent->port())});
  ASSERT_TRUE(device);
  std::vector<Reading> readings;
  Status status = device->Poll(Request(4), &readings);
  ASSERT_TRUE(status.ok()) << status.ToString();
  auto by_name = ByName(readings);
  ASSERT_EQ(readings.size(), 3u);  // "absent": noSuchObject, no reading
  EXPECT_TRUE(std::isnan(by_name["state"].value));
  EXPECT_EQ(Label(by_name["state"], "value_str"), "\"on\"");
  EXPECT_EQ(by_name["voltage"].value, 230.5);
  EXPECT_EQ(Label(by_name["voltage"], "value_str"), "");
  EXPECT_TRUE(std::isnan(by_name["status"].value));
  EXPECT_EQ(Label(by_name["status"], "value_str"), "\"overloaded outlet\"");
}

TEST(SnmpDevice, AWrongCommunityIsAnErrorThatDoesNotShowIt) {
  auto agent = StartAgent();
  ASSERT_TRUE(agent);
  auto device = Make({Metric("uptime", "1.3.6.1.2.1.1.3.0", agent->port(), "s3cret-community")});
  ASSERT_TRUE(device);
  std::vector<Reading> readings;
  Status status = device->Poll(Request(1, milliseconds(300)), &readings);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), Status::Code::kUnavailable);
  EXPECT_EQ(status.message().find("s3cret"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("snmp://***@127.0.0.1:" + std::to_string(agent->port())),
            std::string::npos)
      << status.message();
  EXPECT_TRUE(readings.empty());
}

TEST(SnmpDevice, ADeadPortTimesOutWithinTheDeadline) {
  Result<int> port = TestSnmpd::FreeUdpPort();
  ASSERT_TRUE(port.ok());
  auto device = Make({Metric("uptime", "1.3.6.1.2.1.1.3.0", *port)});
  ASSERT_TRUE(device);
  std::vector<Reading> readings;
  auto start = steady_clock::now();
  Status status = device->Poll(Request(1, milliseconds(400)), &readings);
  auto elapsed = steady_clock::now() - start;
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), Status::Code::kUnavailable);
  EXPECT_NE(status.message().find("timed out"), std::string::npos) << status.message();
  EXPECT_GE(elapsed, milliseconds(300));
  EXPECT_LT(elapsed, milliseconds(2000));
  // A deadline already passed: no request, timed out at once.
  PollRequest late = Request(1, milliseconds(0));
  late.deadline = steady_clock::now() - milliseconds(1);
  status = device->Poll(late, &readings);
  EXPECT_NE(status.message().find("timed out"), std::string::npos) << status.message();
}

TEST(SnmpDevice, AnUnknownHostIsUnavailable) {
  MetricDescription metric = Metric("uptime", "1.3.6.1.2.1.1.3.0", 161);
  metric.url.host = "no-such-host.invalid";
  auto device = Make({metric});
  ASSERT_TRUE(device);
  std::vector<Reading> readings;
  Status status = device->Poll(Request(1, milliseconds(500)), &readings);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), Status::Code::kUnavailable);
  EXPECT_NE(status.message().find("no-such-host.invalid"), std::string::npos) << status.message();
  EXPECT_EQ(status.message().find("public"), std::string::npos) << status.message();
}

TEST(SnmpDevice, DevicesPollConcurrently) {
  auto agent = StartAgent();
  ASSERT_TRUE(agent);
  ASSERT_TRUE(agent->SetValue("1.1.5", "gauge", "120").ok());
  std::vector<std::thread> threads;
  std::vector<int> counts(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto device =
          MakeSnmpDevice({Metric("uptime", "1.3.6.1.2.1.1.3.0", agent->port()),
                          Metric("power", std::string(kPass) + ".1.1.5", agent->port()),
                          Metric("lo", "1.3.6.1.2.1.31.1.1.1.6.{{ 1.3.6.1.2.1.31.1.1.1.1 == lo }}",
                                 agent->port())},
                         DriverEnvironment());
      if (!device.ok()) return;
      for (int poll = 0; poll < 5; ++poll) {
        std::vector<Reading> readings;
        if ((*device)->Poll(Request(3), &readings).ok()) counts[t] += readings.size();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int count : counts) EXPECT_EQ(count, 15);
}

}  // namespace
}  // namespace kwatt::collect::snmp_device_test
