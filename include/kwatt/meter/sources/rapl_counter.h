// The arithmetic of a RAPL energy counter as the kernel's intel_rapl driver does it: a unit in
// exact microjoules, the max_energy_range_uj it reports, and counts turned into microjoules. The
// RAPL sources undo it (src/meter/sources/rapl_internal.h); the simulated RAPL tree
// (kwatt/simulate/simulated_rapl.h) does it. Pure functions.
#ifndef KWATT_METER_SOURCES_RAPL_COUNTER_H_
#define KWATT_METER_SOURCES_RAPL_COUNTER_H_

#include <cstdint>

namespace kwatt::meter::rapl_internal {

// A non-negative rational number of microjoules: numerator / denominator.
struct Microjoules {
  uint64_t numerator = 1;
  uint64_t denominator = 1;
};

// max_energy_range_uj of a layout: floor((range - 1) * reported_unit).
uint64_t MaxEnergyRange(uint64_t range, Microjoules reported_unit);

// floor(count * unit) in microjoules, exact (128-bit), saturating at INT64_MAX.
int64_t CountToMicrojoules(uint64_t count, Microjoules unit);

}  // namespace kwatt::meter::rapl_internal

#endif  // KWATT_METER_SOURCES_RAPL_COUNTER_H_
