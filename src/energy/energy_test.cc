#include "kwatt/energy/energy.h"

#include <gtest/gtest.h>

namespace kwatt::energy {
namespace {

constexpr UnixNanos kS = kNanosPerSecond;
const std::string kNode = "n-1.s.grid5000.fr";

PowerCollector Collect(const std::string& metric, const std::vector<std::pair<double, double>>& samples,
                       const std::string& labels = "{}") {
  PowerCollector c({kNode});
  for (auto [t, v] : samples) c.Add(kNode, metric, labels, UnixNanos(t * 1e9), v);
  return c;
}

TEST(ComputeEnergy, TrapezoidsClippedWithInterpolation) {
  // A ramp from 0 W at 0 s to 100 W at 10 s, sampled every second.
  std::vector<std::pair<double, double>> samples;
  for (int i = 0; i <= 10; ++i) samples.push_back({double(i), 10.0 * i});
  auto data = Collect("wattmetre_power_watt", samples);
  EnergyOptions options;
  options.phases = {{"middle", UnixNanos(2.5 * kS), UnixNanos(7.5 * kS)}};
  auto report = ComputeEnergy(data, 0, 10 * kS, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const NodeEnergy& node = report->nodes[0];
  EXPECT_EQ(node.metric, "wattmetre_power_watt");
  EXPECT_DOUBLE_EQ(node.window.joules, 500);
  EXPECT_DOUBLE_EQ(node.phases[0].joules, 250);  // (25 + 75) / 2 * 5
  EXPECT_DOUBLE_EQ(node.window.coverage(), 1);
  EXPECT_DOUBLE_EQ(node.window.peak_watts, 100);
}

TEST(ComputeEnergy, IntervalsWithTheSameNameAreOnePhase) {
  // 50 W from 0 to 10 s, 150 W from 10 to 20 s, 50 W again from 20 to 30 s; "idle" is marked
  // twice, as an experiment alternating phases marks it.
  std::vector<std::pair<double, double>> samples;
  for (int i = 0; i <= 30; ++i) samples.push_back({double(i), i > 10 && i < 20 ? 150.0 : 50.0});
  auto data = Collect("wattmetre_power_watt", samples);
  EnergyOptions options;
  options.phases = {{"idle", 0, 10 * kS}, {"busy", 11 * kS, 19 * kS}, {"idle", 20 * kS, 30 * kS}};
  options.baseline_phase = "idle";
  auto report = ComputeEnergy(data, 0, 30 * kS, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->phase_names, (std::vector<std::string>{"idle", "busy"}));
  const NodeEnergy& node = report->nodes[0];
  ASSERT_EQ(node.phases.size(), 2u);
  EXPECT_DOUBLE_EQ(node.phases[0].seconds, 20);
  EXPECT_DOUBLE_EQ(node.phases[0].joules, 1000);
  EXPECT_DOUBLE_EQ(node.phases[0].coverage(), 1);
  EXPECT_DOUBLE_EQ(node.phases[1].joules, 1200);
  EXPECT_DOUBLE_EQ(node.baseline_watts, 50);
  EXPECT_DOUBLE_EQ(report->phase_totals[0].seconds, 20);
  EXPECT_DOUBLE_EQ(report->phase_totals[0].joules, 1000);
}

TEST(ComputeEnergy, GapsAreKeptApart) {
  auto data = Collect("wattmetre_power_watt",
                      {{0, 100}, {1, 100}, {2, 100}, {10, 100}, {11, 100}, {12, 100}});
  auto report = ComputeEnergy(data, 0, 12 * kS, {});
  ASSERT_TRUE(report.ok());
  const Figures& f = report->nodes[0].window;
  EXPECT_EQ(f.gaps, 1);
  EXPECT_DOUBLE_EQ(f.joules, 400);
  EXPECT_DOUBLE_EQ(f.gap_joules, 800);
  EXPECT_DOUBLE_EQ(f.covered_seconds, 4);
}

TEST(ComputeEnergy, PrefersTheWattmeterUnlessItIsMissingMostOfTheWindow) {
  PowerCollector data({kNode});
  for (int i = 0; i <= 100; ++i) data.Add(kNode, "pdu_outlet_power_watt", "{}", i * kS, 50);
  for (int i = 0; i <= 10; ++i) data.Add(kNode, "wattmetre_power_watt", "{}", i * kS, 50);
  auto report = ComputeEnergy(data, 0, 100 * kS, {});
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->nodes[0].metric, "pdu_outlet_power_watt");
  EXPECT_NE(report->nodes[0].reason.find("wattmetre_power_watt covers only"), std::string::npos);
}

TEST(ComputeEnergy, SeveralOutletsAreSummedAndCountersCrossCheck) {
  PowerCollector data({kNode});
  for (int i = 0; i <= 60; ++i) {
    data.Add(kNode, "pdu_outlet_power_watt", R"({"_info":"a"})", i * kS, 30);
    data.Add(kNode, "pdu_outlet_power_watt", R"({"_info":"b"})", i * kS + kS / 3, 20);
    data.Add(kNode, "pdu_outlet_energy_watthours_total", "{}", i * kS, 1000 + i * 50.0 / 3600);
  }
  auto report = ComputeEnergy(data, 0, 60 * kS, {});
  ASSERT_TRUE(report.ok());
  const NodeEnergy& node = report->nodes[0];
  EXPECT_EQ(node.series, 2);
  EXPECT_NEAR(node.window.total_joules(), 3000, 1e-6);
  EXPECT_NEAR(node.window.counter_joules, 3000, 1e-6);
}

TEST(ComputeEnergy, NoPowerIsNamedNotZero) {
  PowerCollector data({kNode});
  auto report = ComputeEnergy(data, 0, 10 * kS, {}, {{kNode, {"wattmetre_power_watt"}}});
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->nodes[0].metric.empty());
  EXPECT_NE(report->nodes[0].reason.find("in the catalogue but returned no row"),
            std::string::npos);
  EXPECT_EQ(report->total.total_joules(), 0);
  EXPECT_FALSE(ComputeEnergy(data, 10 * kS, 0, {}).ok());
}

}  // namespace
}  // namespace kwatt::energy
