#include "kwatt/energy/energy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <tuple>

#include "kwatt/core/catalogue.h"
#include "kwatt/energy/integration.h"
#include "kwatt/energy/source_check.h"
#include "src/energy/power_pieces.h"

namespace kwatt::energy {

void Figures::Add(const Figures& other) {
  seconds = std::max(seconds, other.seconds);
  joules += other.joules;
  gap_joules += other.gap_joules;
  // Coverage of a sum: covered node-time over node-time.
  covered_seconds += other.covered_seconds;
  node_seconds += other.node_seconds;
  gaps += other.gaps;
  terms.Add(other.terms);
  peak_watts = has_power ? (other.has_power ? std::max(peak_watts, other.peak_watts) : peak_watts)
                         : other.peak_watts;
  has_power = has_power || other.has_power;
  auto add_nan = [](double a, double b) { return std::isnan(a) ? b : std::isnan(b) ? a : a + b; };
  counter_joules = add_nan(counter_joules, other.counter_joules);
  baseline_joules = add_nan(baseline_joules, other.baseline_joules);
}

void Figures::Extend(const Figures& later) {
  seconds += later.seconds;
  joules += later.joules;
  gap_joules += later.gap_joules;
  covered_seconds += later.covered_seconds;
  node_seconds += later.node_seconds;
  gaps += later.gaps;
  terms.Add(later.terms);
  peak_watts = has_power ? (later.has_power ? std::max(peak_watts, later.peak_watts) : peak_watts)
                         : later.peak_watts;
  has_power = has_power || later.has_power;
  auto add_nan = [](double a, double b) { return std::isnan(a) ? b : std::isnan(b) ? a : a + b; };
  counter_joules = add_nan(counter_joules, later.counter_joules);
  baseline_joules = add_nan(baseline_joules, later.baseline_joules);
}

PowerCollector::PowerCollector(std::vector<std::string> nodes, std::string metric, RowKind kind)
    : nodes_(std::move(nodes)), metric_(std::move(metric)), kind_(kind) {}

namespace {

bool Wanted(std::string_view metric) {
  for (const std::string& m : PowerMetrics()) {
    if (m == metric) return true;
  }
  for (const std::string& m : PartOfNodeMetrics()) {
    if (m == metric) return true;
  }
  for (const std::string& m : EnergyCounters()) {
    if (m == metric) return true;
  }
  return false;
}

double Seconds(int64_t ns) { return double(ns) / 1e9; }

}  // namespace

int detail::RowNodeIndex::Find(const std::vector<std::string>& nodes, std::string_view site,
                               uint32_t device, const StringInterner& interner) {
  if (interner.serial() != interner_ || site != site_) {
    interner_ = interner.serial();
    site_ = std::string(site);
    cache_.clear();
  }
  if (device >= cache_.size()) cache_.resize(interner.size(), -2);
  int& index = cache_[device];
  if (index == -2) {
    std::string fqdn = std::string(interner.Get(device)) + "." + site_ + ".grid5000.fr";
    auto it = std::find(nodes.begin(), nodes.end(), fqdn);
    index = it == nodes.end() ? -1 : int(it - nodes.begin());
  }
  return index;
}

Status PowerCollector::Write(std::string_view site, const RowBatch& batch,
                             const StringInterner& interner) {
  if (interner.serial() != metric_interner_) {
    metric_interner_ = interner.serial();
    wanted_metric_.clear();
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    uint32_t metric_id = batch.metric[i];
    if (metric_id >= wanted_metric_.size()) wanted_metric_.resize(interner.size(), -1);
    int8_t& wanted = wanted_metric_[metric_id];
    if (wanted < 0) {
      std::string_view metric = interner.Get(metric_id);
      wanted = Wanted(metric) || (!metric_.empty() && metric == metric_) ? 1 : 0;
    }
    if (!wanted) continue;
    int node = lookup_.Find(nodes_, site, batch.device[i], interner);
    if (node < 0) continue;
    // One series per labels text, exactly (the PSU, the outlet...; `_device_orig` included:
    // it is the same for every row of a series).
    Add(nodes_[size_t(node)], std::string(interner.Get(metric_id)),
        std::string(interner.Get(batch.labels[i])), batch.time[i], batch.value[i]);
  }
  return Status::OK();
}

int64_t PowerCollector::NanRows(const std::string& node, const std::string& metric) const {
  auto by_node = nan_rows_.find(node);
  if (by_node == nan_rows_.end()) return 0;
  auto it = by_node->second.find(metric);
  return it == by_node->second.end() ? 0 : it->second;
}

void PowerCollector::Add(const std::string& node, const std::string& metric,
                         const std::string& labels, UnixNanos t, double value) {
  if (std::isnan(value)) {
    ++nan_rows_[node][metric];
    return;
  }
  Series& series = store_[node][metric][labels];
  series.time.push_back(t);
  series.value.push_back(value);
}

namespace {

using Series = PowerCollector::Series;

// The counter's value at t, interpolated; NaN when t is outside its samples by more than `slack`.
double CounterAt(const Series& s, UnixNanos t, int64_t slack) {
  if (s.time.empty() || t < s.time.front() - slack || t > s.time.back() + slack) return NAN;
  auto it = std::lower_bound(s.time.begin(), s.time.end(), t);
  if (it == s.time.begin()) return s.value.front();
  if (it == s.time.end()) return s.value.back();
  size_t i = size_t(it - s.time.begin());
  double w = double(t - s.time[i - 1]) / double(s.time[i] - s.time[i - 1]);
  return s.value[i - 1] + (s.value[i] - s.value[i - 1]) * w;
}

}  // namespace

namespace {

// InvalidArgument: "NAME should be WHAT, not VALUE".
Status RefusedNumber(std::string_view name, std::string_view what, double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return Status::InvalidArgument(std::string(name) + " should be " + std::string(what) + ", not " +
                                 text);
}

}  // namespace

Status CheckClockOffset(double seconds, std::string_view name) {
  if (std::isfinite(seconds) && seconds >= 0 && seconds <= 3600) return Status::OK();
  return RefusedNumber(name,
                       "the most the clock that took the marks may be off the meters', in "
                       "seconds from 0 to 3600",
                       seconds);
}

Status CheckGapFactor(double gap_factor, std::string_view name) {
  if (std::isfinite(gap_factor) && gap_factor >= 1) return Status::OK();
  return RefusedNumber(name,
                       "a finite number of at least 1 (the sampling periods without a sample "
                       "that make a gap)",
                       gap_factor);
}

Status CheckPhases(const std::vector<Interval>& phases) {
  for (const Interval& phase : phases) {
    std::string span = FormatParisTimestamp(phase.start) + " .. " + FormatParisTimestamp(phase.end);
    if (phase.name.empty()) {
      return Status::InvalidArgument("a phase needs a name (" + span + " has none)");
    }
    if (phase.name == "window") {
      return Status::InvalidArgument(
          "the phase name \"window\" is reserved: it names the whole window's figures; give the "
          "phase " +
          span + " another name");
    }
    if (phase.end == phase.start) {
      return Status::InvalidArgument("phase " + phase.name + " is empty: it starts and ends at " +
                                     FormatParisTimestamp(phase.start) +
                                     "; give a phase that lasts");
    }
    if (phase.end < phase.start) {
      return Status::InvalidArgument("phase " + phase.name + " ends (" +
                                     FormatParisTimestamp(phase.end) + ") before it starts (" +
                                     FormatParisTimestamp(phase.start) + ")");
    }
  }
  return Status::OK();
}

std::vector<Role> MergeRoles(const std::vector<Role>& roles) {
  std::vector<Role> merged;
  for (const Role& role : roles) {
    auto it = std::find_if(merged.begin(), merged.end(),
                           [&](const Role& r) { return r.name == role.name; });
    if (it == merged.end()) {
      merged.push_back(Role{role.name, {}});
      it = merged.end() - 1;
    }
    for (const std::string& node : role.nodes) {
      if (std::find(it->nodes.begin(), it->nodes.end(), node) == it->nodes.end()) {
        it->nodes.push_back(node);
      }
    }
  }
  return merged;
}

namespace {

std::string Span(UnixNanos a, UnixNanos b) {
  return FormatParisTimestamp(a) + " .. " + FormatParisTimestamp(b);
}

// Where the power data is: from one period before the first sample to one period after the last
// (summary rows: from the first bucket's start to the last one's end), over every node and power
// metric in `metrics`, stray series (FindStraySeries over [start, end]) left out: a row pushed an
// hour after the data does not stretch it. False when there is none.
bool DataSpan(const PowerCollector& data, const std::vector<std::string>& metrics, UnixNanos start,
              UnixNanos end, double gap_factor, UnixNanos* lo, UnixNanos* hi) {
  bool any = false;
  for (const auto& [node, by_metric] : data.store()) {
    for (const std::string& metric : metrics) {
      auto it = by_metric.find(metric);
      if (it == by_metric.end()) continue;
      std::vector<StraySeries> stray =
          FindStraySeries(it->second, start, end, gap_factor, data.kind());
      for (const auto& [labels, series] : it->second) {
        if (series.time.empty()) continue;
        const std::string& these = labels;  // clang 14 captures no structured binding
        if (std::any_of(stray.begin(), stray.end(),
                        [&](const StraySeries& s) { return s.labels == these; })) {
          continue;
        }
        const int64_t period = ReadingPeriod(series, data.kind());
        const bool samples = data.kind() == RowKind::kSamples;
        const internal::Cadence cadence(series, period, gap_factor);
        UnixNanos first = series.time.front() - (samples ? cadence.AtStart() : 0);
        UnixNanos last = series.time.back() + (samples ? cadence.AtEnd() : period);
        *lo = any ? std::min(*lo, first) : first;
        *hi = any ? std::max(*hi, last) : last;
        any = true;
      }
    }
  }
  return any;
}

// A phase's intervals: clipped to [lo, hi], their union (sorted, disjoint).
struct PhasePlan {
  std::vector<std::string> names;
  std::vector<Interval> intervals;  // disjoint within a phase, each with its phase's name
  std::vector<size_t> phase_of;     // per interval: index in names
};

Result<PhasePlan> PlanPhases(const std::vector<Interval>& phases, bool clip, UnixNanos lo,
                             UnixNanos hi, std::vector<std::string>* notes) {
  PhasePlan plan;
  std::vector<std::vector<std::pair<UnixNanos, UnixNanos>>> by_name;
  for (const Interval& phase : phases) {
    auto it = std::find(plan.names.begin(), plan.names.end(), phase.name);
    size_t index = size_t(it - plan.names.begin());
    if (it == plan.names.end()) {
      plan.names.push_back(phase.name);
      by_name.emplace_back();
    }
    UnixNanos a = phase.start, b = phase.end;
    if (clip) {
      a = std::max(a, lo);
      b = std::min(b, hi);
      if (b <= a) {
        notes->push_back("phase " + phase.name + ": " + Span(phase.start, phase.end) +
                         " left out: no power data then (the data covers " + Span(lo, hi) + ")");
        continue;
      }
      if (a != phase.start || b != phase.end) {
        notes->push_back("phase " + phase.name + " clipped to " + Span(a, b) + " (asked " +
                         Span(phase.start, phase.end) + "): no power data outside it");
      }
    }
    by_name[index].emplace_back(a, b);
  }
  for (size_t p = 0; p < plan.names.size(); ++p) {
    auto& list = by_name[p];
    if (list.empty()) {
      return Status::InvalidArgument("phase " + plan.names[p] +
                                     " has no power data: it is outside the data's window " +
                                     Span(lo, hi) + "; give a phase within it");
    }
    std::sort(list.begin(), list.end());
    std::vector<std::pair<UnixNanos, UnixNanos>> merged;
    bool overlapped = false;
    for (const auto& [a, b] : list) {
      if (!merged.empty() && a < merged.back().second) {
        overlapped = true;
        merged.back().second = std::max(merged.back().second, b);
      } else {
        merged.emplace_back(a, b);
      }
    }
    if (overlapped) {
      notes->push_back("phase " + plan.names[p] +
                       ": overlapping intervals merged (each instant counted once)");
    }
    for (const auto& [a, b] : merged) {
      plan.intervals.push_back(Interval{plan.names[p], a, b});
      plan.phase_of.push_back(p);
    }
  }
  return plan;
}

// Corruption when a value of the series a node's energy is computed from is not finite or beyond
// kMaxPlausibleWatts: an infinite (or absurd) energy is no answer.
Status CheckPowerValues(const std::string& node, const std::string& metric,
                        const std::map<std::string, Series>& all) {
  for (const auto& [labels, series] : all) {
    for (size_t i = 0; i < series.value.size(); ++i) {
      double v = series.value[i];
      if (std::isfinite(v) && std::fabs(v) <= kMaxPlausibleWatts) continue;
      char text[32];
      std::snprintf(text, sizeof text, "%g", v);
      return Status::Corruption(
          node + ": " + metric + (labels == "{}" ? "" : " " + labels) + " reads " + text +
          " W at " + FormatParisTimestamp(series.time[i]) +
          ", which no node draws (not a finite number of at most 1 MW): no energy is computed "
          "from it; remove the row, or choose another power metric");
    }
  }
  return Status::OK();
}

// Corruption when one of a node's figures is not finite (an energy counter's values can be as
// absurd as a power's).
Status CheckFiniteFigures(const NodeEnergy& node, const std::vector<std::string>& phase_names) {
  auto check = [&](const Figures& f, const std::string& over) {
    for (double v : {f.joules, f.gap_joules, f.peak_watts}) {
      if (!std::isfinite(v)) {
        return Status::Corruption(node.node + ": " + node.metric + " gives a non-finite energy " +
                                  over + ": its values are no measurement");
      }
    }
    if (std::isinf(f.counter_joules)) {
      return Status::Corruption(node.node + ": " + node.counter_metric +
                                " gives a non-finite energy " + over +
                                ": its values are no measurement");
    }
    return Status::OK();
  };
  KWATT_RETURN_IF_ERROR(check(node.window, "over the window"));
  for (size_t p = 0; p < node.phases.size() && p < phase_names.size(); ++p) {
    KWATT_RETURN_IF_ERROR(check(node.phases[p], "over phase " + phase_names[p]));
  }
  return Status::OK();
}

// The figures of a node without power data over an interval: its time, uncovered.
Figures Uncovered(UnixNanos a, UnixNanos b) {
  Figures f;
  f.seconds = f.node_seconds = Seconds(b - a);
  return f;
}

// Notes where the window or a phase cuts 5-minute buckets of summary rows, which know only each
// bucket's mean.
void NoteBucketCuts(const PhasePlan& plan, size_t phase_count, bool any_data, UnixNanos start,
                    UnixNanos end, std::vector<std::string>* notes) {
  auto off_grid = [](UnixNanos t) { return t % kSummaryBucketNanos != 0; };
  if (any_data && (off_grid(start) || off_grid(end))) {
    notes->push_back("window: " + Span(start, end) +
                     " cuts 5-minute buckets of the summary rows: the part of a bucket "
                     "inside it counts at the bucket's mean power");
  }
  std::vector<bool> noted(phase_count, false);
  for (size_t p = 0; p < plan.intervals.size(); ++p) {
    const Interval& interval = plan.intervals[p];
    if (noted[plan.phase_of[p]] || !(off_grid(interval.start) || off_grid(interval.end))) {
      continue;
    }
    noted[plan.phase_of[p]] = true;
    notes->push_back("phase " + interval.name + ": " + Span(interval.start, interval.end) +
                     " cuts 5-minute buckets of the summary rows: the part of a bucket "
                     "inside it counts at the bucket's mean power");
  }
}

// The figures of each phase from those of the plan's intervals (a phase given several times
// extends over all of them); a phase without an interval keeps empty figures.
std::vector<Figures> PhasesOf(const PhasePlan& plan, size_t phase_count,
                              const std::vector<Figures>& intervals) {
  std::vector<Figures> phases(phase_count);
  std::vector<bool> seen(phase_count, false);
  for (size_t p = 0; p < plan.intervals.size(); ++p) {
    size_t k = plan.phase_of[p];
    if (!seen[k]) {
      phases[k] = intervals[p];
      seen[k] = true;
    } else {
      phases[k].Extend(intervals[p]);
    }
  }
  return phases;
}

// Cross-checks a node's energy with the first energy counter it reports (EnergyCounters()): the
// counter's increase over the window and over each of the plan's intervals.
void CrossCheckWithCounter(const PowerCollector::Store::mapped_type& node_data, RowKind kind,
                           UnixNanos start, UnixNanos end, const PhasePlan& plan,
                           NodeEnergy* result, std::vector<Figures>* intervals) {
  for (const std::string& counter : EnergyCounters()) {
    auto it = node_data.find(counter);
    if (it == node_data.end()) continue;
    result->counter_metric = counter;
    // A counter's summary row is its maximum over the bucket: its value at the bucket's end.
    const int64_t shift = kind == RowKind::kBucketMeans ? kSummaryBucketNanos : 0;
    auto increase = [&](UnixNanos a, UnixNanos b) {
      double total = 0;
      for (const auto& [labels, series] : it->second) {
        int64_t slack = 2 * MedianInterval(series);
        total += (CounterAt(series, b - shift, slack) - CounterAt(series, a - shift, slack)) * 3600;
      }
      return total;
    };
    result->window.counter_joules = increase(start, end);
    for (size_t p = 0; p < plan.intervals.size(); ++p) {
      (*intervals)[p].counter_joules = increase(plan.intervals[p].start, plan.intervals[p].end);
    }
    return;
  }
}

// What every node's figures are computed over: the window, clipped to the data's, the phases
// within it and the options.
struct ReportPlan {
  ReportPlan(const PowerCollector& data, const EnergyOptions& options)
      : data(data), options(options) {}

