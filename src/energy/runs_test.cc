#include "kwatt/energy/runs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "src/testing/runs_truth.h"

namespace kwatt::energy::runs_test {
namespace {

// Runs whose total energies are `joules`, one figure each.
std::vector<std::vector<RunFigure>> Totals(std::vector<double> joules) {
  std::vector<std::vector<RunFigure>> runs;
  for (double j : joules) runs.push_back({{"total", "total", "window", j, 1.0, 100}});
  return runs;
}

TEST(SummarizeRuns, MeanSpreadAndStudentsInterval) {
  std::vector<RunsSummary> s = SummarizeRuns(Totals({10, 12, 14}));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].runs, 3);
  EXPECT_DOUBLE_EQ(s[0].mean, 12);
  EXPECT_DOUBLE_EQ(s[0].sd, 2);
  // t(0.975, 2 degrees of freedom) = 4.302653: 12 +- 4.302653 x 2 / sqrt(3).
  EXPECT_NEAR(s[0].high - s[0].mean, 4.302653 * 2 / std::sqrt(3), 1e-5);
  EXPECT_NEAR(s[0].mean - s[0].low, 4.302653 * 2 / std::sqrt(3), 1e-5);
  EXPECT_DOUBLE_EQ(s[0].mean_half_width, 1);
  // One run: a mean, no spread.
  std::vector<RunsSummary> one = SummarizeRuns(Totals({10}));
  EXPECT_TRUE(std::isnan(one[0].sd) && std::isnan(one[0].low));
}

TEST(SummarizeRuns, FiguresAreMatchedByScopeNameAndPhase) {
  std::vector<std::vector<RunFigure>> runs = {
      {{"node", "a", "window", 10, 0, 1}, {"node", "b", "window", 20, 0, 1}},
      {{"node", "a", "window", 12, 0, 1}, {"node", "a", "busy", 5, 0, 1}}};
  std::vector<RunsSummary> s = SummarizeRuns(runs);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].name, "a");
  EXPECT_EQ(s[0].runs, 2);
  EXPECT_DOUBLE_EQ(s[0].mean, 11);
  EXPECT_EQ(s[1].name, "b");
  EXPECT_EQ(s[1].runs, 1);
  EXPECT_EQ(s[2].phase, "busy");
}

TEST(CompareRuns, WelchsTestOnKnownFigures) {
  // A: 10, 12, 14; B: 20, 22, 24. Difference 10, standard error sqrt(8/3), t = 6.1237 with
  // 4 degrees of freedom (Welch-Satterthwaite), two-sided p = 0.003602; t(0.975, 4) = 2.776445.
  std::vector<RunsComparison> c = CompareRuns(Totals({10, 12, 14}), Totals({20, 22, 24}));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_DOUBLE_EQ(c[0].difference, 10);
  EXPECT_NEAR(c[0].relative, 10.0 / 12, 1e-12);
  EXPECT_NEAR(c[0].t, 6.1237244, 1e-6);
  EXPECT_NEAR(c[0].dof, 4, 1e-9);
  EXPECT_NEAR(c[0].p_value, 0.003602, 1e-5);
  EXPECT_NEAR(c[0].high - 10, 2.776445 * std::sqrt(8.0 / 3), 1e-5);
  EXPECT_TRUE(c[0].significant);
  EXPECT_NE(c[0].why.find("B uses more"), std::string::npos) << c[0].why;
  // Overlapping sets: no difference shown.
  c = CompareRuns(Totals({10, 12, 14}), Totals({11, 13, 15}));
  EXPECT_FALSE(c[0].significant);
  EXPECT_LT(c[0].low, 0);
  EXPECT_GT(c[0].high, 0);
  EXPECT_NE(c[0].why.find("no difference shown"), std::string::npos) << c[0].why;
  // A higher confidence asks more.
  c = CompareRuns(Totals({10, 12, 14}), Totals({15, 17, 19}), 0.95);
  EXPECT_TRUE(c[0].significant);
  c = CompareRuns(Totals({10, 12, 14}), Totals({15, 17, 19}), 0.99);
  EXPECT_FALSE(c[0].significant);
}

