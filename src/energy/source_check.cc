#include "kwatt/energy/source_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "kwatt/core/text.h"
#include "kwatt/energy/integration.h"

namespace kwatt::energy {

namespace {

// Where a default comes from (doc/energy.md, "How far to trust it", cites each).
constexpr const char* kAssumedClass1 =
    "assumed: IEC 62053-21 class 1 (1 %), the class of metering-grade meters; no accuracy is "
    "published for this device";
constexpr const char* kBmcUnreliable =
    "assumed: Grid'5000's catalogue calls BMC metrics 'quite unreliable: inaccurate, highly "
    "averaged'; 10 % is kwatt's bound, not a maker's";

// How long a BMC averages its power readings over: Grid'5000's catalogue calls them "highly
// averaged"; 10 s is kwatt's assumption (two of its 5 s periods), not a maker's figure.
constexpr double kBmcAveragingSeconds = 10;

// The highest minus the lowest value of `s` over [x - reach, x + reach], the samples just outside
// included (the line through them crosses it); 0 without samples.
double RangeNear(const PowerCollector::Series& s, UnixNanos x, int64_t reach) {
  const std::vector<UnixNanos>& t = s.time;
  if (t.empty()) return 0;
  size_t lo = size_t(std::lower_bound(t.begin(), t.end(), x - reach) - t.begin());
  size_t hi = size_t(std::upper_bound(t.begin(), t.end(), x + reach) - t.begin());
  if (lo > 0) --lo;
  if (hi < t.size()) ++hi;
  if (hi <= lo) return 0;
  auto [low, high] = std::minmax_element(s.value.begin() + long(lo), s.value.begin() + long(hi));
  return *high - *low;
}

// The 95 % half-width of what a figure's data leave uncertain: its interval without the accuracy
// and the clock (two sources over the same marks move together with the clock).
double DataHalfWidth(const Figures& f) {
  ErrorTerms terms = f.terms;
  terms.accuracy_bound = 0;
  return Combine(terms, 0).half_width_without_accuracy;
}

std::string PercentOf(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g %%", fraction * 100);
  return text;
}

std::string JoulesText(double joules) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f J", joules);
  return text;
}

}  // namespace

const std::vector<PowerSourceKind>& PowerSourceKinds() {
  static const std::vector<PowerSourceKind> kinds = {
      {"wattmetre_power_watt",
       "external wattmeter",
       SourceScope::kWholeNode,
       {0.01, 0.1, kAssumedClass1}},
      {"pdu_outlet_power_watt", "PDU outlet", SourceScope::kWholeNode, {0.01, 1.0, kAssumedClass1}},
      {"bmc_node_power_watt",
       "BMC",
       SourceScope::kWholeNode,
       {0.10, 5.0, kBmcUnreliable},
       kBmcAveragingSeconds},
      {"bmc_psu_power_watt",
       "BMC (per PSU)",
       SourceScope::kWholeNode,
       {0.10, 5.0, kBmcUnreliable},
       kBmcAveragingSeconds},
      {PartOfNodeMetrics()[0],
       "RAPL and GPUs, as kwatt meter read them",
       SourceScope::kPartOfNode,
       {}},
  };
  return kinds;
}

const PowerSourceKind* FindPowerSourceKind(std::string_view metric) {
  for (const PowerSourceKind& kind : PowerSourceKinds()) {
    if (kind.metric == metric) return &kind;
  }
  return nullptr;
}

void AddAveragingTerm(const std::string& metric,
                      const std::map<std::string, PowerCollector::Series>& series, UnixNanos a,
                      UnixNanos b, Figures* f) {
  const PowerSourceKind* kind = FindPowerSourceKind(metric);
  if (kind == nullptr || kind->averaging_seconds <= 0 || !f->has_power || b <= a) return;
  const double half = kind->averaging_seconds / 2;
  const auto reach = int64_t(kind->averaging_seconds * 1e9);
  double moves = 0;
  for (const auto& [labels, s] : series) moves += RangeNear(s, a, reach) + RangeNear(s, b, reach);
  const double bound = half * (std::fabs(f->terms.edge_watts) + moves / 2);
  f->terms.sampling_variance += bound * bound / 3;
}

