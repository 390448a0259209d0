// The meter's saved counters (an output's part of the state file, OutputSeries::Restore): no
// crash; a text refused leaves nothing restored (what is saved next is what a fresh one saves); a
// text taken is saved back to a text that is taken again and saves the same.
#include <cstdint>
#include <string>

#include "fuzz/fuzz_util.h"
#include "src/meter/outputs/output_series.h"

using kwatt::meter::internal::OutputSeries;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  OutputSeries series(10, 60);
  kwatt::Status restored = series.Restore(text);
  std::string saved = series.Save();
  if (!restored.ok()) {
    KWATT_FUZZ_CHECK(restored.code() == kwatt::Status::Code::kCorruption);
    KWATT_FUZZ_CHECK(saved == OutputSeries(10, 60).Save());
    return 0;
  }
  OutputSeries again(10, 60);
  KWATT_FUZZ_CHECK(again.Restore(saved).ok());
  KWATT_FUZZ_CHECK(again.Save() == saved);
  return 0;
}