  const PowerCollector& data;
  const EnergyOptions& options;
  std::vector<std::string> order;  // the power metrics a node's is chosen among, preferred first
  UnixNanos start = 0, end = 0;    // the window reported
  PhasePlan phases;
  size_t phase_count = 0;
  int baseline_index = -1;  // in phases.names; -1: no baseline
  // The figures of a node without power data, per phase: its time, uncovered.
  std::vector<Figures> uncovered_phases;
};

// Sets the report's window to the one asked, clipped to the data's (nothing is extrapolated past
// the data), with a note when clipped. Returns whether there is any data; InvalidArgument when
// there is some, but none in the window.
Result<bool> ClipWindow(const PowerCollector& data, const std::vector<std::string>& order,
                        double gap_factor, EnergyReport* report) {
  const UnixNanos requested_start = report->requested_start;
  const UnixNanos requested_end = report->requested_end;
  UnixNanos lo = 0, hi = 0;
  bool any_data = DataSpan(data, order, requested_start, requested_end, gap_factor, &lo, &hi);
  UnixNanos start = requested_start, end = requested_end;
  if (any_data) {
    start = std::max(start, lo);
    end = std::min(end, hi);
    // Time whose rows could not be fetched is not time without data: the window keeps it, and
    // its energy counts it as uncovered.
    auto unfetched = [&](UnixNanos a, UnixNanos b) {
      return a < b &&
             std::any_of(data.unfetched_spans().begin(), data.unfetched_spans().end(),
                         [&](const auto& span) { return span.first < b && a < span.second; });
    };
    const bool keep_start = unfetched(requested_start, start);
    const bool keep_end = unfetched(end, requested_end);
    if (keep_start) start = requested_start;
    if (keep_end) end = requested_end;
    if (end <= start) {
      return Status::InvalidArgument("no power data in the window " +
                                     Span(requested_start, requested_end));
    }
    if (start != requested_start || end != requested_end) {
      report->notes.push_back("window clipped to " + Span(start, end) + " (asked " +
                              Span(requested_start, requested_end) + "): no power data outside it");
    }
    if (keep_start || keep_end) {
      report->notes.push_back(
          "the window keeps time whose rows could not be fetched (NOT FETCHED): it counts as "
          "uncovered, not as time without data");
    }
  }
  report->start = start;
  report->end = end;
  return any_data;
}

// The index of `baseline_phase` in `phase_names`; -1 when none is given.
Result<int> BaselineIndex(const std::string& baseline_phase,
                          const std::vector<std::string>& phase_names) {
  if (baseline_phase.empty()) return -1;
  auto it = std::find(phase_names.begin(), phase_names.end(), baseline_phase);
  if (it == phase_names.end()) {
    return Status::InvalidArgument("the baseline phase \"" + baseline_phase +
                                   "\" is not one of the phases given");
  }
  return int(it - phase_names.begin());
}

// The series of each node's power, in the order of the report's nodes (none for a node without
// power), for the peaks of sums over nodes, which Figures::Add cannot know.
class NodeSeries {
 public:
  explicit NodeSeries(const ReportPlan& plan) : plan_(plan) {}

