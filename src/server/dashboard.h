// The dashboard of `kwatt serve` (doc/dashboard.md): its pages under /dashboard/ and the JSON
// endpoints they read under /dashboard/api/ (the site with its nodes' latest power, jobs, a job's
// energy as `kwatt energy` computes it, downsampled series, rows to download). Internal to the
// server: it reaches the server's jobs and rows through DashboardContext, so that it serves the
// simulated testbed and a store alike.
//
// Thread safety: the handlers run on the server's threads at once; the context's functions must
// be safe to call so (the server's are).
#ifndef KWATT_SRC_SERVER_DASHBOARD_H_
#define KWATT_SRC_SERVER_DASHBOARD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kwatt/core/catalogue.h"
#include "kwatt/core/status.h"
#include "kwatt/core/time.h"
#include "kwatt/jobs/job.h"
#include "kwatt/simulate/testbed.h"
#include "src/server/row_stream.h"

namespace kwatt::http {
class HardenedServer;
}

namespace kwatt::server::internal {

// What one answer of the dashboard's API may cost (doc/dashboard.md, "Limits"); beyond, a 400
// names the limit and how to narrow the request.
// The most (series x buckets) points of a series answer: 32 bytes each while it is computed, about
// 40 bytes of JSON.
inline constexpr int64_t kMaxSeriesCells = 2'000'000;

struct DashboardContext {
  const simulate::Testbed* testbed = nullptr;
  std::string api_prefix = "/stable";  // where the Kwollect API is (for the pages' links)
  std::function<UnixNanos()> now;      // the server's (simulated) now
  std::function<Result<std::vector<jobs::Job>>(const std::string& site)> jobs_of;
  // NotFound when the site has no such job.
  std::function<Result<jobs::Job>(const std::string& site, int64_t uid)> find_job;
  // The rows the metrics API would answer for devices x metrics (all when empty) over
  // [start, end] seen at `now` (raw rows, not summaries).
  std::function<Result<std::shared_ptr<MetricsAnswer>>(
      const simulate::Site& site, std::vector<std::string> devices,
      std::vector<std::string> metrics, UnixNanos start, UnixNanos end, UnixNanos now)>
      open_rows;
  // A cluster's metric catalogue (a store's own when it has one).
  std::function<Result<Catalogue>(const simulate::Cluster& cluster)> catalogue;
  // The most rows a series, energy or site answer reads (ServerOptions::dashboard_max_rows): 30
  // million is about 10 s of work on one core, and the power rows an energy answer keeps (16
  // bytes each).
  int64_t max_rows_read = 30'000'000;
};

// Adds the dashboard's routes to `http`.
void AddDashboardRoutes(http::HardenedServer* http, DashboardContext context);

}  // namespace kwatt::server::internal

#endif  // KWATT_SRC_SERVER_DASHBOARD_H_
