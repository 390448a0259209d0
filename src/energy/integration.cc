// Integration of power series and the choice of a node's power metric (integration.h).
#include "kwatt/energy/integration.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kwatt::energy {

namespace {

using Series = PowerCollector::Series;

double SecondsOf(int64_t ns) { return double(ns) / 1e9; }

// Energy of the straight line from (t0, v0) to (t1, v1), restricted to [a, b].
double SegmentJoules(UnixNanos t0, double v0, UnixNanos t1, double v1, UnixNanos a, UnixNanos b,
                     double* seconds) {
  UnixNanos lo = std::max(t0, a), hi = std::min(t1, b);
  *seconds = 0;
  if (hi <= lo) return 0;
  auto at = [&](UnixNanos x) {
    return t1 == t0 ? v0 : v0 + (v1 - v0) * (double(x - t0) / double(t1 - t0));
  };
  *seconds = SecondsOf(hi - lo);
  return 0.5 * (at(lo) + at(hi)) * *seconds;
}
}  // namespace

int64_t MedianInterval(const Series& s) {
  if (s.time.size() < 2) return kNanosPerSecond;
  std::vector<int64_t> steps;
  steps.reserve(s.time.size() - 1);
  for (size_t i = 1; i < s.time.size(); ++i) steps.push_back(s.time[i] - s.time[i - 1]);
  std::nth_element(steps.begin(), steps.begin() + steps.size() / 2, steps.end());
  return std::max<int64_t>(steps[steps.size() / 2], 1);
}

// Before the first and after the last sample the first/last value is held for up to one period
// (measured); beyond that the time is uncovered and nothing is estimated (a gap with no sample on
// its other side: holding the value across it would be extrapolating).
Figures IntegrateSeries(const Series& s, UnixNanos a, UnixNanos b, int64_t period,
                        double gap_factor) {
  Figures f;
  f.seconds = SecondsOf(b - a);
  f.node_seconds = f.seconds;
  if (s.time.empty() || b <= a) {
    f.gaps = b > a ? 1 : 0;
    return f;
  }
  int64_t gap = int64_t(gap_factor * double(period));
  // A stretch of `seconds`: measured, estimated in a gap, or (`known` false) unknown, a gap with
  // no estimate.
  auto account = [&](double joules, double seconds, bool is_gap, bool known = true) {
    if (seconds <= 0) return;
    f.has_power = f.has_power || known;
    if (is_gap) {
      f.gap_joules += joules;
      ++f.gaps;
    } else {
      f.joules += joules;
      f.covered_seconds += seconds;
    }
  };
  size_t first = size_t(std::lower_bound(s.time.begin(), s.time.end(), a) - s.time.begin());
  size_t begin = first > 0 ? first - 1 : 0;  // the sample before a, for interpolation
  double seconds = 0;
  // Before the first sample: held for one period, then nothing.
  if (s.time[0] > a) {
    UnixNanos edge = std::min(s.time[0], b);
    UnixNanos held = std::max(a, s.time[0] - period);
    if (edge > held) account(s.value[0] * SecondsOf(edge - held), SecondsOf(edge - held), false);
    if (held > a) account(0, SecondsOf(held - a), true, false);
  }
  for (size_t i = begin; i + 1 < s.time.size() && s.time[i] < b; ++i) {
    double joules =
        SegmentJoules(s.time[i], s.value[i], s.time[i + 1], s.value[i + 1], a, b, &seconds);
    account(joules, seconds, s.time[i + 1] - s.time[i] > gap);
  }
  // After the last sample: the same.
  if (s.time.back() < b) {
    UnixNanos edge = std::max(s.time.back(), a);
    UnixNanos held = std::min(b, s.time.back() + period);
    if (held > edge)
      account(s.value.back() * SecondsOf(held - edge), SecondsOf(held - edge), false);
    if (b > held) account(0, SecondsOf(b - held), true, false);
  }
  for (size_t i = first; i < s.time.size() && s.time[i] <= b; ++i) {
    f.peak_watts = std::max(f.peak_watts, s.value[i]);
  }
  return f;
}

Figures IntegrateNodeMetric(const std::map<std::string, Series>& all, UnixNanos a, UnixNanos b,
                            double gap_factor, int64_t* period_out) {
  Figures sum;
  bool first = true;
  int64_t period = 0;
  for (const auto& [labels, series] : all) {
    int64_t p = MedianInterval(series);
    period = std::max(period, p);
    Figures f = IntegrateSeries(series, a, b, p, gap_factor);
    if (first) {
      sum = f;
      first = false;
    } else {
      // Series of one node (PDU outlets, PSUs): the node is covered where all of them are.
      sum.joules += f.joules;
      sum.gap_joules += f.gap_joules;
      sum.covered_seconds = std::min(sum.covered_seconds, f.covered_seconds);
      sum.gaps += f.gaps;
      sum.peak_watts += f.peak_watts;
      sum.has_power = sum.has_power || f.has_power;
    }
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
  std::snprintf(text, sizeof text, "%.0f%%", fraction * 100);
  return text;
}

}  // namespace

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
      if (listed) notes += metric + " is in the catalogue but returned no row; ";
      continue;
    }
    PowerChoice candidate;
    candidate.metric = metric;
    candidate.series = series;
    candidate.window = IntegrateNodeMetric(*series, start, end, gap_factor, &candidate.period);
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
  return result;
}

}  // namespace kwatt::energy
