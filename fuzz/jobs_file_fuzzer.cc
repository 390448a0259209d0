// The simulator's jobs file (doc/jobs_file.md): no crash, whatever the JSON.
#include <cstdint>
#include <string_view>

#include "kwatt/jobs/jobs_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)kwatt::jobs::JobSet::Parse(text, "fuzz");
  return 0;
}
