// The NVML source's saved counters (doc/meter/sources.md, "GPUs: NVML", saved counters): one line,
//   nvml 1 UUID=MILLIJOULES UUID=MILLIJOULES ...
// in the source's domain order. Internal: the source and its fuzzer use it.
#ifndef KWATT_SRC_METER_SOURCES_NVML_COUNTERS_H_
#define KWATT_SRC_METER_SOURCES_NVML_COUNTERS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kwatt/core/status.h"

namespace kwatt::meter::internal {

// A GPU's UUID and its raw counter (millijoules).
using NvmlCounter = std::pair<std::string, uint64_t>;

std::string FormatNvmlCounters(const std::vector<NvmlCounter>& counters);

// InvalidArgument naming what is wrong: another format or version, a field without '=', a UUID
// that is empty or has a space or '=', a counter that is not a decimal integer below 2^64, a UUID
// given twice.
Result<std::vector<NvmlCounter>> ParseNvmlCounters(std::string_view text);

}  // namespace kwatt::meter::internal

#endif  // KWATT_SRC_METER_SOURCES_NVML_COUNTERS_H_
