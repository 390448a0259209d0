// The "cputime" formula: a domain's measured energy over an interval shared among targets by
// their CPU time, in integer microjoules, with exact conservation (doc/meter/README.md):
//
//   measured = idle + unattributed + sum of the targets' shares.
//
// The measured energy is first split into an idle part (the domain's idle power x the interval,
// at most what was measured) and a dynamic part. The dynamic part goes to the targets in
// proportion to their CPU time in the machine's busy CPU time; the busy time no target used (other
// software, the kernel) keeps its share as unattributed. The idle part goes by the idle policy:
//   none          kept apart as idle;
//   proportional  shared as the dynamic part is (so a target's share is its CPU share of it all);
//   equal         split evenly among the targets of the interval (Kepler's choice for idle power).
// With no busy time at all the dynamic part is unattributed; with no target the idle part is idle.
//
// All functions are pure and thread-safe.
#ifndef KWATT_METER_FORMULAS_ATTRIBUTION_H_
#define KWATT_METER_FORMULAS_ATTRIBUTION_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/meter/formulas/report.h"

namespace kwatt::meter {

enum class IdlePolicy { kNone, kProportional, kEqual };

// "none", "proportional", "equal"; InvalidArgument naming the three otherwise.
Result<IdlePolicy> ParseIdlePolicy(std::string_view text);
const char* IdlePolicyName(IdlePolicy policy);

// `total` split in parts proportional to `weights` (each >= 0) that sum to `total` exactly: each
// part is the floor of its exact share, and the units left go one each to the largest remainders
// (ties to the earlier weight). All weights zero: every part is zero but the last, which gets
// `total` (callers put their "nobody" bucket last). REQUIRES: weights not empty, total >= 0.
std::vector<int64_t> Apportion(int64_t total, const std::vector<int64_t>& weights);

// One domain over one interval: `measured` shared among targets whose CPU times in the interval
// are `target_cpu_microseconds`, the machine's busy time being `busy_microseconds` (raised to the
// targets' sum when a read skew puts it below). `idle_microjoules` is clamped to [0, measured].
// The result's target_microjoules follows `target_cpu_microseconds`; flags are left 0.
DomainEnergy Attribute(int64_t measured_microjoules, int64_t idle_microjoules,
                       const std::vector<int64_t>& target_cpu_microseconds,
                       int64_t busy_microseconds, IdlePolicy policy);

// A learned idle power and how well it is known.
struct IdleEstimate {
  double watts = 0;
  // One standard error of `watts` when a line was fitted (the intercept's, from the residuals);
  // else `watts` itself: the lowest power seen is an upper bound, the idle power lies anywhere
  // from 0 to it.
  double uncertainty_watts = 0;
  size_t samples = 0;   // the intervals it was learned on
  bool fitted = false;  // a line was fitted; else the lowest power seen
};

// A domain's idle power, learned from what it measured: over the last `window` intervals, the
// intercept at zero utilisation of a least-squares line of power against the machine's busy
// fraction, kept between 0 and the lowest power seen. The line is used when the busy fractions
// spread over 0.05, or, closer together, when its intercept is known within 2 % of the lowest
// power (a steady load on a machine whose power follows it exactly, as kwatt simulate rapl
// --follow-cpu's); else the lowest power seen, an upper bound (the dynamic power at the lowest
// load is in it: 74 W for a true 60 W at a steady 17 % load), with that uncertainty. None until
// `min_samples` intervals were seen. Given power (MeterOptions) replaces it.
//
// With `block_seconds` > 0, intervals are learned from in blocks of at least that long (their
// time-weighted mean power and busy fraction; `window` counts blocks): a counter that was updated
// a little late (a loaded machine) moves energy from one interval to the next, which makes an
// interval's power lower than the idle power, but seldom out of a block.
class IdlePowerEstimator {
 public:
  explicit IdlePowerEstimator(size_t window = 600, size_t min_samples = 10,
                              double block_seconds = 0)
      : window_(window), min_samples_(min_samples), block_seconds_(block_seconds) {}
  // An interval: its mean power, the machine's busy fraction (busy / capacity, 0..1) and its
  // length (needed with blocks only).
  void Add(double watts, double busy_fraction, double seconds = 0);
  std::optional<IdleEstimate> Estimate() const;
  std::optional<double> IdleWatts() const {
    std::optional<IdleEstimate> estimate = Estimate();
    return estimate ? std::optional<double>(estimate->watts) : std::nullopt;
  }

 private:
  void Learn(double busy_fraction, double watts);

  size_t window_, min_samples_;
  double block_seconds_;
  size_t intervals_ = 0;                                                 // intervals seen
  double block_joules_ = 0, block_busy_seconds_ = 0, block_length_ = 0;  // the block begun
  std::deque<std::pair<double, double>> points_;                         // (busy fraction, watts)
};

}  // namespace kwatt::meter

#endif  // KWATT_METER_FORMULAS_ATTRIBUTION_H_