  // The next node's series: those `chosen` (none when it chose no metric). They must outlive this.
  void Add(const PowerChoice& chosen) {
    node_series_.emplace_back();
    if (chosen.metric.empty()) return;
    if (chosen.kept) kept_series_.push_back(chosen.kept);
    for (const auto& [labels, series] : *chosen.series) {
      node_series_.back().push_back({&series, ReadingPeriod(series, plan_.data.kind())});
    }
  }

  // Sets the peaks of a sum over nodes (`members`, indices in the report's nodes) over the window
  // and each phase: the peak of their summed power.
  void SetPeaksOfSum(const std::vector<size_t>& members, Figures* window,
                     std::vector<Figures>* phases) const {
    const PhasePlan& plan = plan_.phases;
    const double gap_factor = plan_.options.gap_factor;
    std::vector<SeriesPeriod> parts;
    for (size_t k : members)
      parts.insert(parts.end(), node_series_[k].begin(), node_series_[k].end());
    if (parts.empty()) return;
    if (window->has_power) {
      window->peak_watts = PeakOfSum(parts, plan_.start, plan_.end, gap_factor, plan_.data.kind());
    }
    std::vector<double> peaks(plan_.phase_count, NAN);
    for (size_t p = 0; p < plan.intervals.size(); ++p) {
      double peak = PeakOfSum(parts, plan.intervals[p].start, plan.intervals[p].end, gap_factor,
                              plan_.data.kind());
      double& phase_peak = peaks[plan.phase_of[p]];
      if (!std::isnan(peak))
        phase_peak = std::isnan(phase_peak) ? peak : std::max(phase_peak, peak);
    }
    for (size_t p = 0; p < plan_.phase_count; ++p) {
      if ((*phases)[p].has_power && !std::isnan(peaks[p])) (*phases)[p].peak_watts = peaks[p];
    }
  }

