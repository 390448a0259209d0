#include "kwatt/meter/kwollect/kwollect_power.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "kwatt/archive/source.h"
#include "kwatt/core/catalogue.h"
#include "kwatt/core/node_name.h"
#include "kwatt/core/own_cpu.h"
#include "kwatt/energy/integration.h"
#include "kwatt/kwollect/fetch.h"

namespace kwatt::meter {

namespace {

using Series = energy::PowerCollector::Series;
using SeriesMap = std::map<std::string, Series>;

double Seconds(std::chrono::nanoseconds d) { return double(d.count()) / 1e9; }

std::string SecondsText(std::chrono::nanoseconds d) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", Seconds(d));
  return text;
}

// The energy of [a, b] from a node's series (energy/integration.h), flagged where part of it is
// not covered; `kept_from`: rows before it were dropped (the live window), so [a, b] starting
// before it is not known whole.
IntervalEnergy Integrate(const SeriesMap& series, UnixNanos a, UnixNanos b, double gap_factor,
                         std::optional<UnixNanos> kept_from) {
  IntervalEnergy e;
  if (b <= a) return e;
  if (series.empty()) {
    e.flags = kUnreadable;
    return e;
  }
  energy::Figures f = energy::IntegrateNodeMetric(series, a, b, gap_factor);
  e.microjoules = std::llround(f.joules * 1e6);
  if (f.gaps > 0 || (kept_from && a < *kept_from)) e.flags = kUnreadable;
  return e;
}

Status CheckPowerMetric(const std::string& metric) {
  if (metric.empty()) return Status::OK();
  const auto& metrics = energy::PowerMetrics();
  if (std::find(metrics.begin(), metrics.end(), metric) != metrics.end()) return Status::OK();
  std::string list;
  for (const std::string& m : metrics) list += (list.empty() ? "" : ", ") + m;
  return Status::InvalidArgument("\"" + metric + "\" is not a power metric kwatt integrates (" +
                                 list + ")");
}

// The metric ids a node's catalogue offers (to explain a choice), empty when unknown.
std::vector<std::string> CatalogueMetrics(const ClusterCatalogues& catalogues,
                                          const NodeName& node) {
  std::vector<std::string> ids;
  if (const Catalogue* catalogue = FindCatalogue(catalogues, node.site + "/" + node.Cluster())) {
    for (const CatalogueMetric& m : catalogue->MetricsOf(node.uid)) ids.push_back(m.metric_id);
  }
  return ids;
}

// The node's chosen metric in `data`: the one asked, or the energy part's choice over [start,
// end]. Its series (empty when the asked metric has no rows), and a note saying why.
Result<std::pair<std::string, SeriesMap>> Choose(const energy::PowerCollector& data,
                                                 const std::string& fqdn, UnixNanos start,
                                                 UnixNanos end, const std::string& metric,
                                                 double gap_factor,
                                                 const std::vector<std::string>& catalogue,
                                                 const std::string& over, std::string* note) {
  const std::vector<std::string> order =
      metric.empty() ? energy::PowerMetrics() : std::vector<std::string>{metric};
  energy::PowerChoice choice =
      energy::ChoosePowerMetric(data, fqdn, start, end, order, gap_factor, &catalogue);
  if (choice.metric.empty()) {
    if (!metric.empty()) {
      *note = fqdn + ": " + metric + " (asked) has no row " + over;
      return std::make_pair(metric, SeriesMap());
    }
    return Status::NotFound(fqdn + " has no power " + over + ": " + choice.reason +
                            " (give a metric it has, or start a job with the type monitor for "
                            "the wattmeter's rows)");
  }
  *note = fqdn + ": " + choice.metric + " (" + choice.reason + ")";
  return std::make_pair(choice.metric, *choice.series);
}

class CollectedSource final : public DelayedEnergySource {
 public:
  CollectedSource(Domain domain, SeriesMap series, double gap_factor,
                  std::vector<std::string> notes)
      : domains_{std::move(domain)},
        series_(std::move(series)),
        gap_factor_(gap_factor),
        notes_(std::move(notes)) {}

