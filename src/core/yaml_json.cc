#include "kwatt/core/yaml_json.h"

#include <yaml.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <vector>

// libyaml (the reference YAML parser, Debian's libyaml-dev), read event by event. Not yaml-cpp:
// its 0.7 (Debian bookworm's) never returns on some 20-byte inputs (found by the
// testbed_description fuzzer).
namespace kwatt::internal {
namespace {

using Json = nlohmann::ordered_json;

// Deeper than any description file; an alias may not make a document huge ("billion laughs").
constexpr size_t kMaxDepth = 64;
constexpr int64_t kMaxNodes = 1'000'000;

Json PlainScalar(const std::string& text) {
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

// A mapping or sequence being read.
struct Frame {
  Json value;
  std::string anchor;        // "" when it has none
  int64_t nodes = 1;         // in it, itself included (what an alias to it costs)
  bool awaiting_key = true;  // mappings: the next scalar is a key
  std::string key;
};

class Converter {
 public:
  Converter(std::string where, YamlScalars scalars) : where_(std::move(where)), scalars_(scalars) {}

  Status At(const yaml_mark_t& mark, const std::string& what) const {
    return Status::InvalidArgument(where_ + ":" + std::to_string(mark.line + 1) + ":" +
                                   std::to_string(mark.column + 1) + ": " + what);
  }

  Status Event(const yaml_event_t& e) {
    switch (e.type) {
      case YAML_DOCUMENT_START_EVENT:
        if (++documents_ > 1) {
          return Status::InvalidArgument(where_ +
                                         ": holds more than one YAML document (---); "
                                         "give one");
        }
        return Status::OK();
      case YAML_MAPPING_START_EVENT:
      case YAML_SEQUENCE_START_EVENT: {
        if (!frames_.empty() && frames_.back().value.is_object() && frames_.back().awaiting_key) {
          return At(e.start_mark, "a key should be a plain name");
        }
        if (frames_.size() >= kMaxDepth) {
          return At(e.start_mark, "nested more than " + std::to_string(kMaxDepth) + " levels deep");
        }
        Frame frame;
        frame.value = e.type == YAML_MAPPING_START_EVENT ? Json::object() : Json::array();
        const yaml_char_t* anchor = e.type == YAML_MAPPING_START_EVENT
                                        ? e.data.mapping_start.anchor
                                        : e.data.sequence_start.anchor;
        if (anchor) frame.anchor = reinterpret_cast<const char*>(anchor);
        frames_.push_back(std::move(frame));
        return Count(e.start_mark, 1);
      }
      case YAML_MAPPING_END_EVENT:
      case YAML_SEQUENCE_END_EVENT: {
        Frame done = std::move(frames_.back());
        frames_.pop_back();
        if (!done.anchor.empty()) anchors_[done.anchor] = {done.value, done.nodes};
        return Add(std::move(done.value), done.nodes);
      }
      case YAML_SCALAR_EVENT: {
        std::string text(reinterpret_cast<const char*>(e.data.scalar.value), e.data.scalar.length);
        if (!frames_.empty() && frames_.back().value.is_object() && frames_.back().awaiting_key) {
          if (frames_.back().value.contains(text)) {
            return At(e.start_mark, "\"" + text + "\" is given twice");
          }
          frames_.back().key = std::move(text);
          frames_.back().awaiting_key = false;
          return Count(e.start_mark, 1);
        }
        // Quoted, block or tagged scalars are strings; plain ones take their kind.
        bool plain = e.data.scalar.style == YAML_PLAIN_SCALAR_STYLE && e.data.scalar.tag == nullptr;
        Json value = !plain                            ? Json(text)
                     : scalars_ == YamlScalars::kTyped ? PlainScalar(text)
                     : PlainScalar(text).is_null()     ? Json(nullptr)
                                                       : Json(text);
        if (e.data.scalar.anchor) {
          anchors_[reinterpret_cast<const char*>(e.data.scalar.anchor)] = {value, 1};
        }
        KWATT_RETURN_IF_ERROR(Count(e.start_mark, 1));
        return Add(std::move(value), 1);
      }
      case YAML_ALIAS_EVENT: {
        std::string name = reinterpret_cast<const char*>(e.data.alias.anchor);
        auto it = anchors_.find(name);
        if (it == anchors_.end()) return At(e.start_mark, "*" + name + " names no anchor");
        if (!frames_.empty() && frames_.back().value.is_object() && frames_.back().awaiting_key) {
          return At(e.start_mark, "a key should be a plain name");
        }
        KWATT_RETURN_IF_ERROR(Count(e.start_mark, it->second.second));
        return Add(it->second.first, it->second.second);
      }
      default:
        return Status::OK();
    }
  }

  Json TakeRoot() { return std::move(root_); }

 private:
  // Counts nodes made, aliases' copies included, against kMaxNodes.
  Status Count(const yaml_mark_t& mark, int64_t nodes) {
    made_ += nodes;
    if (made_ > kMaxNodes) {
      return At(mark, "more than " + std::to_string(kMaxNodes) +
                          " values (aliases that expand too much?)");
    }
    return Status::OK();
  }

  Status Add(Json value, int64_t nodes) {
    if (frames_.empty()) {
      root_ = std::move(value);
      return Status::OK();
    }
    Frame& top = frames_.back();
    top.nodes += nodes;
    if (top.value.is_array()) {
      top.value.push_back(std::move(value));
    } else {
      top.value[top.key] = std::move(value);
      top.awaiting_key = true;
    }
    return Status::OK();
  }

  std::string where_;
  YamlScalars scalars_;
  std::vector<Frame> frames_;
  std::unordered_map<std::string, std::pair<Json, int64_t>> anchors_;
  Json root_;
  int documents_ = 0;
  int64_t made_ = 0;
};

}  // namespace

Result<std::string> YamlToJson(std::string_view yaml, const std::string& where,
                               YamlScalars scalars) {
  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) return Status::Internal("cannot start the YAML parser");
  std::unique_ptr<yaml_parser_t, void (*)(yaml_parser_t*)> closing(&parser, yaml_parser_delete);
  yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(yaml.data()),
                               yaml.size());
  Converter converter(where, scalars);
  while (true) {
    yaml_event_t event;
    if (!yaml_parser_parse(&parser, &event)) {
      std::string problem = parser.problem ? parser.problem : "a YAML error";
      if (parser.context) problem = std::string(parser.context) + ": " + problem;
      return Status::InvalidArgument(where + ":" + std::to_string(parser.problem_mark.line + 1) +
                                     ":" + std::to_string(parser.problem_mark.column + 1) +
                                     ": not YAML (" + problem + ")");
    }
    std::unique_ptr<yaml_event_t, void (*)(yaml_event_t*)> deleting(&event, yaml_event_delete);
    bool end = event.type == YAML_STREAM_END_EVENT;
    KWATT_RETURN_IF_ERROR(converter.Event(event));
    if (end) break;
  }
  return converter.TakeRoot().dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace kwatt::internal
