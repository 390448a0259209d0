#include "kwatt/energy/source_check.h"

#include <gtest/gtest.h>

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
  // 1 % of 60000 J + 0.1 W x 600 s, and 1 % of 60600 J + 1 W x 600 s.
  EXPECT_NEAR(c[0].allowed_joules, 600 + 60 + 606 + 600, 1e-6);
  EXPECT_EQ(c[1].verdict, Verdict::kAgrees) << c[1].why;  // BMC: 10 % + 5 W

  // A PDU reading 5 % high, a BMC 15 % low: beyond what they state.
  sources = Sources()
                .Add("wattmetre_power_watt", 100)
                .Add("pdu_outlet_power_watt", 105)
                .Add("bmc_node_power_watt", 85)
                .Energies();
  c = CompareSources(sources, 0);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].verdict, Verdict::kDisagrees);
  EXPECT_EQ(c[0].why,
            "pdu_outlet_power_watt is 5 % above wattmetre_power_watt; their stated accuracies "
            "allow only 1890.0 J");
  EXPECT_EQ(c[1].verdict, Verdict::kDisagrees) << c[1].why;
  EXPECT_NEAR(c[1].relative, -0.15, 1e-9);
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
  EXPECT_NEAR(c.allowed_joules, 0.002 * 60900 + 0.001 * 60000, 1e-6);
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
