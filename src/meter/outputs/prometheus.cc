// The Prometheus exposition of the meter, and the HTTP server of --listen (doc/meter/outputs.md,
// "Prometheus").
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string_view>
#include <thread>
#include <utility>

#include "kwatt/core/prometheus_writer.h"
#include "kwatt/core/text.h"
#include "kwatt/http/hardened_server.h"
#include "src/meter/outputs/output_base.h"

namespace kwatt::meter {

using internal::SeriesKind;
using internal::SeriesLabels;
using internal::SeriesPoint;

struct PrometheusExposition::Impl {
  explicit Impl(const OutputOptions& options)
      : series(options.max_targets, options.ranking_half_life_seconds),
        max_retained(options.max_targets > 0 ? 10 * size_t(options.max_targets) : 0) {}

  // A target's series as Prometheus reads it. Prometheus cannot count a counter's first value,
  // nor a series with one sample: a series that began at its first interval's energy would lose
  // it from every sum of rates. So a target's series starts at 0, its energy until a scrape has
  // read that 0 going to "other"'s series; it then counts from there. Its labels are those of its
  // first appearance (a kernel thread renamed keeps its series); it stays, frozen, once idle or
  // ended (a series that vanished would be extrapolated past its end), up to max_retained.
  struct Exposed {
    SeriesLabels labels;
    int64_t offset_microjoules = 0;  // of its counter, in other's series instead
    int64_t shown_microjoules = 0;   // what the text shows: counter - offset
    int64_t zero_generation = -1;    // shown at 0 in this text, not yet read; -1: counting
  };

