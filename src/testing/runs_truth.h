// Runs compared against the simulator's truth (doc/energy.md, "Runs compared"): sets of runs of
// one experiment whose true difference is known, compared as `kwatt energy --run ... --versus
// ...` compares them (ComputeEnergy on each run's wattmeter rows, then CompareRuns).
//
// Each run is 10 minutes of a simulated node's job: 2 idle, 6 of work at a CPU level, 2 idle.
// Set A's levels are drawn around 0.5, set B's around 0.5 + the level that makes `difference`
// (relative to A's mean energy of the work phase); each run's level is off its set's by a normal
// draw whose spread makes the work phase's energy vary by `spread` (relative) from run to run. The
// true difference of the work phase, and of the window, is the one the set means' levels make.
// Used by the unit tests and bench/runs_power_bench.cc.
#ifndef KWATT_SRC_TESTING_RUNS_TRUTH_H_
#define KWATT_SRC_TESTING_RUNS_TRUTH_H_

#include <cstdint>

#include "kwatt/core/status.h"

namespace kwatt::testing {

struct RunsTruthOptions {
  int comparisons = 100;  // pairs of sets compared, each with runs of its own
  int runs = 5;           // in each set
  double difference = 0;  // B's true work-phase energy over A's, minus 1 (0.02: 2 % more)
  double spread = 0.01;   // the run-to-run standard deviation of it, relative
  double confidence = 0.95;
  uint64_t seed = 1;
};

struct RunsTruthResult {
  int comparisons = 0;
  int significant = 0;  // a difference claimed (the work phase's)
  int covered = 0;      // the interval of the difference held the true one
  double true_difference_joules = 0;
  double mean_a_joules = 0;  // A's true mean work-phase energy
};

Result<RunsTruthResult> CompareRunsAgainstTruth(const RunsTruthOptions& options);

}  // namespace kwatt::testing

#endif  // KWATT_SRC_TESTING_RUNS_TRUTH_H_
