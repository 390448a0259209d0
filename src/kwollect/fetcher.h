// The fetcher of kwollect::Fetch without the resolution before it, over any Transport: what the
// unit tests drive with a scripted transport. Internal to the kwollect library.
#ifndef KWATT_SRC_KWOLLECT_FETCHER_H_
#define KWATT_SRC_KWOLLECT_FETCHER_H_

#include <map>
#include <string>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/http/transport.h"
#include "kwatt/kwollect/client_options.h"
#include "kwatt/kwollect/fetch.h"
#include "src/kwollect/planner.h"

namespace kwatt::kwollect::internal {

// One site of a resolved query, ready to be planned.
struct SitePlanInput {
  std::string site;
  std::vector<std::string> uids;
  std::vector<NodeRate> rates;  // what the planner expects of each node
  // Each node's metric ids from its cluster's catalogue: what a request for every metric is
  // split into when even one node over the shortest slice is too much for Kwollect.
  std::map<std::string, std::vector<std::string>> metric_ids;
};

// Plans each site over [report->start, report->end] (query.metrics, query.summary,
// options.max_rows_per_request) and fetches the plan through `transport`: at most
// options.max_concurrency requests in flight (max_per_site per site), Kwollect's timeout split,
// transient failures retried, rows delivered to `sink` in plan order, failures merged into
// report->failures; report's counters filled. Fetch's contract for the sink and `progress`.
// REQUIRES: ValidateClientOptions(options) is OK; `inputs` in output order.
Status RunFetcher(const ClientOptions& options, const FetchQuery& query,
                  std::vector<SitePlanInput> inputs, http::Transport* transport, RowSink* sink,
                  const ProgressCallback& progress, RowsReport* report);

}  // namespace kwatt::kwollect::internal

#endif  // KWATT_SRC_KWOLLECT_FETCHER_H_