  const std::vector<Domain>& domains() const override { return domains_; }
  Result<std::optional<std::vector<IntervalEnergy>>> EnergyBetween(UnixNanos start,
                                                                   UnixNanos end) override {
    return std::optional<std::vector<IntervalEnergy>>(
        std::vector<IntervalEnergy>{Integrate(series_, start, end, gap_factor_, std::nullopt)});
  }
  std::chrono::nanoseconds MaxDelay() const override { return std::chrono::nanoseconds(0); }
  std::vector<std::string> Notes() const override { return notes_; }

 private:
  std::vector<Domain> domains_;
  SeriesMap series_;
  double gap_factor_;
  std::vector<std::string> notes_;
};

Result<std::unique_ptr<DelayedEnergySource>> CollectedPowerOf(
    const energy::PowerCollector& data, const std::string& fqdn, UnixNanos start, UnixNanos end,
    const std::string& metric, double gap_factor, const std::string& origin,
    const std::vector<std::string>& catalogue) {
  KWATT_RETURN_IF_ERROR(CheckPowerMetric(metric));
  if (!(gap_factor >= 1)) return Status::InvalidArgument("gap_factor should be 1 or more");
  if (std::find(data.nodes().begin(), data.nodes().end(), fqdn) == data.nodes().end()) {
    std::string nodes;
    for (const std::string& n : data.nodes()) nodes += (nodes.empty() ? "" : ", ") + n;
    return Status::NotFound(origin + " holds no node " + fqdn + " (it holds " +
                            (nodes.empty() ? "none" : nodes) + ")");
  }
  std::string note;
  auto chosen = Choose(data, fqdn, start, end, metric, gap_factor, catalogue,
                       "in " + origin + " (" + FormatParisTimestamp(start) + " .. " +
                           FormatParisTimestamp(end) + ")",
                       &note);
  if (!chosen.ok()) return chosen.status();
  Domain domain{"kwollect", fqdn, "node", -1, chosen->first + " of " + fqdn + " (" + origin + ")"};
  return std::unique_ptr<DelayedEnergySource>(std::make_unique<CollectedSource>(
      std::move(domain), std::move(chosen->second), gap_factor, std::vector<std::string>{note}));
}

// A failure that polling again will not mend: the source has failed as a whole.
bool IsFatal(const Status& status) {
  switch (status.code()) {
    case Status::Code::kUnauthenticated:
    case Status::Code::kPermissionDenied:
    case Status::Code::kInvalidArgument:
    case Status::Code::kNotFound:
    case Status::Code::kInternal:
      return true;
    default:
      return false;
  }
}

class LiveSource final : public KwollectPowerSource {
 public:
  LiveSource(KwollectPowerOptions options, NodeName node, std::string metric, RowsReport resolved,
             Domain domain, SeriesMap series, std::vector<std::string> notes)
      : options_(std::move(options)),
        node_(std::move(node)),
        fqdn_(node_.Fqdn()),
        metric_(std::move(metric)),
        resolved_(std::move(resolved)),
        domains_{std::move(domain)},
        notes_(std::move(notes)),
        series_(std::move(series)) {
    if (!options_.log) {
      options_.log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
    }
    UpdateStats(options_.clock->WallNanos());
  }

  void Start() {
    thread_ = std::jthread([this](std::stop_token stop) {
      OwnCpuScope own;  // the meter's work, never a target's
      while (options_.clock->SleepUntil(
          options_.clock->MonotonicNanos() + options_.poll_period.count(), stop)) {
        if (!Poll(stop)) break;
      }
    });
  }

  ~LiveSource() override {
    thread_.request_stop();
    if (thread_.joinable()) thread_.join();
  }

  const std::vector<Domain>& domains() const override { return domains_; }

