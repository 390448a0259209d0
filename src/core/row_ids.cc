#include "kwatt/core/row_ids.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "kwatt/core/text.h"

namespace kwatt {
namespace {

Status CheckId(std::string_view id, bool device) {
  if (id.empty()) return Status::InvalidArgument("is empty");
  if (id.size() > kMaxRowIdBytes) {
    return Status::InvalidArgument("is " + std::to_string(id.size()) + " bytes long, at most " +
                                   std::to_string(kMaxRowIdBytes) + " are kept");
  }
  for (char c : id) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      char code[8];
      std::snprintf(code, sizeof code, "0x%02x", static_cast<unsigned>(c));
      return Status::InvalidArgument(std::string("holds a control character (") + code +
                                     "), which no id may hold");
    }
  }
  // The query's own reading of a list: an id is servable when it reads back as itself.
  std::vector<std::string> items = SplitCommaList(id);
  if (id.find(',') != std::string_view::npos) {
    return Status::InvalidArgument(
        "holds ',', where metrics queries split their lists of ids, so no query could ask for "
        "it: use another character");
  }
  if (items.size() != 1 || items[0] != id) {
    return Status::InvalidArgument(
        "begins or ends with a space, which metrics queries drop, so no query could ask for it: "
        "remove it");
  }
  if (device && id.find('.') != std::string_view::npos) {
    std::string instead(id);
    std::replace(instead.begin(), instead.end(), '.', '-');
    return Status::InvalidArgument(
        "holds '.', where metrics queries cut device ids (nova-1.lyon.grid5000.fr asks for "
        "nova-1), so no query could ask for it: give a node's uid (nova-1) or an id without '.' "
        "(\"" +
        instead + "\")");
  }
  return Status::OK();
}

}  // namespace

Status CheckDeviceId(std::string_view id) { return CheckId(id, /*device=*/true); }

Status CheckMetricId(std::string_view id) { return CheckId(id, /*device=*/false); }

}  // namespace kwatt
