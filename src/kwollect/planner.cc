#include "src/kwollect/planner.h"

#include <algorithm>
#include <cmath>

#include "kwatt/http/client.h"

namespace kwatt::kwollect::internal {

double ExpectedRowsPerSecond(const Catalogue& catalogue, const std::string& uid,
                             const std::vector<std::string>& metrics,
                             const std::vector<std::string>& job_types, bool in_job, bool summary) {
  double rate = 0;
  for (const CatalogueMetric& metric : catalogue.MetricsOf(uid)) {
    if (!metrics.empty() &&
        std::find(metrics.begin(), metrics.end(), metric.metric_id) == metrics.end()) {
      continue;
    }
    int64_t period = in_job ? EffectivePeriodMs(*metric.entry, metric.metric_id, job_types)
                            : metric.entry->period_ms;
    if (period > 0) rate += summary ? 1.0 / 300 : 1000.0 / double(period);
  }
  return rate;
}

namespace {

constexpr int64_t kMicro = kNanosPerMicro;

// Splits [start, end] into `count` adjacent inclusive slices on microsecond boundaries.
std::vector<std::pair<UnixNanos, UnixNanos>> TimeSlices(UnixNanos start, UnixNanos end,
                                                        int64_t count) {
  std::vector<std::pair<UnixNanos, UnixNanos>> slices;
  int64_t instants = (end - start) / kMicro + 1;  // microseconds covered, both ends included
  count = std::max<int64_t>(1, std::min<int64_t>(count, instants));
  int64_t length = (instants + count - 1) / count * kMicro;
  for (UnixNanos a = start; a <= end; a += length) {
    UnixNanos b = std::min(end, a + length - kMicro);
    slices.emplace_back(a, b);
    if (b == end) break;
  }
  return slices;
}

}  // namespace

std::vector<std::vector<std::string>> GroupsForUrl(const std::vector<std::string>& items,
                                                   size_t max_bytes) {
  std::vector<std::vector<std::string>> groups;
  size_t bytes = 0;
  for (const std::string& item : items) {
    size_t size = http::UrlEncode(item).size();
    size_t separator = 3;  // "%2C"
    if (groups.empty() || (!groups.back().empty() && bytes + separator + size > max_bytes)) {
      groups.emplace_back();
      bytes = 0;
    }
    bytes += (groups.back().empty() ? 0 : separator) + size;
    groups.back().push_back(item);
  }
  return groups;
}

std::vector<PlannedRequest> PlanSite(const std::vector<NodeRate>& nodes,
                                     const std::vector<std::string>& metrics, UnixNanos start,
                                     UnixNanos end, int64_t budget) {
  std::vector<PlannedRequest> plan;
  if (nodes.empty() || end < start) return plan;
  budget = std::max<int64_t>(budget, 1);
  double seconds = double(end - start) / 1e9;
  double max_rate = 0, total_rate = 0;
  for (const NodeRate& node : nodes) {
    max_rate = std::max(max_rate, node.rows_per_second);
    total_rate += node.rows_per_second;
  }
  // Node groups: as many nodes as fit the budget over the shortest slice.
  double min_slice_s = double(kMinSliceNs) / 1e9;
  size_t per_group = nodes.size();
  if (total_rate * std::min(seconds, min_slice_s) > double(budget) && max_rate > 0) {
    per_group = size_t(std::max(1.0, std::floor(double(budget) / (max_rate * min_slice_s))));
  }
  // Metric groups: only with an explicit list, when one node over the shortest slice is too much.
  std::vector<std::vector<std::string>> metric_groups = {metrics};
  if (per_group == 1 && metrics.size() > 1 && max_rate * min_slice_s > double(budget)) {
    size_t groups =
        std::min(metrics.size(), size_t(std::ceil(max_rate * min_slice_s / double(budget))));
    metric_groups.assign(groups, {});
    for (size_t i = 0; i < metrics.size(); ++i) metric_groups[i % groups].push_back(metrics[i]);
  }
  // Then each group cut again where its list would not fit in a URL.
  if (!metrics.empty()) {
    std::vector<std::vector<std::string>> fitting;
    for (const auto& group : metric_groups) {
      for (auto& part : GroupsForUrl(group)) fitting.push_back(std::move(part));
    }
    metric_groups = std::move(fitting);
  }
  std::vector<std::vector<std::string>> node_groups;
  for (size_t i = 0; i < nodes.size(); i += per_group) {
    std::vector<std::string> group;
    for (size_t j = i; j < std::min(nodes.size(), i + per_group); ++j)
      group.push_back(nodes[j].uid);
    for (auto& part : GroupsForUrl(group)) node_groups.push_back(std::move(part));
  }
  double group_rate = total_rate / double(node_groups.size()) / double(metric_groups.size());
  int64_t slices = int64_t(std::ceil(group_rate * seconds / double(budget)));
  uint64_t merge_group = 0;
  for (const auto& [a, b] : TimeSlices(start, end, std::max<int64_t>(slices, 1))) {
    for (const auto& uids : node_groups) {
      uint64_t group = metric_groups.size() > 1 ? ++merge_group : 0;
      for (const auto& group_metrics : metric_groups) {
        plan.push_back(PlannedRequest{uids, group_metrics, a, b, group});
      }
    }
  }
  return plan;
}

std::vector<PlannedRequest> SplitByTime(const PlannedRequest& request, int64_t count) {
  std::vector<PlannedRequest> out;
  for (const auto& [a, b] : TimeSlices(request.start, request.end, count)) {
    out.push_back(PlannedRequest{request.uids, request.metrics, a, b, request.merge_group});
  }
  return out;
}

std::vector<PlannedRequest> SplitRequest(const PlannedRequest& request,
                                         const std::vector<std::string>& all_metrics,
                                         bool by_time) {
  // Both bounds are inclusive: the request spans end - start + 1 us.
  if (by_time && request.end - request.start + kMicro >= 2 * kMinSplitNs) {
    auto slices = TimeSlices(request.start, request.end, 2);
    if (slices.size() == 2) {
      PlannedRequest a = request, b = request;
      a.start = slices[0].first;
      a.end = slices[0].second;
      b.start = slices[1].first;
      b.end = slices[1].second;
      return {a, b};
    }
  }
  if (request.uids.size() > 1) {
    size_t half = request.uids.size() / 2;
    PlannedRequest a = request, b = request;
    a.uids.assign(request.uids.begin(), request.uids.begin() + half);
    b.uids.assign(request.uids.begin() + half, request.uids.end());
    return {a, b};
  }
  const std::vector<std::string>& metrics = request.metrics.empty() ? all_metrics : request.metrics;
  if (metrics.size() > 1) {
    size_t half = metrics.size() / 2;
    PlannedRequest a = request, b = request;
    a.metrics.assign(metrics.begin(), metrics.begin() + half);
    b.metrics.assign(metrics.begin() + half, metrics.end());
    return {a, b};
  }
  return {};
}

}  // namespace kwatt::kwollect::internal
