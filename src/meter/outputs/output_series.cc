#include "src/meter/outputs/output_series.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "kwatt/core/json_text.h"

namespace kwatt::meter::internal {

namespace {

constexpr const char* kStateFormat = "kwatt-meter-counters";

std::string DomainKey(std::string_view source, std::string_view name) {
  return std::string(source) + "\n" + std::string(name);
}

}  // namespace

SeriesLabels LabelsOf(const SeriesPoint& point, const MeterHeader& header,
                      const IntervalReport& report) {
  const Domain& domain = header.domains[size_t(point.domain)];
  SeriesLabels labels = {{"source", domain.source}, {"domain", domain.name}};
  switch (point.kind) {
    case SeriesKind::kMeasured:
      labels.emplace_back("kind", domain.kind);
      break;
    case SeriesKind::kIdle:
      labels.emplace_back("kind", "idle");
      break;
    case SeriesKind::kUnattributed:
      labels.emplace_back("kind", "unattributed");
      break;
    case SeriesKind::kOther:
      labels.emplace_back("kind", "other");
      break;
    case SeriesKind::kTarget: {
      const Target& target = report.targets[size_t(point.target)].target;
      labels.emplace_back("kind", TargetKindName(target.kind));
      labels.emplace_back("target", target.key);
      labels.emplace_back("name", target.name);
      break;
    }
  }
  return labels;
}

bool IsGap(const DomainEnergy& domain) { return (domain.flags & (kReset | kUnreadable)) != 0; }

double IntervalSeconds(const IntervalReport& report) {
  return double(report.end - report.start) / double(kNanosPerSecond);
}

std::vector<HealthFigure> HealthFigures(const MeterHealth& health) {
  std::vector<HealthFigure> out = {
      {kTicks, "counter", "Reads of the meter's sources.", "", double(health.ticks)},
      {kLateTicks, "counter", "Reads that started more than a tenth of a period late.", "",
       double(health.late_ticks)},
      {kMissedTicks, "counter", "Ticks skipped because a read outlived them.", "",
       double(health.missed_ticks)},
      {kMergedSamples, "counter",
       "Samples merged into the next interval because the formula was behind (none lost).", "",
       double(health.merged_samples)},
      {kMaxLag, "gauge", "The longest lag of a read behind its tick so far, in seconds.", "",
       health.max_lag_seconds},
      {kReports, "counter", "Intervals reported.", "", double(health.reports)},
  };
  for (const auto& [output, dropped] : health.dropped_reports) {
    out.push_back({kDroppedReports, "counter",
                   "Reports an output could not take (its queue full) or failed to write.", output,
                   double(dropped)});
  }
  out.push_back(
      {kWraps, "counter", "Energy counter wraps, counted exactly.", "", double(health.wraps)});
  out.push_back({kResets, "counter", "Energy counter resets: intervals whose energy is unknown.",
                 "", double(health.resets)});
  return out;
}

void KwollectRows(const MeterHeader& header, const IntervalReport& report,
                  const std::vector<SeriesPoint>& points, std::vector<MeterRow>* rows) {
  rows->clear();
  double seconds = IntervalSeconds(report);
  for (const SeriesPoint& point : points) {
    bool measured = point.kind == SeriesKind::kMeasured;
    SeriesLabels labels = LabelsOf(point, header, report);
    if (!IsGap(report.domains[size_t(point.domain)]) && seconds > 0) {
      rows->push_back({measured ? kKwollectDomainPower : kKwollectPower, labels,
                       double(point.microjoules) / 1e6 / seconds});
    }
    rows->push_back({measured ? kDomainEnergy : kEnergy, std::move(labels),
                     double(point.total_microjoules) / 1e6});
  }
  for (HealthFigure& figure : HealthFigures(report.health)) {
    SeriesLabels labels;
    if (!figure.output.empty()) labels.emplace_back("output", std::move(figure.output));
    rows->push_back({figure.metric, std::move(labels), figure.value});
  }
}

std::string LabelsJson(const SeriesLabels& labels) {
  std::vector<std::pair<std::string, std::string>> members;
  members.reserve(labels.size());
  for (const auto& [key, value] : labels) {
    std::string text;
    AppendJsonString(&text, value);
    members.emplace_back(key, std::move(text));
  }
  return JsonbObjectText(std::move(members));
}

OutputSeries::OutputSeries(int max_targets, double half_life_seconds)
    : max_targets_(std::max(0, max_targets)), half_life_seconds_(half_life_seconds) {}

void OutputSeries::Begin(const MeterHeader& header) {
  header_ = header;
  counters_.assign(header.domains.size(), Counters());
  for (size_t d = 0; d < header.domains.size(); ++d) {
    auto it = restored_.find(DomainKey(header.domains[d].source, header.domains[d].name));
    if (it != restored_.end()) counters_[d] = std::move(it->second);
  }
  restored_.clear();
}

void OutputSeries::Add(const IntervalReport& report, std::vector<SeriesPoint>* points) {
  points->clear();
  last_sequence_ = report.sequence;
  const size_t n = report.targets.size();
  auto share = [&](const DomainEnergy& domain, size_t t) {
    return t < domain.target_microjoules.size() ? domain.target_microjoules[t] : 0;
  };

  // Rank the targets by their energy lately (all domains), exponentially forgotten.
  double decay =
      half_life_seconds_ > 0 ? std::exp2(-IntervalSeconds(report) / half_life_seconds_) : 0.0;
  std::map<std::string, double, std::less<>> scores;
  std::vector<double> score(n, 0);
  for (size_t t = 0; t < n; ++t) {
    double energy = 0;
    for (const DomainEnergy& domain : report.domains) energy += double(share(domain, t));
    const std::string& key = report.targets[t].target.key;
    auto old = scores_.find(key);
    score[t] = (old == scores_.end() ? 0.0 : old->second * decay) + energy;
    scores[key] = score[t];
  }
  scores_ = std::move(scores);  // targets that ended are forgotten
  std::vector<bool> exposed(n, true);
  if (max_targets_ > 0 && n > size_t(max_targets_)) {
    std::vector<size_t> order(n);
    for (size_t t = 0; t < n; ++t) order[t] = t;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      if (score[a] != score[b]) return score[a] > score[b];
      return report.targets[a].target.key < report.targets[b].target.key;
    });
    for (size_t rank = size_t(max_targets_); rank < n; ++rank) exposed[order[rank]] = false;
  }

  for (size_t d = 0; d < counters_.size() && d < report.domains.size(); ++d) {
    const DomainEnergy& energy = report.domains[d];
    Counters& c = counters_[d];
    // A target idle through an interval is absent from its report and alive: its counter is
    // kept for the life of the run. It is forgotten when it ended, but a cgroup's: one may be
    // made again under its path (a service restarted), and its counter then goes on from where
    // it was, never down (a process's key, with its start time, is never seen again).
    for (const std::string& key : report.ended_targets) {
      if (key.starts_with("cgroup:")) continue;
      auto ended = c.targets.find(key);
      if (ended != c.targets.end()) c.targets.erase(ended);
    }
    int domain = int(d);
    c.measured += energy.measured_microjoules;
    points->push_back({domain, SeriesKind::kMeasured, -1, energy.measured_microjoules, c.measured});
    c.idle += energy.idle_microjoules;
    points->push_back({domain, SeriesKind::kIdle, -1, energy.idle_microjoules, c.idle});
    c.unattributed += energy.unattributed_microjoules;
    points->push_back(
        {domain, SeriesKind::kUnattributed, -1, energy.unattributed_microjoules, c.unattributed});
    int64_t other = 0;
    bool any_other = false;
    for (size_t t = 0; t < n; ++t) {
      int64_t microjoules = share(energy, t);
      if (!exposed[t]) {
        other += microjoules;
        any_other = true;
        continue;
      }
      int64_t& total = c.targets[report.targets[t].target.key];
      total += microjoules;
      points->push_back({domain, SeriesKind::kTarget, int(t), microjoules, total});
    }
    c.other += other;
    if (any_other || c.other > 0) {
      points->push_back({domain, SeriesKind::kOther, -1, other, c.other});
    }
  }
}

