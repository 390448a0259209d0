#include "kwatt/meter/sources/source.h"

namespace kwatt::meter {

std::string DescribeDomainFlags(uint32_t flags) {
  std::string out;
  auto add = [&](uint32_t bit, const char* word) {
    if (!(flags & bit)) return;
    if (!out.empty()) out += ", ";
    out += word;
  };
  add(kWrapped, "wrapped");
  add(kReset, "reset");
  add(kMaybeMissedWrap, "may have missed a wrap");
  add(kUnreadable, "unreadable");
  return out;
}

}  // namespace kwatt::meter
