// A metrics answer as a stream of JSON text, rows in timestamp order, in bounded memory whatever
// the number of rows: the interface the HTTP part serves, and its simulated implementation
// (RowStream; the store's is StoreRowStream, src/server/store_rows.h). Internal to the server.
#ifndef KWATT_SRC_SERVER_ROW_STREAM_H_
#define KWATT_SRC_SERVER_ROW_STREAM_H_

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kwatt/core/null_value.h"
#include "kwatt/core/row_batch.h"
#include "kwatt/core/row_rates.h"
#include "kwatt/core/status.h"
#include "kwatt/core/time.h"
#include "kwatt/simulate/series.h"

namespace kwatt::server::internal {

// What separates two rows of a metrics answer's JSON array (every row source writes it).
inline constexpr std::string_view kRowSeparator = ",\n";

inline constexpr int64_t kSummaryBucketNs = 300 * kNanosPerSecond;
// Summary buckets appear once they ended this long ago (Kwollect refreshes its aggregate every
// 5 minutes, with a lag).
inline constexpr int64_t kSummaryLagNs = 300 * kNanosPerSecond;

// Summary buckets of [start, end] seen at `now`: [first, end) with first and end on the 5-minute
// grid, only those that ended kSummaryLagNs before `now`.
std::pair<UnixNanos, UnixNanos> SummaryBuckets(UnixNanos start, UnixNanos end, UnixNanos now);

// A summary row's value: the mean of a bucket's values, their maximum for a counter (a metric id
// ending in "_total"), as Kwollect's aggregate computes them: SQL's avg() and max() skip nulls
// (NullValue, null_value.h), and a bucket of nulls only is null.
class SummaryAccumulator {
 public:
  void Add(double v) {
    ++count_;
    if (IsNullValue(v)) return;
    // As PostgreSQL's max(): NaN is above every number.
    if (values_ == 0 || std::isnan(v) || (!std::isnan(max_) && v > max_)) max_ = v;
    sum_ += v;
    ++values_;
  }
  // Rows added, nulls included: a bucket with any row has a summary row.
  int64_t count() const { return count_; }
  double Value(bool counter) const {
    if (values_ == 0) return NullValue();
    return counter ? max_ : sum_ / double(values_);
  }

 private:
  int64_t count_ = 0, values_ = 0;
  double sum_ = 0, max_ = 0;
};

// What the HTTP part serves: "[", rows separated by ",\n", "]".
class MetricsAnswer {
 public:
  virtual ~MetricsAnswer() = default;
  // How many rows the whole answer has (for the row limit); an error when they cannot be read.
  virtual Result<int64_t> CountRows() = 0;
  // Appends the next rows to `out`, at least `target_bytes` of them unless the answer ends (the
  // opening '[' first, the closing ']' last). Returns false once everything is written, or when
  // the rows cannot be read: then status() says why and the answer is left unclosed, so that a
  // client never takes it for a complete one.
  virtual bool Next(std::string* out, size_t target_bytes) = 0;
  virtual int64_t rows_written() const = 0;
  virtual bool finished() const = 0;
  virtual Status status() const { return Status::OK(); }

  // The rows as columns instead of text, for the parts that compute on them (the dashboard's
  // downsampling and energy, src/server/dashboard.h), in the same order: clears `batch` and fills
  // it with the next rows (at least one, at most `max_rows`; `raw` stays empty), whose ids refer
  // to `*interner` (valid until the next call). Returns false once every row was given (then
  // `batch` is empty) or when the rows cannot be read (then status() says why). An answer is read
  // either with Next() or with NextRows(), not both.
  virtual bool NextRows(RowBatch* batch, const StringInterner** interner, size_t max_rows) = 0;
};

class RowStream : public MetricsAnswer {
 public:
  // Rows of `series` with start <= timestamp <= end and timestamp <= now; in summary mode, one
  // row per series and 5-minute bucket whose start is within [start, end].
  // `as_rate`: each value as Kwollect's as_rate gives it (SeriesRates).
  RowStream(std::vector<simulate::OutputSeries> series, UnixNanos start, UnixNanos end,
            UnixNanos now, bool summary, bool as_rate = false);

  // Computed without generating the rows.
  Result<int64_t> CountRows() override;
  bool Next(std::string* out, size_t target_bytes) override;
  int64_t rows_written() const override { return rows_written_; }
  bool finished() const override { return finished_; }
  Status status() const override { return status_; }
  // Summary mode has no rows to give: InvalidArgument.
  bool NextRows(RowBatch* batch, const StringInterner** interner, size_t max_rows) override;

 private:
  struct Cursor {
    size_t segment = 0;
    int64_t k = 0;
    int64_t k_end = 0;  // exclusive, within the current segment
    UnixNanos t = 0;    // time of sample k
  };
  bool Advance(size_t series_index);  // moves cursor to its next sample; false when exhausted
  void WriteRow(std::string* out, const simulate::OutputSeries& series, UnixNanos t, double value);
  bool NextSummary(std::string* out, size_t limit);  // until out->size() >= limit

  std::vector<simulate::OutputSeries> series_;
  UnixNanos lo_, hi_;  // [lo, hi)
  bool summary_;
  std::optional<SeriesRates> rates_;  // as_rate
  bool started_ = false, finished_ = false;
  int64_t rows_written_ = 0;
  std::vector<Cursor> cursors_;
  std::vector<std::pair<UnixNanos, uint32_t>> heap_;  // min-heap on (time, series index)
  UnixNanos bucket_ = 0, bucket_end_ = 0;  // summary: current bucket and the last one (exclusive)
  // Formatting cache: the text of the current second.
  int64_t cached_second_ = INT64_MIN;
  char cached_text_[kMaxTimestampLength];
  size_t cached_date_length_ = 0;  // "YYYY-MM-DDTHH:MM:SS"
  char cached_offset_[8];
  // NextRows: the ids of each series' device, metric and labels, interned once.
  StringInterner interner_;
  std::vector<std::array<uint32_t, 3>> ids_;
  int64_t offset_second_ = INT64_MIN;  // the second whose UTC offset is offset_
  int32_t offset_ = 0;
  Status status_;
};

}  // namespace kwatt::server::internal

#endif  // KWATT_SRC_SERVER_ROW_STREAM_H_
