#include "kwatt/energy/source_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kwatt/energy/integration.h"

namespace kwatt::energy::source_check_test {
namespace {

constexpr UnixNanos kT0 = 1744977600LL * kNanosPerSecond;
constexpr const char* kNode = "nova-1.lyon.grid5000.fr";

// A node's sources at constant powers, sampled every second over [kT0, kT0 + 600 s] (or over
// its first `covered` seconds only), integrated as `kwatt energy` integrates them.
class Sources {
 public:
  Sources& Add(const std::string& metric, double watts, int covered = 600) {
    for (int s = 0; s <= covered; ++s)
      data_.Add(kNode, metric, "{}", kT0 + s * kNanosPerSecond, watts);
    metrics_.push_back(metric);
    return *this;
  }
  std::vector<SourceEnergy> Energies() const {
    std::vector<SourceEnergy> out;
    for (const std::string& metric : metrics_) {
      Figures f = IntegrateNodeMetric(data_.store().at(kNode).at(metric), kT0,
                                      kT0 + 600 * kNanosPerSecond, 3);
      out.push_back({metric, f});
    }
    return out;
  }

 private:
  PowerCollector data_{{kNode}, "custom_power_watt"};
  std::vector<std::string> metrics_;
};

using Verdict = SourceComparison::Verdict;

// What two sources' data leave uncertain, at 95 %: their intervals without accuracy and clock.
double DataAllowance(const SourceEnergy& a, const SourceEnergy& b) {
  auto half_width = [](const Figures& f) {
    ErrorTerms terms = f.terms;
    terms.accuracy_bound = 0;
    return Combine(terms, 0).half_width_without_accuracy;
  };
  return std::hypot(half_width(a.figures), half_width(b.figures));
}

TEST(CompareSources, WholeNodeSourcesAgreeWithinTheirStatedAccuraciesAndNoFurther) {
  std::vector<SourceEnergy> sources = Sources()
                                          .Add("wattmetre_power_watt", 100)
                                          .Add("pdu_outlet_power_watt", 101)
                                          .Add("bmc_node_power_watt", 92)
                                          .Energies();
  std::vector<SourceComparison> c = CompareSources(sources, 0);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].metric, "pdu_outlet_power_watt");
  EXPECT_EQ(c[0].reference, "wattmetre_power_watt");
  EXPECT_EQ(c[0].verdict, Verdict::kAgrees) << c[0].why;
  EXPECT_NEAR(c[0].joules, 600, 1e-6);
  EXPECT_NEAR(c[0].relative, 0.01, 1e-9);
  // 1 % of 60000 J + 0.1 W x 600 s, and 1 % of 60600 J + 1 W x 600 s, and what the readings
  // leave uncertain (whole watts: each may be off by half a watt all along, 300 J).
  const double data = DataAllowance(sources[0], sources[1]);
  EXPECT_NEAR(data, 1.96 * std::hypot(300, 300) / std::sqrt(3), 1e-6);
  EXPECT_NEAR(c[0].allowed_joules, 600 + 60 + 606 + 600 + data, 1e-6);
  EXPECT_EQ(c[1].verdict, Verdict::kAgrees) << c[1].why;  // BMC: 10 % + 5 W

  // A PDU reading 5 % high, a BMC 20 % low: beyond what they state.
  sources = Sources()
                .Add("wattmetre_power_watt", 100)
                .Add("pdu_outlet_power_watt", 105)
                .Add("bmc_node_power_watt", 80)
                .Energies();
  c = CompareSources(sources, 0);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].verdict, Verdict::kDisagrees);
  EXPECT_EQ(c[0].why,
            "pdu_outlet_power_watt is 5 % above wattmetre_power_watt; their stated accuracies "
            "and what their data leave uncertain allow only 2370.1 J");
  EXPECT_EQ(c[1].verdict, Verdict::kDisagrees) << c[1].why;
  EXPECT_NEAR(c[1].relative, -0.20, 1e-9);
}

TEST(CompareSources, TheUsersStatedAccuracyReplacesTheDefault) {
  std::vector<SourceEnergy> sources =
      Sources().Add("wattmetre_power_watt", 100).Add("pdu_outlet_power_watt", 101.5).Energies();
  EXPECT_EQ(CompareSources(sources, 0)[0].verdict, Verdict::kAgrees);
  Result<std::pair<std::string, StatedAccuracy>> tight =
      ParseStatedAccuracy("pdu_outlet_power_watt=0.2%");
  ASSERT_TRUE(tight.ok()) << tight.status().ToString();
  Result<std::pair<std::string, StatedAccuracy>> exact =
      ParseStatedAccuracy("wattmetre_power_watt = 0.1% + 0W");
  ASSERT_TRUE(exact.ok()) << exact.status().ToString();
  std::map<std::string, StatedAccuracy> given = {*tight, *exact};
  SourceComparison c = CompareSources(sources, 0, given)[0];
  EXPECT_EQ(c.verdict, Verdict::kDisagrees) << c.why;
  EXPECT_NEAR(c.allowed_joules,
              0.002 * 60900 + 0.001 * 60000 + DataAllowance(sources[0], sources[1]), 1e-6);
}

