// The Prometheus and JSON drivers against a real HTTP server on loopback (the integration test
// polls Debian's prometheus-node-exporter).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <thread>

#include "kwatt/collect/device.h"
#include "kwatt/http/hardened_server.h"

namespace kwatt::collect::http_devices_test {
namespace {

class Peer {
 public:
  using Pages = std::map<std::string, std::string>;
  explicit Peer(Pages pages) : pages_(std::move(pages)) {
    server_.Get(".*", [this](const http::Request& request, http::Response& response) {
      if (request.path == "/secret/status.json") {
        if (request.get_header_value("Authorization") != "Basic dTpwQHNz") {  // u:p@ss
          response.status = 401;
          return;
        }
        response.set_content("12.5", "application/json");
        return;
      }
      auto it = pages_.find(request.path);
      if (it == pages_.end()) {
        response.status = 404;
        return;
      }
      response.set_content(it->second, "text/plain");
    });
    port_ = *server_.Bind("127.0.0.1", 0);
    EXPECT_TRUE(server_.Serve().ok());
  }
  ~Peer() { server_.Shutdown(); }
  std::string url(const std::string& scheme, const std::string& path) const {
    return scheme + "://127.0.0.1:" + std::to_string(port_) + "/" + path;
  }

 private:
  std::map<std::string, std::string> pages_;
  http::HardenedServer server_;
  int port_ = 0;
};

MetricDescription Metric(const std::string& url, const std::string& name = "m") {
  MetricDescription metric;
  metric.name = name;
  metric.device_id = "nova-1";
  metric.url = *ParseMetricUrl(url);
  metric.origin = "test";
  return metric;
}

Status PollAll(Device& device, size_t metrics, std::vector<Reading>* out) {
  PollRequest request;
  request.sent_at = 1'700'000'000'000'000'000;
  request.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  request.active.assign(metrics, true);
  return device.Poll(request, out);
}

TEST(PrometheusDevice, KeepsTheSelectedNamesAndReadsKwollectCustomMetrics) {
  Peer peer(Peer::Pages{
      {"/metrics",
       "# TYPE node_load1 gauge\nnode_load1 0.5\nnode_load5 0.25\n"
       "gpu_power{gpu=\"0\",name=\"A \\\"100\\\"\"} 250\n"
       "kwollect_custom{_metric_id=\"phase\",_timestamp=\"1700000001.25\",run=\"3\"} 2\n"
       "kwollect_custom{_metric_id=\"bad\",_timestamp=\"soon\"} 1\n"
       "kwollect_custom{_metric_id=\"now\",_timestamp=\"\"} 4\n"}});
  std::vector<MetricDescription> metrics = {Metric(peer.url("prometheus", "node_load1-gpu_power")),
                                            Metric(peer.url("prometheus", "kwollect_custom"))};
  auto device = MakeDevice(metrics, {});
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  std::vector<Reading> readings;
  ASSERT_TRUE(PollAll(**device, 2, &readings).ok());
  ASSERT_EQ(readings.size(), 4u);
  EXPECT_EQ(readings[0].metric_id, "prom_node_load1");
  EXPECT_EQ(readings[0].time, 1'700'000'000'000'000'000);
  EXPECT_EQ(LabelsText(readings[1].labels), R"({"gpu":"0","name":"A \"100\""})");
  EXPECT_EQ(readings[2].metric_id, "phase");
  EXPECT_EQ(readings[2].time, 1'700'000'001'250'000'000);
  // The scrape's time is no label: a new series per scrape otherwise.
  EXPECT_EQ(LabelsText(readings[2].labels),
            R"({"run":"3","_metric_origin":"prom_kwollect_custom"})");
  // An empty _timestamp (a textfile collector's "none") is the scrape's time.
  EXPECT_EQ(readings[3].metric_id, "now");
  EXPECT_EQ(readings[3].time, 1'700'000'000'000'000'000);
  // The unreadable one is skipped, and told.
  std::vector<PollProblem> problems = (*device)->TakeProblems();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].kind, PollProblem::Kind::kBadTimestamp);
  EXPECT_NE(problems[0].message.find("_metric_id \"bad\" has _timestamp=\"soon\""),
            std::string::npos)
      << problems[0].message;
  // Scraped again, the sample with its own time is not read again; the others are.
  readings.clear();
  ASSERT_TRUE(PollAll(**device, 2, &readings).ok());
  ASSERT_EQ(readings.size(), 3u);
  for (const Reading& reading : readings) EXPECT_NE(reading.metric_id, "phase");
  // A description without a path keeps every name.
  auto all = MakeDevice({Metric(peer.url("prometheus", ""))}, {});
  readings.clear();
  ASSERT_TRUE(PollAll(**all, 1, &readings).ok());
  EXPECT_EQ(readings.size(), 5u);
}

TEST(PrometheusDevice, AScrapeThatDoesNotReadGivesNoRowAndNamesTheLine) {
  Peer peer(Peer::Pages{{"/metrics", "ok 1\nbroken{a=\"x} 2\n"}});
  auto device = MakeDevice({Metric(peer.url("prometheus", ""))}, {});
  std::vector<Reading> readings;
  Status status = PollAll(**device, 1, &readings);
  EXPECT_EQ(status.code(), Status::Code::kUnavailable);
  EXPECT_NE(status.message().find("line 2"), std::string::npos) << status.message();
  EXPECT_TRUE(readings.empty());
}

TEST(JsonDevice, ReadsTheValueAtEachPointerWithOneRequestPerDocument) {
  Peer peer(Peer::Pages{
      {"/status.json", R"({"outlets": [{"watts": 41.5}, {"watts": "n/a"}], "on": true})"}});
  std::vector<MetricDescription> metrics = {
      Metric(peer.url("json", "status.json#/outlets/0/watts"), "a"),
      Metric(peer.url("json", "status.json#/outlets/1/watts"), "b"),
      Metric(peer.url("json", "status.json#/on"), "c"),
      Metric(peer.url("json", "status.json#/missing"), "d")};
  metrics[0].scale_factor = 2;
  auto device = MakeDevice(metrics, {});
  ASSERT_TRUE(device.ok());
  std::vector<Reading> readings;
  ASSERT_TRUE(PollAll(**device, 4, &readings).ok());
  ASSERT_EQ(readings.size(), 3u);
  EXPECT_EQ(readings[0].value, 83);
  EXPECT_TRUE(std::isnan(readings[1].value));
  EXPECT_EQ(LabelsText(readings[1].labels), R"({"value_str":"n/a"})");
  EXPECT_EQ(readings[2].value, 1);
  // Credentials in the URL are sent as basic authentication, and never shown.
  std::string secret = peer.url("json", "secret/status.json");
  auto authenticated = MakeDevice({Metric(secret.replace(0, 7, "json://u:p%40ss@"))}, {});
  readings.clear();
  ASSERT_TRUE(PollAll(**authenticated, 1, &readings).ok());
  ASSERT_EQ(readings.size(), 1u);
  EXPECT_EQ(readings[0].value, 12.5);
  auto refused = MakeDevice({Metric(secret.replace(0, 7, "json://u:wrong@"))}, {});
  Status denied = PollAll(**refused, 1, &readings);
  EXPECT_NE(denied.message().find("HTTP 401"), std::string::npos) << denied.message();
  EXPECT_EQ(denied.message().find("wrong"), std::string::npos) << denied.message();
  auto missing = MakeDevice({Metric(peer.url("json", "nothing.json"))}, {});
  readings.clear();
  Status status = PollAll(**missing, 1, &readings);
  EXPECT_NE(status.message().find("HTTP 404"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace kwatt::collect::http_devices_test
