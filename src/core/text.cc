#include "kwatt/core/text.h"

namespace kwatt {

std::vector<std::string> SplitCommaList(std::string_view text) {
  std::vector<std::string> items;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t comma = text.find(',', begin);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(begin, comma - begin);
    size_t first = item.find_first_not_of(" \t");
    if (first != std::string_view::npos) {
      item = item.substr(first, item.find_last_not_of(" \t") - first + 1);
      items.emplace_back(item);
    }
    begin = comma + 1;
  }
  return items;
}

}  // namespace kwatt
