// The shape of a series' power as kwatt reads it (integration.h): private to the energy part,
// shared by the integration (integration.cc) and the terms of its interval (uncertainty.cc).
#ifndef KWATT_SRC_ENERGY_POWER_PIECES_H_
#define KWATT_SRC_ENERGY_POWER_PIECES_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kwatt/core/time.h"
#include "kwatt/energy/energy.h"

namespace kwatt::energy::internal {

using Series = PowerCollector::Series;

inline double SecondsOf(int64_t ns) { return double(ns) / 1e9; }

// How many intervals on each side of one its local period is the median of (Cadence).
inline constexpr size_t kLocalIntervals = 5;

// A series' sampling period where it is, not overall: Kwollect samples a wattmeter every second
// outside a monitoring job and every 10 or 20 ms inside one, so that one series has several
// periods, and what is a gap at 10 ms is the normal step at 1 s. The period about the interval
// between samples i and i + 1 is the larger of the medians of up to kLocalIntervals intervals
// before it and after it (a gap among them does not move a median; at a change of rate the slower
// side's); the interval is a gap when it is longer than `gap_factor` times that. At the series'
// ends, the median of its first (last) intervals is the period a value is held for. A series of
// fewer than two samples has `period` (the caller's) everywhere.
class Cadence {
 public:
  Cadence(const Series& series, int64_t period, double gap_factor)
      : t_(series.time), period_(period), gap_factor_(gap_factor) {}

  // The local period about the interval from sample i to sample i + 1 (i + 1 < size).
  int64_t Around(size_t i) const {
    const size_t n = t_.size();
    int64_t before = MedianOf(i >= kLocalIntervals ? i - kLocalIntervals : 0, i);
    int64_t after = MedianOf(i + 1, std::min(n - 1, i + 1 + kLocalIntervals));
    if (before == 0 && after == 0) return t_[i + 1] - t_[i];  // its only interval
    return std::max(before, after);
  }
  // Whether the samples i and i + 1 have a gap between them. (A median of intervals is at least
  // their smallest: an interval within gap_factor of the smallest of those after it is no gap,
  // which spares sorting them for nearly every interval of a regular series.)
  bool Gap(size_t i) const {
    const double step = double(t_[i + 1] - t_[i]);
    const size_t n = t_.size();
    if (i + 2 < n) {
      int64_t least = t_[i + 2] - t_[i + 1];
      for (size_t j = i + 2; j + 1 < n && j <= i + kLocalIntervals; ++j) {
        least = std::min<int64_t>(least, t_[j + 1] - t_[j]);
      }
      if (step <= gap_factor_ * double(least)) return false;
    }
    return step > gap_factor_ * double(Around(i));
  }
  // The period at the first (last) sample: how long its value is held before (after) it.
  int64_t AtStart() const {
    return t_.size() < 2 ? period_ : MedianOf(0, std::min(t_.size() - 1, kLocalIntervals));
  }
  int64_t AtEnd() const {
    const size_t n = t_.size();
    return n < 2 ? period_ : MedianOf(n - 1 > kLocalIntervals ? n - 1 - kLocalIntervals : 0, n - 1);
  }

 private:
  // The median of the intervals from sample j to j + 1 for j in [from, to); 0 when none.
  int64_t MedianOf(size_t from, size_t to) const {
    if (to <= from) return 0;
    int64_t d[kLocalIntervals];
    size_t m = 0;
    for (size_t j = from; j < to && m < kLocalIntervals; ++j) d[m++] = t_[j + 1] - t_[j];
    std::sort(d, d + m);
    return std::max<int64_t>(1, m % 2 ? d[m / 2] : (d[m / 2 - 1] + d[m / 2]) / 2);
  }

  const std::vector<UnixNanos>& t_;
  const int64_t period_;
  const double gap_factor_;
};

// A stretch of one series' power: linear from v0 at t0 to v1 at t1 (t0 < t1).
struct PowerPiece {
  enum Kind {
    kMeasured,   // between samples close enough, or a value held for one period at an end
    kEstimated,  // in a gap: the line between the samples around it
    kUnknown,    // no power known (before the first sample, after the last): v0 = v1 = 0
  };
  UnixNanos t0 = 0, t1 = 0;
  double v0 = 0, v1 = 0;
  Kind kind = kMeasured;

