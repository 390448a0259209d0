// YAML documents read as JSON: for the description files kwatt reads (a store's testbed; later
// Kwollect's metric description files), which people write in YAML and kwatt checks as JSON.
// Internal to kwatt (yaml-cpp stays out of the public headers).
#ifndef KWATT_SRC_CORE_YAML_JSON_H_
#define KWATT_SRC_CORE_YAML_JSON_H_

#include <string>
#include <string_view>

#include "kwatt/core/status.h"

namespace kwatt::internal {

// The JSON text of the YAML document `yaml` (JSON is YAML too, so a JSON file reads as itself).
// Mappings become objects (keys must be scalars), sequences arrays; a plain scalar becomes null
// (`~`, `null`, empty), a boolean (`true`, `false`), an integer, a number, or else a string; a
// quoted scalar is always a string. InvalidArgument naming `where` and the line and column when
// the text is not YAML, holds several documents, an alias cycle or a key that is not a scalar.
Result<std::string> YamlToJson(std::string_view yaml, const std::string& where);

}  // namespace kwatt::internal

#endif  // KWATT_SRC_CORE_YAML_JSON_H_