TEST(CompareRuns, WithoutTwoRunsInEachSetNothingIsClaimed) {
  std::vector<RunsComparison> c = CompareRuns(Totals({10}), Totals({20, 21}));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_FALSE(c[0].significant);
  EXPECT_DOUBLE_EQ(c[0].difference, 10.5);
  EXPECT_TRUE(std::isnan(c[0].p_value));
  EXPECT_NE(c[0].why.find("fewer than two runs"), std::string::npos);
  // In JSON, unknown figures are null.
  auto json = nlohmann::json::parse(RunsComparisonJson(c));
  EXPECT_TRUE(json[0]["p_value"].is_null());
  EXPECT_EQ(json[0]["a"]["runs"], 1);
  EXPECT_EQ(json[0]["b"]["mean_joules"], 20.5);
}

TEST(CheckConfidence, RefusesWhatIsNoConfidenceLevel) {
  EXPECT_TRUE(CheckConfidence(0.95).ok());
  for (double bad : {0.0, 0.3, 1.0, 95.0, double(NAN)}) {
    Status s = CheckConfidence(bad, "--confidence");
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("--confidence"), std::string::npos);
  }
}

TEST(RunFiguresOf, EveryFigureWithPowerData) {
  PowerCollector c({"n-1.s.grid5000.fr", "n-2.s.grid5000.fr"});
  for (int i = 0; i <= 10; ++i) {
    c.Add("n-1.s.grid5000.fr", "wattmetre_power_watt", "{}", i * kNanosPerSecond, 100);
  }
  EnergyOptions options;
  options.phases = {{"busy", 0, 5 * kNanosPerSecond}};
  Result<EnergyReport> report = ComputeEnergy(c, 0, 10 * kNanosPerSecond, options);
  ASSERT_TRUE(report.ok());
  std::vector<RunFigure> figures = RunFiguresOf(*report);
  // n-1's window and phase, the total's; n-2 has no power data.
  ASSERT_EQ(figures.size(), 4u);
  EXPECT_EQ(figures[0].name, "n-1.s.grid5000.fr");
  EXPECT_DOUBLE_EQ(figures[0].joules, 1000);
  EXPECT_GT(figures[0].half_width, 0);
  EXPECT_EQ(figures[1].phase, "busy");
  EXPECT_EQ(figures[2].scope, "total");
}

// Sets of simulated runs whose true difference is known (src/testing/runs_truth.h): the
// simulator's nova-1, 10-minute runs, the work phase's energy varying by 1 % from run to run.
TEST(CompareRunsAgainstTheSimulatorsTruth, NoDifferenceIsClaimedWhereThereIsNone) {
  kwatt::testing::RunsTruthOptions options;
  options.comparisons = 300;
  options.runs = 5;
  options.difference = 0;
  Result<kwatt::testing::RunsTruthResult> r = kwatt::testing::CompareRunsAgainstTruth(options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->comparisons, 300);
  // At 95 % confidence, a difference is claimed in about 5 % of the comparisons (a binomial
  // standard deviation of 1.3 %).
  EXPECT_LE(r->significant, 0.09 * 300) << r->significant;
  EXPECT_GE(r->covered, 0.91 * 300) << r->covered;
}

TEST(CompareRunsAgainstTheSimulatorsTruth, ATrueDifferenceIsFoundWithinItsInterval) {
  kwatt::testing::RunsTruthOptions options;
  options.comparisons = 100;
  options.runs = 5;
  options.difference = 0.03;  // three times the run-to-run spread
  Result<kwatt::testing::RunsTruthResult> r = kwatt::testing::CompareRunsAgainstTruth(options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NEAR(r->true_difference_joules, 0.03 * r->mean_a_joules, 1e-6);
  EXPECT_GE(r->significant, 95) << r->significant;
  EXPECT_GE(r->covered, 88) << r->covered;
}

}  // namespace
}  // namespace kwatt::energy::runs_test
