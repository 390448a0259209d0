// Per-pixel downsampling of time series for the dashboard's plots: the rows of a window cut into
// equal buckets (one per pixel of the plot), and per series and bucket the minimum, maximum, mean
// and count of the values, so that a plot of a long window still shows every peak. Internal to the
// server (doc/dashboard.md, "Series").
//
// Memory is (series x buckets) accumulators, whatever the number of rows. Not thread-safe.
#ifndef KWATT_SRC_SERVER_DOWNSAMPLE_H_
#define KWATT_SRC_SERVER_DOWNSAMPLE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "kwatt/core/row_batch.h"
#include "kwatt/core/time.h"

namespace kwatt::server::internal {

// The most buckets one answer has (a plot 20,000 pixels wide).
inline constexpr size_t kMaxBuckets = 20000;

// The bucket length, in nanoseconds, for [start, end] (inclusive) in `width` buckets: the window
// length over `width`, rounded up (at least 1 ns).
int64_t BucketStepFor(UnixNanos start, UnixNanos end, size_t width);

class Downsampler {
 public:
  struct Options {
    UnixNanos start = 0;  // bucket i is [start + i * step, start + (i + 1) * step)
    int64_t step = 1;     // nanoseconds, > 0
    size_t buckets = 1;   // rows at or after start + buckets * step are not counted
    // Counters (metric ids ending in "_total") as rates: each sample but a series' first becomes
    // (v - v_previous) / (t - t_previous) per second at its time t; a decrease (a reset) gives no
    // value.
    bool counter_rates = false;
  };

  struct Bucket {
    int64_t count = 0;  // values that are numbers (NaN is not counted)
    double min = 0, max = 0, sum = 0;
    double mean() const { return sum / double(count); }
  };
  struct Series {
    std::string device, metric, labels;  // labels: the JSON object's text
    int64_t rows = 0;                    // rows of the window (NaN values included)
    int64_t nans = 0;                    // rows whose value is NaN
    std::vector<Bucket> buckets;
    // For counter rates: the previous sample.
    bool has_previous = false;
    UnixNanos previous_t = 0;
    double previous_v = 0;
  };

  explicit Downsampler(const Options& options);

  // Adds rows (of one time-ordered answer: a series' rows come in time order); rows before
  // `start` or from start + buckets * step on count for no bucket (a counter's rate still starts
  // from them). The ids refer to `interner` (another one than the last call's, even at the same
  // address, is told by its serial).
  void Add(const RowBatch& batch, const StringInterner& interner);

  const Options& options() const { return options_; }
  // Every series seen, ordered by (device, metric, labels).
  std::vector<const Series*> SortedSeries() const;
  int64_t rows() const { return rows_; }
  size_t series_count() const { return series_.size(); }

  // The answer of the series endpoint (doc/dashboard.md): {"start","step","buckets","rows",
  // "time":[bucket starts, epoch seconds],"series":[{"device","metric","labels","rows","nans",
  // "min":[...],"max":[...],"mean":[...],"count":[...]}]}, null for an empty bucket's min, max
  // and mean (and for values that are not finite).
  std::string Json() const;

 private:
  Series& SeriesOf(uint32_t device, uint32_t metric, uint32_t labels,
                   const StringInterner& interner);

  Options options_;
  std::vector<Series> series_;
  std::unordered_map<std::string, size_t> by_key_;  // device \0 metric \0 labels -> index
  uint64_t interner_ = 0;                           // the serial of the one cache_ refers to
  std::unordered_map<uint64_t, size_t> cache_;      // (device, metric, labels ids) -> index
  int64_t rows_ = 0;
};

}  // namespace kwatt::server::internal

#endif  // KWATT_SRC_SERVER_DOWNSAMPLE_H_
