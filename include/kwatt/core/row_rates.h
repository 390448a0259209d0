// Kwollect's `as_rate=true`: each row's value as the per-second rate of its series, as Kwollect's
// get_metrics computes it (its SQL window over each series, by device, metric and labels as
// answered, in time order). The server answers `as_rate` with it; the client computes it over rows
// fetched in pieces, so that a long window gives what one answer of the whole window would.
//
// Not thread-safe: one per answer.
#ifndef KWATT_CORE_ROW_RATES_H_
#define KWATT_CORE_ROW_RATES_H_

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kwatt/core/row_batch.h"
#include "kwatt/core/time.h"

namespace kwatt {

// A row's value becomes (v - the previous row's v) / the seconds between them; below the previous
// value (a counter that wrapped or restarted), (the highest value so far - the previous + v) / the
// seconds. Null (NullValue) for a series' first row, a row at its previous row's instant, and
// where either value is null; NaN where either is NaN (PostgreSQL orders NaN above every number,
// which gives NaN in both branches; and since its running maximum is then NaN, every later wrap of
// that series is NaN too). Rows are given series by series in time order, any series
// interleaved.
class SeriesRates {
 public:
  // The rate at the row (t, value) of `series` (a key naming it, whatever its form).
  double Next(std::string_view series, UnixNanos t, double value);

  // The rate at row `i` of `rows` (ids of `interner`), its series named by device, metric and
  // labels.
  double NextRow(const RowBatch& rows, size_t i, const StringInterner& interner);

  // Every row of `rows` (ids of `interner`, in time order) given its rate, the series named by
  // device, metric and labels; each row's text (`raw`) written anew from its fields.
  void Apply(RowBatch* rows, const StringInterner& interner);

  // Forgets the series of `devices` (Apply's keys): rows of theirs that could not be fetched
  // leave a hole, and the next row's rate is null, as a series' first row's, rather than a mean
  // over the hole.
  void Forget(const std::vector<std::string>& devices);

 private:
  struct Last {
    UnixNanos t = 0;
    double value = 0;
    double highest = 0;  // NullValue() while every value was null
  };
  std::unordered_map<std::string, Last> last_;
  std::string key_;  // NextRow's, kept for its capacity
};

}  // namespace kwatt

#endif  // KWATT_CORE_ROW_RATES_H_
