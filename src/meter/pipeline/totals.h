// Totals kept over reports (MeterTotals of meter.h): for the live meter and for replays alike.
// Internal to the meter part.
//
// Thread safety: one thread at a time (the meter holds a mutex around it).
#ifndef KWATT_SRC_METER_PIPELINE_TOTALS_H_
#define KWATT_SRC_METER_PIPELINE_TOTALS_H_

#include <map>
#include <string>

#include "kwatt/meter/pipeline/meter.h"

namespace kwatt::meter {

class TotalsKeeper {
 public:
  // Targets kept one by one; beyond, their shares go to one "(other targets)" entry, so that a
  // daemon following every process for weeks keeps a bounded state.
  static constexpr size_t kMaxTargets = 100'000;

  // Zero totals over `domains`.
  void Reset(const std::vector<Domain>& domains);
  // Totals saved earlier (a state file): their domains must be the same.
  void Restore(const MeterTotals& saved);
  void Add(const IntervalReport& report);
  const MeterTotals& totals() const { return totals_; }

 private:
  MeterTotals totals_;
  std::map<std::string, size_t> index_;  // target key -> totals_.targets
};

}  // namespace kwatt::meter

#endif  // KWATT_SRC_METER_PIPELINE_TOTALS_H_
