#include "kwatt/collect/device.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <tuple>

#include "kwatt/core/json_text.h"
#include "kwatt/core/null_value.h"
#include "src/collect/drivers.h"

namespace kwatt::collect {
namespace {

// A value's text as Python's float() reads it (what Kwollect does): blanks around, a sign,
// decimal or exponent notation, "nan", "inf", "infinity" in any case.
bool ParseNumber(std::string_view text, double* value) {
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  bool negative = false;
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
    if (!text.empty() && (text[0] == '+' || text[0] == '-')) return false;
  }
  if (text.empty()) return false;
  auto [end, error] =
      std::from_chars(text.data(), text.data() + text.size(), *value, std::chars_format::general);
  if (end != text.data() + text.size()) return false;
  if (error == std::errc::result_out_of_range) {
    // from_chars leaves the value unset: Python gives an infinity or zero.
    bool tiny = text.find_first_of("eE") != std::string_view::npos &&
                text[text.find_first_of("eE") + 1] == '-';
    *value = tiny ? 0.0 : HUGE_VAL;
  } else if (error != std::errc()) {
    return false;
  }
  if (negative) *value = -*value;
  return true;
}

}  // namespace

Reading ReadingOf(const MetricDescription& metric, UnixNanos time, double value) {
  Reading reading;
  reading.time = time;
  reading.device_id = metric.device_id;
  reading.metric_id = metric.name;
  reading.value = metric.scale_factor ? value * *metric.scale_factor : value;
  reading.labels = metric.labels;
  return reading;
}

Reading ReadingOf(const MetricDescription& metric, UnixNanos time, std::string_view text) {
  double value = 0;
  if (ParseNumber(text, &value)) return ReadingOf(metric, time, value);
  Reading reading = ReadingOf(metric, time, std::nan(""));
  std::string quoted;
  AppendJsonString(&quoted, text);
  reading.labels.emplace_back("value_str", std::move(quoted));
  return reading;
}

void AliasReadings(std::vector<Reading>* readings) {
  // (alias, metric, time, other labels' text) -> the node's row under construction.
  struct Node {
    // SQL's sum(value): nulls left out (null when every value is), a NaN taken in (NaN).
    double sum = NullValue();
    std::vector<std::string> originals;
    Labels labels;
  };
  std::map<std::tuple<std::string, std::string, UnixNanos, std::string>, Node> nodes;
  for (Reading& reading : *readings) {
    auto alias = std::find_if(reading.labels.begin(), reading.labels.end(),
                              [](const auto& label) { return label.first == "_device_alias"; });
    if (alias == reading.labels.end()) continue;
    std::string alias_json = alias->second;
    reading.labels.erase(std::remove_if(reading.labels.begin(), reading.labels.end(),
                                        [](const auto& l) { return l.first == "_device_alias"; }),
                         reading.labels.end());
    // An alias that is not a string (a list, a number) names no node: the row is kept as is.
    if (alias_json.size() < 2 || alias_json.front() != '"') continue;
    std::string node_id = alias_json.substr(1, alias_json.size() - 2);
    if (node_id.find('\\') != std::string::npos || node_id.empty()) continue;
    Node& node = nodes[{node_id, reading.metric_id, reading.time, LabelsText(reading.labels)}];
    if (node.originals.empty()) node.labels = reading.labels;
    if (!IsNullValue(reading.value)) {
      node.sum = IsNullValue(node.sum) ? reading.value : node.sum + reading.value;
    }
    node.originals.push_back(reading.device_id);
  }
  for (auto& [key, node] : nodes) {
    std::sort(node.originals.begin(), node.originals.end());
    std::string list = "[";
    for (const std::string& original : node.originals) {
      if (list.size() > 1) list += ',';
      AppendJsonString(&list, original);
    }
    list += ']';
    Reading row;
    row.device_id = std::get<0>(key);
    row.metric_id = std::get<1>(key);
    row.time = std::get<2>(key);
    row.value = node.sum;
    row.labels = std::move(node.labels);
    row.labels.emplace_back("_device_orig", std::move(list));
    readings->push_back(std::move(row));
  }
}

bool IsStreamScheme(std::string_view scheme) { return scheme == "wattmetre"; }

Result<std::unique_ptr<Device>> MakeDevice(const std::vector<MetricDescription>& metrics,
                                           const DriverEnvironment& environment) {
  if (metrics.empty()) return Status::InvalidArgument("MakeDevice: no metric");
  const std::string& scheme = metrics[0].url.scheme;
  for (const MetricDescription& metric : metrics) {
    if (metric.url.DeviceKey() != metrics[0].url.DeviceKey()) {
      return Status::InvalidArgument("MakeDevice: " + metric.origin + " is another device than " +
                                     metrics[0].origin);
    }
  }
  if (scheme == "prometheus") return MakePrometheusDevice(metrics, environment);
  if (scheme == "json") return MakeJsonDevice(metrics, environment);
  if (scheme == "snmp") return MakeSnmpDevice(metrics, environment);
  if (scheme == "ipmisensor") return MakeIpmiDevice(metrics, environment);
  return Status::InvalidArgument(metrics[0].origin + ": " + scheme + ":// is not polled");
}

Result<std::unique_ptr<StreamSource>> MakeStreamSource(
    const std::vector<MetricDescription>& metrics, const DriverEnvironment& environment) {
  if (metrics.empty()) return Status::InvalidArgument("MakeStreamSource: no metric");
  if (metrics[0].url.scheme == "wattmetre") return MakeWattmetreSource(metrics, environment);
  return Status::InvalidArgument(metrics[0].origin + ": " + metrics[0].url.scheme +
                                 ":// is polled, not a stream");
}

}  // namespace kwatt::collect