  mutable std::mutex mutex;  // guards everything below
  internal::OutputSeries series;
  std::shared_ptr<const std::string> text = std::make_shared<const std::string>();
  OutputStats stats;
  std::vector<SeriesPoint> points;
  std::map<std::pair<int, std::string>, Exposed> retained;     // by (domain, key)
  std::map<std::string, int64_t, std::less<>> retained_since;  // key -> last report exposing it
  std::vector<int64_t> other_offsets;                          // per domain: to other's series
  std::vector<int64_t> other_totals;  // per domain: other's counter in the series, last seen
  // Restored from a state, by "source\ndomain", until Begin maps them to the header's domains.
  std::map<std::string, int64_t> restored_other;
  std::vector<std::pair<std::string, std::pair<std::string, Exposed>>> restored_targets;
  int64_t generation = 0;                  // of `text`
  mutable int64_t served_generation = -1;  // of the last text a scrape read
  const size_t max_retained;
};

namespace {

void Family(std::string* out, const char* name, const char* type, const char* help) {
  AppendPrometheusFamily(out, name, type, help);
}

void Sample(std::string* out, const char* name, const SeriesLabels& labels, double value) {
  AppendPrometheusSample(out, name, labels, std::isfinite(value) ? value : 0.0);
}

void AppendInfo(std::string* out, const MeterHeader& header) {
  Family(out, "kwatt_meter_info", "gauge", "The meter: its machine, formula and idle policy.");
  Sample(
      out, "kwatt_meter_info",
      {{"sensor", header.sensor}, {"formula", header.formula}, {"idle_policy", header.idle_policy}},
      1);
}

// The exposition after `report`: its points, every target exposed so far as `exposition` shows
// it, and each domain's other.
std::string Render(const MeterHeader& header, const IntervalReport& report,
                   const PrometheusExposition::Impl& exposition) {
  const std::vector<SeriesPoint>& points = exposition.points;
  std::string out;
  AppendInfo(&out, header);
  Family(&out, "kwatt_meter_last_report_timestamp_seconds", "gauge",
         "When the last interval reported ended, in seconds since the epoch: an old value means "
         "the meter is stuck.");
  Sample(&out, "kwatt_meter_last_report_timestamp_seconds", {}, double(report.end) / 1e9);
  Family(&out, "kwatt_meter_interval_seconds", "gauge", "The length of the last interval.");
  Sample(&out, "kwatt_meter_interval_seconds", {}, internal::IntervalSeconds(report));
  Family(&out, "kwatt_meter_targets", "gauge", "Targets seen in the last interval.");
  Sample(&out, "kwatt_meter_targets", {}, double(report.targets.size()));

  double seconds = internal::IntervalSeconds(report);
  struct Kind {
    bool measured;
    bool counter;
    const char* name;
    const char* type;
    const char* help;
  };
  const Kind kinds[] = {
      {true, true, internal::kDomainEnergy, "counter",
       "Energy each domain measured since the meter started (kept across restarts)."},
      {true, false, internal::kPrometheusDomainPower, "gauge",
       "Each domain's mean power over the last interval (absent when the interval is a gap)."},
      {false, true, internal::kEnergy, "counter",
       "Each domain's energy shared out since the meter started: kind idle, unattributed, each "
       "target with series of its own (kind process, tree, cgroup), and the others (kind other); "
       "they add up to the domain's."},
      {false, false, internal::kPrometheusPower, "gauge",
       "Each domain's power shared out over the last interval, as the energy is."},
  };
  for (const Kind& kind : kinds) {
    Family(&out, kind.name, kind.type, kind.help);
    if (kind.counter && !kind.measured) {
      // The shares' counters: idle and unattributed as the series have them, every target
      // exposed so far as shown, other with what the targets' first intervals gave it.
      for (const SeriesPoint& point : points) {
        if (point.kind == SeriesKind::kIdle || point.kind == SeriesKind::kUnattributed) {
          Sample(&out, kind.name, internal::LabelsOf(point, header, report),
                 double(point.total_microjoules) / 1e6);
        }
      }
      for (const auto& [key, exposed] : exposition.retained) {
        Sample(&out, kind.name, exposed.labels, double(exposed.shown_microjoules) / 1e6);
      }
      for (size_t d = 0; d < header.domains.size(); ++d) {
        SeriesPoint other{.domain = int(d), .kind = SeriesKind::kOther};
        Sample(&out, kind.name, internal::LabelsOf(other, header, report),
               double(exposition.other_totals[d] + exposition.other_offsets[d]) / 1e6);
      }
      continue;
    }
    for (const SeriesPoint& point : points) {
      if ((point.kind == SeriesKind::kMeasured) != kind.measured) continue;
      if (!kind.counter && (internal::IsGap(report.domains[size_t(point.domain)]) || seconds <= 0))
        continue;
      double value = kind.counter ? double(point.total_microjoules) / 1e6
                                  : double(point.microjoules) / 1e6 / seconds;
      auto exposed = point.kind == SeriesKind::kTarget
                         ? exposition.retained.find(
                               {point.domain, report.targets[size_t(point.target)].target.key})
                         : exposition.retained.end();
      Sample(&out, kind.name,
             exposed != exposition.retained.end() ? exposed->second.labels
                                                  : internal::LabelsOf(point, header, report),
             value);
    }
  }
  const char* family = nullptr;
  for (const internal::HealthFigure& figure : internal::HealthFigures(report.health)) {
    if (family == nullptr || std::strcmp(family, figure.metric) != 0) {
      family = figure.metric;
      Family(&out, figure.metric, figure.type, figure.help);
    }
    Sample(&out, figure.metric, {{"output", figure.output}}, figure.value);
  }
  return out;
}

}  // namespace

PrometheusExposition::PrometheusExposition(const OutputOptions& options)
    : impl_(std::make_unique<Impl>(options)) {}

PrometheusExposition::~PrometheusExposition() = default;

Status PrometheusExposition::Begin(const MeterHeader& header) {
  std::string text;
  AppendInfo(&text, header);
  std::lock_guard<std::mutex> lock(impl_->mutex);
  Impl& m = *impl_;
  m.series.Begin(header);
  m.text = std::make_shared<const std::string>(std::move(text));
  // What a restarted meter's text showed goes on: other's share of the targets' first intervals,
  // and each target's series as it was (its offset, its labels).
  m.other_offsets.assign(header.domains.size(), 0);
  m.other_totals.assign(header.domains.size(), 0);
  for (size_t d = 0; d < header.domains.size(); ++d) {
    const std::string name = header.domains[d].source + "\n" + header.domains[d].name;
    auto other = m.restored_other.find(name);
    if (other != m.restored_other.end()) m.other_offsets[d] = other->second;
    for (auto& [domain, target] : m.restored_targets) {
      if (domain != name) continue;
      m.retained[{int(d), target.first}] = target.second;
      m.retained_since.try_emplace(target.first, -1);
    }
  }
  m.restored_other.clear();
  m.restored_targets.clear();
  return Status::OK();
}

Status PrometheusExposition::Write(const IntervalReport& report) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const MeterHeader& header = impl_->series.header();
  if (report.domains.size() != header.domains.size()) {
    return Status::Internal("a report with " + std::to_string(report.domains.size()) +
                            " domains, where the header has " +
                            std::to_string(header.domains.size()));
  }
  Impl& m = *impl_;
  m.series.Add(report, &m.points);
  const int64_t generation = ++m.generation;  // Begin sized the per-domain vectors
  for (const SeriesPoint& point : m.points) {
    if (point.kind == SeriesKind::kOther)
      m.other_totals[size_t(point.domain)] = point.total_microjoules;
    if (point.kind != SeriesKind::kTarget) continue;
    const std::string& key = report.targets[size_t(point.target)].target.key;
    auto [it, added] = m.retained.try_emplace({point.domain, key});
    Impl::Exposed& exposed = it->second;
    if (added) {
      exposed.labels = internal::LabelsOf(point, header, report);
      // A counter born in this interval starts at 0 (one continued from a saved state, or one
      // exposed again after it was let go, shows what it holds: a series that went on).
      if (point.total_microjoules == point.microjoules) exposed.zero_generation = generation;
    } else if (exposed.zero_generation >= 0 && m.served_generation >= exposed.zero_generation) {
      exposed.zero_generation = -1;  // its 0 was read: it counts from here
    } else if (exposed.zero_generation >= 0) {
      exposed.zero_generation = generation;  // not read yet: 0 again
    }
    if (exposed.zero_generation >= 0) {
      int64_t moved = point.total_microjoules - exposed.offset_microjoules;
      exposed.offset_microjoules += moved;
      m.other_offsets[size_t(point.domain)] += moved;
    }
    exposed.shown_microjoules = point.total_microjoules - exposed.offset_microjoules;
    m.retained_since[key] = report.sequence;
  }
  while (m.max_retained > 0 && m.retained_since.size() > m.max_retained) {
    auto oldest =
        std::min_element(m.retained_since.begin(), m.retained_since.end(),
                         [](const auto& a, const auto& b) { return a.second < b.second; });
    for (size_t d = 0; d < header.domains.size(); ++d) m.retained.erase({int(d), oldest->first});
    m.retained_since.erase(oldest);
  }
  m.text = std::make_shared<const std::string>(Render(header, report, m));
  ++impl_->stats.reports;
  impl_->stats.rows_written += int64_t(impl_->points.size());
  return Status::OK();
}

