// The terms of an energy figure's interval that its series tells (integration.h's
// SeriesErrorTerms; uncertainty.h says what each term is).
#include "kwatt/energy/uncertainty.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kwatt/energy/integration.h"
#include "src/energy/power_pieces.h"

namespace kwatt::energy {
namespace {

using Series = PowerCollector::Series;
using internal::PieceReader;
using internal::PowerPiece;
using internal::SecondsOf;

// How many samples on each side of one a sample's spread is at least the mean of (Spreads).
constexpr size_t kPooled = 8;

// Seconds of [lo, hi] within [a, b].
double Overlap(UnixNanos lo, UnixNanos hi, UnixNanos a, UnixNanos b) {
  return std::max<double>(0, SecondsOf(std::min(hi, b) - std::max(lo, a)));
}

// The part of [a, b] that the sample at `lo` (`rising` false) or at `hi` (`rising` true) stands
// for between lo and hi: the integral over [lo, hi] within [a, b] of its share of the line
// between them (1 at the sample, 0 at the other end), seconds.
double LineShare(UnixNanos lo, UnixNanos hi, UnixNanos a, UnixNanos b, bool rising) {
  const UnixNanos x0 = std::max(lo, a), x1 = std::min(hi, b);
  if (x1 <= x0 || hi <= lo) return 0;
  const double length = SecondsOf(hi - lo);
  const double u0 = SecondsOf(x0 - lo) / length, u1 = SecondsOf(x1 - lo) / length;
  const double rising_part = 0.5 * (u1 * u1 - u0 * u0);
  return (rising ? rising_part : (u1 - u0) - rising_part) * length;
}

// Where the samples of a series stand for [a, b]: indices [first, last) from the one before a to
// the one after b, and whether two samples are close enough for the line between them to be a
// measurement (a gap otherwise).
struct Neighbourhood {
  const Series& s;
  const internal::Cadence& cadence;  // raw samples: where two have a gap between them
  size_t first = 0, last = 0;
  int64_t bucket = 0;  // summary rows: their bucket (one missing between two rows is a gap)

  // Whether the consecutive samples i and i + 1 are close enough for the line between them to be
  // a measurement.
  bool Close(size_t i) const {
    return bucket > 0 ? s.time[i + 1] - s.time[i] <= bucket : !cadence.Gap(i);
  }

  // Each sample's spread off the line of its neighbours, as a variance (W^2): r^2 / (1 + alpha^2 +
  // (1 - alpha)^2), r its distance from the line, so that for readings with independent errors of
  // variance s^2 it is s^2 on average; averaged with its kPooled neighbours' on each side (the
  // power's moves come in bursts, and a move between two samples that leaves no trace in either
  // is likelier where the power moves; an average, not the larger of the two, so that over a long
  // window each spread counts once). A sample without two close neighbours takes its
  // neighbours' mean; with none at all, the range of the values as a rectangular spread.
  std::vector<double> Spreads() const {
    const std::vector<UnixNanos>& t = s.time;
    const std::vector<double>& v = s.value;
    const size_t lo = first > kPooled ? first - kPooled : 0;
    const size_t hi = std::min(t.size(), last + kPooled);
    // own[i - lo]: sample i's, NaN without two close neighbours; prefix sums of the known ones.
    std::vector<double> own(hi - lo, NAN), sum(hi - lo + 1, 0);
    std::vector<int> count(hi - lo + 1, 0);
    for (size_t i = lo; i < hi; ++i) {
      if (i > 0 && i + 1 < t.size() && Close(i - 1) && Close(i)) {
        const double alpha = double(t[i] - t[i - 1]) / double(t[i + 1] - t[i - 1]);
        const double r = v[i] - (v[i - 1] + alpha * (v[i + 1] - v[i - 1]));
        own[i - lo] = r * r / (1 + alpha * alpha + (1 - alpha) * (1 - alpha));
      }
      const bool known = !std::isnan(own[i - lo]);
      sum[i - lo + 1] = sum[i - lo] + (known ? own[i - lo] : 0);
      count[i - lo + 1] = count[i - lo] + known;
    }
    std::vector<double> spread(last - first, NAN);
    double fallback = NAN;
    for (size_t i = first; i < last; ++i) {
      const size_t from = (i > lo + kPooled ? i - kPooled : lo) - lo;
      const size_t to = std::min(hi, i + kPooled + 1) - lo;
      const int n = count[to] - count[from];
      const double pooled = n > 0 ? (sum[to] - sum[from]) / n : NAN;
      const double mine = own[i - lo];
      spread[i - first] = std::isnan(pooled) ? mine : pooled;
      if (std::isnan(spread[i - first])) {
        if (std::isnan(fallback)) fallback = Range() * Range() / 12;
        spread[i - first] = fallback;
      }
    }
    return spread;
  }