  Result<std::optional<std::vector<IntervalEnergy>>> EnergyBetween(UnixNanos start,
                                                                   UnixNanos end) override {
    std::lock_guard lock(mutex_);
    if (!fatal_.ok()) return fatal_;
    if (series_.empty()) return std::optional<std::vector<IntervalEnergy>>();
    for (const auto& [labels, s] : series_) {
      if (s.time.empty() || s.time.back() < end) {
        return std::optional<std::vector<IntervalEnergy>>();  // may still come
      }
    }
    std::optional<UnixNanos> kept_from;
    if (dropped_) kept_from = kept_from_;
    return std::optional<std::vector<IntervalEnergy>>(std::vector<IntervalEnergy>{
        Integrate(series_, start, end, options_.gap_factor, kept_from)});
  }

  std::chrono::nanoseconds MaxDelay() const override { return options_.max_delay; }
  std::vector<std::string> Notes() const override { return notes_; }

  Stats stats() const override {
    std::lock_guard lock(mutex_);
    return stats_;
  }

 private:
  // One poll: the rows since a little before the newest ones. False when the source failed as a
  // whole (polling stops; EnergyBetween returns the error), or was stopped.
  bool Poll(std::stop_token stop) {
    const UnixNanos now = options_.clock->WallNanos();
    const UnixNanos oldest = now - options_.retention.count();
    UnixNanos from = std::numeric_limits<UnixNanos>::max();
    {
      std::lock_guard lock(mutex_);
      for (const auto& [labels, s] : series_) {
        if (!s.time.empty())
          from = std::min(from, s.time.back() - UnixNanos(options_.reread.count()));
      }
    }
    if (from == std::numeric_limits<UnixNanos>::max()) from = oldest;
    from = std::max(from, oldest);
    if (now <= from) return true;
    kwollect::FetchQuery query;
    query.nodes = {node_};
    query.start = from;
    query.end = now;
    query.metrics = {metric()};
    query.check_metrics = false;
    energy::PowerCollector rows({fqdn_});
    // A fetch in progress is abandoned when the source is closed (an API that hangs must not hold
    // the meter's stop for the client's timeout).
    Result<RowsReport> report = kwollect::FetchResolved(
        options_.client, query, resolved_, &rows, [&stop](const RowsProgress&) {
          return stop.stop_requested() ? Status::Incomplete("the source was closed") : Status::OK();
        });
    if (stop.stop_requested()) return false;
    Status failed = report.ok() ? Status::OK() : report.status();
    if (report.ok() && !report->complete()) failed = report->failures.front().error;
    if (!failed.ok()) {
      const bool fatal = IsFatal(failed);
      {
        std::lock_guard lock(mutex_);
        stats_.last_error = failed.message();
        if (fatal) {
          fatal_ = failed.WithContext("Kwollect power of " + fqdn_);
        } else {
          ++stats_.failed_polls;
        }
      }
      if (fatal) {
        options_.log("kwatt meter: Kwollect power of " + fqdn_ + ": " + failed.message() +
                     " (no more polls)");
        return false;
      }
      // The polling thread alone logs: last_log_ needs no lock.
      const int64_t monotonic = options_.clock->MonotonicNanos();
      if (last_log_ == 0 || monotonic - last_log_ >= 60 * kNanosPerSecond) {
        last_log_ = monotonic;
        options_.log("kwatt meter: polling Kwollect for " + fqdn_ + " failed, retrying every " +
                     SecondsText(options_.poll_period) + ": " + failed.message());
      }
      return true;
    }
    std::lock_guard lock(mutex_);
    auto node = rows.store().find(fqdn_);
    if (node != rows.store().end()) {
      auto fetched = node->second.find(metric());
      if (fetched != node->second.end()) {
        for (const auto& [labels, fresh] : fetched->second) Merge(series_[labels], fresh, from);
      }
    }
    // The window is bounded: rows before `oldest` go, but the one just before it, so that an
    // interval from `oldest` on is still interpolated at its start.
    for (auto& [labels, s] : series_) {
      size_t first =
          size_t(std::lower_bound(s.time.begin(), s.time.end(), oldest) - s.time.begin());
      if (first > 1) {
        s.time.erase(s.time.begin(), s.time.begin() + ptrdiff_t(first - 1));
        s.value.erase(s.value.begin(), s.value.begin() + ptrdiff_t(first - 1));
        dropped_ = true;
        kept_from_ = std::max(kept_from_, s.time.front());
      }
    }
    ++stats_.polls;
    UpdateStats(now);
    return true;
  }

