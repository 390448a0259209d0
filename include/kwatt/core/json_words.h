// How messages name a JSON value's type to the person who wrote it: "a string", "a list"... for
// the files kwatt reads (jobs files, testbed descriptions, metric descriptions). Header-only and
// generic over the JSON value type, so that the parts reading such files (with nlohmann's json)
// share these words without this header naming a third-party type.
#ifndef KWATT_CORE_JSON_WORDS_H_
#define KWATT_CORE_JSON_WORDS_H_

#include <string>

namespace kwatt::internal {

// A file written in JSON says "an object"; one written in YAML (read as JSON) "a mapping".
enum class FileSyntax { kJson, kYaml };

// `value` is a JSON value with nlohmann's json's predicates (is_null, is_boolean...).
template <typename Json>
std::string JsonTypeName(const Json& value, FileSyntax syntax) {
  if (value.is_null()) return "null";
  if (value.is_boolean()) return "a boolean";
  if (value.is_string()) return "a string";
  if (value.is_array()) return "a list";
  if (value.is_object()) return syntax == FileSyntax::kYaml ? "a mapping" : "an object";
  if (value.is_number_float()) {
    return syntax == FileSyntax::kYaml ? "a number" : "a number with a fraction";
  }
  return "a number";
}

}  // namespace kwatt::internal

#endif  // KWATT_CORE_JSON_WORDS_H_
