// The Prometheus text exposition format (version 0.0.4, what node exporters, NVIDIA's DCGM
// exporter and `kwatt meter` serve on /metrics), read as a stream of samples: the reader of
// `kwatt collect`'s Prometheus driver (doc/collect.md).
//
// What it reads, as the format defines it: `# HELP` and `# TYPE` lines (other `#` lines are
// comments), samples `name{label="value",...} value [timestamp_ms]` with label values unescaped
// (`\\`, `\"`, `\n`), values as Go's ParseFloat reads them (`NaN`, `+Inf`, `-Inf`, exponents),
// blank lines, `\r\n` line ends, spaces or tabs between tokens.
//
// Thread-compatible: a PrometheusTextReader is used by one thread at a time.
#ifndef KWATT_COLLECT_PROMETHEUS_TEXT_H_
#define KWATT_COLLECT_PROMETHEUS_TEXT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kwatt/core/status.h"

namespace kwatt::collect {

// One sample. Reused from one sample to the next: copy what must outlive the callback.
struct PrometheusSample {
  std::string name;                                         // "node_cpu_seconds_total"
  std::vector<std::pair<std::string, std::string>> labels;  // in the text's order, unescaped
  double value = 0;
  std::optional<int64_t> timestamp_ms;  // milliseconds since the epoch, when the text has one
  // The type its family's `# TYPE` line gave ("counter", "gauge", "histogram", "summary",
  // "untyped"), or "untyped" without one. A histogram's or summary's `_bucket`, `_sum` and
  // `_count` samples carry their family's type.
  std::string_view type = "untyped";
};

// Receives each sample; a non-OK status stops the reading, which returns it.
using PrometheusSampleCallback = std::function<Status(const PrometheusSample&)>;

// Reads a whole exposition. InvalidArgument naming the line and column and what is wrong at the
// first malformed line (an unterminated label value, a name that is not a metric name, a value
// that is not a number, a timestamp that is not an integer, a label given twice in one sample, a
// second `# TYPE` for one family): a scrape is taken whole or refused, as Prometheus does, so the
// samples given to `each` before the error must be dropped by the caller (collect them, then keep
// them only on OK).
[[nodiscard]] Status ReadPrometheusText(std::string_view text,
                                        const PrometheusSampleCallback& each);

}  // namespace kwatt::collect

#endif  // KWATT_COLLECT_PROMETHEUS_TEXT_H_
