#include "kwatt/energy/energy.h"

#include <gtest/gtest.h>

namespace kwatt::energy {
namespace {

constexpr UnixNanos kS = kNanosPerSecond;
const std::string kNode = "n-1.s.grid5000.fr";

PowerCollector Collect(const std::string& metric,
                       const std::vector<std::pair<double, double>>& samples,
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

// Issue 10 #11: nothing is extrapolated past the data: a window wider than the data (an archive
// asked for more, a job still running) is clipped to it, and the report says so.
TEST(ComputeEnergy, WindowIsClippedToTheDataNotExtrapolated) {
  std::vector<std::pair<double, double>> samples;
  for (int i = 100; i <= 200; ++i) samples.push_back({double(i), 100.0});
  auto data = Collect("wattmetre_power_watt", samples);
  // Asked 0 .. 1000 s: the data covers 99 .. 201 s (one period either side).
  auto report = ComputeEnergy(data, 0, 1000 * kS, {});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->start, 99 * kS);
  EXPECT_EQ(report->end, 201 * kS);
  EXPECT_EQ(report->requested_start, 0);
  EXPECT_EQ(report->requested_end, 1000 * kS);
  const Figures& f = report->nodes[0].window;
  EXPECT_DOUBLE_EQ(f.total_joules(), 102 * 100.0);  // not 1000 s x 100 W
  EXPECT_DOUBLE_EQ(f.coverage(), 1);
  ASSERT_EQ(report->notes.size(), 1u);
  EXPECT_EQ(report->notes[0].rfind("window clipped to " + FormatParisTimestamp(99 * kS), 0), 0u)
      << report->notes[0];
}

TEST(ComputeEnergy, PhasesAreClippedOrRefusedWhenOutsideTheData) {
  std::vector<std::pair<double, double>> samples;
  for (int i = 0; i <= 100; ++i) samples.push_back({double(i), 50.0});
  auto data = Collect("wattmetre_power_watt", samples);
  EnergyOptions options;
  options.phases = {{"late", 90 * kS, 300 * kS}};
  auto report = ComputeEnergy(data, 0, 400 * kS, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_DOUBLE_EQ(report->nodes[0].phases[0].seconds, 11);  // 90 .. 101 s
  EXPECT_DOUBLE_EQ(report->nodes[0].phases[0].total_joules(), 550);
  bool noted = false;
  for (const std::string& note : report->notes)
    noted |= note.rfind("phase late clipped to", 0) == 0;
  EXPECT_TRUE(noted);
  // A phase with no data at all: refused, not a number.
  options.phases = {{"after", 200 * kS, 300 * kS}};
  auto outside = ComputeEnergy(data, 0, 400 * kS, options);
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(outside.status().message().find("phase after has no power data"), std::string::npos);
}

// A node's own missing edge is uncovered, not filled by holding its last value.
TEST(ComputeEnergy, TheLastValueIsNotHeldAcrossAMissingEnd) {
  PowerCollector data({"a.s.grid5000.fr", "b.s.grid5000.fr"});
  for (int i = 0; i <= 100; ++i)
    data.Add("a.s.grid5000.fr", "wattmetre_power_watt", "{}", i * kS, 10);
  for (int i = 0; i <= 50; ++i)
    data.Add("b.s.grid5000.fr", "wattmetre_power_watt", "{}", i * kS, 10);
  auto report = ComputeEnergy(data, 0, 100 * kS, {});
  ASSERT_TRUE(report.ok());
  const Figures& b = report->nodes[1].window;
  EXPECT_DOUBLE_EQ(b.total_joules(), 510);  // 0 .. 51 s, nothing after
  EXPECT_DOUBLE_EQ(b.covered_seconds, 51);
  EXPECT_EQ(b.gaps, 1);
}

// Issue 10 #12: a total over nodes one of which has no power data is partial.
TEST(ComputeEnergy, TotalCoverageCountsNodesWithoutPower) {
  PowerCollector data({"a.s.grid5000.fr", "b.s.grid5000.fr"});
  for (int i = 0; i <= 10; ++i)
    data.Add("a.s.grid5000.fr", "wattmetre_power_watt", "{}", i * kS, 10);
  EnergyOptions options;
  options.phases = {{"p", 0, 5 * kS}};
  options.roles = {{"both", {"a.s.grid5000.fr", "b.s.grid5000.fr"}}};
  auto report = ComputeEnergy(data, 0, 10 * kS, options);
  ASSERT_TRUE(report.ok());
  EXPECT_DOUBLE_EQ(report->total.coverage(), 0.5);
  EXPECT_DOUBLE_EQ(report->total.total_joules(), 100);
  EXPECT_DOUBLE_EQ(report->phase_totals[0].coverage(), 0.5);
  EXPECT_DOUBLE_EQ(report->roles[0].second.coverage(), 0.5);
  EXPECT_DOUBLE_EQ(report->role_phases[0][0].coverage(), 0.5);
  EXPECT_EQ(report->nodes_without_power, std::vector<std::string>{"b.s.grid5000.fr"});
  // Two fully covered nodes: 100 %.
  data.Add("b.s.grid5000.fr", "wattmetre_power_watt", "{}", 0, 10);
  for (int i = 1; i <= 10; ++i)
    data.Add("b.s.grid5000.fr", "wattmetre_power_watt", "{}", i * kS, 10);
  report = ComputeEnergy(data, 0, 10 * kS, options);
  ASSERT_TRUE(report.ok());
  EXPECT_DOUBLE_EQ(report->total.coverage(), 1);
  EXPECT_TRUE(report->nodes_without_power.empty());
}

// Issue 10 #14: overlapping intervals of one phase count once; roles with one name are merged.
TEST(ComputeEnergy, OverlappingIntervalsAndRolesWithOneNameAreUnions) {
  PowerCollector data({"a.s.grid5000.fr", "b.s.grid5000.fr"});
  for (int i = 0; i <= 30; ++i) {
    data.Add("a.s.grid5000.fr", "wattmetre_power_watt", "{}", i * kS, 10);
    data.Add("b.s.grid5000.fr", "wattmetre_power_watt", "{}", i * kS, 20);
  }
  EnergyOptions options;
  options.phases = {{"busy", 0, 20 * kS}, {"busy", 10 * kS, 30 * kS}};
  options.roles = {{"r", {"a.s.grid5000.fr"}}, {"r", {"b.s.grid5000.fr", "a.s.grid5000.fr"}}};
  auto report = ComputeEnergy(data, 0, 30 * kS, options);
  ASSERT_TRUE(report.ok());
  const Figures& busy = report->nodes[0].phases[0];
  EXPECT_DOUBLE_EQ(busy.seconds, 30);
  EXPECT_DOUBLE_EQ(busy.total_joules(), 300);  // not 400: 10 .. 20 s once
  ASSERT_EQ(report->roles.size(), 1u);
  EXPECT_EQ(report->roles[0].first.nodes.size(), 2u);
  EXPECT_DOUBLE_EQ(report->roles[0].second.total_joules(), 900);  // a + b, each once
  std::string json = EnergyReportJson(*report);
  EXPECT_NE(json.find("overlapping intervals merged"), std::string::npos);
}

TEST(ComputeEnergy, NoRowMessageNamesEveryPowerMetric) {
  PowerCollector data({kNode});
  auto report = ComputeEnergy(data, 0, 10 * kS, {});
  ASSERT_TRUE(report.ok());
  for (const std::string& metric : PowerMetrics()) {
    EXPECT_NE(report->nodes[0].reason.find(metric), std::string::npos) << metric;
  }
}

}  // namespace
}  // namespace kwatt::energy
