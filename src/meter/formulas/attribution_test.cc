#include "kwatt/meter/formulas/attribution.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

namespace kwatt::meter::attribution_test {
namespace {

int64_t Sum(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{0});
}

int64_t Conserved(const DomainEnergy& e) {
  return e.idle_microjoules + e.unattributed_microjoules + Sum(e.target_microjoules);
}

// issue 22, item 10: a steady load on a machine whose power follows it exactly (kwatt simulate
// rapl --follow-cpu: 60 W idle + 80 W x busy) gave 74 W, the lowest power seen, for its idle power.
TEST(IdlePowerEstimator, ASteadyLoadStillFitsTheLineWhenItIsKnownWellAndSaysHowWell) {
  IdlePowerEstimator estimator;
  std::mt19937 random(7);
  std::uniform_real_distribution<double> load(0.16, 0.19);  // spread 0.03: under 0.05
  for (int i = 0; i < 100; ++i) {
    double u = load(random);
    estimator.Add(60 + 80 * u, u);
  }
  std::optional<IdleEstimate> estimate = estimator.Estimate();
  ASSERT_TRUE(estimate);
  EXPECT_TRUE(estimate->fitted);
  EXPECT_NEAR(estimate->watts, 60.0, 1e-6);
  EXPECT_LT(estimate->uncertainty_watts, 1e-6);
  EXPECT_EQ(estimate->samples, 100u);
}

TEST(IdlePowerEstimator, ANoisySteadyLoadIsOnlyAnUpperBoundAndSaysSo) {
  IdlePowerEstimator estimator;
  std::mt19937 random(7);
  std::uniform_real_distribution<double> load(0.16, 0.19);
  std::normal_distribution<double> noise(0, 3);
  double lowest = 1e9;
  for (int i = 0; i < 100; ++i) {
    double u = load(random), watts = 60 + 80 * u + noise(random);
    lowest = std::min(lowest, watts);
    estimator.Add(watts, u);
  }
  std::optional<IdleEstimate> estimate = estimator.Estimate();
  ASSERT_TRUE(estimate);
  EXPECT_FALSE(estimate->fitted);
  EXPECT_DOUBLE_EQ(estimate->watts, lowest);
  EXPECT_DOUBLE_EQ(estimate->uncertainty_watts, lowest);  // anywhere from 0 to it
}

TEST(IdlePowerEstimator, AVaryingLoadFitsTheLineWithItsStandardError) {
  IdlePowerEstimator estimator;
  std::mt19937 random(11);
  std::uniform_real_distribution<double> load(0.05, 0.95);
  std::normal_distribution<double> noise(0, 1);
  for (int i = 0; i < 600; ++i) {
    double u = load(random);
    estimator.Add(60 + 80 * u + noise(random), u);
  }
  std::optional<IdleEstimate> estimate = estimator.Estimate();
  ASSERT_TRUE(estimate);
  EXPECT_TRUE(estimate->fitted);
  EXPECT_GT(estimate->uncertainty_watts, 0.01);
  EXPECT_LT(estimate->uncertainty_watts, 0.3);
  EXPECT_NEAR(estimate->watts, 60.0, 4 * estimate->uncertainty_watts);
}

TEST(Apportion, SharesByWeightAndSumsExactly) {
  EXPECT_EQ(Apportion(100, {1, 1, 2}), (std::vector<int64_t>{25, 25, 50}));
  // 10 in thirds: 3.33 each, the one unit left to the first of the equal remainders.
  EXPECT_EQ(Apportion(10, {1, 1, 1}), (std::vector<int64_t>{4, 3, 3}));
  // Largest remainder first: 7 * (2/7, 5/7)... exact; 8 * (1/3, 2/3) = 2.67, 5.33 -> 3, 5.
  EXPECT_EQ(Apportion(8, {1, 2}), (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(Apportion(0, {3, 4}), (std::vector<int64_t>{0, 0}));
  // No weight at all: everything to the last part (the callers' "nobody").
  EXPECT_EQ(Apportion(42, {0, 0, 0}), (std::vector<int64_t>{0, 0, 42}));
  // Negative weights count as zero.
  EXPECT_EQ(Apportion(9, {-5, 3}), (std::vector<int64_t>{0, 9}));
}

TEST(Apportion, NoOverflowAtLargeTotalsAndWeights) {
  const int64_t total = int64_t(1) << 62;  // 4.6e18 uJ
  std::vector<int64_t> weights = {int64_t(1) << 40, (int64_t(1) << 40) - 1, 3};
  std::vector<int64_t> parts = Apportion(total, weights);
  EXPECT_EQ(Sum(parts), total);
  EXPECT_GT(parts[0], parts[1]);
  EXPECT_GE(parts[2], 0);
}

TEST(Apportion, RandomCasesAlwaysConserveAndStayWithinOneOfTheExactShare) {
  std::mt19937_64 random(7);
  for (int round = 0; round < 2000; ++round) {
    size_t n = 1 + random() % 12;
    std::vector<int64_t> weights(n);
    for (auto& w : weights) w = int64_t(random() % 1'000'000);
    int64_t total = int64_t(random() % 10'000'000'000);
    std::vector<int64_t> parts = Apportion(total, weights);
    ASSERT_EQ(Sum(parts), total);
    long double weight_sum = 0;
    for (int64_t w : weights) weight_sum += w;
    if (weight_sum == 0) continue;
    for (size_t i = 0; i < n; ++i) {
      long double exact = (long double)total * weights[i] / weight_sum;
      EXPECT_LE(std::abs((long double)parts[i] - exact), 1.0L);
    }
  }
}

TEST(Attribute, DynamicEnergyByCpuTimeAndTheRestUnattributed) {
  // 10 J measured, 4 J of it idle. Two targets used 300 ms and 100 ms of 800 ms busy.
  DomainEnergy e = Attribute(10'000'000, 4'000'000, {300'000, 100'000}, 800'000, IdlePolicy::kNone);
  EXPECT_EQ(e.measured_microjoules, 10'000'000);
  EXPECT_EQ(e.idle_microjoules, 4'000'000);
  EXPECT_EQ(e.target_microjoules, (std::vector<int64_t>{2'250'000, 750'000}));
  EXPECT_EQ(e.unattributed_microjoules, 3'000'000);
  EXPECT_EQ(Conserved(e), e.measured_microjoules);
}

TEST(Attribute, ProportionalIdleGoesWithTheCpuShares) {
  DomainEnergy e =
      Attribute(10'000'000, 4'000'000, {300'000, 100'000}, 800'000, IdlePolicy::kProportional);
  EXPECT_EQ(e.idle_microjoules, 0);
  // Each target gets its CPU share of all 10 J.
  EXPECT_EQ(e.target_microjoules, (std::vector<int64_t>{3'750'000, 1'250'000}));
  EXPECT_EQ(e.unattributed_microjoules, 5'000'000);
  EXPECT_EQ(Conserved(e), 10'000'000);
}

TEST(Attribute, EqualIdleIsSplitEvenlyAmongTheTargets) {
  DomainEnergy e =
      Attribute(10'000'000, 4'000'001, {300'000, 100'000}, 800'000, IdlePolicy::kEqual);
  EXPECT_EQ(e.idle_microjoules, 0);
  // Dynamic 5,999,999 by CPU (3/8, 1/8, the rest unattributed); idle 4,000,001 halved.
  EXPECT_EQ(Conserved(e), 10'000'000);
  EXPECT_NEAR(double(e.target_microjoules[0]), 2'250'000 + 2'000'000, 2);
  EXPECT_NEAR(double(e.target_microjoules[1]), 750'000 + 2'000'000, 2);
}

TEST(Attribute, NoBusyTimeLeavesTheDynamicPartUnattributed) {
  DomainEnergy none = Attribute(5'000'000, 3'000'000, {0, 0}, 0, IdlePolicy::kProportional);
  EXPECT_EQ(none.target_microjoules, (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(none.unattributed_microjoules, 2'000'000);
  EXPECT_EQ(none.idle_microjoules, 3'000'000);
  DomainEnergy equal = Attribute(5'000'000, 3'000'000, {0, 0}, 0, IdlePolicy::kEqual);
  EXPECT_EQ(equal.target_microjoules, (std::vector<int64_t>{1'500'000, 1'500'000}));
  EXPECT_EQ(equal.unattributed_microjoules, 2'000'000);
}

TEST(Attribute, NoTargetKeepsIdleApartWhateverThePolicy) {
  for (IdlePolicy policy : {IdlePolicy::kNone, IdlePolicy::kProportional, IdlePolicy::kEqual}) {
    DomainEnergy e = Attribute(7'000'000, 2'000'000, {}, 500'000, policy);
    EXPECT_TRUE(e.target_microjoules.empty());
    EXPECT_EQ(Conserved(e), 7'000'000) << IdlePolicyName(policy);
    if (policy != IdlePolicy::kProportional) {
      EXPECT_EQ(e.idle_microjoules, 2'000'000);
    }
  }
}

TEST(Attribute, IdleAboveWhatWasMeasuredIsClamped) {
  DomainEnergy e = Attribute(1'000, 5'000, {10}, 10, IdlePolicy::kNone);
  EXPECT_EQ(e.idle_microjoules, 1'000);
  EXPECT_EQ(e.target_microjoules[0], 0);
  EXPECT_EQ(Conserved(e), 1'000);
  DomainEnergy negative_idle = Attribute(1'000, -5, {10}, 10, IdlePolicy::kNone);
  EXPECT_EQ(negative_idle.idle_microjoules, 0);
  EXPECT_EQ(negative_idle.target_microjoules[0], 1'000);
}

TEST(Attribute, TargetsAboveTheBusyTimeRaiseIt) {
  // A read skew: targets sum to 1.2 s of CPU while the machine says 1 s busy.
  DomainEnergy e = Attribute(12'000'000, 0, {800'000, 400'000}, 1'000'000, IdlePolicy::kNone);
  EXPECT_EQ(e.target_microjoules, (std::vector<int64_t>{8'000'000, 4'000'000}));
  EXPECT_EQ(e.unattributed_microjoules, 0);
}

TEST(Attribute, ConservationHoldsOnRandomIntervals) {
  std::mt19937_64 random(11);
  for (int round = 0; round < 5000; ++round) {
    size_t n = random() % 20;
    std::vector<int64_t> cpu(n);
    int64_t busy = 0;
    for (auto& c : cpu) busy += (c = int64_t(random() % 2'000'000));
    busy += int64_t(random() % 3'000'000) - 1'000'000;  // sometimes below the targets' sum
    int64_t measured = int64_t(random() % 50'000'000'000);
    int64_t idle = int64_t(random() % 60'000'000'000) - 5'000'000'000;
    for (IdlePolicy policy : {IdlePolicy::kNone, IdlePolicy::kProportional, IdlePolicy::kEqual}) {
      DomainEnergy e = Attribute(measured, idle, cpu, busy, policy);
      ASSERT_EQ(Conserved(e), measured);
      for (int64_t share : e.target_microjoules) ASSERT_GE(share, 0);
      ASSERT_GE(e.unattributed_microjoules, 0);
      ASSERT_GE(e.idle_microjoules, 0);
    }
  }
}

TEST(IdlePolicy, ParsesItsThreeNames) {
  EXPECT_EQ(*ParseIdlePolicy("equal"), IdlePolicy::kEqual);
  EXPECT_STREQ(IdlePolicyName(*ParseIdlePolicy("proportional")), "proportional");
  Result<IdlePolicy> bad = ParseIdlePolicy("fair");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("none, proportional, equal"), std::string::npos);
}

TEST(IdlePowerEstimator, FindsTheInterceptOfALinearMachine) {
  IdlePowerEstimator estimator(600, 10);
  EXPECT_FALSE(estimator.IdleWatts().has_value());
  // P = 40 W + 80 W x busy fraction.
  for (int i = 0; i < 100; ++i) {
    double u = (i % 10) / 10.0 + 0.05;
    estimator.Add(40 + 80 * u, u);
  }
  ASSERT_TRUE(estimator.IdleWatts().has_value());
  EXPECT_NEAR(*estimator.IdleWatts(), 40, 1e-9);
}

TEST(IdlePowerEstimator, TheLowestPowerWhenUtilisationDoesNotVary) {
  IdlePowerEstimator estimator(600, 3);
  for (double p : {90.0, 85.0, 88.0, 91.0}) estimator.Add(p, 0.5);
  EXPECT_EQ(*estimator.IdleWatts(), 85.0);
}

// A loaded machine: the counters were read a little late every other interval, moving 30 % of an
// interval's energy into the next (100 ms periods, 60 W idle + 80 W x busy). Single intervals
// then show 51 W, below the idle power, which was stated as its upper bound; in blocks of 0.5 s
// what is stated holds the truth.
TEST(IdlePowerEstimator, LateCounterReadsDoNotPutTheBoundBelowTheIdlePower) {
  auto learn = [](double block_seconds) {
    IdlePowerEstimator estimator(600, 10, block_seconds);
    std::mt19937 random(5);
    std::uniform_real_distribution<double> load(0.16, 0.19);
    for (int i = 0; i < 30; ++i) {
      double u = load(random);
      estimator.Add((60 + 80 * u) * (i % 2 == 0 ? 0.7 : 1.3), u, 0.1);
    }
    return *estimator.Estimate();
  };
  IdleEstimate single = learn(0);
  EXPECT_FALSE(single.fitted);
  EXPECT_LT(single.watts, 60.0);  // what the meter said before: "at most 51 W"
  IdleEstimate blocks = learn(0.5);
  EXPECT_EQ(blocks.samples, 6u);
  if (blocks.fitted) {
    EXPECT_NEAR(blocks.watts, 60.0, 3 * blocks.uncertainty_watts);
  } else {
    EXPECT_GE(blocks.watts, 60.0);
  }
}

TEST(IdlePowerEstimator, NeverAboveTheLowestPowerNorBelowZero) {
  IdlePowerEstimator estimator(600, 2);
  // Power falling with utilisation (a noisy machine): the intercept would be above every sample.
  estimator.Add(100, 0.1);
  estimator.Add(80, 0.9);
  EXPECT_EQ(*estimator.IdleWatts(), 80.0);
  IdlePowerEstimator steep(600, 2);
  steep.Add(10, 0.2);
  steep.Add(110, 0.9);  // intercept -18.6 W
  EXPECT_EQ(*steep.IdleWatts(), 0.0);
}

TEST(IdlePowerEstimator, ForgetsBeyondItsWindow) {
  IdlePowerEstimator estimator(5, 2);
  for (int i = 0; i < 5; ++i) estimator.Add(10, 0.5);
  for (int i = 0; i < 5; ++i) estimator.Add(50, 0.5);
  EXPECT_EQ(*estimator.IdleWatts(), 50.0);
}

}  // namespace
}  // namespace kwatt::meter::attribution_test
