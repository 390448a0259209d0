// Energy intervals checked against the simulator's truth (doc/energy.md, "How far to trust it"):
// randomized cases, each a node, a power source, a sampling period, a window and a phase within
// it, sometimes a gap in the rows and a clock offset of the marks. The rows are the simulator's
// own samples of the source (what `kwatt serve --simulate` serves), read every `decimation`-th to
// make slower sampling; the energy is ComputeEnergy's; the truth is the node's exact energy from
// its continuous power model over the marks as the meters' clock has them, times the share of
// the node's power the source's feeds carry. Used by the unit tests and
// bench/energy_interval_bench.cc.
#ifndef KWATT_SRC_TESTING_ENERGY_TRUTH_H_
#define KWATT_SRC_TESTING_ENERGY_TRUTH_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/energy/energy.h"
#include "kwatt/simulate/series.h"

namespace kwatt::testing {

// Deterministic draws from a seed (the same on every machine).
class SeededDraws {
 public:
  explicit SeededDraws(uint64_t seed);
  double Unit();  // [0, 1)
  double Between(double lo, double hi) { return lo + (hi - lo) * Unit(); }
  size_t Index(size_t n);  // [0, n)
  double Normal();         // mean 0, standard deviation 1

 private:
  uint64_t state_;
};

// The samples a fetch of [a, b] (its margin included: energy::EnergyFetchMargin) gets of `series`
// (the simulator's, as SeriesOfDevice gives them), every `decimation`-th, none in [drop_from,
// drop_to), times `scale` (a meter that lies), added to `rows` under `node`. Returns the share of
// the node's power their feeds carry; `period` receives the period read.
double AddSimulatedRows(const std::vector<simulate::OutputSeries>& series, UnixNanos a, UnixNanos b,
                        int decimation, UnixNanos drop_from, UnixNanos drop_to,
                        const std::string& node, energy::PowerCollector* rows, int64_t* period,
                        double scale = 1);

// One figure against the truth.
struct IntervalCheck {
  // The case's regime: "steady" (a window within a monitoring job, one rate), "monitor start" (a
  // window across a monitoring job's start: the wattmeter at 1 s before it, 20 ms in it),
  // "before monitor" (the minute before a monitoring job starts), "1 s window" (a window of one
  // period on the wattmeter read at 1 s, most often across a change of load), "2-PSU short" (a
  // window of one period on a node with two PDU outlets), "outage edge" (the wattmeter out across
  // the window's start while the node's BMC has data), "summary cut" (5-minute summary rows, a
  // window and a phase cutting buckets), "three sources" (a wattmeter read at 1 s, a PDU outlet
  // reading what it reads and the BMC, all honest), "lying source" (the same, the wattmeter 5, 10
  // or 20 % off).
  std::string regime = "steady";
  std::string node;      // FQDN
  std::string metric;    // the source
  double period_s = 0;   // its sampling period as read
  std::string interval;  // "window" or "phase"
  double seconds = 0;
  bool gap = false;          // rows were taken out of a stretch of it
  double clock_shift_s = 0;  // how far the marks' clock was off (the truth's interval moved)
  double joules = 0;         // ComputeEnergy's
  // The simulator's; for a BMC, times its gain (simulate::kBmcGain: its class error taken out).
  double truth_joules = 0;
  double wall_truth_joules = NAN;  // a BMC's: the node's energy at the wall (NaN: truth_joules)
  double half_width = 0;     // without the accuracy term (the simulator's sources have no class)
  double with_accuracy = 0;  // with it (the documented default)
  double lie = 0;            // "lying source": how far the wattmeter reads off (0.05: 5 % high)
  bool flagged = false;      // the source checks call a source of the interval disagreeing

  double error() const { return joules - truth_joules; }
  // The truth within the interval with the accuracy term, against the wall's energy.
  bool covered_with_accuracy() const {
    const double wall = std::isnan(wall_truth_joules) ? truth_joules : wall_truth_joules;
    return std::fabs(joules - wall) <= with_accuracy;
  }
  bool covered() const { return error() <= half_width && -error() <= half_width; }
};

struct IntervalTruthOptions {
  int cases = 300;  // each gives a window's check and a phase's
  uint64_t seed = 1;
  double clock_offset_s = 0.1;  // the stated bound; each case's marks are off by up to it
  // Cases of the BMC against the node's true energy (its stated accuracy then must cover its
  // averaging and its gain, which are its class): not in `cases`.
  int bmc_cases = 0;
  // Cases of each regime but "steady" (IntervalCheck::regime), each a window's check and a
  // phase's: not in `cases`.
  int regime_cases = 0;
};

// The checks of every case, or the first error of building the testbed or computing an energy.
Result<std::vector<IntervalCheck>> CheckIntervalsAgainstTruth(const IntervalTruthOptions& options);

}  // namespace kwatt::testing

#endif  // KWATT_SRC_TESTING_ENERGY_TRUTH_H_
