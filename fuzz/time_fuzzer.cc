// Times as users, Kwollect and archives give them: no crash, no undefined behaviour (UBSan checks
// the arithmetic), and a parsed ISO time formats back to a time that parses to the same instant.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "kwatt/core/time.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const kwatt::UnixNanos now = 1744977600LL * 1'000'000'000;
  kwatt::Result<kwatt::ParsedTime> iso = kwatt::ParseIsoTimestamp(text);
  if (iso.ok()) {
    std::string back = kwatt::FormatUtcTimestamp(iso->utc);
    kwatt::Result<kwatt::ParsedTime> again = kwatt::ParseIsoTimestamp(back);
    KWATT_FUZZ_CHECK(again.ok() && again->utc == iso->utc);
  }
  (void)kwatt::ParseKwollectTimeParameter(text);
  kwatt::Result<kwatt::UnixNanos> user = kwatt::ParseUserTime(text, now);
  if (user.ok()) {
    (void)kwatt::FormatParisTimestamp(*user);
    (void)kwatt::FormatEpochSeconds(*user);
  }
  return 0;
}
