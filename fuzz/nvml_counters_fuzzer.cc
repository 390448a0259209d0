// The NVML source's saved counters, as the meter's state file gives them back after a restart
// (doc/meter/sources.md, "GPUs: NVML", saved counters): no crash, no undefined behaviour, and
// counters that parse format back to the same text and parse again to the same counters.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "src/meter/sources/nvml_counters.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto counters = kwatt::meter::internal::ParseNvmlCounters(text);
  if (counters.ok()) {
    std::string back = kwatt::meter::internal::FormatNvmlCounters(*counters);
    auto again = kwatt::meter::internal::ParseNvmlCounters(back);
    KWATT_FUZZ_CHECK(again.ok() && *again == *counters);
  }
  return 0;
}
