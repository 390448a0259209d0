#include "kwatt/collect/config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "kwatt/core/json_text.h"
#include "kwatt/core/json_words.h"
#include "kwatt/core/row_ids.h"
#include "kwatt/core/yaml_json.h"

namespace kwatt::collect {
namespace {

using nlohmann::json;

constexpr int64_t kMaxPeriodMs = 86'400'000;

// The schemes kwatt has a driver for, and their default ports.
int DefaultPort(std::string_view scheme) {
  if (scheme == "snmp") return 161;
  if (scheme == "ipmisensor") return 623;
  if (scheme == "prometheus") return 9100;
  if (scheme == "json") return 80;
  if (scheme == "wattmetre") return 0;
  return -1;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Result<std::string> PercentDecode(std::string_view text, std::string_view what) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    int high = i + 2 < text.size() ? HexDigit(text[i + 1]) : -1;
    int low = i + 2 < text.size() ? HexDigit(text[i + 2]) : -1;
    if (high < 0 || low < 0) {
      return Status::InvalidArgument(std::string(what) +
                                     " has a '%' that is not followed by two hexadecimal digits");
    }
    out += char(high * 16 + low);
    i += 2;
  }
  return out;
}

std::string TypeName(const json& value) {
  return internal::JsonTypeName(value, internal::FileSyntax::kYaml);
}

// A period field: a whole number of milliseconds in 1..kMaxPeriodMs.
Result<int64_t> PeriodField(const json& value, const std::string& where) {
  if (value.is_number_integer() || value.is_number_unsigned()) {
    int64_t ms = value.is_number_unsigned() && value.get<uint64_t>() > uint64_t(kMaxPeriodMs)
                     ? kMaxPeriodMs + 1
                     : value.get<int64_t>();
    if (ms >= 1 && ms <= kMaxPeriodMs) return ms;
  } else if (value.is_number_float()) {
    double ms = value.get<double>();
    if (ms >= 1 && ms <= kMaxPeriodMs && std::floor(ms) == ms) return int64_t(ms);
  } else {
    return Status::InvalidArgument(where + " should be a number of milliseconds, not " +
                                   TypeName(value));
  }
  return Status::InvalidArgument(where + " should be a whole number of milliseconds from 1 to " +
                                 std::to_string(kMaxPeriodMs) + ", not " + value.dump());
}

Result<std::string> TextField(const json& value, const std::string& where) {
  if (!value.is_string()) {
    return Status::InvalidArgument(where + " should be a string, not " + TypeName(value));
  }
  std::string text = value.get<std::string>();
  if (text.empty()) return Status::InvalidArgument(where + " is empty");
  return text;
}

// An id the rows are written under: one the API can serve (kwatt/core/row_ids.h).
Status ServableId(const std::string& id, Status (*check)(std::string_view),
                  const std::string& where) {
  Status servable = check(id);
  if (servable.ok()) return servable;
  return Status::InvalidArgument(where + " " +
                                 json(id).dump(-1, ' ', false, json::error_handler_t::replace) +
                                 ": " + servable.message());
}

Result<MetricDescription> ParseDescription(const json& entry, const std::string& origin,
                                           const std::filesystem::path& file_dir) {
  if (!entry.is_object()) {
    return Status::InvalidArgument(
        origin + " should be a mapping of name, device_id, url..., not " + TypeName(entry));
  }
  MetricDescription metric;
  metric.origin = origin;
  std::optional<int64_t> optional_period;
  const json* command = nullptr;
  const json* mapping = nullptr;
  for (const auto& [key, value] : entry.items()) {
    std::string where = origin + ": " + key;
    if (key == "name") {
      KWATT_ASSIGN_OR_RETURN(metric.name, TextField(value, where));
      KWATT_RETURN_IF_ERROR(ServableId(metric.name, CheckMetricId, where));
    } else if (key == "device_id") {
      KWATT_ASSIGN_OR_RETURN(metric.device_id, TextField(value, where));
      KWATT_RETURN_IF_ERROR(ServableId(metric.device_id, CheckDeviceId, where));
    } else if (key == "url") {
      KWATT_ASSIGN_OR_RETURN(std::string text, TextField(value, where));
      Result<MetricUrl> url = ParseMetricUrl(text);
      if (!url.ok()) return Status::InvalidArgument(where + ": " + url.status().message());
      metric.url = std::move(url).value();
    } else if (key == "update_every") {
      KWATT_ASSIGN_OR_RETURN(metric.update_every_ms, PeriodField(value, where));
    } else if (key == "optional_period") {
      KWATT_ASSIGN_OR_RETURN(optional_period, PeriodField(value, where));
    } else if (key == "optional") {
      if (!value.is_boolean()) {
        return Status::InvalidArgument(where + " should be true or false, not " + value.dump());
      }
      metric.optional = value.get<bool>();
    } else if (key == "scale_factor") {
      if (value.is_null()) continue;
      if (!value.is_number() || !std::isfinite(value.get<double>())) {
        return Status::InvalidArgument(where + " should be a number, not " + value.dump());
      }
      metric.scale_factor = value.get<double>();
    } else if (key == "labels") {
      if (value.is_null()) continue;
      if (!value.is_object()) {
        return Status::InvalidArgument(
            where + " should be a mapping of label names to values, not " + TypeName(value));
      }
      for (const auto& [label, label_value] : value.items()) {
        if (label.empty()) return Status::InvalidArgument(where + " has an empty label name");
        if (label == "_device_alias") {
          // One node: Kwollect's API reads it as one device id, and the node's row is the sum
          // of its devices' (a list would give each node the whole power, or none).
          if (!label_value.is_string() || label_value.get<std::string>().empty()) {
            return Status::InvalidArgument(
                where + ": _device_alias should be the device id of one node (nova-1), not " +
                (label_value.is_string() ? std::string("empty") : TypeName(label_value)) +
                ": a device measuring several nodes needs one description per node");
          }
          metric.device_alias = label_value.get<std::string>();
        }
        metric.labels.emplace_back(label, label_value.dump());
      }
    } else if (key == "command") {
      command = &value;
    } else if (key == "mapping") {
      mapping = &value;
    } else {
      return Status::InvalidArgument(
          where +
          " is not a field of a metric description (name, device_id, url, update_every, "
          "optional, optional_period, labels, scale_factor; command and mapping for "
          "wattmetre://)");
    }
  }
  for (const char* required : {"name", "device_id", "url"}) {
    if (!entry.contains(required)) {
      return Status::InvalidArgument(origin + " has no " + required +
                                     " (a metric description "
                                     "needs name, device_id and url)");
    }
  }
  bool stream = metric.url.scheme == "wattmetre";
  if ((command || mapping) && !stream) {
    return Status::InvalidArgument(origin + ": " + (command ? "command" : "mapping") +
                                   " is only for wattmetre:// (a wattmeter's line stream)");
  }
  if (command) {
    std::string where = origin + ": command";
    if (!command->is_array() || command->empty()) {
      return Status::InvalidArgument(where +
                                     " should be a non-empty list of the program and its "
                                     "arguments, e.g. [wattmetre-read, --tty=/dev/ttyUSB0]");
    }
    for (const json& argument : *command) {
      if (!argument.is_string() && !argument.is_number()) {
        return Status::InvalidArgument(where + " should hold strings, not " + TypeName(argument));
      }
      metric.command.push_back(argument.is_string() ? argument.get<std::string>()
                                                    : argument.dump());
    }
  }
  if (mapping) {
    KWATT_ASSIGN_OR_RETURN(std::string path, TextField(*mapping, origin + ": mapping"));
    metric.mapping_file = (file_dir / path).lexically_normal().string();
  }
  if (stream && metric.command.empty() && metric.url.path.empty()) {
    return Status::InvalidArgument(origin +
                                   ": url should name the stream (wattmetre://ID/PATH, "
                                   "'-' for the standard input) or the description give a command");
  }
  if (stream && !metric.command.empty() && !metric.url.path.empty()) {
    return Status::InvalidArgument(origin +
                                   ": give the stream's path in url or a command, not both");
  }
  if (optional_period) {
    if (!metric.optional) {
      return Status::InvalidArgument(origin +
                                     ": optional_period is for optional metrics only "
                                     "(add optional: true)");
    }
    metric.optional_period_ms = *optional_period;
  }
  return metric;
}

bool SkippedFile(const std::string& name) {
  auto ends_with = [&](std::string_view suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return name.empty() || name[0] == '.' || ends_with("~") || ends_with(".bak") ||
         name.find(".dpkg-") != std::string::npos || ends_with(".swp");
}

}  // namespace

std::string LabelsText(Labels labels) { return JsonbObjectText(std::move(labels)); }

std::string MetricUrl::Redacted() const {
  std::string out = scheme + "://";
  if (!user.empty() || !password.empty()) {
    // An SNMP community is a password.
    out += scheme == "snmp" ? "***" : user;
    if (!password.empty()) out += ":***";
    out += '@';
  }
  out += host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port != 0) out += ":" + std::to_string(port);
  out += "/" + path;
  if (!query.empty()) out += "?" + query;
  if (!fragment.empty()) out += "#" + fragment;
  return out;
}

