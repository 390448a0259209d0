#include "src/core/yaml_json.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

namespace kwatt::internal {
namespace {

using Json = nlohmann::ordered_json;

// Deeper than any description file; an alias may not make a document infinite.
constexpr int kMaxDepth = 64;

Json Scalar(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted: a string whatever it holds
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
    return nullptr;
  }
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  const char* end = text.data() + text.size();
  int64_t integer = 0;
  auto [int_end, int_error] = std::from_chars(text.data(), end, integer);
  if (int_error == std::errc() && int_end == end) return integer;
  double number = 0;
  auto [num_end, num_error] = std::from_chars(text.data(), end, number);
  if (num_error == std::errc() && num_end == end && std::isfinite(number)) return number;
  return text;
}

Status Convert(const YAML::Node& node, const std::string& where, int depth, Json* out) {
  auto at = [&](const YAML::Node& n) {
    YAML::Mark mark = n.Mark();
    return where + (mark.is_null() ? std::string()
                                   : ":" + std::to_string(mark.line + 1) + ":" +
                                         std::to_string(mark.column + 1));
  };
  if (depth > kMaxDepth) {
    return Status::InvalidArgument(at(node) + ": nested more than " + std::to_string(kMaxDepth) +
                                   " levels deep (an alias that contains itself?)");
  }
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      *out = nullptr;
      return Status::OK();
    case YAML::NodeType::Scalar:
      *out = Scalar(node);
      return Status::OK();
    case YAML::NodeType::Sequence: {
      *out = Json::array();
      for (const YAML::Node& item : node) {
        Json converted;
        KWATT_RETURN_IF_ERROR(Convert(item, where, depth + 1, &converted));
        out->push_back(std::move(converted));
      }
      return Status::OK();
    }
    case YAML::NodeType::Map: {
      *out = Json::object();
      for (const auto& pair : node) {
        if (!pair.first.IsScalar()) {
          return Status::InvalidArgument(at(pair.first) + ": a key should be a plain name");
        }
        const std::string& key = pair.first.Scalar();
        if (out->contains(key)) {
          return Status::InvalidArgument(at(pair.first) + ": \"" + key + "\" is given twice");
        }
        Json converted;
        KWATT_RETURN_IF_ERROR(Convert(pair.second, where, depth + 1, &converted));
        (*out)[key] = std::move(converted);
      }
      return Status::OK();
    }
  }
  return Status::Internal(at(node) + ": a YAML node of no known kind");
}

}  // namespace

Result<std::string> YamlToJson(std::string_view yaml, const std::string& where) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(std::string(yaml));
  } catch (const YAML::Exception& e) {
    std::string place = e.mark.is_null() ? where
                                         : where + ":" + std::to_string(e.mark.line + 1) + ":" +
                                               std::to_string(e.mark.column + 1);
    return Status::InvalidArgument(place + ": not YAML (" + e.msg + ")");
  }
  if (documents.size() > 1) {
    return Status::InvalidArgument(where + ": holds " + std::to_string(documents.size()) +
                                   " YAML documents (---); give one");
  }
  Json out;
  if (!documents.empty()) {
    try {
      KWATT_RETURN_IF_ERROR(Convert(documents[0], where, 0, &out));
    } catch (const YAML::Exception& e) {
      return Status::InvalidArgument(where + ": not YAML (" + e.msg + ")");
    }
  }
  return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace kwatt::internal