Result<std::pair<std::string, StatedAccuracy>> ParseStatedAccuracy(std::string_view text) {
  auto refuse = [&](const std::string& why) {
    return Status::InvalidArgument("accuracy '" + std::string(text) + "': " + why +
                                   " (give METRIC=P%+WW, e.g. pdu_outlet_power_watt=2%+0.5W)");
  };
  size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) return refuse("no METRIC=");
  std::string metric(TrimBlanks(text.substr(0, eq)));
  const PowerSourceKind* kind = FindPowerSourceKind(metric);
  if (kind == nullptr || kind->scope != SourceScope::kWholeNode) {
    std::string known;
    for (const PowerSourceKind& k : PowerSourceKinds()) {
      if (k.scope == SourceScope::kWholeNode) known += (known.empty() ? "" : ", ") + k.metric;
    }
    return refuse("no accuracy is checked for " + metric + " (whole-node power metrics: " + known +
                  ")");
  }
  StatedAccuracy accuracy;
  accuracy.basis = "given (--accuracy " + std::string(text) + ")";
  std::string rest(TrimBlanks(text.substr(eq + 1)));
  if (rest.empty()) return refuse("no figure");
  bool percent_seen = false, watts_seen = false;
  while (!rest.empty()) {
    size_t plus = rest.find('+', 1);
    std::string term(TrimBlanks(std::string_view(rest).substr(0, plus)));
    rest = plus == std::string::npos ? "" : rest.substr(plus + 1);
    bool is_percent = term.ends_with('%');
    bool is_watts = term.ends_with('W');
    if ((!is_percent && !is_watts) || (is_percent && percent_seen) || (is_watts && watts_seen)) {
      return refuse("'" + term + "' is neither a percentage nor watts (or is given twice)");
    }
    std::string number = term.substr(0, term.size() - 1);
    char* end = nullptr;
    double value = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || !(value >= 0)) {
      return refuse("'" + term + "' is not a number of at least 0");
    }
    if (is_percent) {
      if (value > 100) return refuse("'" + term + "' is above 100 %");
      accuracy.relative = value / 100;
      percent_seen = true;
    } else {
      if (value > kMaxPlausibleWatts) return refuse("'" + term + "' is above a megawatt");
      accuracy.watts = value;
      watts_seen = true;
    }
  }
  return std::make_pair(metric, accuracy);
}

std::string_view VerdictName(SourceComparison::Verdict verdict) {
  switch (verdict) {
    case SourceComparison::Verdict::kAgrees:
      return "agrees";
    case SourceComparison::Verdict::kDisagrees:
      return "disagrees";
    case SourceComparison::Verdict::kPartOfNode:
      return "part_of_node";
    case SourceComparison::Verdict::kAbovePart:
      return "part_above_wall";
    case SourceComparison::Verdict::kNotComparable:
      return "not_comparable";
  }
  return "";
}

const StatedAccuracy* AccuracyOf(const std::string& metric,
                                 const std::map<std::string, StatedAccuracy>& accuracies) {
  auto given = accuracies.find(metric);
  if (given != accuracies.end()) return &given->second;
  const PowerSourceKind* kind = FindPowerSourceKind(metric);
  if (kind && kind->scope == SourceScope::kWholeNode) return &kind->accuracy;
  return nullptr;
}

