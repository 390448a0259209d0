// YAML documents read as JSON: for the description files kwatt reads (a store's testbed, the
// collector's configuration and metric descriptions, ~/.python-grid5000.yaml), which people write
// in YAML and kwatt checks as JSON. libyaml does the reading, inside core; this header names none
// of its types.
#ifndef KWATT_CORE_YAML_JSON_H_
#define KWATT_CORE_YAML_JSON_H_

#include <string>
#include <string_view>

#include "kwatt/core/status.h"

namespace kwatt::internal {

// The JSON text of the YAML document `yaml` (JSON is YAML too, so a JSON file reads as itself),
// read by libyaml. Mappings become objects (keys must be scalars, each once), sequences arrays,
// aliases copies of their anchor's value; a plain scalar becomes null (`~`, `null`, empty), a
// boolean (`true`, `false`), an integer, a number, or else a string; a quoted, block or tagged
// scalar is always a string. InvalidArgument naming `where`, the line and the column when the
// text is not YAML, holds several documents, a key that is not a scalar or that is given twice,
// an alias to no anchor, more than 64 levels or more than 1,000,000 values (aliases of aliases).
//
// With kText, a plain scalar other than null is the string of its text as written instead ("0123",
// "1.50" and "yes" kept as they are), for a reader that decides each value's type itself.
enum class YamlScalars { kTyped, kText };
Result<std::string> YamlToJson(std::string_view yaml, const std::string& where,
                               YamlScalars scalars = YamlScalars::kTyped);

}  // namespace kwatt::internal

#endif  // KWATT_CORE_YAML_JSON_H_
