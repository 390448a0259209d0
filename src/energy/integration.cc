// Integration of power series and the choice of a node's power metric (integration.h).
#include "kwatt/energy/integration.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <queue>
#include <utility>

#include "src/energy/power_pieces.h"

namespace kwatt::energy {

namespace {

using Series = PowerCollector::Series;
using internal::PieceReader;
using internal::PowerPiece;
using internal::SecondsOf;

}  // namespace

int64_t MedianInterval(const Series& s) {
  if (s.time.size() < 2) return kNanosPerSecond;
  std::vector<int64_t> steps;
  steps.reserve(s.time.size() - 1);
  for (size_t i = 1; i < s.time.size(); ++i) steps.push_back(s.time[i] - s.time[i - 1]);
  std::nth_element(steps.begin(), steps.begin() + steps.size() / 2, steps.end());
  return std::max<int64_t>(steps[steps.size() / 2], 1);
}

int64_t ReadingPeriod(const Series& s, RowKind kind) {
  return kind == RowKind::kBucketMeans ? kSummaryBucketNanos : MedianInterval(s);
}

Figures IntegrateSeries(const Series& s, UnixNanos a, UnixNanos b, int64_t period,
                        double gap_factor, RowKind kind) {
  Figures f;
  f.seconds = SecondsOf(b - a);
  f.node_seconds = f.seconds;
  if (b <= a) return f;
  PieceReader reader(s, a, b, period, gap_factor, kind);
  PowerPiece piece;
  while (reader.Next(&piece)) {
    switch (piece.kind) {
      case PowerPiece::kMeasured:
        f.joules += piece.Joules();
        f.covered_seconds += piece.Seconds();
        break;
      case PowerPiece::kEstimated:
        f.gap_joules += piece.Joules();
        ++f.gaps;
        break;
      case PowerPiece::kUnknown:
        ++f.gaps;
        continue;
    }
    // The peak: the highest value of the line, its ends (the interval's edges) included.
    double high = std::max(piece.v0, piece.v1);
    f.peak_watts = f.has_power ? std::max(f.peak_watts, high) : high;
    f.has_power = true;
  }
  return f;
}

double PeakOfSum(const std::vector<SeriesPeriod>& all, UnixNanos a, UnixNanos b, double gap_factor,
                 RowKind kind) {
  double peak = NAN;
  auto consider = [&](double v) { peak = std::isnan(peak) ? v : std::max(peak, v); };
  if (b <= a) return peak;
  const size_t n = all.size();
  std::vector<PieceReader> readers;
  readers.reserve(n);
  for (const SeriesPeriod& s : all) {
    readers.emplace_back(*s.series, a, b, s.period, gap_factor, kind);
  }
  // The next piece of series i that has a power value; false when there is none.
  auto next_known = [&](size_t i, PowerPiece* piece) {
    while (readers[i].Next(piece)) {
      if (piece->kind != PowerPiece::kUnknown) return true;
    }
    return false;
  };
  if (n == 1) {
    PowerPiece piece;
    while (next_known(0, &piece)) consider(std::max(piece.v0, piece.v1));
    return peak;
  }
  // A sweep over the pieces' ends: the sum is linear between two of them, so its highest value is
  // at one of them, just before or just after it (a held value starts or stops there). The pieces
  // under way are summed as intercept + slope * x (x: seconds since a), recomputed exactly every
  // so often so that rounding does not build up over millions of pieces.
  std::vector<PowerPiece> piece(n);
  std::vector<char> on(n, 0);
  std::vector<double> slope(n, 0), intercept(n, 0);
  auto x_of = [&](UnixNanos t) { return SecondsOf(t - a); };
  using Event = std::pair<UnixNanos, size_t>;  // (when, series): its piece starts, or ends
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  for (size_t i = 0; i < n; ++i) {
    if (next_known(i, &piece[i])) events.push({piece[i].t0, i});
  }
  double sum_intercept = 0, sum_slope = 0;
  size_t active = 0;
  int since_exact = 0;
  std::vector<size_t> starting;
  while (!events.empty()) {
    const UnixNanos t = events.top().first;
    const double x = x_of(t);
    if (active > 0) consider(sum_intercept + sum_slope * x);  // just before t
    starting.clear();
    while (!events.empty() && events.top().first == t) {
      size_t i = events.top().second;
      events.pop();
      if (on[i]) {  // its piece ends at t
        on[i] = 0;
        --active;
        sum_intercept -= intercept[i];
        sum_slope -= slope[i];
        if (!next_known(i, &piece[i])) continue;
        if (piece[i].t0 > t) {
          events.push({piece[i].t0, i});
          continue;
        }
      }
      starting.push_back(i);  // its piece starts at t
    }
    if (active == 0) sum_intercept = sum_slope = 0;  // nothing under way: exactly nothing
    for (size_t i : starting) {
      const PowerPiece& p = piece[i];
      slope[i] = (p.v1 - p.v0) / p.Seconds();
      intercept[i] = p.v0 - slope[i] * x_of(p.t0);
      sum_intercept += intercept[i];
      sum_slope += slope[i];
      on[i] = 1;
      ++active;
      events.push({p.t1, i});
    }
    if (++since_exact == 1024) {
      since_exact = 0;
      sum_intercept = sum_slope = 0;
      for (size_t i = 0; i < n; ++i) {
        if (!on[i]) continue;
        sum_intercept += intercept[i];
        sum_slope += slope[i];
      }
    }
    if (active > 0) consider(sum_intercept + sum_slope * x);  // just after t
  }
  return peak;
}

Figures IntegrateNodeMetric(const std::map<std::string, Series>& all, UnixNanos a, UnixNanos b,
                            double gap_factor, int64_t* period_out, RowKind kind) {
  Figures sum;
  bool first = true;
  int64_t period = 0;
  std::vector<SeriesPeriod> parts;
  for (const auto& [labels, series] : all) {
    int64_t p = ReadingPeriod(series, kind);
    period = std::max(period, p);
    parts.push_back({&series, p});
    Figures f = IntegrateSeries(series, a, b, p, gap_factor, kind);
    // The interval's terms of a figure that is reported (not of a coverage asked in passing).
    f.terms = SeriesErrorTerms(series, a, b, p, gap_factor, kind);
    if (first) {
      sum = f;
      first = false;
    } else {
      // Series of one node (PDU outlets, PSUs): the node is covered where all of them are.
      sum.joules += f.joules;
      sum.gap_joules += f.gap_joules;
      sum.covered_seconds = std::min(sum.covered_seconds, f.covered_seconds);
      sum.gaps += f.gaps;
      sum.has_power = sum.has_power || f.has_power;
      sum.terms.Add(f.terms);  // the series' meters err apart; their powers add at the edges
    }
  }
  // Several series (PSUs): the peak of their sum, not the sum of their peaks.
  if (parts.size() > 1 && sum.has_power) {
    sum.peak_watts = PeakOfSum(parts, a, b, gap_factor, kind);
  }
  if (period_out) *period_out = period;
  return sum;
}

namespace {

std::string Describe(const std::string& metric) {
  if (metric == "wattmetre_power_watt") return "external wattmeter";
  if (metric == "pdu_outlet_power_watt") return "PDU outlet (external)";
  if (metric == "bmc_node_power_watt") return "BMC: coarse, averaged, may be inaccurate";
  if (metric == "bmc_psu_power_watt") return "BMC per-PSU power, summed: coarse";
  return "requested";
}

std::string Percent(double fraction) {
  char text[16];
  double percent = fraction * 100;
  // A stray row covers 0.06 % of a window, not "0%".
  std::snprintf(text, sizeof text, percent > 0 && percent < 1 ? "%.1g%%" : "%.0f%%", percent);
  return text;
}

// Series with a handful of samples beside one with many, and series covering a small fraction of
// what the best one covers, are no meter (FindStraySeries).
constexpr int64_t kHandfulOfSamples = 10;
constexpr double kStrayCoverage = 0.25;
constexpr int64_t kStrayReach = 10;

}  // namespace

std::vector<StraySeries> FindStraySeries(const std::map<std::string, Series>& all, UnixNanos a,
                                         UnixNanos b, double gap_factor, RowKind kind) {
  std::vector<StraySeries> stray;
  if (all.size() < 2 || b <= a) return stray;
  struct Look {
    const std::string* labels;
    int64_t samples;
    double covered;
    bool aside = false;
  };
  std::vector<Look> looks;
  int64_t most_samples = 0;
  // Samples are counted over the window and kStrayReach periods of the slowest series on each
  // side (where rows were read beyond it): in a window of one period, a PSU's outlet with no sample
  // inside is as much a meter as the one with a sample.
  int64_t reach = 0;
  for (const auto& [labels, series] : all) reach = std::max(reach, ReadingPeriod(series, kind));
  reach *= kStrayReach;
  for (const auto& [labels, series] : all) {
    const int64_t period = ReadingPeriod(series, kind);
    // A summary row counts from its bucket's start, up to a period before a.
    const UnixNanos from = (kind == RowKind::kBucketMeans ? a - period + 1 : a) - reach;
    int64_t samples = std::upper_bound(series.time.begin(), series.time.end(), b + reach) -
                      std::lower_bound(series.time.begin(), series.time.end(), from);
    double covered = IntegrateSeries(series, a, b, period, gap_factor, kind).covered_seconds;
    looks.push_back({&labels, samples, covered});
    most_samples = std::max(most_samples, samples);
  }
  double best_covered = 0;
  for (Look& look : looks) {
    look.aside =
        look.samples < kHandfulOfSamples && look.samples * 10 <= most_samples && most_samples > 0;
    if (!look.aside) best_covered = std::max(best_covered, look.covered);
  }
  const double seconds = SecondsOf(b - a);
  for (Look& look : looks) {
    look.aside = look.aside || look.covered < kStrayCoverage * best_covered;
    if (!look.aside) continue;
    stray.push_back({*look.labels,
                     std::to_string(look.samples) + (look.samples == 1 ? " sample" : " samples") +
                         " in the window, covering " + Percent(look.covered / seconds) + " of it"});
  }
  return stray;
}

PowerChoice ChoosePowerMetric(const PowerCollector& data, const std::string& node, UnixNanos start,
                              UnixNanos end, const std::vector<std::string>& order,
                              double gap_factor,
                              const std::vector<std::string>* catalogue_metrics) {
  auto node_data = data.store().find(node);
  std::vector<PowerChoice> candidates;
  std::string notes;
  for (const std::string& metric : order) {
    const std::map<std::string, Series>* series = nullptr;
    if (node_data != data.store().end()) {
      auto it = node_data->second.find(metric);
      if (it != node_data->second.end()) series = &it->second;
    }
    if (!series) {
      bool listed = catalogue_metrics &&
                    std::find(catalogue_metrics->begin(), catalogue_metrics->end(), metric) !=
                        catalogue_metrics->end();
      if (int64_t nan = data.NanRows(node, metric); nan > 0) {
        notes += metric + " returned only NaN values (" + std::to_string(nan) + " rows); ";
      } else if (listed) {
        notes += metric + " is in the catalogue but returned no row; ";
      }
      continue;
    }
    PowerChoice candidate;
    candidate.metric = metric;
    candidate.series = series;
    candidate.set_aside = FindStraySeries(*series, start, end, gap_factor, data.kind());
    if (!candidate.set_aside.empty()) {
      auto kept = std::make_shared<std::map<std::string, Series>>(*series);
      for (const StraySeries& stray : candidate.set_aside) kept->erase(stray.labels);
      candidate.kept = kept;
      candidate.series = kept.get();
    }
    candidate.window = IntegrateNodeMetric(*candidate.series, start, end, gap_factor,
                                           &candidate.period, data.kind());
    candidates.push_back(candidate);
  }
  const PowerChoice* chosen = nullptr;
  for (const PowerChoice& c : candidates) {
    if (c.window.coverage() >= 0.95) {
      chosen = &c;
      break;
    }
    notes += c.metric + " covers only " + Percent(c.window.coverage()) + " of the window; ";
  }
  if (!chosen && !candidates.empty()) {
    chosen = &*std::max_element(candidates.begin(), candidates.end(),
                                [](const PowerChoice& x, const PowerChoice& y) {
                                  return x.window.coverage() < y.window.coverage();
                                });
    notes += "the best coverage is kept; ";
  }
  if (!chosen) {
    std::string asked;
    for (const std::string& m : order) asked += (asked.empty() ? "" : ", ") + m;
    PowerChoice none;
    none.reason =
        "no power metric: " + (notes.empty() ? "no row of " + asked + " for this node in the window"
                                             : notes.substr(0, notes.size() - 2));
    return none;
  }
  PowerChoice result = *chosen;
  result.reason =
      Describe(chosen->metric) + (notes.empty() ? "" : "; " + notes.substr(0, notes.size() - 2));
  if (!result.set_aside.empty()) {
    result.reason += "; set aside, no meter of this node:";
    for (const StraySeries& stray : result.set_aside) {
      result.reason += (&stray == &result.set_aside.front() ? " " : ", ") + result.metric + " " +
                       stray.labels + " (" + stray.why + ")";
    }
  }
  return result;
}

}  // namespace kwatt::energy
