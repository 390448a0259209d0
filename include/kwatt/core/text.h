// Small text helpers shared by the libraries and the CLI. Pure functions; thread-safe.
#ifndef KWATT_CORE_TEXT_H_
#define KWATT_CORE_TEXT_H_

#include <string>
#include <string_view>
#include <vector>

namespace kwatt {

// "a, b,,c" -> {"a", "b", "c"}: items of a comma-separated list, spaces and tabs around each
// removed, empty ones dropped (the form of Kwollect's `nodes` and `metrics` parameters).
std::vector<std::string> SplitCommaList(std::string_view text);

}  // namespace kwatt

#endif  // KWATT_CORE_TEXT_H_