std::string MetricUrl::DeviceKey() const {
  std::string key = scheme;
  for (const std::string* part : {&user, &password, &host}) {
    key += '\n';
    key += *part;
  }
  key += '\n' + std::to_string(port);
  // A wattmeter's stream is its own device, whatever its path.
  if (scheme == "wattmetre") key += '\n' + path + '\n' + query;
  return key;
}

Result<MetricUrl> ParseMetricUrl(std::string_view text) {
  MetricUrl url;
  size_t colon = text.find("://");
  if (colon == std::string_view::npos || colon == 0) {
    return Status::InvalidArgument(
        "is not a URL scheme://HOST/PATH (snmp://, ipmisensor://, prometheus://, json://, "
        "wattmetre://)");
  }
  url.scheme = std::string(text.substr(0, colon));
  std::transform(url.scheme.begin(), url.scheme.end(), url.scheme.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (DefaultPort(url.scheme) < 0) {
    return Status::InvalidArgument("has the scheme '" + url.scheme +
                                   "', which kwatt has no driver for (snmp, ipmisensor, "
                                   "prometheus, json, wattmetre)");
  }
  std::string_view rest = text.substr(colon + 3);
  // The authority ends at the first '/', '?' or '#' (wattmetre://ID?version=2 has no path).
  size_t slash = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view()
                          : rest[slash] == '/'            ? rest.substr(slash + 1)
                                                          : rest.substr(slash);
  size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    size_t separator = userinfo.find(':');
    KWATT_ASSIGN_OR_RETURN(url.user, PercentDecode(userinfo.substr(0, separator), "its user"));
    if (separator != std::string_view::npos) {
      KWATT_ASSIGN_OR_RETURN(url.password,
                             PercentDecode(userinfo.substr(separator + 1), "its password"));
    }
  }
  std::string_view port_text;
  if (!authority.empty() && authority[0] == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return Status::InvalidArgument("has an IPv6 address without its closing ']'");
    }
    url.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return Status::InvalidArgument("has text after its IPv6 address");
      port_text = after.substr(1);
    }
  } else {
    size_t port_colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, port_colon));
    if (port_colon != std::string_view::npos) port_text = authority.substr(port_colon + 1);
  }
  if (url.host.empty()) return Status::InvalidArgument("has no host");
  if (!port_text.empty() || authority.ends_with(":")) {
    int port = 0;
    auto [end, error] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (error != std::errc() || end != port_text.data() + port_text.size() || port < 1 ||
        port > 65535) {
      return Status::InvalidArgument("has the port '" + std::string(port_text) +
                                     "', which is not a number from 1 to 65535");
    }
    url.port = port;
  }
  size_t hash = path.find('#');
  if (hash != std::string_view::npos) {
    KWATT_ASSIGN_OR_RETURN(url.fragment, PercentDecode(path.substr(hash + 1), "its fragment"));
    path = path.substr(0, hash);
  }
  size_t question = path.find('?');
  if (question != std::string_view::npos) {
    url.query = std::string(path.substr(question + 1));
    path = path.substr(0, question);
  }
  KWATT_ASSIGN_OR_RETURN(url.path, PercentDecode(path, "its path"));
  return url;
}

