// A cluster's metric catalogue as the reference API (or an archive's manifest) gives it: no
// crash, whatever the JSON.
#include <cstdint>
#include <string_view>

#include "kwatt/core/catalogue.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)kwatt::Catalogue::FromJson(text);
  return 0;
}
