#include "kwatt/simulate/node_model.h"

#include <gtest/gtest.h>

namespace kwatt::simulate::node_model_test {
namespace {

constexpr UnixNanos kT0 = 1745000000LL * kNanosPerSecond;

jobs::JobSet OneJob() {
  auto jobs =
      jobs::JobSet::Parse(R"({"jobs":[{"site":"lyon","uid":7,"nodes":["nova-1.lyon.grid5000.fr"],
    "started_at":1745000000,"stopped_at":1745000600,
    "phases":[{"name":"idle","duration":100,"cpu":0},{"name":"busy","duration":200,"cpu":1,
              "network":0.5}], "repeat_phases":true}]})",
                          "test");
  EXPECT_TRUE(jobs.ok()) << jobs.status().ToString();
  return std::move(*jobs);
}

TEST(LoadProfile, PhasesWithRamps) {
  LoadProfile profile = LoadProfile::ForNode("lyon", "nova-1", OneJob());
  EXPECT_DOUBLE_EQ(profile.At(kT0 - kNanosPerSecond).cpu, 0);
  EXPECT_DOUBLE_EQ(profile.At(kT0 + 50 * kNanosPerSecond).cpu, 0);
  EXPECT_DOUBLE_EQ(profile.At(kT0 + 100 * kNanosPerSecond + kRampNs / 2).cpu, 0.5);
  EXPECT_DOUBLE_EQ(profile.At(kT0 + 150 * kNanosPerSecond).cpu, 1);
  EXPECT_DOUBLE_EQ(profile.At(kT0 + 150 * kNanosPerSecond).network, 0.5);
  EXPECT_DOUBLE_EQ(profile.At(kT0 + 350 * kNanosPerSecond).cpu, 0);  // repeated: idle again
  EXPECT_DOUBLE_EQ(profile.At(kT0 + 450 * kNanosPerSecond).cpu, 1);
  EXPECT_DOUBLE_EQ(profile.At(kT0 + 700 * kNanosPerSecond).cpu, 0);  // after the job
  EXPECT_DOUBLE_EQ(LoadProfile::ForNode("lyon", "nova-4", OneJob()).At(kT0).cpu, 0);
}

TEST(LoadProfile, IntegralIsExact) {
  LoadProfile profile = LoadProfile::ForNode("lyon", "nova-1", OneJob());
  // Busy from 100 s (ramp 1 s) to 300 s (ramp 1 s): 200 s of cpu exactly.
  EXPECT_NEAR(profile.Integral(kT0, kT0 + 300 * kNanosPerSecond).cpu, 199.5, 1e-9);
  EXPECT_NEAR(profile.Integral(kT0, kT0 + 600 * kNanosPerSecond).cpu, 399.5, 1e-9);
  // Riemann sum at 1 ms agrees.
  double sum = 0;
  for (int64_t t = 0; t < 320'000; ++t)
    sum += profile.At(kT0 + 90 * kNanosPerSecond + t * kNanosPerMilli + kNanosPerMilli / 2).cpu;
  EXPECT_NEAR(profile.Integral(kT0 + 90 * kNanosPerSecond, kT0 + 410 * kNanosPerSecond).cpu,
              sum / 1000, 1e-6);
}

TEST(NodeModel, EnergyIsTheIntegralOfPower) {
  NodeModel node("nova-1", HardwareOfCluster("nova"),
                 LoadProfile::ForNode("lyon", "nova-1", OneJob()), 1);
  UnixNanos a = kT0 + 37 * kNanosPerSecond + 123, b = kT0 + 512 * kNanosPerSecond;
  double sum = 0;
  const int64_t step = kNanosPerMilli;
  for (UnixNanos t = a; t < b; t += step) sum += node.PowerWatts(std::min(t + step / 2, b));
  EXPECT_NEAR(node.EnergyJoules(a, b), sum * 1e-3, 0.05);
  // Idle power is the cluster's, within the node-to-node spread.
  EXPECT_NEAR(node.PowerWatts(kT0 - 3600 * kNanosPerSecond), 68, 68 * 0.04 + 1.3);
  EXPECT_GT(node.PowerWatts(kT0 + 200 * kNanosPerSecond), 170);
}

TEST(JobSet, ErrorsNameTheProblem) {
  auto missing =
      jobs::JobSet::Parse(R"({"jobs":[{"site":"lyon","uid":1,"started_at":1}]})", "f.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("jobs file f.json: jobs[0].nodes is required"),
            std::string::npos)
      << missing.status().message();
  auto level = jobs::JobSet::Parse(R"({"jobs":[{"site":"lyon","uid":1,"nodes":["nova-1"],
    "started_at":1,"phases":[{"duration":5,"cpu":2}]}]})",
                                   "f.json");
  ASSERT_FALSE(level.ok());
  EXPECT_NE(level.status().message().find("cpu must be between 0 and 1"), std::string::npos);
  EXPECT_FALSE(jobs::JobSet::Parse("[", "f.json").ok());
}

}  // namespace
}  // namespace kwatt::simulate::node_model_test
