// Carbon-intensity files (kwatt report --carbon-intensity FILE: RTE's eCO2mix export or CSV): no
// crash, no undefined behaviour; what parses has at least one value, its times strictly
// ascending, each value within 0..2000 g/kWh, and reads back at its own time.
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "kwatt/energy/carbon.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  kwatt::Result<kwatt::energy::CarbonIntensity> c =
      kwatt::energy::ParseCarbonIntensity(text, "fuzz");
  if (!c.ok()) return 0;
  KWATT_FUZZ_CHECK(!c->times.empty() && c->times.size() == c->grams_per_kwh.size());
  for (size_t i = 0; i < c->times.size(); ++i) {
    KWATT_FUZZ_CHECK(i == 0 || c->times[i] > c->times[i - 1]);
    KWATT_FUZZ_CHECK(c->grams_per_kwh[i] >= 0 && c->grams_per_kwh[i] <= 2000);
    KWATT_FUZZ_CHECK(c->At(c->times[i]) == c->grams_per_kwh[i]);
  }
  return 0;
}
