#include "kwatt/simulate/series.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "src/server/row_stream.h"

namespace kwatt::simulate::series_test {
namespace {

constexpr UnixNanos kT0 = 1745000000LL * kNanosPerSecond;
constexpr UnixNanos kNow = 1800000000LL * kNanosPerSecond;

std::unique_ptr<Testbed> MakeTestbed() {
  auto jobs = jobs::JobSet::Parse(R"({"jobs":[{"site":"grenoble","uid":1,"nodes":["yeti-1"],
    "started_at":1745000000,"stopped_at":1745000600,"types":["monitor=wattmetre"],
    "phases":[{"duration":300,"cpu":1}]}]})",
                                  "test");
  EXPECT_TRUE(jobs.ok());
  auto testbed = Testbed::Build({}, std::move(*jobs));
  EXPECT_TRUE(testbed.ok()) << testbed.status().ToString();
  return std::move(*testbed);
}

TEST(RenderLabels, JsonbKeyOrder) {
  EXPECT_EQ(RenderLabels({{"interface", "eth1"}}, {"ecotype-prod2-port-1_6"}),
            R"({"interface":"eth1","_device_orig":["ecotype-prod2-port-1_6"]})");
  EXPECT_EQ(RenderLabels({{"mode", "idle"}, {"cpu", "3"}}, {}), R"({"cpu":"3","mode":"idle"})");
  EXPECT_EQ(RenderLabels({}, {"b-port2", "a-port1"}), R"({"_device_orig":["a-port1","b-port2"]})");
  EXPECT_EQ(RenderLabels({{"_info", "x"}}, {"p"}), R"({"_info":"x","_device_orig":["p"]})");
  EXPECT_EQ(RenderLabels({}, {}), "{}");
}

TEST(SamplingGrid, CountsMatchEnumeration) {
  for (bool exact : {true, false}) {
    SamplingGrid grid{12345, exact};
    for (int64_t period : {20 * kNanosPerMilli, kNanosPerSecond, 5 * kNanosPerSecond}) {
      UnixNanos previous = grid.TimeOf(-1, period);
      for (int64_t k = 0; k < 200; ++k) {
        UnixNanos t = grid.TimeOf(k, period);
        EXPECT_GT(t, previous);
        EXPECT_EQ(grid.FirstIndexAtOrAfter(t, period), k);
        EXPECT_EQ(grid.FirstIndexAtOrAfter(t + 1, period), k + 1);
        previous = t;
      }
    }
  }
}

TEST(SeriesOfDevice, TwoPsuNodeSumsItsPorts) {
  auto testbed = MakeTestbed();
  const Site* site = testbed->FindSite("grenoble");
  ASSERT_NE(site, nullptr);
  auto node = SeriesOfDevice(*testbed, *site, *testbed->FindDevice(*site, "yeti-1"),
                             {"wattmetre_power_watt"});
  ASSERT_EQ(node.size(), 1u);
  EXPECT_EQ(node[0].labels_json, R"({"_device_orig":["wattmetre1-port0","wattmetre1-port1"]})");
  ASSERT_EQ(node[0].sources.size(), 2u);
  auto port0 = SeriesOfDevice(*testbed, *site, *testbed->FindDevice(*site, "wattmetre1-port0"),
                              {"wattmetre_power_watt"});
  auto port1 = SeriesOfDevice(*testbed, *site, *testbed->FindDevice(*site, "wattmetre1-port1"),
                              {"wattmetre_power_watt"});
  ASSERT_EQ(port0.size(), 1u);
  ASSERT_EQ(port1.size(), 1u);
  EXPECT_EQ(port0[0].labels_json, "{}");
  for (UnixNanos t = kT0; t < kT0 + 10 * kNanosPerSecond; t += kNanosPerSecond) {
    double a = port0[0].ValueAt(t), b = port1[0].ValueAt(t);
    EXPECT_EQ(node[0].ValueAt(t), a + b);
    EXPECT_GT(a, 0.4 * node[0].ValueAt(t));
  }
  // 20 ms during the monitor job, 1 s outside.
  EXPECT_EQ(node[0].CountIn(kT0, kT0 + kNanosPerSecond), 50);
  EXPECT_EQ(node[0].CountIn(kT0 - 10 * kNanosPerSecond, kT0), 10);
}

// A testbed running the job above, and `faults` (JSON list text) in its jobs file.
std::unique_ptr<Testbed> MakeTestbedWithFaults(const std::string& faults) {
  auto jobs = jobs::JobSet::Parse(R"({"jobs":[{"site":"grenoble","uid":1,"nodes":["yeti-1"],
    "started_at":1745000000,"stopped_at":1745000600,"types":["monitor=wattmetre"],
    "phases":[{"duration":300,"cpu":1}]}],"faults":)" +
                                      faults + "}",
                                  "test");
  EXPECT_TRUE(jobs.ok()) << jobs.status().ToString();
  auto testbed = Testbed::Build({}, std::move(*jobs));
  EXPECT_TRUE(testbed.ok()) << testbed.status().ToString();
  return std::move(*testbed);
}

