// `kwatt serve`: a Kwollect-compatible HTTP API (doc/kwollect_api.md) over the simulated testbed
// (`--simulate`) or over a store's rows and jobs (`--store URI`, kwatt/store/store.h): one HTTP
// implementation over two row sources. See doc/server.md for what it serves and how it can be made
// to fail.
//
// Thread safety: Start() returns a running server whose methods may be called from any thread.
#ifndef KWATT_SERVER_SERVER_H_
#define KWATT_SERVER_SERVER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/core/time.h"

namespace kwatt::server {

struct ServerOptions {
  std::string host = "127.0.0.1";  // address to bind
  int port = 0;                    // 0: any free port (see Server::port())
  uint64_t seed = 1;               // every simulated value is a function of it
  std::string jobs_file;           // jobs and outages (doc/jobs_file.md); empty: no job
  // Serve the rows, jobs and catalogues of this store (a file: the embedded store, created when
  // missing; postgresql://...: PostgreSQL) instead of simulated ones; sites, clusters and nodes
  // are still the reference data's. Pushed metrics go into it.
  std::string store_uri;
  std::string reference_dir;  // empty: the reference data embedded in the binary
  // A testbed description file (sites, clusters, nodes, metrics; doc/store.md) to serve instead
  // of the reference data; empty: none.
  std::string testbed_file;
  int64_t max_rows = 0;  // a metrics answer above this fails as Kwollect's timeout; 0: none
  // The most rows one dashboard answer (a plot, a job's energy) reads (doc/dashboard.md,
  // "Limits"); beyond, a 400 names the limit and the part of the page says it.
  int64_t dashboard_max_rows = 30'000'000;
  int latency_ms = 0;           // added before answering each request
  int64_t rows_per_second = 0;  // pace of each metrics answer, as a database would; 0: flat out
  double fail_rate = 0;         // fraction of metrics requests that fail (503, or a cut body)
  int fail_status = 0;          // 400-599: the failed ones all answer this status with an HTML
                                // page (a proxy's error), never a cut body; 0: as above
  // Sites whose API is down: every request under /sites/SITE answers 503 with a proxy's HTML
  // page, as a site's API behind Grid'5000's proxy does when it is down.
  std::vector<std::string> down_sites;
  std::string auth;  // "user:password" to require HTTP Basic auth, and to take pushed metrics
                     // (POST: into the store, or kept in memory); empty: open, pushes refused
  std::optional<UnixNanos> start_clock_at;  // the simulated clock starts here; default: real time
  int threads = 8;                          // handlers run at once (the worker pool)
  size_t max_connections = 10'000;          // beyond it, 503 (kwatt/http/server_limits.h)
  size_t max_connections_per_client = 0;    // one address's share; 0: no cap of its own
  // The access log (kwatt/http/access_log.h): "" none, "-" stderr, else a file appended to.
  std::string access_log;
};

class Server {
 public:
  // Builds the testbed, binds and starts serving in background threads.
  static Result<std::unique_ptr<Server>> Start(const ServerOptions& options);
  ~Server();  // stops

  int port() const;
  // "http://HOST:PORT/stable"
  std::string base_url() const;
  // "http://HOST:PORT/dashboard/": the pages (doc/dashboard.md)
  std::string dashboard_url() const;
  // Stops accepting, ends open connections, joins the threads. Idempotent.
  void Stop();
  // Blocks until Stop() is called from another thread.
  void Wait();

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kwatt::server

#endif  // KWATT_SERVER_SERVER_H_