std::string OutputSeries::Save() const {
  nlohmann::ordered_json state;
  state["format"] = kStateFormat;
  state["version"] = kStateFormatVersion;
  state["sequence"] = last_sequence_;
  nlohmann::ordered_json domains = nlohmann::ordered_json::array();
  auto add = [&](std::string_view source, std::string_view name, const Counters& c) {
    nlohmann::ordered_json entry;
    entry["source"] = source;
    entry["domain"] = name;
    entry["measured"] = c.measured;
    entry["idle"] = c.idle;
    entry["unattributed"] = c.unattributed;
    entry["other"] = c.other;
    nlohmann::ordered_json targets = nlohmann::ordered_json::object();
    for (const auto& [key, total] : c.targets) targets[key] = total;
    entry["targets"] = std::move(targets);
    domains.push_back(std::move(entry));
  };
  for (size_t d = 0; d < counters_.size(); ++d) {
    add(header_.domains[d].source, header_.domains[d].name, counters_[d]);
  }
  for (const auto& [key, c] : restored_) {  // restored, not begun yet: kept as they were
    size_t newline = key.find('\n');
    add(std::string_view(key).substr(0, newline), std::string_view(key).substr(newline + 1), c);
  }
  state["domains"] = std::move(domains);
  return state.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

Status OutputSeries::Restore(std::string_view text) {
  auto bad = [](const std::string& what) {
    return Status::Corruption("the meter's saved counters: " + what +
                              " (the state file is damaged: remove it to start the counters "
                              "from 0)");
  };
  if (text.empty()) return Status::OK();  // nothing saved
  nlohmann::json state = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!state.is_object()) return bad("not a JSON object");
  auto format = state.find("format");
  if (format == state.end() || *format != kStateFormat) {
    return bad("\"format\" is not \"" + std::string(kStateFormat) + "\"");
  }
  auto version = state.find("version");
  if (version == state.end() || !version->is_number_integer()) {
    return bad("\"version\" is not an integer");
  }
  if (*version != kStateFormatVersion) {
    return bad("version " + version->dump() + ", where this kwatt reads version " +
               std::to_string(kStateFormatVersion));
  }
  auto domains = state.find("domains");
  if (domains == state.end() || !domains->is_array()) return bad("\"domains\" is not an array");
  std::map<std::string, Counters, std::less<>> restored;
  for (size_t i = 0; i < domains->size(); ++i) {
    const nlohmann::json& entry = (*domains)[i];
    std::string where = "domains[" + std::to_string(i) + "]";
    if (!entry.is_object()) return bad(where + " is not an object");
    std::string names[2];
    const char* name_keys[2] = {"source", "domain"};
    for (int k = 0; k < 2; ++k) {
      auto it = entry.find(name_keys[k]);
      if (it == entry.end() || !it->is_string() || it->get<std::string>().empty()) {
        return bad(where + "." + name_keys[k] + " is not a non-empty string");
      }
      names[k] = it->get<std::string>();
    }
    auto counter = [&](const nlohmann::json& value, const std::string& name, int64_t* out) {
      if (!value.is_number_integer() || value.get<int64_t>() < 0) {
        return bad(name + " is not a non-negative integer (microjoules)");
      }
      *out = value.get<int64_t>();
      return Status::OK();
    };
    Counters c;
    std::pair<const char*, int64_t*> fields[] = {{"measured", &c.measured},
                                                 {"idle", &c.idle},
                                                 {"unattributed", &c.unattributed},
                                                 {"other", &c.other}};
    for (auto [key, out] : fields) {
      auto it = entry.find(key);
      if (it == entry.end()) return bad(where + " has no \"" + key + "\"");
      KWATT_RETURN_IF_ERROR(counter(*it, where + "." + key, out));
    }
    auto targets = entry.find("targets");
    if (targets == entry.end() || !targets->is_object()) {
      return bad(where + ".targets is not an object");
    }
    for (auto it = targets->begin(); it != targets->end(); ++it) {
      KWATT_RETURN_IF_ERROR(
          counter(it.value(), where + ".targets[" + it.key() + "]", &c.targets[it.key()]));
    }
    if (!restored.emplace(DomainKey(names[0], names[1]), std::move(c)).second) {
      return bad(where + " repeats the domain " + names[0] + " " + names[1]);
    }
  }
  restored_ = std::move(restored);
  return Status::OK();
}

}  // namespace kwatt::meter::internal
