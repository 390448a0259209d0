// Cutting a query into requests that Kwollect answers within its limits. Internal.
#ifndef KWATT_SRC_KWOLLECT_PLANNER_H_
#define KWATT_SRC_KWOLLECT_PLANNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "kwatt/core/catalogue.h"
#include "kwatt/core/time.h"

namespace kwatt::kwollect::internal {

struct PlannedRequest {
  std::vector<std::string> uids;
  std::vector<std::string> metrics;  // empty: all
  UnixNanos start = 0;               // inclusive
  UnixNanos end = 0;                 // inclusive
  // Not 0: one of the requests of a window of the same nodes split by metric (and, maybe, then by
  // time), adjacent in the plan: their rows are delivered merged in time order, since each node's
  // rows must reach the sink in time order (an archive's files, shared/KWOLLECT.md's order).
  uint64_t merge_group = 0;
};

// The most bytes a request's node list or metric list takes in its URL, percent-encoded: longer
// lists are cut into groups (a URL of about 8 KB is what HTTP servers commonly take; 410 metric
// ids were an HTTP 414).
inline constexpr size_t kMaxListUrlBytes = 3000;
// `items` (in order) cut into consecutive groups whose comma-joined, percent-encoded text is at
// most `max_bytes` (an item longer than that alone in its group).
std::vector<std::vector<std::string>> GroupsForUrl(const std::vector<std::string>& items,
                                                   size_t max_bytes = kMaxListUrlBytes);

struct NodeRate {
  std::string uid;
  double rows_per_second = 0;
};

// Rows per second `uid` reports according to its catalogue: each metric (prometheus groups
// expanded, `only_for` honoured, restricted to `metrics` unless empty) at its period, or at its
// optional period when `job_types` enable it (monitor types; node exporter on non-deploy jobs).
// With `summary`: one row per metric and 5 minutes.
double ExpectedRowsPerSecond(const Catalogue& catalogue, const std::string& uid,
                             const std::vector<std::string>& metrics,
                             const std::vector<std::string>& job_types, bool in_job, bool summary);

// Shortest time slice the planner makes before it splits nodes, then metrics.
inline constexpr int64_t kMinSliceNs = 10 * kNanosPerSecond;

// Requests covering [start, end] for `nodes`, each expected under `budget` rows: time slices
// first (adjacent slices share no instant and leave none out: a slice ends 1 us before the next
// begins, Kwollect's resolution), then node groups, then metric groups (only when `metrics` lists
// them: an implicit "all" cannot be split without risking to miss a metric). Order: slice after
// slice, node group after node group, so that each node's requests are in time order.
std::vector<PlannedRequest> PlanSite(const std::vector<NodeRate>& nodes,
                                     const std::vector<std::string>& metrics, UnixNanos start,
                                     UnixNanos end, int64_t budget);

// `request` cut into `count` adjacent time slices (fewer when it spans fewer microseconds).
std::vector<PlannedRequest> SplitByTime(const PlannedRequest& request, int64_t count);

// Shortest time slice SplitRequest makes: below it, a request Kwollect refuses as too large is
// split by nodes, then by metrics, never into sub-second slices (which multiply requests by
// thousands when the refusal does not come from the size).
inline constexpr int64_t kMinSplitNs = kNanosPerSecond;

// Halves of a request that Kwollect refused as too large: by time while each half spans at least
// kMinSplitNs, then by nodes, then by metrics: the request's own list, or, when it asks for every
// metric, `all_metrics` (the catalogue's metric ids for its nodes; metrics the catalogue does not
// list are then not asked for). Empty when it cannot be split. `by_time` false: by nodes, then by
// metrics only (a URL too long: a shorter window would not shorten it). Halves keep the request's
// merge_group (0 when split by metric from a request without one: the caller gives them one).
std::vector<PlannedRequest> SplitRequest(const PlannedRequest& request,
                                         const std::vector<std::string>& all_metrics = {},
                                         bool by_time = true);

}  // namespace kwatt::kwollect::internal

#endif  // KWATT_SRC_KWOLLECT_PLANNER_H_