OutputSeries NodeSeries(const Testbed& testbed, const std::string& metric) {
  const Site* site = testbed.FindSite("grenoble");
  auto series = SeriesOfDevice(testbed, *site, *testbed.FindDevice(*site, "yeti-1"), {metric});
  EXPECT_EQ(series.size(), 1u) << metric;
  return series.empty() ? OutputSeries() : series[0];
}

// A fault makes one series lie as the jobs file says, over its span only, and leaves the node's
// other meters true: what the source checks are tested on.
TEST(SeriesOfDevice, AFaultMakesASourceLieAsTheJobsFileSays) {
  auto truth = MakeTestbed();
  const OutputSeries wattmetre = NodeSeries(*truth, "wattmetre_power_watt");
  const OutputSeries bmc = NodeSeries(*truth, "bmc_node_power_watt");
  const UnixNanos from = kT0 + 60 * kNanosPerSecond, to = kT0 + 120 * kNanosPerSecond;
  struct Case {
    std::string fault;
    std::function<double(UnixNanos)> expected;  // over [from, to)
  } cases[] = {
      {R"("bias":10)", [&](UnixNanos t) { return wattmetre.ValueAt(t) + 10; }},
      {R"("scale":1.05)", [&](UnixNanos t) { return wattmetre.ValueAt(t) * 1.05; }},
      {R"("stuck":true)", [&](UnixNanos) { return wattmetre.ValueAt(from); }},
      {R"("late":2.5)", [&](UnixNanos t) { return wattmetre.ValueAt(t + 2500 * kNanosPerMilli); }},
      {R"("scale":2,"bias":-1,"late":-1)",
       [&](UnixNanos t) { return wattmetre.ValueAt(t - kNanosPerSecond) * 2 - 1; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.fault);
    auto lying = MakeTestbedWithFaults(
        R"([{"site":"grenoble","device":"yeti-1","metric":"wattmetre_power_watt",)" + c.fault +
        R"(,"start":1745000060,"end":1745000120}])");
    const OutputSeries lied = NodeSeries(*lying, "wattmetre_power_watt");
    for (UnixNanos t = kT0 + 50 * kNanosPerSecond; t < kT0 + 130 * kNanosPerSecond;
         t += 700 * kNanosPerMilli) {
      double expected = t >= from && t < to ? c.expected(t) : wattmetre.ValueAt(t);
      ASSERT_DOUBLE_EQ(lied.ValueAt(t), expected) << (t - kT0);
      ASSERT_EQ(NodeSeries(*lying, "bmc_node_power_watt").ValueAt(t), bmc.ValueAt(t));
    }
  }
  // Without a metric, every series of the device lies; without a span, always.
  auto always = MakeTestbedWithFaults(R"([{"site":"grenoble","device":"yeti-1","bias":3}])");
  EXPECT_DOUBLE_EQ(NodeSeries(*always, "bmc_node_power_watt").ValueAt(kT0 + 7),
                   bmc.ValueAt(kT0 + 7) + 3);
  EXPECT_DOUBLE_EQ(NodeSeries(*always, "wattmetre_power_watt").ValueAt(kT0 - kNanosPerSecond),
                   wattmetre.ValueAt(kT0 - kNanosPerSecond) + 3);
}

TEST(RowStream, CountEqualsRowsAndOrderIsByTime) {
  auto testbed = MakeTestbed();
  const Site* site = testbed->FindSite("grenoble");
  std::vector<OutputSeries> series;
  for (const char* id : {"yeti-1", "yeti-2"}) {
    for (auto& s : SeriesOfDevice(*testbed, *site, *testbed->FindDevice(*site, id), {})) {
      series.push_back(std::move(s));
    }
  }
  server::internal::RowStream stream(series, kT0 - 20 * kNanosPerSecond, kT0 + 20 * kNanosPerSecond,
                                     kNow, false);
  int64_t expected = *stream.CountRows();
  std::string body;
  while (stream.Next(&body, 4096)) {
  }
  auto rows = nlohmann::json::parse(body);
  ASSERT_TRUE(rows.is_array());
  EXPECT_EQ(int64_t(rows.size()), expected);
  EXPECT_GT(expected, 1000);
  std::string previous;
  int64_t previous_t = INT64_MIN;
  for (const auto& row : rows) {
    auto t = ParseIsoTimestamp(row["timestamp"].get<std::string>());
    ASSERT_TRUE(t.ok());
    EXPECT_GE(t->utc, previous_t);
    previous_t = t->utc;
  }
}

}  // namespace
}  // namespace kwatt::simulate::series_test