  // The highest value minus the lowest.
  double Range() const {
    if (first >= last) return 0;
    auto [low, high] =
        std::minmax_element(s.value.begin() + long(first), s.value.begin() + long(last));
    return *high - *low;
  }

  // The smallest step between two consecutive readings. Readings that never change tell no step:
  // then the coarsest of 1, 0.1, 0.01 and 0.001 W they are all whole multiples of (a PDU's 100 W
  // may be anything from 99.5 to 100.5 W), else none.
  double Step() const {
    double step = 0;
    for (size_t i = first + 1; i < last; ++i) {
      const double d = std::fabs(s.value[i] - s.value[i - 1]);
      if (d > 0 && (step == 0 || d < step)) step = d;
    }
    if (step > 0 || first >= last) return step;
    for (double unit : {1.0, 0.1, 0.01, 0.001}) {
      const double x = s.value[first] / unit;
      if (std::fabs(x - std::round(x)) <= 1e-9 * std::max(1.0, std::fabs(x))) return unit;
    }
    return 0;
  }
};

// Raw samples: each sample's share of [a, b] on the lines to its close neighbours (sampling), and
// of the values held one period past the first and last samples (edges).
void AddSampleTerms(const Neighbourhood& near, UnixNanos a, UnixNanos b, ErrorTerms* terms) {
  const std::vector<UnixNanos>& t = near.s.time;
  const size_t n = t.size();
  const std::vector<double> spread = near.Spreads();
  // Rounding errors average out where the readings move by at least half a step between samples
  // (the noise dithers them); on a steadier signal they are one error, held.
  const double step = near.Step();
  double mean_spread = 0;
  for (double x : spread) mean_spread += x / double(spread.size());
  const bool dithered = step > 0 && std::sqrt(mean_spread) >= step / 2;
  const double rounding = dithered ? step * step / 12 : 0;
  double shares = 0, shares_squared = 0;
  for (size_t i = near.first; i < near.last; ++i) {
    double line = 0, held = 0;
    if (i == 0) {
      held += Overlap(t[0] - near.cadence.AtStart(), t[0], a, b);
    } else if (near.Close(i - 1)) {
      line += LineShare(t[i - 1], t[i], a, b, /*rising=*/true);
    }
    if (i + 1 == n) {
      held += Overlap(t[i], t[i] + near.cadence.AtEnd(), a, b);
    } else if (near.Close(i)) {
      line += LineShare(t[i], t[i + 1], a, b, /*rising=*/false);
    }
    // One reading's error weighs on both its shares: its variance (line + held)^2 x own, the
    // cross term split between the two terms.
    const double own = std::max(0.0, spread[i - near.first] - rounding);
    terms->sampling_variance += (line * line + line * held) * own;
    terms->gaps_variance += (held * held + line * held) * own;
    shares += line + held;
    shares_squared += (line + held) * (line + held);
  }
  if (dithered) {
    terms->resolution_variance += rounding * shares_squared;
  } else {
    terms->resolution_bound += step / 2 * shares;
  }
}

// How far the power within a summary bucket is assumed to stray from the series' bucket means: a
// node's power rarely falls below half the lowest of them, or bursts above twice the highest, for
// part of five minutes.
constexpr double kBucketLowFactor = 0.5, kBucketHighFactor = 2;

// Summary rows: a bucket's mean is its energy exactly; one cut by an edge counts at its mean, the
// part inside off by up to how the power moved within it, read from how the means move and
// scatter, and at least by what the bucket's energy allows: its mean tells nothing of when within
// the bucket the power was drawn (a phase on the idle half of a bucket whose other half was busy),
// so with the power within [kBucketLowFactor x the lowest mean, kBucketHighFactor x the highest]
// the part inside holds between what the rest may have drawn and the bucket's energy (a
// rectangular bound over that range).
void AddBucketTerms(const Neighbourhood& near, UnixNanos a, UnixNanos b, int64_t period,
                    ErrorTerms* terms) {
  const std::vector<UnixNanos>& t = near.s.time;
  const std::vector<double> spread = near.Spreads();
  const auto [lowest, highest] = std::minmax_element(near.s.value.begin(), near.s.value.end());
  const double low = kBucketLowFactor * std::max(0.0, *lowest);
  const double high = kBucketHighFactor * std::max(0.0, *highest);
  for (size_t i = near.first; i < near.last; ++i) {
    UnixNanos end = t[i] + period;
    if (i + 1 < t.size()) end = std::min(end, t[i + 1]);
    const double length = SecondsOf(end - t[i]);
    const double inside = Overlap(t[i], end, a, b);
    if (length <= 0 || inside <= 0 || inside >= length) continue;
    const double cut = inside * (1 - inside / length);
    // How far the power moved within it: as far as the means around it move (a steady ramp's
    // part of a bucket is off its mean by up to half the move), and as they scatter.
    double move = 0;
    if (i > 0 && near.Close(i - 1)) move = std::fabs(near.s.value[i] - near.s.value[i - 1]);
    if (i + 1 < t.size() && near.Close(i)) {
      move = std::max(move, std::fabs(near.s.value[i + 1] - near.s.value[i]));
    }
    const double ramp = cut * move / 2;
    terms->sampling_variance += cut * cut * spread[i - near.first] + ramp * ramp / 3;
    const double energy = near.s.value[i] * length, outside = length - inside;
    const double least = std::max(inside * low, energy - outside * high);
    const double most = std::min(inside * high, energy - outside * low);
    if (most > least) {
      const double bound = (most - least) / 2;
      terms->sampling_variance += bound * bound / 3;
    }
  }
}

}  // namespace

ErrorTerms SeriesErrorTerms(const Series& s, UnixNanos a, UnixNanos b, int64_t period,
                            double gap_factor, RowKind kind) {
  ErrorTerms terms;
  const std::vector<UnixNanos>& t = s.time;
  if (t.empty() || b <= a) return terms;
  const bool buckets = kind == RowKind::kBucketMeans;
  const internal::Cadence cadence(s, period, gap_factor);
  Neighbourhood near{s, cadence};
  near.bucket = buckets ? period : 0;
  near.first = size_t(std::lower_bound(t.begin(), t.end(), buckets ? a - period : a) - t.begin());
  if (near.first > 0) --near.first;
  near.last = size_t(std::upper_bound(t.begin(), t.end(), b) - t.begin());
  if (near.last < t.size()) ++near.last;
  if (buckets) {
    AddBucketTerms(near, a, b, period, &terms);
  } else {
    AddSampleTerms(near, a, b, &terms);
  }
  // The gaps, each estimated on the line across it: the power within it may have been anywhere
  // in the range the series shows. The power at the edges, for the clock's term.
  const double range = near.Range();
  PieceReader reader(s, a, b, period, gap_factor, kind);
  PowerPiece piece;
  bool first = true;
  double at_start = 0, at_end = 0;
  while (reader.Next(&piece)) {
    const bool known = piece.kind != PowerPiece::kUnknown;
    if (first) at_start = known ? piece.v0 : 0;
    first = false;
    at_end = known ? piece.v1 : 0;
    if (piece.kind == PowerPiece::kEstimated) {
      const double bound = range * piece.Seconds();
      terms.gaps_variance += bound * bound / 3;
    }
  }
  terms.edge_watts = at_end - at_start;
  return terms;
}

}  // namespace kwatt::energy