TEST(CompareSources, APartOfTheNodeIsBelowTheWallAndTheRestIsNamedAsThePlatforms) {
  std::vector<SourceEnergy> sources = Sources()
                                          .Add("wattmetre_power_watt", 100)
                                          .Add("kwatt_meter_domain_power_watt", 60)
                                          .Energies();
  SourceComparison c = CompareSources(sources, 0)[0];
  EXPECT_EQ(c.verdict, Verdict::kPartOfNode);
  EXPECT_NEAR(c.rest_watts, 40, 1e-9);
  EXPECT_NE(c.why.find("the rest of the platform"), std::string::npos) << c.why;
  EXPECT_EQ(c.why.find("error"), std::string::npos) << c.why;
  // A part above the wall that holds it: one of the two is wrong.
  sources = Sources()
                .Add("wattmetre_power_watt", 100)
                .Add("kwatt_meter_domain_power_watt", 120)
                .Energies();
  c = CompareSources(sources, 0)[0];
  EXPECT_EQ(c.verdict, Verdict::kAbovePart);
  EXPECT_EQ(VerdictName(c.verdict), "part_above_wall");
}

TEST(CompareSources, ASourceCoveringTooLittleOrWithoutAStatedAccuracyIsNotJudged) {
  std::vector<SourceEnergy> sources = Sources()
                                          .Add("wattmetre_power_watt", 100)
                                          .Add("pdu_outlet_power_watt", 150, 300)
                                          .Add("custom_power_watt", 300)
                                          .Energies();
  std::vector<SourceComparison> c = CompareSources(sources, 0);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].verdict, Verdict::kNotComparable);
  EXPECT_TRUE(std::isnan(c[0].joules));
  EXPECT_NE(c[0].why.find("pdu_outlet_power_watt covers 50.2 %"), std::string::npos) << c[0].why;
  EXPECT_EQ(c[1].verdict, Verdict::kNotComparable);
  EXPECT_NEAR(c[1].joules, 120000, 1e-6);  // shown, not judged
  EXPECT_EQ(c[1].why, "no stated accuracy for custom_power_watt: give one with --accuracy");
}

// A wattmeter reading 20 % high while the node's PDU outlet and BMC agree with each other: the
// energy is taken from the PDU (the next in the order of preference), and the reason says why.
// With only one other source, nothing outvotes the chosen one: it is kept, disputed.
TEST(ComputeEnergy, AChosenSourceTwoAgreeingOthersContradictIsSetAside) {
  PowerCollector data({kNode});
  for (int s = 0; s <= 600; ++s) {
    const double watts = 150 + 30 * std::sin(s / 40.0);
    data.Add(kNode, "wattmetre_power_watt", "{}", kT0 + s * kNanosPerSecond, 1.2 * watts);
    data.Add(kNode, "pdu_outlet_power_watt", "{}", kT0 + s * kNanosPerSecond, watts);
    if (s % 5 == 0) {
      data.Add(kNode, "bmc_node_power_watt", "{}", kT0 + s * kNanosPerSecond, 0.97 * watts);
    }
  }
  Result<EnergyReport> report = ComputeEnergy(data, kT0, kT0 + 600 * kNanosPerSecond, {});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const NodeEnergy& node = report->nodes[0];
  EXPECT_EQ(node.metric, "pdu_outlet_power_watt");
  EXPECT_NE(node.reason.find("; wattmetre_power_watt set aside: it reads 20 % above "
                             "pdu_outlet_power_watt and 23.7 % above bmc_node_power_watt, beyond "
                             "what their stated accuracies and data allow, and those two agree "
                             "with each other"),
            std::string::npos)
      << node.reason;
  // The checks then show the wattmeter disagreeing with the PDU.
  std::vector<SourceCheck> checks = CheckSources(data, *report, {});
  ASSERT_FALSE(checks.empty());
  EXPECT_EQ(checks[0].sources[0].metric, "pdu_outlet_power_watt");
  EXPECT_EQ(checks[0].comparisons[0].metric, "wattmetre_power_watt");
  EXPECT_EQ(checks[0].comparisons[0].verdict, Verdict::kDisagrees);

  // Without the BMC: two sources that disagree, and nothing to tell which is wrong.
  PowerCollector two({kNode});
  for (const auto& [labels, series] : data.store().at(kNode).at("wattmetre_power_watt")) {
    for (size_t i = 0; i < series.time.size(); ++i) {
      two.Add(kNode, "wattmetre_power_watt", labels, series.time[i], series.value[i]);
      two.Add(kNode, "pdu_outlet_power_watt", labels, series.time[i], series.value[i] / 1.2);
    }
  }
  report = ComputeEnergy(two, kT0, kT0 + 600 * kNanosPerSecond, {});
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const NodeEnergy& kept = report->nodes[0];
  EXPECT_EQ(kept.metric, "wattmetre_power_watt");
  // Kept, disputed: its accuracy term takes in the PDU's reading (1 % + 0.1 W stated, plus the
  // 16.7 % the PDU reads below it), so its interval holds the PDU's energy too.
  EXPECT_NE(kept.reason.find("; pdu_outlet_power_watt reads 16.7 % below it, beyond what their "
                             "stated accuracies and data allow, and no third source tells which "
                             "is wrong: its accuracy term is widened by that much"),
            std::string::npos)
      << kept.reason;
  const double joules = kept.window.total_joules();
  EXPECT_NEAR(kept.window.terms.accuracy_bound, (0.01 + 1 / 6.0) * joules + 0.1 * 600, 1);
  EXPECT_GE(kept.window.uncertainty(0).half_width, joules - joules / 1.2);
}

