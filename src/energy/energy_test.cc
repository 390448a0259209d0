#include "kwatt/energy/energy.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "kwatt/energy/integration.h"
#include "kwatt/energy/source_check.h"
#include "kwatt/energy/workflow.h"

namespace kwatt::energy::energy_test {
namespace {

constexpr UnixNanos kS = kNanosPerSecond;
const std::string kNode = "n-1.s.grid5000.fr";

// Appends a row of node n-1 (site s) to `batch`.
void AddRow(RowBatch* batch, StringInterner* interner, UnixNanos t, const char* metric,
            double value) {
  batch->time.push_back(t);
  batch->utc_offset.push_back(3600);
  batch->device.push_back(interner->Intern("n-1"));
  batch->metric.push_back(interner->Intern(metric));
  batch->value.push_back(value);
  batch->labels.push_back(interner->Intern("{}"));
}

PowerCollector Collect(const std::string& metric,
                       const std::vector<std::pair<double, double>>& samples,
                       const std::string& labels = "{}") {
  PowerCollector c({kNode});
  for (auto [t, v] : samples) c.Add(kNode, metric, labels, UnixNanos(t * 1e9), v);
  return c;
}

// The one energy workflow: its feed is asked for the energy's metrics, phases are placed once the
// window is known, and the figures and checks are ComputeEnergy's and CheckSources' over the rows
// fed; the feed's and the placement's errors stop it.
TEST(EnergyOf, FeedsPlacesComputesAndChecksAsTheirOwnCallsDo) {
  RowsReport resolved;
  resolved.nodes = {{"n-1", "s"}};
  resolved.start = 0;
  resolved.end = 60 * kS;
  StringInterner interner;
  RowBatch batch;
  for (int i = 0; i <= 60; ++i) {
    for (auto [metric, watts] :
         {std::pair{"wattmetre_power_watt", 100.0}, std::pair{"bmc_node_power_watt", 97.0}}) {
      AddRow(&batch, &interner, i * kS, metric, watts + i % 3);
    }
  }
  std::vector<std::string> asked;
  auto feed = [&](const std::vector<std::string>& metrics, RowSink* sink) -> Result<RowsReport> {
    asked = metrics;
    KWATT_RETURN_IF_ERROR(sink->Begin(resolved));
    KWATT_RETURN_IF_ERROR(sink->Write("s", batch, interner));
    return resolved;
  };
  auto place = [](const RowsReport& rows, EnergyOptions* options) {
    options->phases = {{"second-half", rows.start + 30 * kS, rows.end}};
    return Status::OK();
  };
  Result<EnergyOutcome> outcome = EnergyOf(feed, EnergyOptions(), place);
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  EXPECT_EQ(asked, EnergyInputMetrics());
  ASSERT_EQ(outcome->report.phase_names, std::vector<std::string>{"second-half"});
  PowerCollector direct({"n-1.s.grid5000.fr"});
  ASSERT_TRUE(direct.Write("s", batch, interner).ok());
  Result<EnergyReport> report = ComputeEnergy(direct, 0, 60 * kS, outcome->options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(EnergyReportJson(outcome->report, &outcome->checks),
            EnergyReportJson(*report, &outcome->checks));
  EXPECT_EQ(SourceChecksJson(outcome->checks),
            SourceChecksJson(CheckSources(direct, *report, outcome->options)));
  ASSERT_NE(outcome->read, nullptr);
  EXPECT_NE(outcome->read->power(), nullptr);

  auto refused = [](const std::vector<std::string>&, RowSink*) -> Result<RowsReport> {
    return Status::NotFound("no such job");
  };
  EXPECT_EQ(EnergyOf(refused, EnergyOptions()).status().code(), Status::Code::kNotFound);
  auto misplaced = [](const RowsReport&, EnergyOptions*) {
    return Status::InvalidArgument("--phase x: no");
  };
  EXPECT_EQ(EnergyOf(feed, EnergyOptions(), misplaced).status().code(),
            Status::Code::kInvalidArgument);
  EnergyOptions bad;
  bad.gap_factor = 0;
  asked.clear();
  EXPECT_EQ(EnergyOf(feed, bad).status().code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(asked.empty());  // refused before anything is read
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

TEST(EnergySink, KeepsTheRowsOfTheMetricGivenEvenWhenItIsNoKnownPowerMetric) {
  // `kwatt energy --metric kwatt_meter_domain_power_watt` on a meter's archive: rows of any metric
  // named are kept, not only those of PowerMetrics().
  RowsReport resolved;
  resolved.nodes = {{"n-1", "s"}};
  resolved.start = 0;
  resolved.end = 10 * kS;
  StringInterner interner;
  RowBatch batch;
  for (int i = 0; i <= 10; ++i) {
    for (const char* metric : {"kwatt_meter_domain_power_watt", "other_power_watt"}) {
      AddRow(&batch, &interner, i * kS, metric, 40);
    }
  }
  EnergyOptions options;
  options.metric = "kwatt_meter_domain_power_watt";
  EnergySink sink(options.metric);
  ASSERT_TRUE(sink.Begin(resolved).ok());
  ASSERT_TRUE(sink.Write("s", batch, interner).ok());
  Result<EnergyReport> report = sink.Compute(resolved, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->nodes[0].metric, "kwatt_meter_domain_power_watt");
  EXPECT_DOUBLE_EQ(report->nodes[0].window.joules, 400);
  EXPECT_EQ(report->nodes[0].series, 1);  // other_power_watt was not kept
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

TEST(ComputeEnergy, ASeriesOfChangingPeriodIsCompleteAtEachOfItsRates) {
  // A wattmeter at 1 s, then at 10 ms (a monitoring job starts at 60 s), then at 1 s again: no
  // gap, full coverage, and the wattmeter is kept over a BMC that covers the window at 5 s.
  std::vector<std::pair<double, double>> samples;
  for (int i = 0; i < 60; ++i) samples.push_back({double(i), 100});
  for (int i = 0; i < 3000; ++i) samples.push_back({60 + 0.01 * i, 200});
  for (int i = 90; i <= 120; ++i) samples.push_back({double(i), 100});
  PowerCollector data = Collect("wattmetre_power_watt", samples);
  for (int i = 0; i <= 24; ++i) data.Add(kNode, "bmc_node_power_watt", "{}", i * 5 * kS, 150);
  auto report = ComputeEnergy(data, 0, 120 * kS, EnergyOptions());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const NodeEnergy& node = report->nodes[0];
  EXPECT_EQ(node.metric, "wattmetre_power_watt");
  EXPECT_EQ(node.window.gaps, 0);
  EXPECT_NEAR(node.window.coverage(), 1, 1e-9);
  // 59 s at 100 W, the step to 200 W over the last second before the job, 29.99 s at 200 W, the
  // step back over 10 ms, then 30 s at 100 W.
  EXPECT_NEAR(node.window.total_joules(), 59 * 100 + 150 + 29.99 * 200 + 0.01 * 150 + 30 * 100,
              1e-3);

  // A hole of 2 s inside the 10 ms stretch is a gap (200 periods), one of 2 s in the 1 s stretch
  // is not; one of 5 s there is.
  std::vector<std::pair<double, double>> holed;
  for (auto [t, v] : samples) {
    if ((t > 70.005 && t < 72.005) || (t > 20.5 && t < 21.5) || (t > 40.5 && t < 44.5)) continue;
    holed.push_back({t, v});
  }
  auto with_holes =
      ComputeEnergy(Collect("wattmetre_power_watt", holed), 0, 120 * kS, EnergyOptions());
  ASSERT_TRUE(with_holes.ok()) << with_holes.status().ToString();
  EXPECT_EQ(with_holes->nodes[0].window.gaps, 2);
  EXPECT_NEAR(with_holes->nodes[0].window.covered_seconds, 120 - 2.01 - 5, 1e-6);
}

TEST(ComputeEnergy, AWattmeterOutAcrossTheWindowsStartIsKeptAndItsEdgeFilledFromTheBmc) {
  // The wattmeter has nothing for the window's first 25 s (an outage from before it); the BMC
  // reads every 5 s throughout. The wattmeter is kept, the 25 s come from the BMC, and the reason
  // says so; the figure is the truth within its interval.
  PowerCollector data({kNode});
  auto watts = [](double s) { return 150 + 50 * std::sin(s / 30); };
  for (int s = -15; s <= 315; ++s) {
    if (s >= 25) data.Add(kNode, "wattmetre_power_watt", "{}", s * kS, watts(s));
    if (s % 5 == 0) data.Add(kNode, "bmc_node_power_watt", "{}", s * kS, watts(s));
  }
  auto report = ComputeEnergy(data, 0, 300 * kS, EnergyOptions());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const NodeEnergy& node = report->nodes[0];
  EXPECT_EQ(node.metric, "wattmetre_power_watt") << node.reason;
  // (Its first sample's value is held for a period before it: 24 s are filled.)
  EXPECT_EQ(node.reason,
            "external wattmeter; where wattmetre_power_watt has no reading, taken from another "
            "source: 24.0 s at the start from bmc_node_power_watt of the window");
  double truth = 0;
  for (int k = 0; k < 300000; ++k) truth += watts((k + 0.5) / 1000) / 1000;
  EXPECT_NEAR(node.window.total_joules(), truth, 0.002 * truth);
  EXPECT_LE(std::fabs(node.window.total_joules() - truth),
            node.window.uncertainty(0).half_width_without_accuracy);
  EXPECT_NEAR(node.window.coverage(), 276.0 / 300, 1e-9);  // the BMC's part is an estimate
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

// Issue 21 #19: a metric that gave only NaN values, and a node whose piece failed to be fetched,
// are said as such, not as "returned no row".
TEST(ComputeEnergy, OnlyNanValuesOrAFailedFetchAreNamedAsSuch) {
  PowerCollector data({kNode, "nova-2.lyon.grid5000.fr"});
  for (int i = 0; i < 5; ++i) data.Add(kNode, "wattmetre_power_watt", "{}", i * kS, NAN);
  data.SetUnfetched({{"nova-2.lyon.grid5000.fr", "HTTP 500 from the API"}});
  auto report = ComputeEnergy(
      data, 0, 10 * kS, {},
      {{kNode, {"wattmetre_power_watt"}}, {"nova-2.lyon.grid5000.fr", {"wattmetre_power_watt"}}});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_NE(report->nodes[0].reason.find("wattmetre_power_watt returned only NaN values (5 rows)"),
            std::string::npos)
      << report->nodes[0].reason;
  EXPECT_EQ(report->nodes[1].reason.rfind(
                "its rows could not all be fetched (HTTP 500 from the API); ", 0),
            0u)
      << report->nodes[1].reason;
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

// Rows that could not be fetched (a damaged store, a failed piece) are not time without data:
// the window keeps that time, uncovered, instead of being clipped to the rows read and called
// covered ("coverage 100 %", "no power data outside it").
TEST(ComputeEnergy, TimeWhoseRowsCouldNotBeFetchedIsUncoveredNotClipped) {
  std::vector<std::pair<double, double>> samples;
  for (int i = 0; i <= 500; ++i) samples.push_back({double(i), 100.0});
  auto data = Collect("wattmetre_power_watt", samples);
  data.SetUnfetchedSpans({{500 * kS, 1000 * kS}});
  auto report = ComputeEnergy(data, 0, 1000 * kS, {});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->start, 0);
  EXPECT_EQ(report->end, 1000 * kS);
  const Figures& f = report->nodes[0].window;
  EXPECT_NEAR(f.coverage(), 0.5, 0.01);
  ASSERT_EQ(report->notes.size(), 1u);
  EXPECT_NE(report->notes[0].find("could not be fetched"), std::string::npos) << report->notes[0];
  EXPECT_EQ(report->notes[0].find("no power data outside it"), std::string::npos);
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
  // The total and the role are called partial, naming the node.
  EXPECT_NE(std::find(report->notes.begin(), report->notes.end(),
                      "role both: partial, no power data for b.s.grid5000.fr (its time counts as "
                      "uncovered; the energy and its interval are the role's other nodes' only)"),
            report->notes.end());
  // Two fully covered nodes: 100 %.
  data.Add("b.s.grid5000.fr", "wattmetre_power_watt", "{}", 0, 10);
  for (int i = 1; i <= 10; ++i)
    data.Add("b.s.grid5000.fr", "wattmetre_power_watt", "{}", i * kS, 10);
  report = ComputeEnergy(data, 0, 10 * kS, options);
  ASSERT_TRUE(report.ok());
  EXPECT_DOUBLE_EQ(report->total.coverage(), 1);
  EXPECT_TRUE(report->nodes_without_power.empty());
  EXPECT_TRUE(report->notes.empty());
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

TEST(IntegrateSeries, ConsecutiveIntervalsAddUpToTheWhole) {
  // Irregular samples of a varying power, with a gap (4 s without a sample at a 0.5 s period).
  PowerCollector::Series s;
  for (double t : {0.0, 0.5, 1.1, 1.5, 2.0, 2.4, 3.0, 7.0, 7.5, 8.0, 8.6, 9.0}) {
    s.time.push_back(UnixNanos(t * 1e9));
    s.value.push_back(100 + 10 * std::sin(t));
  }
  const int64_t period = MedianInterval(s);
  EXPECT_EQ(period, 500'000'000);
  Figures whole = IntegrateSeries(s, kS / 4, 9 * kS, period, 3);
  Figures sum;
  for (UnixNanos a = kS / 4; a < 9 * kS; a += kS / 3) {
    Figures part = IntegrateSeries(s, a, std::min<UnixNanos>(a + kS / 3, 9 * kS), period, 3);
    sum.joules += part.joules;
    sum.gap_joules += part.gap_joules;
    sum.covered_seconds += part.covered_seconds;
  }
  EXPECT_NEAR(sum.joules, whole.joules, 1e-9);
  EXPECT_NEAR(sum.gap_joules, whole.gap_joules, 1e-9);
  EXPECT_NEAR(sum.covered_seconds, whole.covered_seconds, 1e-9);
  EXPECT_EQ(whole.gaps, 1);
  EXPECT_NEAR(whole.covered_seconds, 8.75 - 4, 1e-9);
  // Inside the gap: nothing covered, the interpolation kept apart.
  Figures in_gap = IntegrateSeries(s, 4 * kS, 5 * kS, period, 3);
  EXPECT_EQ(in_gap.joules, 0);
  EXPECT_GT(in_gap.gap_joules, 90);
  EXPECT_EQ(in_gap.covered_seconds, 0);
}

TEST(ChoosePowerMetric, IsTheChoiceComputeEnergyMakes) {
  PowerCollector data({kNode});
  for (int i = 0; i <= 100; ++i) data.Add(kNode, "pdu_outlet_power_watt", "{}", i * kS, 50);
  for (int i = 0; i <= 30; ++i) data.Add(kNode, "wattmetre_power_watt", "{}", i * kS, 52);
  PowerChoice choice = ChoosePowerMetric(data, kNode, 0, 100 * kS, PowerMetrics(), 3);
  EXPECT_EQ(choice.metric, "pdu_outlet_power_watt");
  EXPECT_NE(choice.reason.find("wattmetre_power_watt covers only 31%"), std::string::npos)
      << choice.reason;
  ASSERT_NE(choice.series, nullptr);
  EXPECT_EQ(choice.period, kS);
  auto report = ComputeEnergy(data, 0, 100 * kS, {});
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->nodes[0].metric, choice.metric);
  EXPECT_EQ(report->nodes[0].reason, choice.reason);
  EXPECT_EQ(report->nodes[0].window.joules, choice.window.joules);
  // Over the wattmeter's own stretch, the wattmeter.
  EXPECT_EQ(ChoosePowerMetric(data, kNode, 0, 30 * kS, PowerMetrics(), 3).metric,
            "wattmetre_power_watt");
  PowerChoice none =
      ChoosePowerMetric(data, "other.s.grid5000.fr", 0, kS, {"bmc_node_power_watt"}, 3);
  EXPECT_EQ(none.metric, "");
  EXPECT_EQ(none.series, nullptr);
  EXPECT_EQ(none.reason,
            "no power metric: no row of bmc_node_power_watt for this node in the window");
}

// Issue 21 #20: a gap factor below 1 makes every sampling interval a gap; 0, negative, NaN and
// infinite ones are no factor at all. Refused, naming the option.
TEST(ComputeEnergy, RefusesAGapFactorThatIsNotAFiniteNumberOfAtLeastOne) {
  auto data = Collect("wattmetre_power_watt", {{0, 10}, {1, 10}, {2, 10}});
  for (double bad : {0.0, -1.0, 0.5, double(NAN), double(INFINITY)}) {
    EnergyOptions options;
    options.gap_factor = bad;
    auto report = ComputeEnergy(data, 0, 2 * kS, options);
    ASSERT_FALSE(report.ok()) << bad;
    EXPECT_EQ(report.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(report.status().message().find("gap_factor"), std::string::npos)
        << report.status().message();
  }
  EnergyOptions one;
  one.gap_factor = 1;
  EXPECT_TRUE(ComputeEnergy(data, 0, 2 * kS, one).ok());
}

// Issue 21 #12: "window" names the whole window's figures (JSON, CSV, Python's frame): a phase of
// that name would collide with them. A phase needs a name, and some length.
TEST(ComputeEnergy, RefusesAPhaseNamedWindowWithoutANameOrEmpty) {
  std::vector<std::pair<double, double>> samples;
  for (int i = 0; i <= 10; ++i) samples.push_back({double(i), 50.0});
  auto data = Collect("wattmetre_power_watt", samples);
  EnergyOptions options;
  options.phases = {{"window", 0, 5 * kS}};
  auto named_window = ComputeEnergy(data, 0, 10 * kS, options);
  ASSERT_FALSE(named_window.ok());
  EXPECT_EQ(named_window.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(named_window.status().message().find("\"window\" is reserved"), std::string::npos)
      << named_window.status().message();
  options.phases = {{"", 0, 5 * kS}};
  auto unnamed = ComputeEnergy(data, 0, 10 * kS, options);
  ASSERT_FALSE(unnamed.ok());
  EXPECT_EQ(unnamed.status().code(), Status::Code::kInvalidArgument);
  // Empty: refused as empty (it was "ends before it starts", which it does not).
  options.phases = {{"p", 5 * kS, 5 * kS}};
  auto empty = ComputeEnergy(data, 0, 10 * kS, options);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("phase p is empty"), std::string::npos)
      << empty.status().message();
}

// Issue 21 #12: a phase between two samples has no sample of its own: its peak is the highest value
// of the line through it (its edges' interpolated values), never 0 or below its mean.
TEST(ComputeEnergy, ThePeakOfAShortPhaseIsAtLeastItsMean) {
  // A ramp from 0 W to 100 W over 10 s, then 100 W, sampled every 10 s.
  auto data = Collect("wattmetre_power_watt", {{0, 0}, {10, 100}, {20, 100}, {30, 100}});
  EnergyOptions options;
  options.phases = {{"rising", 2 * kS, 6 * kS}, {"flat", 12 * kS, 15 * kS}};
  auto report = ComputeEnergy(data, 0, 30 * kS, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const Figures& rising = report->nodes[0].phases[0];
  EXPECT_NEAR(rising.mean_watts(), 40, 1e-9);
  EXPECT_NEAR(rising.peak_watts, 60, 1e-9);  // was 0: no sample in it
  const Figures& flat = report->nodes[0].phases[1];
  EXPECT_NEAR(flat.peak_watts, 100, 1e-9);
  EXPECT_GE(flat.peak_watts, flat.mean_watts());
}

// Issue 21 #12: the peak of a sum (a node's PSUs, a role, the total) is the peak of the summed
// power, not the sum of each part's peak reached at other times.
TEST(ComputeEnergy, PeaksOfSumsAreThePeakOfTheSummedPower) {
  const std::string a = "a.s.grid5000.fr", b = "b.s.grid5000.fr", c = "c.s.grid5000.fr";
  PowerCollector data({a, b, c});
  for (int i = 0; i <= 20; ++i) {
    // a and b take turns at 200 W: their sum is 300 W throughout.
    data.Add(a, "wattmetre_power_watt", "{}", i * kS, i <= 10 ? 200 : 100);
    data.Add(b, "wattmetre_power_watt", "{}", i * kS, i <= 10 ? 100 : 200);
    // c's two PDU outlets do the same.
    data.Add(c, "pdu_outlet_power_watt", R"({"_info":"a"})", i * kS, i <= 10 ? 200 : 100);
    data.Add(c, "pdu_outlet_power_watt", R"({"_info":"b"})", i * kS, i <= 10 ? 100 : 200);
  }
  EnergyOptions options;
  options.phases = {{"p", 5 * kS, 15 * kS}};
  options.roles = {{"ab", {a, b}}};
  auto report = ComputeEnergy(data, 0, 20 * kS, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_DOUBLE_EQ(report->nodes[0].window.peak_watts, 200);
  EXPECT_DOUBLE_EQ(report->nodes[1].window.peak_watts, 200);
  EXPECT_NEAR(report->nodes[2].window.peak_watts, 300, 1e-9);  // was 400
  EXPECT_NEAR(report->nodes[2].phases[0].peak_watts, 300, 1e-9);
  EXPECT_NEAR(report->roles[0].second.peak_watts, 300, 1e-9);  // was 400
  EXPECT_NEAR(report->role_phases[0][0].peak_watts, 300, 1e-9);
  EXPECT_NEAR(report->total.peak_watts, 600, 1e-9);  // was 800
  EXPECT_NEAR(report->phase_totals[0].peak_watts, 600, 1e-9);
}

// The sweep behind the peaks of sums, against an exact oracle: series sampled at the same instants
// sum to the series of their sums, whose peak is its highest piece end.
TEST(PeakOfSum, IsThePeakOfTheSeriesOfTheSums) {
  std::mt19937 random(7);
  std::uniform_real_distribution<double> watts(50, 250);
  for (int round = 0; round < 20; ++round) {
    const size_t n = round == 0 ? 100000 : 50 + random() % 500;
    std::vector<PowerCollector::Series> parts(3);
    PowerCollector::Series sum;
    UnixNanos t = 1'700'000'000 * kS;
    for (size_t i = 0; i < n; ++i) {
      t += (random() % 50 == 0 ? 10 : 1) * kS / 4 + UnixNanos(random() % 1000);  // a few gaps
      double total = 0;
      for (auto& part : parts) {
        double v = watts(random);
        part.time.push_back(t);
        part.value.push_back(v);
        total += v;
      }
      sum.time.push_back(t);
      sum.value.push_back(total);
    }
    const int64_t period = MedianInterval(sum);
    std::vector<SeriesPeriod> refs;
    for (const auto& part : parts) refs.push_back({&part, period});
    // Over the whole series and an interval cutting it between samples.
    const UnixNanos a = sum.time.front() - 2 * kS, b = sum.time.back() + 2 * kS;
    const UnixNanos c = sum.time[n / 3] + 1234567, d = sum.time[2 * n / 3] - 7654321;
    for (auto [lo, hi] : {std::pair{a, b}, std::pair{c, d}}) {
      double expected = IntegrateSeries(sum, lo, hi, period, 3).peak_watts;
      EXPECT_NEAR(PeakOfSum(refs, lo, hi, 3), expected, 1e-9 * expected) << round;
    }
  }
}

// Issue 21 #12: where there is no power data, the energy is unknown: null in JSON, not 0.
TEST(EnergyReportJson, FiguresWithoutPowerDataAreNullNotZero) {
  PowerCollector nothing({kNode});
  EnergyOptions options;
  options.phases = {{"p", 2 * kS, 4 * kS}};
  options.roles = {{"r", {kNode}}};
  auto report = ComputeEnergy(nothing, 0, 10 * kS, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  nlohmann::json json = nlohmann::json::parse(EnergyReportJson(*report));
  for (const nlohmann::json* f : {&json["total"], &json["roles"]["r"], &json["phase_totals"]["p"],
                                  &json["role_phases"]["r"]["p"]}) {
    for (const char* key :
         {"joules", "wh", "measured_joules", "gap_joules", "mean_watts", "peak_watts"}) {
      EXPECT_TRUE((*f)[key].is_null()) << key << " " << f->dump();
    }
    EXPECT_EQ((*f)["coverage"], 0);
  }
  // A node with power data, but none in a phase: that phase's energy is unknown too.
  const std::string other = "b.s.grid5000.fr";
  PowerCollector some({kNode, other});
  for (int i = 0; i <= 10; ++i) some.Add(kNode, "wattmetre_power_watt", "{}", i * kS, 10);
  for (int i = 0; i <= 4; ++i) some.Add(other, "wattmetre_power_watt", "{}", i * kS, 10);
  options.phases = {{"late", 7 * kS, 10 * kS}};
  options.roles = {};
  report = ComputeEnergy(some, 0, 10 * kS, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  json = nlohmann::json::parse(EnergyReportJson(*report));
  EXPECT_TRUE(json["nodes"][1]["phases"]["late"]["joules"].is_null()) << json["nodes"][1].dump();
  EXPECT_EQ(json["nodes"][1]["phases"]["late"]["coverage"], 0);
  EXPECT_DOUBLE_EQ(json["nodes"][0]["phases"]["late"]["joules"].get<double>(), 30);
}

// Builds a JSON value from a DocumentWriter's events, checking that they nest and that every value
// in an object follows its key.
class JsonFromEvents : public DocumentWriter {
 public:
  void BeginObject() override { Open(nlohmann::ordered_json::object()); }
  void EndObject() override { Close(true); }
  void BeginArray() override { Open(nlohmann::ordered_json::array()); }
  void EndArray() override { Close(false); }
  void Key(std::string_view key) override {
    ASSERT_FALSE(open_.empty());
    ASSERT_TRUE(open_.back().value.is_object()) << "a key outside an object: " << key;
    ASSERT_FALSE(open_.back().key.has_value()) << "two keys in a row: " << key;
    open_.back().key = std::string(key);
  }
  void Null() override { Add(nullptr); }
  void Bool(bool v) override { Add(v); }
  void Integer(int64_t v) override { Add(v); }
  void Double(double v) override {
    EXPECT_TRUE(std::isfinite(v));
    Add(v);
  }
  void String(std::string_view v) override { Add(std::string(v)); }

  nlohmann::ordered_json value;
  int documents = 0;

 private:
  struct Open_ {
    nlohmann::ordered_json value;
    std::optional<std::string> key;
  };
  void Open(nlohmann::ordered_json container) { open_.push_back({std::move(container), {}}); }
  void Close(bool object) {
    ASSERT_FALSE(open_.empty());
    ASSERT_EQ(open_.back().value.is_object(), object);
    ASSERT_FALSE(open_.back().key.has_value()) << "a key without its value";
    nlohmann::ordered_json done = std::move(open_.back().value);
    open_.pop_back();
    Add(std::move(done));
  }
  void Add(nlohmann::ordered_json v) {
    if (open_.empty()) {
      value = std::move(v);
      ++documents;
      return;
    }
    Open_& top = open_.back();
    if (top.value.is_array()) {
      top.value.push_back(std::move(v));
      return;
    }
    ASSERT_TRUE(top.key.has_value()) << "a value without its key in an object";
    top.value[*top.key] = std::move(v);
    top.key.reset();
  }
  std::vector<Open_> open_;
};

// energy() in Python is built from WriteEnergyReport's events: the same document as the CLI's
// JSON, member for member and in order, with a node without power (nulls), roles, phases and the
// sources checked against each other.
TEST(WriteEnergyReport, GivesTheDocumentEnergyReportJsonPrints) {
  const std::string other = "b.s.grid5000.fr";
  PowerCollector data({kNode, other});
  for (int i = 0; i <= 60; ++i) {
    data.Add(kNode, "wattmetre_power_watt", "{}", i * kS, 100 + i % 3);
    data.Add(kNode, "bmc_node_power_watt", "{}", i * kS, 97 + i % 2);
  }
  EnergyOptions options;
  options.phases = {{"first", 0, 30 * kS}, {"second", 30 * kS, 60 * kS}};
  options.roles = {{"r", {kNode, other}}};
  options.baseline_phase = "first";
  Result<EnergyReport> report = ComputeEnergy(data, 0, 60 * kS, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const std::vector<SourceCheck> checks = CheckSources(data, *report, options);
  ASSERT_FALSE(checks.empty());
  for (const std::vector<SourceCheck>* with : {&checks, static_cast<decltype(&checks)>(nullptr)}) {
    const std::string text = EnergyReportJson(*report, with);
    JsonFromEvents events;
    WriteEnergyReport(*report, with, &events);
    EXPECT_EQ(events.documents, 1);
    EXPECT_EQ(events.value.dump(2), text);
    EXPECT_EQ(events.value, nlohmann::ordered_json::parse(text));
    EXPECT_EQ(events.value.contains("source_checks"), with != nullptr);
  }
}

// Issue 21 #8: a summary row is its bucket's mean power from its timestamp (the bucket's start) on:
// read as samples, idle phases came out 87 % too high and busy ones 32 % too low.
TEST(ComputeEnergy, SummaryRowsAreTheMeanPowerOfTheirBucket) {
  // 100 W for 10 minutes, then 300 W for 10 minutes: two buckets each.
  PowerCollector data({kNode}, "", RowKind::kBucketMeans);
  for (int bucket = 0; bucket < 4; ++bucket) {
    data.Add(kNode, "wattmetre_power_watt", "{}", bucket * 300 * kS, bucket < 2 ? 100 : 300);
    // The counter's row is its maximum over the bucket: about its value at the bucket's end.
    double wh_at_end = bucket < 2 ? (bucket + 1) * 100 * 300 / 3600.0
                                  : 2 * 100 * 300 / 3600.0 + (bucket - 1) * 300 * 300 / 3600.0;
    data.Add(kNode, "pdu_outlet_energy_watthours_total", "{}", bucket * 300 * kS, wh_at_end);
  }
  EnergyOptions options;
  options.phases = {
      {"idle", 0, 600 * kS}, {"busy", 600 * kS, 1200 * kS}, {"cut", 150 * kS, 750 * kS}};
  auto report = ComputeEnergy(data, 0, 1200 * kS, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const NodeEnergy& node = report->nodes[0];
  EXPECT_DOUBLE_EQ(node.period_s, 300);
  EXPECT_DOUBLE_EQ(node.window.total_joules(), 240000);
  EXPECT_DOUBLE_EQ(node.window.coverage(), 1);
  EXPECT_EQ(node.window.gaps, 0);
  EXPECT_DOUBLE_EQ(node.phases[0].total_joules(), 60000);   // was +87 %
  EXPECT_DOUBLE_EQ(node.phases[1].total_joules(), 180000);  // was -32 %
  EXPECT_DOUBLE_EQ(node.phases[1].peak_watts, 300);
  // A phase cutting buckets: each at its mean. Said so.
  EXPECT_DOUBLE_EQ(node.phases[2].total_joules(), 450 * 100 + 150 * 300);
  EXPECT_NE(node.reason.find("5-minute summary rows"), std::string::npos) << node.reason;
  bool noted = false;
  for (const std::string& note : report->notes) noted |= note.rfind("phase cut: ", 0) == 0;
  EXPECT_TRUE(noted);
  // The counter's rows are read at their buckets' ends.
  EXPECT_NEAR(node.phases[1].counter_joules, 180000, 1e-6);
  // A missing bucket is a gap, estimated between the buckets around it; nothing after the last.
  PowerCollector missing({kNode}, "", RowKind::kBucketMeans);
  for (int bucket : {0, 2, 3}) {
    missing.Add(kNode, "wattmetre_power_watt", "{}", bucket * 300 * kS, bucket < 2 ? 100 : 300);
  }
  report = ComputeEnergy(missing, 0, 1200 * kS, {});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const Figures& f = report->nodes[0].window;
  EXPECT_EQ(f.gaps, 1);
  EXPECT_DOUBLE_EQ(f.covered_seconds, 900);
  EXPECT_DOUBLE_EQ(f.joules, 300 * 100 + 600 * 300);
  EXPECT_DOUBLE_EQ(f.gap_joules, 300 * (100 + 300) / 2.0);
}

// Issue 21 #12: a baseline phase without power data gives no baseline (unknown), not 0 W.
TEST(ComputeEnergy, ABaselinePhaseWithoutPowerDataGivesNoBaseline) {
  const std::string other = "b.s.grid5000.fr";
  PowerCollector data({kNode, other});
  for (int i = 0; i <= 10; ++i) data.Add(kNode, "wattmetre_power_watt", "{}", i * kS, 10);
  for (int i = 5; i <= 10; ++i) data.Add(other, "wattmetre_power_watt", "{}", i * kS, 20);
  EnergyOptions options;
  options.phases = {{"idle", 0, 3 * kS}};
  options.baseline_phase = "idle";
  auto report = ComputeEnergy(data, 0, 10 * kS, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_DOUBLE_EQ(report->nodes[0].baseline_watts, 10);
  EXPECT_TRUE(std::isnan(report->nodes[1].baseline_watts)) << report->nodes[1].baseline_watts;
  EXPECT_TRUE(std::isnan(report->nodes[1].window.baseline_joules));
  nlohmann::json json = nlohmann::json::parse(EnergyReportJson(*report));
  EXPECT_TRUE(json["nodes"][1]["baseline_watts"].is_null());
}

// Issue 21 #12: a pushed 1e308 gave an infinite energy with exit 0. A power value that is not
// finite, or that no node draws, is refused naming the node and the metric.
TEST(ComputeEnergy, RefusesPowerValuesThatAreNotFiniteOrAbsurdNamingNodeAndMetric) {
  for (double bad : {1e308, double(INFINITY), -double(INFINITY), 5e6}) {
    std::vector<std::pair<double, double>> samples;
    for (int i = 0; i <= 10; ++i) samples.push_back({double(i), i == 5 ? bad : 100.0});
    auto data = Collect("wattmetre_power_watt", samples);
    auto report = ComputeEnergy(data, 0, 10 * kS, {});
    ASSERT_FALSE(report.ok()) << bad;
    EXPECT_EQ(report.status().code(), Status::Code::kCorruption);
    EXPECT_NE(report.status().message().find(kNode), std::string::npos)
        << report.status().message();
    EXPECT_NE(report.status().message().find("wattmetre_power_watt"), std::string::npos)
        << report.status().message();
  }
}

// Issue 21 #10: a row pushed under the node's power metric with other labels, or a short extra
// series, is no PSU of the node: set aside and named, not summed (coverage was 0.17 %, energy 6x).
TEST(ComputeEnergy, StraySeriesBesideTheMeterAreSetAsideAndNamed) {
  const std::string meter = R"({"_device_orig":["wattmetre1-port6"]})";
  auto real = [&] {
    PowerCollector data({kNode});
    for (int i = 0; i <= 1800; ++i) data.Add(kNode, "wattmetre_power_watt", meter, i * kS, 100);
    return data;
  };
  struct Case {
    const char* what;
    std::string labels;
    std::vector<std::pair<double, double>> rows;
  };
  std::vector<std::pair<double, double>> short_series;
  for (int i = 600; i <= 780; ++i) short_series.push_back({double(i), 300});
  for (const Case& c : std::vector<Case>{
           {"one pushed row", "{}", {{900, 5000}}},
           {"two pushed rows", R"({"run":"x"})", {{100, 5000}, {101, 5000}}},
           {"a short series", R"({"source":"test"})", short_series},
       }) {
    PowerCollector data = real();
    for (auto [t, v] : c.rows)
      data.Add(kNode, "wattmetre_power_watt", c.labels, UnixNanos(t * 1e9), v);
    auto report = ComputeEnergy(data, 0, 1800 * kS, {});
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    const NodeEnergy& node = report->nodes[0];
    EXPECT_EQ(node.series, 1) << c.what;
    EXPECT_DOUBLE_EQ(node.window.coverage(), 1) << c.what;
    EXPECT_DOUBLE_EQ(node.window.total_joules(), 180000) << c.what;
    EXPECT_DOUBLE_EQ(node.window.peak_watts, 100) << c.what;
    EXPECT_NE(node.reason.find("set aside"), std::string::npos) << c.what << ": " << node.reason;
    EXPECT_NE(node.reason.find(c.labels), std::string::npos) << c.what << ": " << node.reason;
  }
  // Two PSUs both covering the window are the node's: summed, even when one has an outage.
  PowerCollector psus({kNode});
  for (int i = 0; i <= 1800; ++i) {
    psus.Add(kNode, "pdu_outlet_power_watt", R"({"_info":"a"})", i * kS, 60);
    if (i < 600 || i > 1200)
      psus.Add(kNode, "pdu_outlet_power_watt", R"({"_info":"b"})", i * kS, 40);
  }
  auto report = ComputeEnergy(psus, 0, 1800 * kS, {});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->nodes[0].series, 2);
  EXPECT_EQ(report->nodes[0].reason.find("set aside"), std::string::npos)
      << report->nodes[0].reason;
  EXPECT_DOUBLE_EQ(report->nodes[0].window.peak_watts, 100);
}

}  // namespace
}  // namespace kwatt::energy::energy_test
