// After-the-fact statistics of an experiment's metrics: per node and metric the count, mean, min,
// max and last value; for counters (`*_total`) the increase and mean rate, robust to counter
// resets; CPU usage per node. Per phase as well. Computed in one streaming pass (a RowSink).
// Not thread-safe.
#ifndef KWATT_ENERGY_STATS_H_
#define KWATT_ENERGY_STATS_H_

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kwatt/energy/energy.h"

namespace kwatt::energy {

// Values that are not finite numbers (NaN: a non-numeric reading; +-Infinity) are no values: not
// counted, and without any finite value a metric has no mean, minimum or maximum (NaN: null in
// JSON, "-" in text), not +-infinity.
struct MetricStats {
  int64_t count = 0;  // finite values
  double sum = 0;
  double min = NAN, max = NAN;  // NaN while count is 0
  double last = NAN;
  UnixNanos last_time = INT64_MIN;
  bool counter = false;
  double increase = 0;  // counters: summed over series, resets counted from zero
  int resets = 0;
  UnixNanos first_time = INT64_MAX;

  double mean() const { return count ? sum / double(count) : NAN; }
  // Counters: increase per second over the span of the samples.
  double rate() const;
};

struct NodeStats {
  std::string node;
  std::map<std::string, MetricStats> metrics;  // by metric id
  double cpu_busy = NAN;                       // fraction of CPU time not idle, over the interval
  std::string cpu_source;  // prom_node_cpu_seconds_total or bmc_cpu_usage_percent
};

class StatsCollector : public RowSink {
 public:
  // `phases`: intervals reported apart (index 0 of results is the whole window).
  StatsCollector(std::vector<std::string> nodes, UnixNanos start, UnixNanos end,
                 std::vector<Interval> phases);
  Status Write(std::string_view site, const RowBatch& batch,
               const StringInterner& interner) override;

  // [interval][node]: interval 0 is the window, then each phase.
  std::vector<std::vector<NodeStats>> Results() const;
  const std::vector<Interval>& intervals() const { return intervals_; }

 private:
  struct SeriesState {
    double last = NAN;
  };
  std::vector<std::string> nodes_;
  std::vector<Interval> intervals_;
  // [interval] node -> metric -> stats, and per (node, metric, labels) the counter state.
  std::vector<std::map<std::string, std::map<std::string, MetricStats>>> stats_;
  std::vector<std::map<std::string, SeriesState>> series_;
  // CPU seconds per interval, node: idle (idle + iowait) and total increases.
  std::vector<std::map<std::string, std::pair<double, double>>> cpu_;
  detail::RowNodeIndex lookup_;
};

// The stats of a role: its nodes' summed (count, sum, min, max, last, increase...; CPU busy
// their mean), under `name`.
NodeStats MergeNodeStats(const std::string& name, const std::vector<const NodeStats*>& nodes);

// A StatsCollector for the nodes and window of a query known only once it is resolved (a job's,
// an archive's): give it to Fetch or FeedSource, then Results().
class StatsSink : public RowSink {
 public:
  explicit StatsSink(std::vector<Interval> phases) : phases_(std::move(phases)) {}
  // InvalidArgument for phases CheckPhases refuses (a phase "window" would be taken for the
  // window's entry).
  Status Begin(const RowsReport& resolved) override;
  Status Write(std::string_view site, const RowBatch& batch,
               const StringInterner& interner) override;
  // [interval][node] as StatsCollector::Results, each interval's nodes followed by one entry per
  // role ("role NAME"; roles with one name merged, MergeRoles). InvalidArgument when a role names
  // a node that is not one of the nodes.
  Result<std::vector<std::vector<NodeStats>>> Results(const std::vector<Role>& roles) const;
  // The window ("window"), then each phase.
  const std::vector<Interval>& intervals() const { return stats_->intervals(); }

 private:
  std::vector<Interval> phases_;
  std::unique_ptr<StatsCollector> stats_;
};

}  // namespace kwatt::energy

#endif  // KWATT_ENERGY_STATS_H_
