// The smartwatts formula (formulas/smartwatts.h) on hwpc-sensor's reports (hwpc.h), as PowerAPI's
// SmartWatts runs: reports of one tick gathered (in any order within the reorder window), the
// machine's RAPL energy and target "all"'s counters learned from, each tick given as one
// IntervalReport to a sink (`kwatt meter smartwatts`).
//
// Thread safety: an HwpcSmartWatts is used by one thread at a time.
#ifndef KWATT_METER_POWERAPI_HWPC_SMARTWATTS_H_
#define KWATT_METER_POWERAPI_HWPC_SMARTWATTS_H_

#include <cstdint>
#include <memory>

#include "kwatt/core/status.h"
#include "kwatt/meter/formulas/report.h"
#include "kwatt/meter/formulas/smartwatts.h"
#include "kwatt/meter/powerapi/hwpc.h"

namespace kwatt::meter {

// What the formula did, for the end-of-run summary.
struct SmartWattsStats {
  int64_t reports = 0;            // HWPC reports received
  int64_t ticks = 0;              // ticks processed (interval reports written)
  int64_t late_reports = 0;       // dropped: their tick was already processed
  int64_t duplicate_reports = 0;  // a second report for the same (tick, target): the later kept
  int64_t ticks_without_all = 0;  // ticks without target "all": their domains are gaps
  int64_t ticks_without_frequency = 0;  // no APERF/MPERF: the base frequency's layer was used
  int64_t models_learned = 0;
};

class HwpcSmartWatts {
 public:
  // `sink` (not owned, outliving this) gets Begin at the first tick processed (its domains are
  // the scopes and sockets of that tick's "all" report), Write for every tick, Finish from
  // Finish(). InvalidArgument when the options are not valid.
  static Result<std::unique_ptr<HwpcSmartWatts>> Create(const SmartWattsOptions& options,
                                                        ReportSink* sink);
  ~HwpcSmartWatts();

  // One HWPC report, in any order within the reorder window. Errors: the sink's Begin failing, or
  // a tick that cannot be matched to the first one's domains (Corruption naming it). A sink's
  // Write error is the sink's to count and say (ReportFanOut: at its Finish), not returned.
  [[nodiscard]] Status Add(HwpcReport report);

  // Processes every tick held, then finishes the sink (Begin first when nothing came at all).
  // Returns the sink's Finish status.
  [[nodiscard]] Status Finish();

  const SmartWattsStats& stats() const { return stats_; }

 private:
  HwpcSmartWatts() = default;
  class Impl;
  std::unique_ptr<Impl> impl_;
  SmartWattsStats stats_;
};

}  // namespace kwatt::meter

#endif  // KWATT_METER_POWERAPI_HWPC_SMARTWATTS_H_