  double Seconds() const { return SecondsOf(t1 - t0); }
  double Joules() const { return 0.5 * (v0 + v1) * Seconds(); }
};

// The pieces of a series' power over [a, b] (a < b), in time order, each starting where the
// previous one ends, from a to b: the one shape of a series that its energy, its coverage and its
// peaks (alone or summed with others) are all read from. A gap is judged against the series'
// local period (Cadence). Before the first sample and after the last the first (last) value is
// held for one period there (measured); beyond that nothing is known
// (there is no sample on its other side: holding the value across it would be extrapolating).
// Pieces are made a few at a time, so that a sweep over many long series holds none of them.
class PieceReader {
 public:
  PieceReader(const Series& series, UnixNanos a, UnixNanos b, int64_t period, double gap_factor,
              RowKind kind)
      : s_(series),
        a_(a),
        b_(b),
        period_(period),
        cadence_(series, period, gap_factor),
        buckets_(kind == RowKind::kBucketMeans) {}

  bool Next(PowerPiece* piece) {
    while (head_ == count_) {
      if (!Refill()) return false;
    }
    *piece = pending_[head_++];
    return true;
  }

 private:
  enum Stage { kBefore, kSegments, kAfter, kDone };

  // Queues [t0, t1] clipped to [a, b], when some of it is left.
  void Emit(UnixNanos t0, UnixNanos t1, double v0, double v1, PowerPiece::Kind kind) {
    UnixNanos lo = std::max(t0, a_), hi = std::min(t1, b_);
    if (hi <= lo) return;
    auto at = [&](UnixNanos x) {
      return x == t0 ? v0 : x == t1 ? v1 : v0 + (v1 - v0) * (double(x - t0) / double(t1 - t0));
    };
    pending_[count_++] = PowerPiece{lo, hi, at(lo), at(hi), kind};
  }

  // Queues the next pieces; false when there are no more.
  bool Refill() {
    head_ = count_ = 0;
    const std::vector<UnixNanos>& t = s_.time;
    const std::vector<double>& v = s_.value;
    switch (stage_) {
      case kBefore:
        stage_ = kSegments;
        if (t.empty()) {
          Emit(a_, b_, 0, 0, PowerPiece::kUnknown);
          stage_ = kDone;
        } else if (buckets_) {
          // Nothing before the first bucket; from the bucket holding a, or the first.
          Emit(a_, t.front(), 0, 0, PowerPiece::kUnknown);
          next_ = size_t(std::upper_bound(t.begin(), t.end(), a_) - t.begin());
          if (next_ > 0) --next_;
          return true;
        } else if (t.front() > a_) {
          UnixNanos held = std::max(a_, t.front() - cadence_.AtStart());
          Emit(a_, held, 0, 0, PowerPiece::kUnknown);
          Emit(held, t.front(), v.front(), v.front(), PowerPiece::kMeasured);
        }
        // From the sample before a (for interpolation), or the first.
        next_ = size_t(std::lower_bound(t.begin(), t.end(), a_) - t.begin());
        if (next_ > 0) --next_;
        return true;
      case kSegments:
        if (buckets_ && next_ < t.size() && t[next_] < b_) {
          // A bucket at its mean, then the missing buckets up to the next row, if any.
          size_t i = next_++;
          UnixNanos end = t[i] + period_;
          if (i + 1 < t.size()) end = std::min(end, t[i + 1]);
          Emit(t[i], end, v[i], v[i], PowerPiece::kMeasured);
          if (i + 1 < t.size()) Emit(end, t[i + 1], v[i], v[i + 1], PowerPiece::kEstimated);
          return true;
        }
        if (!buckets_ && next_ + 1 < t.size() && t[next_] < b_) {
          size_t i = next_++;
          Emit(t[i], t[i + 1], v[i], v[i + 1],
               cadence_.Gap(i) ? PowerPiece::kEstimated : PowerPiece::kMeasured);
          return true;
        }
        stage_ = kAfter;
        return true;
      case kAfter: {
        stage_ = kDone;
        if (buckets_) {
          Emit(std::max(t.back() + period_, a_), b_, 0, 0, PowerPiece::kUnknown);
        } else if (t.back() < b_) {
          UnixNanos held = std::min(b_, t.back() + cadence_.AtEnd());
          Emit(t.back(), held, v.back(), v.back(), PowerPiece::kMeasured);
          Emit(std::max(held, a_), b_, 0, 0, PowerPiece::kUnknown);
        }
        return true;
      }
      case kDone:
        return false;
    }
    return false;
  }

  const Series& s_;
  const UnixNanos a_, b_;
  const int64_t period_;
  const Cadence cadence_;
  const bool buckets_;  // summary rows: each the mean over its bucket of `period_`
  Stage stage_ = kBefore;
  size_t next_ = 0;  // kSegments: the sample the next segment starts at
  PowerPiece pending_[3];
  int head_ = 0, count_ = 0;
};

}  // namespace kwatt::energy::internal

#endif  // KWATT_SRC_ENERGY_POWER_PIECES_H_