 private:
  const ReportPlan& plan_;
  std::vector<std::vector<SeriesPeriod>> node_series_;
  // The copies of the series kept where some were set aside (PowerChoice::kept): node_series_
  // points into them, so they live as long as it does.
  std::vector<std::shared_ptr<const std::map<std::string, PowerCollector::Series>>> kept_series_;
};

// The stated accuracy's bound in each of a node's figures (its metric's, AccuracyOf): relative x
// energy + watts x the time each of its series (each a meter: a 2-PSU node's outlets) measured.
// NaN for a metric without one (an unknown --metric).
void SetAccuracyBounds(const std::map<std::string, StatedAccuracy>& accuracies, NodeEnergy* node) {
  const StatedAccuracy* accuracy = AccuracyOf(node->metric, accuracies);
  auto set = [&](Figures& f) {
    f.terms.accuracy_bound = accuracy == nullptr
                                 ? NAN
                                 : accuracy->relative * std::fabs(f.total_joules()) +
                                       accuracy->watts * node->series * f.covered_seconds;
  };
  set(node->window);
  for (Figures& f : node->phases) set(f);
}

// The least a preferred source must cover of the window itself to be kept with its missing edges
// filled from another source (rather than the other source taken for the whole window).
constexpr double kOwnCoverageToFill = 0.5;

// Another whole-node source of a node, for the stretches its chosen one does not cover.
struct StandIn {
  PowerChoice choice;
  const StatedAccuracy* accuracy = nullptr;
  // The chosen source's energy over this one's where both read the window: what its energy is
  // multiplied by where it stands in, so that a BMC reading 4 % low fills the wattmeter's edge at
  // the wattmeter's level. 1 where nothing was compared.
  double scale = 1;
};

// How long both sources must read the window, in periods of the stand-in, for its scale to be
// measured (else it is 1).
constexpr double kCalibrationPeriods = 20;

// What the node's other whole-node sources say of its chosen one over the window.
struct Vote {
  // Set aside: the source taken instead, with why.
  std::optional<PowerChoice> taken;
  // Kept though another source disagrees with it and nothing tells which of the two is wrong:
  // the one that reads farthest from it, and how far (its energy over the chosen one's, minus 1).
  std::string disputed_by;
  double relative = 0;  // NaN where the chosen one read 0 J
  double joules = 0;    // the other's energy over the window minus the chosen one's
};

// When the node's chosen source (`chosen`, chosen by preference) disagrees over the window with
// two other whole-node sources of `candidates` (the node's, each chosen alone) that agree with
// each other, the first of those in the order of preference is taken, with why: a wattmeter
// reading 20 % high while its PDU outlet and BMC agree is the one that is wrong, whatever the
// order of preference says. When it disagrees with others that do not so outvote it (one other
// source only, or a BMC too coarse to tell a 5 % error), it is kept, disputed.
Vote Outvoted(const ReportPlan& plan, const std::vector<StandIn>& candidates,
              const PowerChoice& chosen) {
  std::vector<SourceEnergy> sources = {{chosen.metric, chosen.window}};
  AddAveragingTerm(chosen.metric, *chosen.series, plan.start, plan.end, &sources[0].figures);
  std::vector<const PowerChoice*> others;
  for (const StandIn& candidate : candidates) {
    const PowerChoice& other = candidate.choice;
    if (other.metric == chosen.metric || other.window.coverage() < kComparableCoverage) continue;
    sources.push_back({other.metric, other.window});
    AddAveragingTerm(other.metric, *other.series, plan.start, plan.end, &sources.back().figures);
    others.push_back(&other);
  }
  Vote vote;
  if (others.empty()) return vote;
  const std::vector<SourceComparison> against_chosen =
      CompareSources(sources, 0, plan.options.accuracies);
  auto disagrees = [](const SourceComparison& c) {
    return c.verdict == SourceComparison::Verdict::kDisagrees;
  };
  for (const SourceComparison& c : against_chosen) {
    if (disagrees(c) && std::fabs(c.joules) > std::fabs(vote.joules)) {
      vote.disputed_by = c.metric;
      vote.relative = c.relative;
      vote.joules = c.joules;
    }
  }
  for (size_t i = 1; i < sources.size(); ++i) {
    if (!disagrees(against_chosen[i - 1])) continue;
    const std::vector<SourceComparison> against_i =
        CompareSources(sources, i, plan.options.accuracies);
    for (size_t j = 1; j < sources.size(); ++j) {
      // (against_i lists every source but i, the chosen one first.)
      if (j == i || !disagrees(against_chosen[j - 1])) continue;
      const SourceComparison& ij = against_i[j < i ? j : j - 1];
      if (ij.verdict != SourceComparison::Verdict::kAgrees) continue;
      auto versus = [&](size_t k) {
        const double relative =
            sources[0].figures.total_joules() / sources[k].figures.total_joules() - 1;
        char text[48];
        std::snprintf(text, sizeof text, "%.3g %% %s ", std::fabs(relative) * 100,
                      relative >= 0 ? "above" : "below");
        return text + sources[k].metric;
      };
      PowerChoice taken = *others[i - 1];
      taken.reason += "; " + chosen.metric + " set aside: it reads " + versus(i) + " and " +
                      versus(j) + ", beyond what their stated accuracies and data allow, and " +
                      "those two agree with each other";
      return {std::move(taken), "", 0};
    }
  }
  return vote;
}

// The stretches at the edges of [x, y] where none of a metric's `series` has power known (before
// the first sample's held period, after the last one's), each empty (from == to) when there is
// none.
struct UnknownEdges {
  UnixNanos before_to = 0;   // [x, before_to)
  UnixNanos after_from = 0;  // [after_from, y)
};
UnknownEdges UnknownEdgesOf(const std::map<std::string, PowerCollector::Series>& series,
                            UnixNanos x, UnixNanos y, double gap_factor, RowKind kind) {
  UnknownEdges edges{y, x};  // nothing known yet: all of it unknown
  for (const auto& [labels, s] : series) {
    internal::PieceReader reader(s, x, y, ReadingPeriod(s, kind), gap_factor, kind);
    internal::PowerPiece piece;
    while (reader.Next(&piece)) {
      if (piece.kind == internal::PowerPiece::kUnknown) continue;
      edges.before_to = std::min(edges.before_to, piece.t0);
      edges.after_from = std::max(edges.after_from, piece.t1);
    }
  }
  if (edges.after_from < edges.before_to) edges.after_from = edges.before_to = y;  // none known
  return edges;
}

// Fills the stretches at the edges of `f` (over [x, y]) where the chosen source (`chosen`) has no
// power known from the first of `others` that covers one: its energy there goes to gap_joules (an
// estimate, not covered time), its own interval terms and its stated accuracy's bound to the
// figure's gaps term, its highest power to the peak. Returns what was filled: how, for the reason
// ("12.0 s at the start from bmc_node_power_watt"; empty when nothing was), and how long.
struct Filled {
  std::string how;
  double seconds = 0;
};
Filled FillUnknownEdges(const ReportPlan& plan, const PowerChoice& chosen,
                        const std::vector<StandIn>& others, UnixNanos x, UnixNanos y, Figures* f) {
  Filled filled;
  if (others.empty() || y <= x) return filled;
  const UnknownEdges edges =
      UnknownEdgesOf(*chosen.series, x, y, plan.options.gap_factor, plan.data.kind());
  for (auto [from, to, where] :
       {std::tuple{x, edges.before_to, "start"}, std::tuple{edges.after_from, y, "end"}}) {
    if (to <= from) continue;
    for (const StandIn& other : others) {
      Figures part = IntegrateNodeMetric(*other.choice.series, from, to, plan.options.gap_factor,
                                         nullptr, plan.data.kind());
      if (!part.has_power || part.coverage() < kComparableCoverage) continue;
      AddAveragingTerm(other.choice.metric, *other.choice.series, from, to, &part);
      const double accuracy =
          other.accuracy ? other.accuracy->BoundJoules(part.total_joules(), part.seconds) : 0;
      f->gap_joules += other.scale * part.total_joules();
      f->terms.gaps_variance +=
          part.terms.sampling_variance + part.terms.gaps_variance + part.terms.resolution_variance +
          part.terms.resolution_bound * part.terms.resolution_bound / 3 + accuracy * accuracy / 3;
      f->peak_watts = f->has_power ? std::max(f->peak_watts, part.peak_watts) : part.peak_watts;
      f->has_power = true;
      char text[160];
      std::snprintf(text, sizeof text, "%s%.1f s at the %s from %s", filled.how.empty() ? "" : ", ",
                    Seconds(to - from), where, other.choice.metric.c_str());
      filled.how += text;
      filled.seconds += Seconds(to - from);
      break;
    }
  }
  return filled;
}

// A node's figures over the window and each phase, from the power metric chosen for it
// (`chosen`), cross-checked with its energy counter; without one, its time uncovered and why.
Result<NodeEnergy> NodeEnergyOf(
    const ReportPlan& plan, const std::string& node,
    const std::map<std::string, std::vector<std::string>>& catalogue_metrics, PowerChoice* chosen) {
  const PowerCollector& data = plan.data;
  NodeEnergy result;
  result.node = node;
  result.phases.resize(plan.phase_count);
  auto node_data = data.store().find(node);
  auto catalogue = catalogue_metrics.find(node);
  *chosen = ChoosePowerMetric(data, node, plan.start, plan.end, plan.order, plan.options.gap_factor,
                              catalogue == catalogue_metrics.end() ? nullptr : &catalogue->second);
  if (chosen->metric.empty()) {
    result.reason = chosen->reason;
    if (auto failed = data.unfetched().find(node); failed != data.unfetched().end()) {
      result.reason =
          "its rows could not all be fetched (" + failed->second + "); " + result.reason;
    }
    result.window = Uncovered(plan.start, plan.end);
    result.phases = plan.uncovered_phases;
    return result;
  }
  // Every whole-node source of the node, each as it would be chosen alone, in the order of
  // preference: to fill the edges the chosen one leaves without power, and to keep a preferred
  // source whose missing edges others fill (a wattmeter out across the window's start, the BMC
  // there), rather than take a coarser one for the whole window.
  std::vector<StandIn> sources;
  Vote vote;  // what the other sources say of the chosen one
  if (plan.options.metric.empty()) {
    for (const std::string& metric : plan.order) {
      const PowerSourceKind* kind = FindPowerSourceKind(metric);
      if (!kind || kind->scope != SourceScope::kWholeNode) continue;
      PowerChoice alone =
          ChoosePowerMetric(data, node, plan.start, plan.end, {metric}, plan.options.gap_factor);
      if (alone.metric.empty()) continue;
      sources.push_back({std::move(alone), AccuracyOf(metric, plan.options.accuracies)});
    }
    auto others_than = [&](const std::string& metric) {
      std::vector<StandIn> others;
      for (const StandIn& s : sources) {
        if (s.choice.metric != metric) others.push_back(s);
      }
      return others;
    };
    for (const StandIn& preferred : sources) {
      if (preferred.choice.metric == chosen->metric) break;  // none before the chosen one
      const Figures& w = preferred.choice.window;
      // Most of the window its own: a source missing most of it is not kept for a sliver.
      if (w.coverage() < kOwnCoverageToFill) continue;
      // Covered, or its edges filled by another source: as good as covered for the choice.
      Figures trial = w;
      const Filled filled =
          FillUnknownEdges(plan, preferred.choice, others_than(preferred.choice.metric), plan.start,
                           plan.end, &trial);
      if (filled.how.empty() || (w.covered_seconds + filled.seconds) / w.seconds < 0.95) continue;
      PowerChoice kept = preferred.choice;
      kept.reason = kept.reason.substr(0, kept.reason.find(';'));  // what it is; the fill follows
      *chosen = kept;
      break;
    }
    vote = Outvoted(plan, sources, *chosen);
    if (vote.taken) *chosen = *vote.taken;
  }
  KWATT_RETURN_IF_ERROR(CheckPowerValues(node, chosen->metric, *chosen->series));
  result.metric = chosen->metric;
  result.period_s = Seconds(chosen->period);
  result.series = int(chosen->series->size());
  result.coarse = chosen->metric.rfind("bmc_", 0) == 0;
  result.reason = chosen->reason;
  if (data.kind() == RowKind::kBucketMeans) {
    result.reason +=
        "; 5-minute summary rows, each its bucket's mean power: the energy is exact over whole "
        "buckets (one cut by an edge counts at its mean), the peak is the highest 5-minute "
        "mean, not the instantaneous peak";
  }
  // The node's other whole-node sources, in the order of preference, for the edges the chosen
  // one leaves without power (a wattmeter's outage across the window's start).
  std::vector<StandIn> others;
  for (const StandIn& s : sources) {
    if (s.choice.metric != chosen->metric) others.push_back(s);
  }
  if (!others.empty() && chosen->window.coverage() < 1) {
    // Each stand-in scaled to the chosen source over the part of the window the chosen one reads.
    const UnknownEdges unknown =
        UnknownEdgesOf(*chosen->series, plan.start, plan.end, plan.options.gap_factor, data.kind());
    const UnixNanos from = unknown.before_to, to = std::max(unknown.after_from, from);
    for (StandIn& other : others) {
      if (Seconds(to - from) < kCalibrationPeriods * Seconds(other.choice.period)) continue;
      Figures mine = IntegrateNodeMetric(*chosen->series, from, to, plan.options.gap_factor,
                                         nullptr, data.kind());
      Figures theirs = IntegrateNodeMetric(*other.choice.series, from, to, plan.options.gap_factor,
                                           nullptr, data.kind());
      if (mine.coverage() >= kComparableCoverage && theirs.coverage() >= kComparableCoverage &&
          theirs.total_joules() > 0) {
        other.scale = mine.total_joules() / theirs.total_joules();
      }
    }
  }
  result.window = chosen->window;
  AddAveragingTerm(chosen->metric, *chosen->series, plan.start, plan.end, &result.window);
  if (Filled filled = FillUnknownEdges(plan, *chosen, others, plan.start, plan.end, &result.window);
      !filled.how.empty()) {
    result.reason += "; where " + chosen->metric +
                     " has no reading, taken from another source: " + filled.how + " of the window";
  }
  const std::vector<Interval>& intervals_of_plan = plan.phases.intervals;
  std::vector<Figures> intervals(intervals_of_plan.size());
  for (size_t p = 0; p < intervals_of_plan.size(); ++p) {
    const Interval& interval = intervals_of_plan[p];
    intervals[p] = IntegrateNodeMetric(*chosen->series, interval.start, interval.end,
                                       plan.options.gap_factor, nullptr, data.kind());
    AddAveragingTerm(chosen->metric, *chosen->series, interval.start, interval.end, &intervals[p]);
    if (Filled filled =
            FillUnknownEdges(plan, *chosen, others, interval.start, interval.end, &intervals[p]);
        !filled.how.empty()) {
      result.reason += "; " + filled.how + " of phase " + interval.name;
    }
  }
  if (node_data != data.store().end()) {
    CrossCheckWithCounter(node_data->second, data.kind(), plan.start, plan.end, plan.phases,
                          &result, &intervals);
  }
  result.phases = PhasesOf(plan.phases, plan.phase_count, intervals);
  if (plan.baseline_index >= 0) {
    // Without power data in that phase, no baseline (NaN: null), not 0 W.
    const Figures& baseline = result.phases[size_t(plan.baseline_index)];
    result.baseline_watts = baseline.has_power ? baseline.mean_watts() : NAN;
    result.window.baseline_joules = result.baseline_watts * result.window.seconds;
    for (Figures& f : result.phases) f.baseline_joules = result.baseline_watts * f.seconds;
  }
  SetAccuracyBounds(plan.options.accuracies, &result);
  if (!vote.disputed_by.empty()) {
    // Either may be the wrong one: the accuracy term takes in the other's reading.
    const double window_seconds = result.window.seconds;
    auto widen = [&](Figures& f) {
      // By the same share of each figure; where the chosen one read nothing (relative NaN), by
      // the other's energy over the figure's share of the window.
      f.terms.accuracy_bound +=
          std::isnan(vote.relative)
              ? std::fabs(vote.joules) * (window_seconds > 0 ? f.seconds / window_seconds : 1)
              : std::fabs(vote.relative) * std::fabs(f.total_joules());
    };
    widen(result.window);
    for (Figures& f : result.phases) widen(f);
    char text[48];
    if (std::isnan(vote.relative)) {
      std::snprintf(text, sizeof text, "%.4g J", std::fabs(vote.joules));
    } else {
      std::snprintf(text, sizeof text, "%.3g %%", std::fabs(vote.relative) * 100);
    }
    result.reason += "; " + vote.disputed_by + " reads " + text +
                     (vote.joules > 0 ? " above" : " below") +
                     " it, beyond what their stated accuracies and data allow, and no third "
                     "source tells which is wrong: its accuracy term is widened by that much";
  }
  KWATT_RETURN_IF_ERROR(CheckFiniteFigures(result, plan.phases.names));
  return result;
}

// Adds a node's figures to the report's total and phase totals (the first node's are the totals).
void AddToTotals(const NodeEnergy& result, EnergyReport* report) {
  if (report->nodes.empty()) {
    report->total = result.window;
    report->phase_totals = result.phases;
  } else {
    report->total.Add(result.window);
    for (size_t p = 0; p < report->phase_totals.size(); ++p) {
      report->phase_totals[p].Add(result.phases[p]);
    }
  }
}

// The totals' peaks (of the sum over every node), the totals of a report without nodes (the
// window uncovered, no node's time), and the note naming the nodes without power.
void FinishTotals(const ReportPlan& plan, const NodeSeries& node_series, EnergyReport* report) {
  std::vector<size_t> everyone(report->nodes.size());
  for (size_t k = 0; k < everyone.size(); ++k) everyone[k] = k;
  node_series.SetPeaksOfSum(everyone, &report->total, &report->phase_totals);
  if (report->nodes.empty()) {
    report->total = Uncovered(plan.start, plan.end);
    report->total.node_seconds = 0;
    report->phase_totals = plan.uncovered_phases;
    for (Figures& f : report->phase_totals) f.node_seconds = 0;
  }
  if (!report->nodes_without_power.empty()) {
    std::string names;
    for (const std::string& n : report->nodes_without_power)
      names += (names.empty() ? "" : ", ") + n;
    report->notes.push_back("total: partial, no power data for " + names +
                            " (their time counts as uncovered; the energy and its interval are "
                            "the other nodes' only)");
  }
}

// Each role's figures (roles of one name merged): the sum of its nodes', with the peaks of their
// summed power. InvalidArgument when a role names a node that is not measured.
Status SumRoles(const ReportPlan& plan, const NodeSeries& node_series, EnergyReport* report) {
  std::vector<Role> roles = MergeRoles(plan.options.roles);
  if (roles.size() < plan.options.roles.size()) {
    report->notes.push_back(
        "roles given more than once under one name are merged (their nodes' "
        "union, each node once)");
  }
  for (const Role& role : roles) {
    Figures sum = Uncovered(plan.start, plan.end);
    sum.node_seconds = 0;
    std::vector<Figures> phases = plan.uncovered_phases;
    for (Figures& f : phases) f.node_seconds = 0;
    bool any = false;
    std::vector<size_t> members;
    for (const std::string& member : role.nodes) {
      auto it = std::find_if(report->nodes.begin(), report->nodes.end(),
                             [&](const NodeEnergy& n) { return n.node == member; });
      if (it == report->nodes.end()) {
        return Status::InvalidArgument("role " + role.name + ": " + member +
                                       " is not one of the nodes measured");
      }
      members.push_back(size_t(it - report->nodes.begin()));
      if (!any) {
        sum = it->window;
        phases = it->phases;
        any = true;
      } else {
        sum.Add(it->window);
        for (size_t p = 0; p < phases.size(); ++p) phases[p].Add(it->phases[p]);
      }
    }
    node_series.SetPeaksOfSum(members, &sum, &phases);
    std::string without;
    for (size_t k : members) {
      if (report->nodes[k].metric.empty()) {
        without += (without.empty() ? "" : ", ") + report->nodes[k].node;
      }
    }
    if (!without.empty()) {
      report->notes.push_back("role " + role.name + ": partial, no power data for " + without +
                              " (its time counts as uncovered; the energy and its interval are "
                              "the role's other nodes' only)");
    }
    report->roles.emplace_back(role, sum);
    report->role_phases.push_back(phases);
  }
  return Status::OK();
}

}  // namespace

Result<EnergyReport> ComputeEnergy(
    const PowerCollector& data, UnixNanos requested_start, UnixNanos requested_end,
    const EnergyOptions& options,
    const std::map<std::string, std::vector<std::string>>& catalogue_metrics) {
  if (requested_end <= requested_start) {
    return Status::InvalidArgument("the energy window is empty");
  }
  KWATT_RETURN_IF_ERROR(CheckGapFactor(options.gap_factor));
  KWATT_RETURN_IF_ERROR(CheckPhases(options.phases));
  KWATT_RETURN_IF_ERROR(CheckClockOffset(options.clock_offset_seconds));
  EnergyReport report;
  report.clock_offset_seconds = options.clock_offset_seconds;
  report.requested_start = requested_start;
  report.requested_end = requested_end;
  ReportPlan plan{data, options};
  plan.order = options.metric.empty() ? PowerMetrics() : std::vector<std::string>{options.metric};
  KWATT_ASSIGN_OR_RETURN(bool any_data, ClipWindow(data, plan.order, options.gap_factor, &report));
  plan.start = report.start;
  plan.end = report.end;
  KWATT_ASSIGN_OR_RETURN(plan.phases,
                         PlanPhases(options.phases, any_data, plan.start, plan.end, &report.notes));
  report.phase_names = plan.phases.names;
  report.phase_intervals = plan.phases.intervals;
  plan.phase_count = report.phase_names.size();
  if (data.kind() == RowKind::kBucketMeans) {
    NoteBucketCuts(plan.phases, plan.phase_count, any_data, plan.start, plan.end, &report.notes);
  }
  KWATT_ASSIGN_OR_RETURN(plan.baseline_index,
                         BaselineIndex(options.baseline_phase, report.phase_names));
  std::vector<Figures> uncovered_intervals;
  for (const Interval& interval : plan.phases.intervals) {
    uncovered_intervals.push_back(Uncovered(interval.start, interval.end));
  }
  plan.uncovered_phases = PhasesOf(plan.phases, plan.phase_count, uncovered_intervals);

  NodeSeries node_series(plan);
  for (const std::string& node : data.nodes()) {
    PowerChoice chosen;
    KWATT_ASSIGN_OR_RETURN(NodeEnergy result, NodeEnergyOf(plan, node, catalogue_metrics, &chosen));
    if (chosen.metric.empty()) report.nodes_without_power.push_back(node);
    AddToTotals(result, &report);
    report.nodes.push_back(std::move(result));
    node_series.Add(chosen);
  }
  FinishTotals(plan, node_series, &report);
  KWATT_RETURN_IF_ERROR(SumRoles(plan, node_series, &report));
  return report;
}

}  // namespace kwatt::energy

