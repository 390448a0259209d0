// How messages name a JSON value's type to the person who wrote it: "a string", "a list"... for
// the files kwatt reads (jobs files, testbed descriptions, metric descriptions). Internal;
// header-only over nlohmann's json (a dependency of the parts that read such files).
#ifndef KWATT_SRC_CORE_JSON_WORDS_H_
#define KWATT_SRC_CORE_JSON_WORDS_H_

#include <nlohmann/json.hpp>
#include <string>

namespace kwatt::internal {

// A file written in JSON says "an object"; one written in YAML (read as JSON) "a mapping".
enum class FileSyntax { kJson, kYaml };

inline std::string JsonTypeName(const nlohmann::json& value, FileSyntax syntax) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::boolean:
      return "a boolean";
    case nlohmann::json::value_t::string:
      return "a string";
    case nlohmann::json::value_t::array:
      return "a list";
    case nlohmann::json::value_t::object:
      return syntax == FileSyntax::kYaml ? "a mapping" : "an object";
    case nlohmann::json::value_t::number_float:
      return syntax == FileSyntax::kYaml ? "a number" : "a number with a fraction";
    default:
      return "a number";
  }
}

}  // namespace kwatt::internal

#endif  // KWATT_SRC_CORE_JSON_WORDS_H_