// A BMC averages its readings over 10 s: over a 15 s phase across a rise of load its energy lags
// the truth by a quarter, and the phase's interval (without the accuracy term) says so.
TEST(AddAveragingTerm, AShortPhaseOnAnAveragingSourceCarriesWhatItsAveragingHides) {
  auto truth_watts = [](double s) { return s < 300 ? 100.0 : 200.0; };
  PowerCollector data({kNode});
  for (int s = 0; s <= 600; s += 5) {
    double mean = 0;  // the mean over the 10 s before
    for (int k = 0; k < 1000; ++k) mean += truth_watts(s - 10 + 0.01 * (k + 0.5)) / 1000;
    data.Add(kNode, "bmc_node_power_watt", "{}", kT0 + s * kNanosPerSecond, mean);
  }
  EnergyOptions options;
  options.phases = {{"rise", kT0 + 295 * kNanosPerSecond, kT0 + 310 * kNanosPerSecond}};
  Result<EnergyReport> report = ComputeEnergy(data, kT0, kT0 + 600 * kNanosPerSecond, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  const Figures& rise = report->nodes[0].phases[0];
  const double truth = 5 * 100 + 10 * 200;
  const double error = rise.total_joules() - truth;
  EXPECT_GT(std::fabs(error), 0.15 * truth) << rise.total_joules();  // the lag is real
  EXPECT_LE(std::fabs(error), rise.uncertainty(0).half_width_without_accuracy)
      << rise.total_joules() << " J for " << truth << " J";
  // A source that does not average carries no such term.
  Figures flat = rise;
  const double before = flat.terms.sampling_variance;
  AddAveragingTerm("wattmetre_power_watt", data.store().at(kNode).at("bmc_node_power_watt"),
                   kT0 + 295 * kNanosPerSecond, kT0 + 310 * kNanosPerSecond, &flat);
  EXPECT_EQ(flat.terms.sampling_variance, before);
}

TEST(ParseStatedAccuracy, TakesEitherTermAndNamesWhatIsWrong) {
  Result<std::pair<std::string, StatedAccuracy>> watts =
      ParseStatedAccuracy("bmc_node_power_watt=8W");
  ASSERT_TRUE(watts.ok());
  EXPECT_EQ(watts->first, "bmc_node_power_watt");
  EXPECT_EQ(watts->second.relative, 0);
  EXPECT_EQ(watts->second.watts, 8);
  EXPECT_EQ(watts->second.basis, "given (--accuracy bmc_node_power_watt=8W)");
  for (const char* bad :
       {"pdu_outlet_power_watt", "=1%", "pdu_outlet_power_watt=", "pdu_outlet_power_watt=1",
        "pdu_outlet_power_watt=-1%", "pdu_outlet_power_watt=1%+2%", "pdu_outlet_power_watt=200%",
        "pdu_outlet_power_watt=x%", "pdu_outlet_power_watt=2e7W"}) {
    Result<std::pair<std::string, StatedAccuracy>> parsed = ParseStatedAccuracy(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("give METRIC=P%+WW"), std::string::npos)
        << parsed.status().message();
  }
  Result<std::pair<std::string, StatedAccuracy>> part =
      ParseStatedAccuracy("kwatt_meter_domain_power_watt=1%");
  ASSERT_FALSE(part.ok());
  EXPECT_NE(part.status().message().find("whole-node power metrics: wattmetre_power_watt, "
                                         "pdu_outlet_power_watt, bmc_node_power_watt, "
                                         "bmc_psu_power_watt"),
            std::string::npos)
      << part.status().message();
}

}  // namespace
}  // namespace kwatt::energy::source_check_test
