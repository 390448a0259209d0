#include "kwatt/energy/carbon.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kwatt::energy::carbon_test {
namespace {

constexpr UnixNanos kS = kNanosPerSecond;
// 2025-04-18T14:00:00+02:00.
constexpr int64_t kT0 = 1744977600;

// RTE's eCO2mix export as it downloads: tab-separated, a quarter-hour a line, the half-hours
// without a value, a notice at the end.
const char kEco2mix[] =
    "P\xe9rim\xe8tre\tNature\tDate\tHeures\tConsommation\tTaux de Co2\tEch. physiques\r\n"
    "France\tDonn\xe9\x65s temps r\xe9\x65l\t2025-04-18\t14:00\t52000\t30\t-8000\r\n"
    "France\tDonn\xe9\x65s temps r\xe9\x65l\t2025-04-18\t14:15\t52100\t\t-8000\r\n"
    "France\tDonn\xe9\x65s temps r\xe9\x65l\t2025-04-18\t14:30\t52200\t50\t-8000\r\n"
    "RTE ne pourra \xeatre tenu responsable de l'usage qui pourrait \xeatre fait des "
    "donn\xe9\x65s\r\n";

TEST(ParseCarbonIntensity, ReadsAnEco2mixExportInParisTime) {
  Result<CarbonIntensity> c = ParseCarbonIntensity(kEco2mix, "eco2mix.xls");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->times.size(), 2u);
  EXPECT_EQ(c->times[0], kT0 * kS);
  EXPECT_EQ(c->times[1], (kT0 + 1800) * kS);
  EXPECT_EQ(c->At(kT0 * kS + 1), 30);
  EXPECT_EQ(c->At((kT0 + 1800) * kS), 50);
  EXPECT_TRUE(std::isnan(c->At(kT0 * kS - 1)));
  EXPECT_TRUE(std::isnan(c->At((kT0 + 1800 + kMaxStaleSeconds + 1) * kS)));
}

TEST(ParseCarbonIntensity, ReadsCsvAndNamesWhatIsWrong) {
  Result<CarbonIntensity> c = ParseCarbonIntensity(
      "time,grams_per_kwh\n2025-04-18T14:00:00+02:00,30\n1744979400,50\n", "ci.csv");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->times[1], (kT0 + 1800) * kS);
  for (auto [text, expected] :
       {std::pair{"when,value\n1,2\n", "ci.csv:1: expected an eCO2mix export"},
        std::pair{"time,grams_per_kwh\n1744977600,-3\n", "ci.csv:2: a carbon intensity of"},
        std::pair{"time,grams_per_kwh\n1744977600,3\n1744977500,3\n", "should go forward"},
        std::pair{"time,grams_per_kwh\n", "no carbon intensity value"}, std::pair{"", "empty"}}) {
    Result<CarbonIntensity> bad = ParseCarbonIntensity(text, "ci.csv");
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_NE(bad.status().message().find(expected), std::string::npos) << bad.status().message();
  }
}

// A phase's emissions: its energy over each interval it was marked over, each part at its
// intensity (a phase marked twice, once at 30 g/kWh and once at 50).
TEST(EmissionsOfPhase, EachIntervalOfThePhaseAtItsIntensity) {
  PowerCollector c({"n-1.s.grid5000.fr"});
  for (int i = 0; i <= 3600; ++i) {
    c.Add("n-1.s.grid5000.fr", "wattmetre_power_watt", "{}", (kT0 + i) * kS, 100);
  }
  EnergyOptions options;
  options.phases = {{"p", kT0 * kS, (kT0 + 600) * kS}, {"p", (kT0 + 3000) * kS, (kT0 + 3600) * kS}};
  Result<EnergyReport> report = ComputeEnergy(c, kT0 * kS, (kT0 + 3600) * kS, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EmissionFactors factors;
  factors.intensity = *ParseCarbonIntensity(kEco2mix, "eco2mix.xls");
  factors.pue = 1.5;
  Result<Emissions> e = EmissionsOfPhase(c, *report, options, factors, 0);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  const double kwh = 100.0 * 600 / 3.6e6;  // each interval
  EXPECT_NEAR(e->kwh_at_wall, 2 * kwh, 1e-9);
  EXPECT_NEAR(e->grams, 1.5 * kwh * 30 + 1.5 * kwh * 50, 1e-6);
  EXPECT_FALSE(EmissionsOfPhase(c, *report, options, factors, 1).ok());
}

TEST(EmissionsOf, EachPartOfTheWindowAtItsIntensityTimesThePue) {
  // 100 W for an hour from 14:00: 0.1 kWh, half at 30 g/kWh, half at 50.
  PowerCollector c({"n-1.s.grid5000.fr"});
  for (int i = 0; i <= 3600; ++i) {
    c.Add("n-1.s.grid5000.fr", "wattmetre_power_watt", "{}", (kT0 + i) * kS, 100);
  }
  EnergyOptions options;
  Result<EnergyReport> report = ComputeEnergy(c, kT0 * kS, (kT0 + 3600) * kS, options);
  ASSERT_TRUE(report.ok());
  EmissionFactors factors;
  factors.intensity = *ParseCarbonIntensity(kEco2mix, "eco2mix.xls");
  factors.pue = 1.5;
  Result<Emissions> e = EmissionsOf(c, *report, options, factors);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_NEAR(e->kwh_at_wall, 0.1, 1e-9);
  EXPECT_NEAR(e->kwh_with_pue, 0.15, 1e-9);
  EXPECT_NEAR(e->mean_grams_per_kwh, 40, 1e-6);
  EXPECT_NEAR(e->grams, 0.15 * 40, 1e-6);
  EXPECT_GT(e->half_width_grams, 0);
  // A constant.
  factors.intensity = CarbonIntensity{52, {}, {}, "RTE 2024"};
  e = EmissionsOf(c, *report, options, factors);
  ASSERT_TRUE(e.ok());
  EXPECT_NEAR(e->grams, 0.15 * 52, 1e-6);
  // A series that does not cover the window: no figure, and why.
  factors.intensity = *ParseCarbonIntensity("time,grams_per_kwh\n1744981200,30\n", "late.csv");
  e = EmissionsOf(c, *report, options, factors);
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(std::isnan(e->grams));
  EXPECT_NE(e->why.find("no value from"), std::string::npos) << e->why;
  // A series that stops inside the window (its last value at 14:20 holds until 15:20 at most):
  // no figure for the hour, and why.
  PowerCollector longer({"n-1.s.grid5000.fr"});
  for (int i = 0; i <= 4 * 3600; ++i) {
    longer.Add("n-1.s.grid5000.fr", "wattmetre_power_watt", "{}", (kT0 + i) * kS, 100);
  }
  Result<EnergyReport> four_hours = ComputeEnergy(longer, kT0 * kS, (kT0 + 4 * 3600) * kS, options);
  ASSERT_TRUE(four_hours.ok());
  factors.intensity =
      *ParseCarbonIntensity("time,grams_per_kwh\n1744977600,30\n1744978800,40\n", "short.csv");
  e = EmissionsOf(longer, *four_hours, options, factors);
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(std::isnan(e->grams));
  EXPECT_NE(e->why.find("has no value from 2025-04-18T15:20:00+02:00"), std::string::npos)
      << e->why;
  // A PUE below 1 is none.
  factors.pue = 0.9;
  EXPECT_FALSE(EmissionsOf(c, *report, options, factors).ok());
}

}  // namespace
}  // namespace kwatt::energy::carbon_test
