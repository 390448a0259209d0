#include "src/testing/runs_truth.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kwatt/energy/runs.h"
#include "kwatt/jobs/jobs_file.h"
#include "kwatt/simulate/node_model.h"
#include "kwatt/simulate/testbed.h"
#include "src/testing/energy_truth.h"

namespace kwatt::testing {
namespace {

constexpr UnixNanos kStart = 1744977600 * kNanosPerSecond;  // 2025-04-18T12:00:00Z
constexpr int kRunSeconds = 600, kIdleSeconds = 120, kWorkSeconds = 360;
constexpr double kBaseLevel = 0.5;

}  // namespace

Result<RunsTruthResult> CompareRunsAgainstTruth(const RunsTruthOptions& options) {
  KWATT_RETURN_IF_ERROR(energy::CheckConfidence(options.confidence));
  if (options.comparisons < 1 || options.runs < 2) {
    return Status::InvalidArgument("at least one comparison of two runs a set");
  }
  const simulate::NodeHardware nova = simulate::HardwareOfCluster("nova");
  // The work phase's energy is idle x 360 s + level x the CPU's watts x 359.5 s (the load ramps
  // up over its first second); levels are drawn to make the difference and spread asked.
  const double cpu_joules_per_level = nova.cpu_watts * (kWorkSeconds - 0.5);
  RunsTruthResult result;
  result.mean_a_joules = nova.idle_watts * kWorkSeconds + kBaseLevel * cpu_joules_per_level;
  const double level_b =
      kBaseLevel + options.difference * result.mean_a_joules / cpu_joules_per_level;
  const double level_spread = options.spread * result.mean_a_joules / cpu_joules_per_level;
  result.true_difference_joules = (level_b - kBaseLevel) * cpu_joules_per_level;

  // Every run of every comparison, one after the other on nova-1: A's runs, then B's.
  SeededDraws draws(options.seed);
  const int runs = options.comparisons * 2 * options.runs;
  std::string phases;
  for (int i = 0; i < runs; ++i) {
    const bool b = (i / options.runs) % 2 == 1;
    const double level =
        std::clamp((b ? level_b : kBaseLevel) + level_spread * draws.Normal(), 0.0, 1.0);
    phases += std::string(phases.empty() ? "" : ",") +
              "{\"duration\":" + std::to_string(kIdleSeconds) +
              ",\"cpu\":0},{\"name\":\"work\",\"duration\":" + std::to_string(kWorkSeconds) +
              ",\"cpu\":" + std::to_string(level) +
              "},{\"duration\":" + std::to_string(kRunSeconds - kIdleSeconds - kWorkSeconds) +
              ",\"cpu\":0}";
  }
  const std::string jobs =
      "{\"jobs\":[{\"site\":\"lyon\",\"uid\":1,\"nodes\":[\"nova-1\"],"
      "\"started_at\":" +
      std::to_string(kStart / kNanosPerSecond) +
      ",\"stopped_at\":" + std::to_string(kStart / kNanosPerSecond + int64_t(runs) * kRunSeconds) +
      ",\"phases\":[" + phases + "]}]}";
  KWATT_ASSIGN_OR_RETURN(jobs::JobSet job_set, jobs::JobSet::Parse(jobs, "runs"));
  KWATT_ASSIGN_OR_RETURN(std::unique_ptr<simulate::Testbed> testbed,
                         simulate::Testbed::Build({}, std::move(job_set)));
  const simulate::Site* site = testbed->FindSite("lyon");
  const simulate::Node* node = testbed->FindNode(*site, "nova-1");
  const std::vector<simulate::OutputSeries> series = simulate::SeriesOfDevice(
      *testbed, *site, {simulate::DeviceRef::Kind::kNode, node, nullptr}, {"wattmetre_power_watt"});
  const std::string fqdn = "nova-1.lyon.grid5000.fr";

  // Each run's figures, as kwatt energy --run gives them.
  auto figures_of = [&](int i) -> Result<std::vector<energy::RunFigure>> {
    const UnixNanos a = kStart + int64_t(i) * kRunSeconds * kNanosPerSecond,
                    b = a + kRunSeconds * kNanosPerSecond;
    energy::PowerCollector rows({fqdn});
    int64_t period = 0;
    AddSimulatedRows(series, a, b, 1, 0, 0, fqdn, &rows, &period);
    energy::EnergyOptions energy_options;
    energy_options.phases = {{"work", a + kIdleSeconds * kNanosPerSecond,
                              a + (kIdleSeconds + kWorkSeconds) * kNanosPerSecond}};
    KWATT_ASSIGN_OR_RETURN(energy::EnergyReport report,
                           energy::ComputeEnergy(rows, a, b, energy_options));
    return energy::RunFiguresOf(report);
  };
  for (int c = 0; c < options.comparisons; ++c) {
    std::vector<std::vector<energy::RunFigure>> set_a, set_b;
    for (int r = 0; r < 2 * options.runs; ++r) {
      KWATT_ASSIGN_OR_RETURN(std::vector<energy::RunFigure> figures,
                             figures_of(c * 2 * options.runs + r));
      (r < options.runs ? set_a : set_b).push_back(std::move(figures));
    }
    for (const energy::RunsComparison& k : energy::CompareRuns(set_a, set_b, options.confidence)) {
      if (k.scope != "total" || k.phase != "work") continue;
      ++result.comparisons;
      result.significant += k.significant;
      result.covered +=
          k.low <= result.true_difference_joules && result.true_difference_joules <= k.high;
    }
  }
  return result;
}

}  // namespace kwatt::testing
