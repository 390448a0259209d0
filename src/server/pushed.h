// Custom metrics pushed with `POST /sites/{site}/metrics` (doc/kwollect_api.md section 1): the
// body's parser, and the rows the simulated server keeps in memory and serves with its own.
// Internal to the server.
//
// Thread safety: PushedMetrics is safe to use from several threads; ParsePushedRows is a function.
#ifndef KWATT_SRC_SERVER_PUSHED_H_
#define KWATT_SRC_SERVER_PUSHED_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "kwatt/core/row_batch.h"
#include "kwatt/core/status.h"
#include "kwatt/core/time.h"
#include "kwatt/simulate/series.h"

namespace kwatt::server::internal {

// Labels rendered as this server keeps them (compact, keys by length then bytes) without `key`, as
// PostgreSQL's `labels - 'key'` gives them; the text itself when it has no such key or is not a
// JSON object.
std::string LabelsWithout(std::string_view labels_json, std::string_view key);

// One row of a push.
struct PushedRow {
  std::string device_id;
  std::string metric_id;
  std::string labels_json;  // as the server renders it: keys by length, then bytes ("{}": none)
  UnixNanos t = 0;
  double value = 0;  // NullValue() for null, a quiet NaN for "NaN"
};

// The rows of a push that carry the label `_device_alias` (a device measuring a node: a PDU
// outlet) made what Kwollect's metrics_by_device view answers, as the collector stores its
// readings (collect::AliasReadings): each loses the label, and each group of them with the same
// (alias, metric, instant, other labels) adds a row for the node, the sum of their values, with
// `_device_orig` naming them. Rows of one push only are summed together.
void AliasPushedRows(std::vector<PushedRow>* rows);

// The most rows PushedMetrics keeps (about 100 bytes each): the simulated server is not a store.
inline constexpr int64_t kMaxPushedRows = 10'000'000;

// What a pushed row's labels may be: nested at most kMaxLabelsDepth levels deep (the labels object
// being level 1) and at most kMaxLabelsBytes of JSON, so that every client reads the row back
// (kwatt's own reader takes 64 levels, the row included: kwatt/core/row_parser.h) and a push cannot
// make a parser or writer that recurses overflow its stack.
inline constexpr int kMaxLabelsDepth = 32;
inline constexpr size_t kMaxLabelsBytes = 64 * 1024;

// Parses a push: a JSON array of objects {"timestamp"?, "device_id", "metric_id", "value",
// "labels"?}. `timestamp` is epoch seconds (a number, microsecond resolution) or a timestamp text
// as the metrics query reads it; absent or null, it is `now` rounded down to the microsecond
// (what a store keeps). `value` is a number or null. Device and metric ids are those the metrics
// query can ask for (CheckDeviceId, CheckMetricId: kwatt/core/row_ids.h); labels an object within
// kMaxLabelsDepth and kMaxLabelsBytes. All or nothing: InvalidArgument naming the first bad row
// ("row 3: ...", counted from 1) and what to send instead.
Result<std::vector<PushedRow>> ParsePushedRows(std::string_view body, UnixNanos now);

// Pushed rows as a batch of rows (ids in `interner`), their timestamps in Paris time as Kwollect
// renders them: what a store appends.
RowBatch ToRowBatch(const std::vector<PushedRow>& rows, StringInterner* interner);

// The pushed rows of every site, as series the row stream serves.
class PushedMetrics {
 public:
  explicit PushedMetrics(int64_t max_rows = kMaxPushedRows) : max_rows_(max_rows) {}
  // Adds `rows` to `site`, all or none: Unavailable when they would exceed the most it keeps.
  Status Add(const std::string& site, const std::vector<PushedRow>& rows);
  // The series of `device_id` on `site` whose metric is in `metrics` (all when empty), as they
  // are now (later pushes do not change them).
  std::vector<simulate::OutputSeries> SeriesOf(const std::string& site,
                                               const std::string& device_id,
                                               const std::vector<std::string>& metrics) const;
  int64_t rows() const;

 private:
  using Key = std::tuple<std::string, std::string, std::string, std::string>;  // site, device,
                                                                               // metric, labels
  const int64_t max_rows_;
  mutable std::mutex mutex_;
  std::map<Key, std::shared_ptr<const std::vector<simulate::RecordedSample>>> series_;
  int64_t rows_ = 0;
};

}  // namespace kwatt::server::internal

#endif  // KWATT_SRC_SERVER_PUSHED_H_