int64_t MetricDescription::PeriodMs() const {
  return optional && optional_period_ms > 0 ? optional_period_ms : update_every_ms;
}

Result<std::vector<MetricDescription>> ParseMetricDescriptions(std::string_view text,
                                                               std::string_view file) {
  std::string name(file);
  KWATT_ASSIGN_OR_RETURN(std::string json_text, internal::YamlToJson(text, name));
  json document = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) return Status::Internal(name + ": YamlToJson gave no JSON");
  std::vector<MetricDescription> metrics;
  if (document.is_null()) return metrics;  // an empty file
  std::filesystem::path dir = std::filesystem::path(name).parent_path();
  if (document.is_object()) {
    KWATT_ASSIGN_OR_RETURN(MetricDescription metric, ParseDescription(document, name, dir));
    metrics.push_back(std::move(metric));
    return metrics;
  }
  if (!document.is_array()) {
    return Status::InvalidArgument(name +
                                   " should hold a metric description (a mapping) or a "
                                   "list of them, not " +
                                   TypeName(document));
  }
  for (size_t i = 0; i < document.size(); ++i) {
    KWATT_ASSIGN_OR_RETURN(
        MetricDescription metric,
        ParseDescription(document[i], name + ", entry " + std::to_string(i + 1), dir));
    metrics.push_back(std::move(metric));
  }
  return metrics;
}

