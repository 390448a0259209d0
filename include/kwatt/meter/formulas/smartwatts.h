// The "smartwatts" formula: a self-calibrating linear power model on hardware counters, in the
// manner of PowerAPI's SmartWatts. It runs in the meter (formula.h: `kwatt meter --formula
// smartwatts`, on the meter's RAPL domains and the targets' cycles and instructions) and on
// hwpc-sensor's reports (powerapi/hwpc_smartwatts.h: `kwatt meter smartwatts`), both giving
// kwatt's interval reports (report.h). doc/meter/attribution.md, "smartwatts", says it for users;
// in short:
//
// Per scope (cpu: RAPL_ENERGY_PKG; dram: RAPL_ENERGY_DRAM), socket and frequency layer, a model
//   power = intercept + sum over the `core` events of coefficient x rate
// is learned by non-negative least squares (intercept included, every value >= 0) on the last
// `history_window` ticks of that layer. Rates are events PER SECOND (a tick's count, scaled by
// time_enabled / time_running for multiplexing, divided by the tick's length), so that a model
// learned at one sampling period holds at another; power is the tick's RAPL energy over its
// length. The features are those of target "all" (the whole machine); when "all" has no `core`
// group, the sum of the targets' (SmartWatts' own choice). The frequency layer is the package's
// frequency, base frequency x APERF / MPERF (the `msr` group of "all", summed over its CPUs),
// rounded down to a multiple of `layer_step_mhz`, as SmartWatts picks its layer. (In the meter:
// the features are the targets' cycles and instructions per second, the machine's are theirs
// scaled up to the machine's busy CPU time, and the layer is the base frequency's.) The model is
// relearned when the error |measured - predicted| aggregated over the last `error_window` ticks
// (median by default) passes the threshold, and at every tick while it was learned on fewer
// samples than the history window holds; a layer learns once it has `min_samples` samples; a
// model whose intercept is not below the TDP is discarded (as SmartWatts does).
//
// Each tick gives one IntervalReport: one domain per scope and socket ("rapl", "package-S" or
// "dram-S"), measured = the RAPL energy in exact integer microjoules (the 2^-32 J counts summed
// exactly, each interval's microjoules the difference of the floors of the running totals), idle =
// intercept x the tick's length (clamped to what was measured), and the rest shared by the model:
// a target's weight is the model's dynamic power on its own rates (coefficients x rates, no
// intercept), the whole machine's is the same on "all"'s rates; targets get their weights' shares
// and the machine's activity outside them stays unattributed (Apportion: the shares add up to the
// microjoule). Until a layer has a model, its ticks' energy is unattributed.
//
// Thread safety: pure values and functions.
#ifndef KWATT_METER_FORMULAS_SMARTWATTS_H_
#define KWATT_METER_FORMULAS_SMARTWATTS_H_

#include <cstdint>
#include <string>

#include "kwatt/core/status.h"

namespace kwatt::meter {

// How the error window is summed up (PowerAPI's learn-error-window-method).
enum class ErrorAggregate { kMedian, kMean };

// The formula's options. Where PowerAPI's SmartWatts has the option, its name is given and the
// default is its default. The rapl events, the sensor period, the reorder window and the scaling
// of multiplexed counts concern hwpc-sensor's reports only.
struct SmartWattsOptions {
  bool cpu_formula = true;   // not disable-cpu-formula
  bool dram_formula = true;  // not disable-dram-formula; only where the reports have the event
  std::string cpu_rapl_event = "RAPL_ENERGY_PKG";    // cpu-rapl-ref-event
  std::string dram_rapl_event = "RAPL_ENERGY_DRAM";  // dram-rapl-ref-event
  double cpu_error_threshold_watts = 2.0;            // cpu-error-threshold
  double dram_error_threshold_watts = 2.0;           // dram-error-threshold
  double cpu_tdp_watts = 400;                        // cpu-tdp: an intercept at or above is refused
  int cpu_base_frequency_mhz = 2100;                 // cpu-base-freq: what MPERF counts at
  int layer_step_mhz = 100;                          // cpu-base-clock: the frequency layers' step
  // sensor-reports-frequency: the length of the first tick (later ticks' length is the time since
  // the tick before).
  int64_t sensor_period_ms = 1000;
  int min_samples = 10;     // learn-min-samples-required
  int history_window = 60;  // learn-history-window-size: samples a model is learned on
  int error_window = 60;    // learn-error-window-size
  ErrorAggregate error_aggregate = ErrorAggregate::kMedian;  // learn-error-window-method
  // Ticks held before the oldest is processed, so that a target's report arriving late still
  // counts (SmartWatts holds 5). A report for a tick already processed is dropped and counted.
  int reorder_ticks = 5;
  // Scale counts by time_enabled / time_running (SmartWatts does not).
  bool scale_multiplexing = true;
};

// InvalidArgument naming the option (PowerAPI's name) that is out of range.
Status ValidateSmartWattsOptions(const SmartWattsOptions& options);

}  // namespace kwatt::meter

#endif  // KWATT_METER_FORMULAS_SMARTWATTS_H_
