// Rows gathered into columns: what the Python package turns into numpy arrays, pandas DataFrames
// and row dicts without copying, filled by a fetch (as a RowSink) or from an archive's loaded
// batch (Append).
//
// Each string column (site, node, device, metric, labels) holds codes into the table's own
// interners, dense from 0 in order of first appearance, whatever interner the rows came with: a
// fetch brings one interner per site, an archive one for every file. `kind` keeps how Python's
// json.loads reads each row's value (int, float, null or string), which the value alone cannot
// tell for NaN and whole numbers.
//
// Thread safety: none; one thread fills it, then it is read.
#ifndef KWATT_CORE_ROW_TABLE_H_
#define KWATT_CORE_ROW_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "kwatt/core/json_text.h"
#include "kwatt/core/row_batch.h"
#include "kwatt/core/row_sink.h"
#include "kwatt/core/status.h"
#include "kwatt/core/time.h"

namespace kwatt {

class RowTable : public RowSink {
 public:
  std::vector<UnixNanos> time;
  std::vector<int32_t> utc_offset;
  std::vector<double> value;        // NaN for null and for "NaN"; `kind` tells which
  std::vector<JsonValueKind> kind;  // how json.loads sees each row's value
  // Codes into the interners below.
  std::vector<int32_t> site, node, device, metric, labels;
  StringInterner sites;        // "lyon"
  StringInterner nodes;        // the device's FQDN: "nova-1.lyon.grid5000.fr"
  StringInterner devices;      // "nova-1"
  StringInterner metrics;      // "wattmetre_power_watt"
  StringInterner label_texts;  // labels objects as sent: "{}", {"port": "eth0"}
  // The resolved query (from Begin, or set by whoever fills the table), then the final report.
  RowsReport report;
  // False when rows are missing: a fetch with failures, an incomplete archive.
  bool complete = true;

  Status Begin(const RowsReport& resolved) override;
  Status Write(std::string_view site_name, const RowBatch& batch,
               const StringInterner& interner) override;

  // Appends rows [begin, end) of `batch`, whose ids refer to `interner`, as rows of `site_name`.
  // `interner` may be another one than the last call's (even a new one at the same address), or
  // the same one grown: each id's code is checked against its text once per call.
  void Append(std::string_view site_name, const RowBatch& batch, const StringInterner& interner,
              size_t begin, size_t end);

  size_t size() const { return time.size(); }

 private:
  // A code of the table learnt for an id of the rows' interner, and the Append that last checked
  // it.
  struct Code {
    int32_t code = -1;
    uint64_t epoch = 0;
  };
  int32_t Map(std::vector<Code>& map, uint32_t id, const StringInterner& from, StringInterner& to);

  uint64_t epoch_ = 0;  // Appends so far
  std::vector<Code> device_map_, metric_map_, labels_map_;
  int32_t current_site_ = -1;
  std::vector<int32_t> node_of_device_;  // device code -> node code, for the current site
};

}  // namespace kwatt

#endif  // KWATT_CORE_ROW_TABLE_H_
