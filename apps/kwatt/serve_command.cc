#include <cstdio>

#include "apps/kwatt/commands.h"
#include "apps/kwatt/stop_signals.h"
#include "kwatt/http/server_limits.h"
#include "kwatt/server/server.h"

namespace kwatt::cli {

Runner RegisterServe(CLI::App* app) {
  struct Args {
    server::ServerOptions options;
    bool simulate = false;
    std::string start_clock;
  };
  auto args = std::make_shared<Args>();
  server::ServerOptions& o = args->options;
  CLI::App* serve = app->add_subcommand(
      "serve",
      "Serve a Kwollect-compatible API over a simulated Grid'5000 testbed, or over a store");
  serve->add_flag("--simulate", args->simulate, "Serve the simulated testbed");
  serve->add_option("--store", o.store_uri,
                    "Serve the rows, jobs and catalogues of this store: a file (the embedded "
                    "store, created when missing) or postgresql://... (doc/store.md)");
  serve->add_option("--host", o.host, "Address to listen on")->capture_default_str();
  serve->add_option("--port", o.port, "Port to listen on; 0 picks a free port")
      ->check(NumberIn(0, 65535, true))
      ->capture_default_str();
  serve->add_option("--seed", o.seed, "Seed of every simulated value")
      ->check(NumberIn(0, 18446744073709551615.0, true))
      ->capture_default_str();
  serve
      ->add_option("--jobs", o.jobs_file,
                   "Jobs file: jobs, load phases and outages (doc/jobs_file.md)")
      ->check(CLI::ExistingFile);
  serve
      ->add_option("--max-rows", o.max_rows,
                   "Answer larger metrics queries with Kwollect's timeout error (0: no limit)")
      ->check(NumberIn(0, 9.2e18, true))
      ->capture_default_str();
  serve->add_option("--latency-ms", o.latency_ms, "Delay added before every answer, in ms")
      ->check(NumberIn(0, 3'600'000, true))
      ->capture_default_str();
  serve
      ->add_option("--rows-per-second", o.rows_per_second,
                   "Pace each metrics answer at this many rows per second, as Kwollect's "
                   "database would (0: as fast as possible)")
      ->check(NumberIn(0, 9.2e18, true))
      ->capture_default_str();
  serve
      ->add_option("--fail-rate", o.fail_rate,
                   "Fraction of metrics requests that fail: 503, or a body cut midway")
      ->check(NumberIn(0, 1, false))
      ->capture_default_str();
  serve
      ->add_option("--fail-status", o.fail_status,
                   "With --fail-rate: failed requests all answer this HTTP status (400-599) "
                   "with an HTML page, as a proxy would, instead of 503 or a cut body")
      ->check(NumberIn(400, 599, true));
  serve
      ->add_option("--dashboard-max-rows", o.dashboard_max_rows,
                   "The most rows one dashboard answer (a plot, a job's energy) reads; beyond, "
                   "that part of the page says so (the API and kwatt energy have no such limit)")
      ->check(NumberIn(1, 9.2e18, true))
      ->capture_default_str();
  serve->add_option("--down-site", o.down_sites,
                    "A site whose API is down: every request under /sites/SITE answers 503 with "
                    "a proxy's HTML page (repeatable)");
  serve
      ->add_option("--auth", o.auth,
                   "Require HTTP Basic credentials USER:PASSWORD (and take pushed metrics)")
      ->check(CLI::Validator(
          [](std::string& value) {
            size_t colon = value.find(':');
            return colon == std::string::npos || colon == 0
                       ? std::string("should be USER:PASSWORD, with a user before the ':'")
                       : std::string();
          },
          "USER:PASSWORD", "Credentials"));
  serve->add_option("--now", args->start_clock,
                    "Start the simulated clock at this instant (epoch seconds or ISO 8601)");
  serve->add_option("--reference", o.reference_dir,
                    "Reference data directory instead of the embedded one (data/reference layout)");
  serve
      ->add_option("--testbed", o.testbed_file,
                   "With --store: serve the sites, clusters, nodes and metrics of this "
                   "description file (YAML or JSON, doc/store.md) instead of Grid'5000's")
      ->excludes("--reference");
  serve
      ->add_option("--threads", o.threads,
                   "Handlers run at once (connections wait on the event loop)")
      ->check(NumberIn(1, http::kMaxThreads, true))
      ->capture_default_str();
  serve
      ->add_option("--max-connections", o.max_connections,
                   "Connections open at once; beyond it a client is answered 503")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  serve->add_option("--max-connections-per-client", o.max_connections_per_client,
                    "Connections open at once from one address; beyond it, 503 (0: no cap)");
  serve
      ->add_option("--log", o.access_log,
                   "Access log, one line per answer (Combined Log Format and the duration in "
                   "microseconds): into FILE, or stderr when no FILE is given")
      ->expected(0, 1)
      ->default_str("-");
  return [serve, args]() -> int {
    if (!serve->parsed()) return -1;
    if (args->simulate == !args->options.store_uri.empty()) {
      std::fprintf(stderr,
                   "kwatt serve: say what to serve: --simulate (the simulated testbed) or --store "
                   "URI (a store's rows), not %s\n",
                   args->simulate ? "both" : "neither");
      return kExitUsage;
    }
    if (args->simulate && !args->options.testbed_file.empty()) {
      std::fprintf(stderr,
                   "kwatt serve: --testbed describes a lab whose rows are in a store: give it with "
                   "--store URI (the simulator simulates Grid'5000's own devices)\n");
      return kExitUsage;
    }
    if (!args->options.store_uri.empty() && serve->count("--seed") > 0) {
      std::fprintf(stderr,
                   "kwatt serve: --seed sets the simulated values: a store serves its own rows "
                   "(drop --seed, or serve --simulate)\n");
      return kExitUsage;
    }
    if (!args->start_clock.empty()) {
      Result<UnixNanos> t = ParseKwollectTimeParameter(args->start_clock);
      if (!t.ok()) {
        std::fprintf(stderr, "kwatt serve: --now: %s\n", t.status().message().c_str());
        return kExitUsage;
      }
      args->options.start_clock_at = *t;
    }
    // Signals are taken by this thread alone: every server thread, started after, blocks them.
    StopSignals stop(StopSignals::How::kBlock);
    auto server = server::Server::Start(args->options);
    if (!server.ok()) {
      std::fprintf(stderr, "kwatt serve: %s\n", server.status().message().c_str());
      return ExitCodeOf(server.status());
    }
    // The API's base URL first (scripts read that line), then the dashboard's.
    std::printf("%s\n%s\n", (*server)->base_url().c_str(), (*server)->dashboard_url().c_str());
    std::fflush(stdout);
    stop.Wait();
    (*server)->Stop();
    return kExitOk;
  };
}

}  // namespace kwatt::cli
