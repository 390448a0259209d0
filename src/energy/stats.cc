#include "kwatt/energy/stats.h"

#include <algorithm>
#include <cmath>

namespace kwatt::energy {

double MetricStats::rate() const {
  if (!counter || count < 2 || last_time <= first_time) return NAN;
  return increase / (double(last_time - first_time) / 1e9);
}

StatsCollector::StatsCollector(std::vector<std::string> nodes, UnixNanos start, UnixNanos end,
                               std::vector<Interval> phases)
    : nodes_(std::move(nodes)) {
  intervals_.push_back({"window", start, end});
  for (Interval& phase : phases) intervals_.push_back(std::move(phase));
  stats_.resize(intervals_.size());
  series_.resize(intervals_.size());
  cpu_.resize(intervals_.size());
}

Status StatsCollector::Write(std::string_view site, const RowBatch& batch,
                             const StringInterner& interner) {
  std::string series_key;
  for (size_t i = 0; i < batch.size(); ++i) {
    int index = lookup_.Find(nodes_, site, batch.device[i], interner);
    if (index < 0) continue;
    const std::string& node = nodes_[size_t(index)];
    std::string_view metric = interner.Get(batch.metric[i]);
    std::string_view labels = interner.Get(batch.labels[i]);
    double v = batch.value[i];
    UnixNanos t = batch.time[i];
    bool counter = metric.size() > 6 && metric.substr(metric.size() - 6) == "_total";
    for (size_t k = 0; k < intervals_.size(); ++k) {
      const Interval& interval = intervals_[k];
      if (t < interval.start || t > interval.end) continue;
      MetricStats& s = stats_[k][node][std::string(metric)];
      s.counter = counter;
      if (!std::isfinite(v)) continue;
      ++s.count;
      s.sum += v;
      s.min = s.count == 1 ? v : std::min(s.min, v);
      s.max = s.count == 1 ? v : std::max(s.max, v);
      if (t >= s.last_time) {
        s.last = v;
        s.last_time = t;
      }
      s.first_time = std::min(s.first_time, t);
      if (!counter) continue;
      series_key = node;
      series_key += '|';
      series_key += metric;
      series_key += '|';
      series_key += labels;
      double& previous = series_[k][series_key].last;
      double increase = 0;
      if (!std::isnan(previous)) {
        if (v >= previous) {
          increase = v - previous;
        } else {  // a reset: the counter restarted from zero
          increase = v;
          ++s.resets;
        }
      }
      previous = v;
      s.increase += increase;
      if (metric == "prom_node_cpu_seconds_total") {
        auto& [idle, total] = cpu_[k][node];
        total += increase;
        if (labels.find("\"mode\":\"idle\"") != std::string_view::npos ||
            labels.find("\"mode\":\"iowait\"") != std::string_view::npos) {
          idle += increase;
        }
      }
    }
  }
  return Status::OK();
}

std::vector<std::vector<NodeStats>> StatsCollector::Results() const {
  std::vector<std::vector<NodeStats>> out(intervals_.size());
  for (size_t k = 0; k < intervals_.size(); ++k) {
    for (const std::string& node : nodes_) {
      NodeStats ns;
      ns.node = node;
      auto it = stats_[k].find(node);
      if (it != stats_[k].end()) ns.metrics = it->second;
      auto cpu = cpu_[k].find(node);
      if (cpu != cpu_[k].end() && cpu->second.second > 0) {
        ns.cpu_busy = 1 - cpu->second.first / cpu->second.second;
        ns.cpu_source = "prom_node_cpu_seconds_total";
      } else if (auto usage = ns.metrics.find("bmc_cpu_usage_percent");
                 usage != ns.metrics.end() && usage->second.count > 0) {
        ns.cpu_busy = usage->second.mean() / 100;
        ns.cpu_source = "bmc_cpu_usage_percent";
      }
      out[k].push_back(std::move(ns));
    }
  }
  return out;
}

NodeStats MergeNodeStats(const std::string& name, const std::vector<const NodeStats*>& nodes) {
  NodeStats merged;
  merged.node = name;
  double busy = 0;
  int with_cpu = 0;
  for (const NodeStats* n : nodes) {
    for (const auto& [metric, s] : n->metrics) {
      MetricStats& m = merged.metrics[metric];
      m.counter = s.counter;
      m.count += s.count;
      m.sum += s.sum;
      m.min = std::fmin(m.min, s.min);  // fmin and fmax: a NaN (no value) is no minimum
      m.max = std::fmax(m.max, s.max);
      if (s.last_time >= m.last_time) {
        m.last = s.last;
        m.last_time = s.last_time;
      }
      m.first_time = std::min(m.first_time, s.first_time);
      m.increase += s.increase;
      m.resets += s.resets;
    }
    if (!std::isnan(n->cpu_busy)) {
      busy += n->cpu_busy;
      ++with_cpu;
    }
  }
  if (with_cpu) merged.cpu_busy = busy / with_cpu;
  return merged;
}

Status StatsSink::Begin(const RowsReport& resolved) {
  KWATT_RETURN_IF_ERROR(CheckPhases(phases_));
  std::vector<std::string> nodes;
  for (const auto& node : resolved.nodes) nodes.push_back(node.Fqdn());
  stats_ = std::make_unique<StatsCollector>(nodes, resolved.start, resolved.end, phases_);
  return Status::OK();
}

Status StatsSink::Write(std::string_view site, const RowBatch& batch,
                        const StringInterner& interner) {
  return stats_->Write(site, batch, interner);
}

Result<std::vector<std::vector<NodeStats>>> StatsSink::Results(
    const std::vector<Role>& roles) const {
  if (!stats_) return Status::InvalidArgument("StatsSink::Results before any rows were fed");
  std::vector<std::vector<NodeStats>> results = stats_->Results();
  // Roles with one name are one role (their union), as in energy: one entry each.
  const std::vector<Role> merged_roles = MergeRoles(roles);
  for (std::vector<NodeStats>& interval : results) {
    size_t node_count = interval.size();
    for (const Role& role : merged_roles) {
      std::vector<const NodeStats*> members;
      for (const std::string& member : role.nodes) {
        auto end = interval.begin() + ptrdiff_t(node_count);
        auto it = std::find_if(interval.begin(), end,
                               [&](const NodeStats& n) { return n.node == member; });
        if (it == end) {
          return Status::InvalidArgument("role " + role.name + ": " + member +
                                         " is not one of the nodes");
        }
        members.push_back(&*it);
      }
      NodeStats merged = MergeNodeStats("role " + role.name, members);
      interval.push_back(std::move(merged));
    }
  }
  return results;
}

}  // namespace kwatt::energy