Result<CollectConfig> ReadCollectConfig(const std::string& dir) {
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    return Status::NotFound(dir + " is not a directory of metric description files");
  }
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (SkippedFile(entry.path().filename().string())) continue;
    if (entry.is_directory()) continue;
    files.push_back(entry.path());
  }
  if (error) return Status::IOError("cannot list " + dir + ": " + error.message());
  std::sort(files.begin(), files.end());
  CollectConfig config;
  for (const auto& path : files) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) return Status::IOError("cannot read " + path.string());
    KWATT_ASSIGN_OR_RETURN(std::vector<MetricDescription> metrics,
                           ParseMetricDescriptions(text.str(), path.string()));
    config.files.push_back(path.string());
    for (auto& metric : metrics) config.metrics.push_back(std::move(metric));
  }
  if (config.metrics.empty()) {
    return Status::InvalidArgument(dir + " holds no metric description (" +
                                   std::to_string(config.files.size()) +
                                   " files read): see doc/collect.md for their format");
  }
  // Two descriptions writing the same series from different places would interleave.
  std::map<std::string, const MetricDescription*> series;
  for (const MetricDescription& metric : config.metrics) {
    std::string key = metric.device_id + '\n' + metric.name + '\n' + LabelsText(metric.labels);
    auto [it, inserted] = series.emplace(key, &metric);
    if (!inserted && it->second->url == metric.url) {
      // Read twice and summed into its node's row, it would double the node's power.
      return Status::InvalidArgument(
          metric.origin + " reads the same series from the same URL as " + it->second->origin +
          " (device " + metric.device_id + ", metric " + metric.name +
          "): each value would be written twice, and a node's row "
          "would sum it twice; remove one");
    }
    if (!inserted && metric.url.scheme != "prometheus") {
      return Status::InvalidArgument(metric.origin + " writes the same series as " +
                                     it->second->origin + " (device " + metric.device_id +
                                     ", metric " + metric.name +
                                     ") from another URL: give them other labels or remove one");
    }
  }
  return config;
}

}  // namespace kwatt::collect
