// Generates a metrics answer as a stream of JSON text, rows in timestamp order, in constant
// memory whatever the number of rows. Internal to the server.
#ifndef KWATT_SRC_SERVER_ROW_STREAM_H_
#define KWATT_SRC_SERVER_ROW_STREAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kwatt/core/time.h"
#include "src/server/series.h"

namespace kwatt::server::internal {

inline constexpr int64_t kSummaryBucketNs = 300 * kNanosPerSecond;
// Summary buckets appear once they ended this long ago (Kwollect refreshes its aggregate every
// 5 minutes, with a lag).
inline constexpr int64_t kSummaryLagNs = 300 * kNanosPerSecond;

class RowStream {
 public:
  // Rows of `series` with start <= timestamp <= end and timestamp <= now; in summary mode, one
  // row per series and 5-minute bucket whose start is within [start, end].
  RowStream(std::vector<OutputSeries> series, UnixNanos start, UnixNanos end, UnixNanos now,
            bool summary);

  // How many rows the whole answer has (computed without generating them).
  int64_t CountRows() const;

  // Appends the next rows to `out`, at least `target_bytes` of them unless the answer ends
  // (the opening '[' first, the closing ']' last). Returns false once everything is written.
  bool Next(std::string* out, size_t target_bytes);
  int64_t rows_written() const { return rows_written_; }
  bool finished() const { return finished_; }

 private:
  struct Cursor {
    size_t segment = 0;
    int64_t k = 0;
    int64_t k_end = 0;  // exclusive, within the current segment
    UnixNanos t = 0;    // time of sample k
  };
  bool Advance(size_t series_index);  // moves cursor to its next sample; false when exhausted
  void WriteRow(std::string* out, const OutputSeries& series, UnixNanos t, double value);
  bool NextSummary(std::string* out, size_t limit);  // until out->size() >= limit

  std::vector<OutputSeries> series_;
  UnixNanos lo_, hi_;  // [lo, hi)
  bool summary_;
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
};

}  // namespace kwatt::server::internal

#endif  // KWATT_SRC_SERVER_ROW_STREAM_H_