Status PrometheusExposition::Finish() { return Status::OK(); }

// The state: the series' counters (OutputSeries::Save), and under "prometheus" what the text
// shows apart from them (doc/meter/outputs.md, "State"): a restarted meter's series go on.
std::string PrometheusExposition::SaveState() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const Impl& m = *impl_;
  nlohmann::ordered_json state = nlohmann::ordered_json::parse(m.series.Save());
  const MeterHeader& header = m.series.header();
  nlohmann::ordered_json other = nlohmann::ordered_json::array();
  for (size_t d = 0; d < m.other_offsets.size() && d < header.domains.size(); ++d) {
    other.push_back({{"source", header.domains[d].source},
                     {"domain", header.domains[d].name},
                     {"offset", m.other_offsets[d]}});
  }
  nlohmann::ordered_json targets = nlohmann::ordered_json::array();
  for (const auto& [key, exposed] : m.retained) {
    if (size_t(key.first) >= header.domains.size()) continue;
    nlohmann::ordered_json labels = nlohmann::ordered_json::array();
    for (const auto& [name, value] : exposed.labels) labels.push_back({name, value});
    targets.push_back({{"source", header.domains[size_t(key.first)].source},
                       {"domain", header.domains[size_t(key.first)].name},
                       {"key", key.second},
                       {"offset", exposed.offset_microjoules},
                       {"shown", exposed.shown_microjoules},
                       {"counting", exposed.zero_generation < 0},
                       {"labels", std::move(labels)}});
  }
  state["prometheus"] = {{"other", std::move(other)}, {"targets", std::move(targets)}};
  return state.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

