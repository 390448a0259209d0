// The Grid'5000 reference data of data/reference/, embedded in the binary at build time.
#ifndef KWATT_SRC_SIMULATE_EMBEDDED_REFERENCE_H_
#define KWATT_SRC_SIMULATE_EMBEDDED_REFERENCE_H_

#include <string_view>
#include <utility>
#include <vector>

namespace kwatt::simulate::internal {

// (path relative to data/reference, content) for every embedded file.
const std::vector<std::pair<std::string_view, std::string_view>>& EmbeddedReferenceFiles();

}  // namespace kwatt::simulate::internal

#endif  // KWATT_SRC_SIMULATE_EMBEDDED_REFERENCE_H_