namespace kwatt::energy {

std::vector<std::string> EnergyInputMetrics(const std::string& metric) {
  std::vector<std::string> metrics =
      metric.empty() ? PowerMetrics() : std::vector<std::string>{metric};
  if (metric.empty()) {
    metrics.insert(metrics.end(), PartOfNodeMetrics().begin(), PartOfNodeMetrics().end());
  }
  for (const std::string& counter : EnergyCounters()) metrics.push_back(counter);
  return metrics;
}

Status EnergySink::Begin(const RowsReport& resolved) {
  std::vector<std::string> nodes;
  for (const auto& node : resolved.nodes) nodes.push_back(node.Fqdn());
  power_ = std::make_unique<PowerCollector>(
      nodes, metric_, resolved.summary ? RowKind::kBucketMeans : RowKind::kSamples);
  return Status::OK();
}

Status EnergySink::Write(std::string_view site, const RowBatch& batch,
                         const StringInterner& interner) {
  return power_->Write(site, batch, interner);
}

Result<EnergyReport> EnergySink::Compute(const RowsReport& resolved,
                                         const EnergyOptions& options) const {
  if (!power_) return Status::InvalidArgument("EnergySink::Compute before any rows were fed");
  std::map<std::string, std::vector<std::string>> catalogue_metrics;
  for (const auto& node : resolved.nodes) {
    const Catalogue* catalogue =
        FindCatalogue(resolved.catalogues, node.site + "/" + node.Cluster());
    if (!catalogue) continue;
    for (const CatalogueMetric& m : catalogue->MetricsOf(node.uid)) {
      catalogue_metrics[node.Fqdn()].push_back(m.metric_id);
    }
  }
  // A node of a failed piece: its missing power is the fetch's doing, said as such.
  std::map<std::string, std::string> unfetched;
  std::vector<std::pair<UnixNanos, UnixNanos>> spans;
  for (const MissingPiece& failure : resolved.failures) {
    bool has_rows = false;  // a node of the piece with rows elsewhere: its data is cut short
    for (const std::string& uid : failure.nodes) {
      const std::string fqdn = uid + "." + failure.site + ".grid5000.fr";
      unfetched.emplace(fqdn, failure.error.message());
      has_rows = has_rows || power_->store().count(fqdn) > 0;
    }
    // (A node without any row, a site that was down, is a node without power data, named as
    // not fetched: its failure does not keep other nodes' window from being clipped.)
    if (has_rows) spans.emplace_back(failure.start, failure.end);
  }
  power_->SetUnfetched(std::move(unfetched));
  power_->SetUnfetchedSpans(std::move(spans));
  // A metric asked (--metric) that kwatt does not know, that no node's catalogue lists and that
  // gave no row is a misspelling or another testbed's metric, not nodes "without power data" (a
  // known one the nodes lack, a BMC's on nodes without one, is that).
  if (!options.metric.empty() && !catalogue_metrics.empty() &&
      FindPowerSourceKind(options.metric) == nullptr) {
    bool listed = false, rows = false;
    std::set<std::string> power;
    for (const auto& [node, metrics] : catalogue_metrics) {
      for (const std::string& m : metrics) {
        listed = listed || m == options.metric;
        if (m.ends_with("_power_watt")) power.insert(m);
      }
    }
    for (const auto& [node, by_metric] : power_->store()) {
      rows = rows || by_metric.count(options.metric) > 0;
    }
    if (!listed && !rows) {
      std::string known;
      for (const std::string& m : power) known += (known.empty() ? "" : ", ") + m;
      return Status::NotFound("no node of the query reports the metric '" + options.metric +
                              "' (a misspelling?); their power metrics: " +
                              (known.empty() ? std::string("none") : known));
    }
  }
  return ComputeEnergy(*power_, resolved.start, resolved.end, options, catalogue_metrics);
}

}  // namespace kwatt::energy