Status PrometheusExposition::RestoreState(std::string_view state) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  Impl& m = *impl_;
  KWATT_RETURN_IF_ERROR(m.series.Restore(state));
  if (state.empty()) return Status::OK();
  nlohmann::json saved = nlohmann::json::parse(state, nullptr, /*allow_exceptions=*/false);
  auto prometheus = saved.find("prometheus");
  if (prometheus == saved.end()) return Status::OK();  // a state of an earlier kwatt
  auto bad = [](const std::string& what) {
    return Status::Corruption("the meter's saved Prometheus series: " + what +
                              " (the state file is damaged: remove it to start the counters "
                              "from 0)");
  };
  auto text = [](const nlohmann::json& entry, const char* key) {
    auto it = entry.find(key);
    return it != entry.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto number = [](const nlohmann::json& entry, const char* key, int64_t* out) {
    auto it = entry.find(key);
    if (it == entry.end() || !it->is_number_integer() || it->get<int64_t>() < 0) return false;
    *out = it->get<int64_t>();
    return true;
  };
  if (!prometheus->is_object()) return bad("not an object");
  std::map<std::string, int64_t> other;
  std::vector<std::pair<std::string, std::pair<std::string, Impl::Exposed>>> targets;
  for (const nlohmann::json& entry : prometheus->value("other", nlohmann::json::array())) {
    int64_t offset = 0;
    if (!entry.is_object() || text(entry, "source").empty() || !number(entry, "offset", &offset)) {
      return bad("an \"other\" entry without source, domain and offset");
    }
    other[text(entry, "source") + "\n" + text(entry, "domain")] = offset;
  }
  for (const nlohmann::json& entry : prometheus->value("targets", nlohmann::json::array())) {
    Impl::Exposed exposed;
    auto labels = entry.is_object() ? entry.find("labels") : entry.end();
    if (!entry.is_object() || text(entry, "key").empty() ||
        !number(entry, "offset", &exposed.offset_microjoules) ||
        !number(entry, "shown", &exposed.shown_microjoules) || labels == entry.end() ||
        !labels->is_array()) {
      return bad("a target entry without key, offset, shown and labels");
    }
    for (const nlohmann::json& label : *labels) {
      if (!label.is_array() || label.size() != 2 || !label[0].is_string() ||
          !label[1].is_string()) {
        return bad("a target's label that is not a pair of strings");
      }
      exposed.labels.emplace_back(label[0].get<std::string>(), label[1].get<std::string>());
    }
    // A series whose 0 no scrape had read goes on at 0 until one does.
    auto counting = entry.find("counting");
    if (counting != entry.end() && counting->is_boolean() && !counting->get<bool>()) {
      exposed.zero_generation = 0;
    }
    targets.push_back({text(entry, "source") + "\n" + text(entry, "domain"),
                       {text(entry, "key"), std::move(exposed)}});
  }
  m.restored_other = std::move(other);
  m.restored_targets = std::move(targets);
  return Status::OK();
}

OutputStats PrometheusExposition::Stats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->stats;
}

std::string PrometheusExposition::Text() const {
  std::shared_ptr<const std::string> text;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    text = impl_->text;
    impl_->served_generation = impl_->generation;
  }
  return *text;
}

Result<std::unique_ptr<http::MetricsServer>> BindMetricsServer(
    const std::string& host, int port, const PrometheusExposition& exposition) {
  const PrometheusExposition* source = &exposition;
  return http::MetricsServer::Bind(
      host, port, [source] { return source->Text(); },
      "kwatt meter: its metrics are at /metrics\n");
}

}  // namespace kwatt::meter
