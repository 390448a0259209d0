// Prometheus's text exposition format (include/kwatt/core/prometheus_writer.h).
#include "kwatt/core/prometheus_writer.h"

#include <cmath>

#include "kwatt/core/json_text.h"
#include "kwatt/core/text.h"

namespace kwatt {

void AppendPrometheusFamily(std::string* out, std::string_view name, std::string_view type,
                            std::string_view help) {
  out->append("# HELP ").append(name).push_back(' ');
  for (char c : help) {
    if (c == '\n') {
      out->append("\\n");
      continue;
    }
    if (c == '\\') out->push_back('\\');
    out->push_back(c);
  }
  out->append("\n# TYPE ").append(name).push_back(' ');
  out->append(type).push_back('\n');
}

void AppendPrometheusSample(std::string* out, std::string_view name, const PrometheusLabels& labels,
                            double value) {
  out->append(name);
  bool first = true;
  for (const auto& [key, label] : labels) {
    if (label.empty()) continue;
    out->push_back(first ? '{' : ',');
    first = false;
    out->append(key).append("=\"");
    AppendPrometheusLabelValue(out, label);
    out->push_back('"');
  }
  if (!first) out->push_back('}');
  out->push_back(' ');
  if (std::isnan(value)) {
    out->append("NaN");
  } else if (std::isinf(value)) {
    out->append(value > 0 ? "+Inf" : "-Inf");
  } else {
    AppendJsonNumber(out, value);
  }
  out->push_back('\n');
}

}  // namespace kwatt