  // Replaces the rows of `kept` from `from` on with `fresh` (rows of [from, now], time order).
  static void Merge(Series& kept, const Series& fresh, UnixNanos from) {
    size_t cut =
        size_t(std::lower_bound(kept.time.begin(), kept.time.end(), from) - kept.time.begin());
    kept.time.resize(cut);
    kept.value.resize(cut);
    for (size_t i = 0; i < fresh.time.size(); ++i) {
      if (fresh.time[i] < from) continue;
      if (!kept.time.empty() && fresh.time[i] <= kept.time.back()) {
        if (fresh.time[i] == kept.time.back()) continue;  // a duplicate
        // Out of order (Kwollect orders by time, so not expected): put it in its place.
        auto at = std::upper_bound(kept.time.begin(), kept.time.end(), fresh.time[i]);
        kept.value.insert(kept.value.begin() + (at - kept.time.begin()), fresh.value[i]);
        kept.time.insert(at, fresh.time[i]);
        continue;
      }
      kept.time.push_back(fresh.time[i]);
      kept.value.push_back(fresh.value[i]);
    }
  }

  // REQUIRES: mutex_ held (or not yet shared).
  void UpdateStats(UnixNanos now) {
    int64_t rows = 0;
    UnixNanos newest = std::numeric_limits<UnixNanos>::min();
    for (const auto& [labels, s] : series_) {
      rows += int64_t(s.time.size());
      if (!s.time.empty()) newest = std::max(newest, s.time.back());
    }
    stats_.rows = rows;
    if (rows > 0) {
      stats_.lag_seconds = double(now - newest) / 1e9;
      stats_.max_lag_seconds = std::max(stats_.max_lag_seconds, stats_.lag_seconds);
    }
  }

  const std::string& metric() const { return metric_; }

  KwollectPowerOptions options_;
  const NodeName node_;
  const std::string fqdn_;
  const std::string metric_;  // the metric polled
  const RowsReport resolved_;
  const std::vector<Domain> domains_;
  const std::vector<std::string> notes_;

  mutable std::mutex mutex_;
  SeriesMap series_;
  bool dropped_ = false;
  UnixNanos kept_from_ = std::numeric_limits<UnixNanos>::min();
  Status fatal_;
  Stats stats_;
  int64_t last_log_ = 0;  // monotonic ns of the last failure logged (the polling thread's)

  std::jthread thread_;  // last: stopped and joined before the members it uses go
};

Status CheckOptions(const KwollectPowerOptions& o) {
  using std::chrono::nanoseconds;
  auto positive = [](nanoseconds d, const char* name) {
    return d > nanoseconds(0) ? Status::OK()
                              : Status::InvalidArgument(std::string(name) + " should be > 0");
  };
  KWATT_RETURN_IF_ERROR(positive(o.poll_period, "the poll period"));
  KWATT_RETURN_IF_ERROR(positive(o.max_delay, "the API's delay (max_delay)"));
  KWATT_RETURN_IF_ERROR(positive(o.choice_window, "choice_window"));
  if (o.reread < nanoseconds(0)) return Status::InvalidArgument("reread should be >= 0");
  if (o.retention < o.max_delay + 2 * o.poll_period + o.reread) {
    return Status::InvalidArgument("the rows kept (retention, " + SecondsText(o.retention) +
                                   ") should cover the API's delay, two polls and the reread (" +
                                   SecondsText(o.max_delay + 2 * o.poll_period + o.reread) +
                                   "), or intervals would be lost");
  }
  if (!(o.gap_factor >= 1)) return Status::InvalidArgument("gap_factor should be 1 or more");
  if (!o.clock) return Status::InvalidArgument("no clock");
  return CheckPowerMetric(o.metric);
}

}  // namespace

