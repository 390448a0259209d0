// Prometheus's text exposition format (version 0.0.4), written the one way every kwatt exposition
// writes it: the collector's /metrics, the meter's --listen and its node exporter textfile.
// (Reading it is the collector's: kwatt/collect/prometheus_text.h.)
//
// Thread safety: every function is thread-safe (each writes into its caller's string).
#ifndef KWATT_CORE_PROMETHEUS_WRITER_H_
#define KWATT_CORE_PROMETHEUS_WRITER_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kwatt {

// (name, value) pairs, in the order written.
using PrometheusLabels = std::vector<std::pair<std::string, std::string>>;

// "# HELP NAME HELP\n# TYPE NAME TYPE\n", the help's backslashes and newlines escaped.
void AppendPrometheusFamily(std::string* out, std::string_view name, std::string_view type,
                            std::string_view help);

// "NAME{KEY="VALUE",...} VALUE\n": each label value escaped (backslash, quote, newline), a label
// whose value is empty left out (Prometheus reads it as no label), no braces without labels; the
// value the shortest decimal that reads back, or NaN, +Inf, -Inf.
void AppendPrometheusSample(std::string* out, std::string_view name, const PrometheusLabels& labels,
                            double value);

}  // namespace kwatt

#endif  // KWATT_CORE_PROMETHEUS_WRITER_H_