std::vector<SourceComparison> CompareSources(
    const std::vector<SourceEnergy>& sources, size_t reference,
    const std::map<std::string, StatedAccuracy>& accuracies) {
  std::vector<SourceComparison> out;
  if (reference >= sources.size()) return out;
  const SourceEnergy& ref = sources[reference];
  auto accuracy_of = [&](const std::string& metric) { return AccuracyOf(metric, accuracies); };
  const double seconds = ref.figures.seconds;
  for (size_t i = 0; i < sources.size(); ++i) {
    if (i == reference) continue;
    const SourceEnergy& source = sources[i];
    SourceComparison c;
    c.metric = source.metric;
    c.reference = ref.metric;
    const Figures& a = source.figures;
    const Figures& b = ref.figures;
    if (!a.has_power || !b.has_power || a.coverage() < kComparableCoverage ||
        b.coverage() < kComparableCoverage) {
      const SourceEnergy& short_one =
          !a.has_power || a.coverage() < kComparableCoverage ? source : ref;
      c.why = short_one.metric + " covers " + PercentOf(short_one.figures.coverage()) +
              " of the interval: below " + PercentOf(kComparableCoverage) +
              ", the difference would be what it missed";
      out.push_back(std::move(c));
      continue;
    }
    c.joules = a.total_joules() - b.total_joules();
    c.relative = b.total_joules() != 0 ? c.joules / b.total_joules() : NAN;
    const PowerSourceKind* kind = FindPowerSourceKind(source.metric);
    if (kind && kind->scope == SourceScope::kPartOfNode) {
      c.rest_watts = seconds > 0 ? -c.joules / seconds : NAN;
      if (c.joules <= 0) {
        c.verdict = SourceComparison::Verdict::kPartOfNode;
        c.why = source.metric + " (" + kind->name + ") reads " +
                PercentOf(a.total_joules() / b.total_joules()) + " of " + ref.metric +
                ": the rest of the platform (fans, disks, memory not metered, the "
                "power supplies' losses...) draws the other " +
                JoulesText(-c.joules);
      } else {
        c.verdict = SourceComparison::Verdict::kAbovePart;
        c.why = source.metric + " (" + kind->name + ") reads " + JoulesText(c.joules) +
                " more than " + ref.metric + ", which holds it: one of the two is wrong";
      }
      out.push_back(std::move(c));
      continue;
    }
    const StatedAccuracy* mine = accuracy_of(source.metric);
    const StatedAccuracy* theirs = accuracy_of(ref.metric);
    if (mine == nullptr || theirs == nullptr) {
      c.verdict = SourceComparison::Verdict::kNotComparable;
      c.why = "no stated accuracy for " + (mine == nullptr ? source.metric : ref.metric) +
              ": give one with --accuracy";
      out.push_back(std::move(c));
      continue;
    }
    const double data = std::hypot(DataHalfWidth(a), DataHalfWidth(b));
    c.allowed_joules = mine->BoundJoules(a.total_joules(), a.seconds) +
                       theirs->BoundJoules(b.total_joules(), b.seconds) + data;
    bool agrees = std::fabs(c.joules) <= c.allowed_joules;
    c.verdict = agrees ? SourceComparison::Verdict::kAgrees : SourceComparison::Verdict::kDisagrees;
    c.why = source.metric + " is " + PercentOf(std::fabs(c.relative)) +
            (c.joules >= 0 ? " above " : " below ") + ref.metric + "; their stated accuracies " +
            (data > 0 ? "and what their data leave uncertain " : "") +
            (agrees ? "allow " : "allow only ") + JoulesText(c.allowed_joules);
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<SourceCheck> CheckSources(const PowerCollector& data, const EnergyReport& report,
                                      const EnergyOptions& options) {
  std::vector<SourceCheck> checks;
  for (const NodeEnergy& node : report.nodes) {
    const PowerSourceKind* chosen = FindPowerSourceKind(node.metric);
    if (node.metric.empty() || (chosen && chosen->scope != SourceScope::kWholeNode)) continue;
    auto held = data.store().find(node.node);
    if (held == data.store().end()) continue;
    // The chosen metric first, then the others the node has, in PowerSourceKinds()' order.
    std::vector<std::string> metrics = {node.metric};
    for (const PowerSourceKind& kind : PowerSourceKinds()) {
      if (kind.metric != node.metric && held->second.count(kind.metric)) {
        metrics.push_back(kind.metric);
      }
    }
    if (metrics.size() < 2) continue;
    std::vector<PowerChoice> choices;
    for (const std::string& metric : metrics) {
      choices.push_back(ChoosePowerMetric(data, node.node, report.start, report.end, {metric},
                                          options.gap_factor));
    }
    auto check = [&](const std::string& name, const std::vector<Interval>& intervals) {
      SourceCheck c{node.node, name, {}, {}};
      for (size_t m = 0; m < metrics.size(); ++m) {
        SourceEnergy energy{metrics[m], {}};
        bool first = true;
        for (const Interval& interval : intervals) {
          Figures f;
          if (choices[m].series) {
            f = IntegrateNodeMetric(*choices[m].series, interval.start, interval.end,
                                    options.gap_factor, nullptr, data.kind());
            AddAveragingTerm(metrics[m], *choices[m].series, interval.start, interval.end, &f);
          } else {
            f.seconds = double(interval.end - interval.start) / 1e9;
            f.node_seconds = f.seconds;
          }
          if (first) {
            energy.figures = f;
            first = false;
          } else {
            energy.figures.Extend(f);
          }
        }
        c.sources.push_back(std::move(energy));
      }
      c.comparisons = CompareSources(c.sources, 0, options.accuracies);
      checks.push_back(std::move(c));
    };
    check("window", {Interval{"window", report.start, report.end}});
    for (const std::string& phase : report.phase_names) {
      std::vector<Interval> intervals;
      for (const Interval& interval : report.phase_intervals) {
        if (interval.name == phase) intervals.push_back(interval);
      }
      check(phase, intervals);
    }
  }
  return checks;
}

std::string SourceChecksJson(const std::vector<SourceCheck>& checks) {
  auto number = [](double x) {
    return std::isfinite(x) ? nlohmann::ordered_json(x) : nlohmann::ordered_json();
  };
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const SourceCheck& c : checks) {
    nlohmann::ordered_json sources = nlohmann::ordered_json::array();
    for (const SourceEnergy& s : c.sources) {
      sources.push_back({{"metric", s.metric},
                         {"joules", s.figures.has_power ? number(s.figures.total_joules())
                                                        : nlohmann::ordered_json()},
                         {"coverage", number(s.figures.coverage())},
                         {"mean_watts", s.figures.has_power ? number(s.figures.mean_watts())
                                                            : nlohmann::ordered_json()}});
    }
    nlohmann::ordered_json comparisons = nlohmann::ordered_json::array();
    for (const SourceComparison& x : c.comparisons) {
      comparisons.push_back({{"metric", x.metric},
                             {"reference", x.reference},
                             {"verdict", std::string(VerdictName(x.verdict))},
                             {"joules", number(x.joules)},
                             {"relative", number(x.relative)},
                             {"allowed_joules", number(x.allowed_joules)},
                             {"rest_watts", number(x.rest_watts)},
                             {"why", x.why}});
    }
    out.push_back({{"node", c.node},
                   {"interval", c.interval},
                   {"sources", std::move(sources)},
                   {"comparisons", std::move(comparisons)}});
  }
  return out.dump(2);
}

}  // namespace kwatt::energy