Result<std::unique_ptr<KwollectPowerSource>> OpenKwollectPower(KwollectPowerOptions options) {
  KWATT_RETURN_IF_ERROR(CheckOptions(options));
  Result<NodeName> node = ParseNodeName(options.node);
  if (!node.ok()) return node.status();
  const std::string fqdn = node->Fqdn();
  const UnixNanos now = options.clock->WallNanos();
  kwollect::FetchQuery query;
  query.nodes = {*node};
  query.start = now - options.choice_window.count();
  query.end = now;
  query.metrics =
      options.metric.empty() ? energy::PowerMetrics() : std::vector<std::string>{options.metric};
  query.check_metrics = false;  // candidates (a 2-PSU node's outlets are in no catalogue)
  Result<RowsReport> resolved = kwollect::Resolve(options.client, query);
  if (!resolved.ok()) return resolved.status();
  energy::PowerCollector rows({fqdn});
  Result<RowsReport> fetched = kwollect::FetchResolved(options.client, query, *resolved, &rows);
  if (!fetched.ok()) return fetched.status();
  if (!fetched->complete()) {
    return fetched->failures.front().error.WithContext("fetching the power rows of " + fqdn);
  }
  std::string note;
  auto chosen = Choose(rows, fqdn, *query.start, now, options.metric, options.gap_factor,
                       CatalogueMetrics(resolved->catalogues, *node),
                       "in the last " + SecondsText(options.choice_window), &note);
  if (!chosen.ok()) return chosen.status();
  Domain domain{"kwollect", fqdn, "node", -1,
                chosen->first + " of " + fqdn + " (" + options.client.api_url + ")"};
  std::vector<std::string> notes = {note, "Kwollect at " + options.client.api_url +
                                              ": polled every " + SecondsText(options.poll_period) +
                                              "; an interval waits up to " +
                                              SecondsText(options.max_delay) + " for its rows"};
  auto source =
      std::make_unique<LiveSource>(options, *node, chosen->first, std::move(*resolved),
                                   std::move(domain), std::move(chosen->second), std::move(notes));
  source->Start();
  return std::unique_ptr<KwollectPowerSource>(std::move(source));
}

Result<std::unique_ptr<DelayedEnergySource>> OpenArchivePower(const std::string& archive_dir,
                                                              const std::string& node,
                                                              const std::string& metric,
                                                              double gap_factor) {
  KWATT_RETURN_IF_ERROR(CheckPowerMetric(metric));
  Result<NodeName> name = ParseNodeName(node);
  if (!name.ok()) return name.status();
  energy::PowerCollector rows({name->Fqdn()});
  RowsReport resolved;
  KWATT_RETURN_IF_ERROR(archive::FeedArchive(
      archive_dir, metric.empty() ? energy::PowerMetrics() : std::vector<std::string>{metric},
      std::nullopt, std::nullopt, &rows, &resolved));
  if (std::find(resolved.nodes.begin(), resolved.nodes.end(), *name) == resolved.nodes.end()) {
    std::string held;
    for (const NodeName& n : resolved.nodes) held += (held.empty() ? "" : ", ") + n.Fqdn();
    return Status::NotFound("archive " + archive_dir + " holds no node " + name->Fqdn() +
                            " (it holds " + (held.empty() ? "none" : held) + ")");
  }
  return CollectedPowerOf(rows, name->Fqdn(), resolved.start, resolved.end, metric, gap_factor,
                          "archive " + archive_dir, CatalogueMetrics(resolved.catalogues, *name));
}

Result<std::unique_ptr<DelayedEnergySource>> CollectedPower(
    const energy::PowerCollector& data, const std::string& node_fqdn, UnixNanos start,
    UnixNanos end, const std::string& metric, double gap_factor, const std::string& origin) {
  return CollectedPowerOf(data, node_fqdn, start, end, metric, gap_factor, origin, {});
}

}  // namespace kwatt::meter
