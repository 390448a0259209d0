// kwatt: the command-line tool. One subcommand per capability (doc/cli.md).
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <pthread.h>
#include <string>

#include "kwatt/core/time.h"
#include "kwatt/server/server.h"

#ifndef KWATT_VERSION
#define KWATT_VERSION "0.0.0"
#endif

namespace {

// Exit statuses (doc/errors.md).
constexpr int kExitUsage = 2;
constexpr int kExitFailure = 1;

int RunServe(const kwatt::server::ServerOptions& options, bool simulate) {
  if (!simulate) {
    std::fprintf(stderr,
                 "kwatt serve: only the simulated testbed can be served for now: add --simulate\n");
    return kExitUsage;
  }
  // Signals are taken by this thread alone (sigwait), so every server thread must block them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto server = kwatt::server::Server::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "kwatt serve: %s\n", server.status().message().c_str());
    return server.status().code() == kwatt::Status::Code::kInvalidArgument ? kExitUsage
                                                                           : kExitFailure;
  }
  std::printf("%s\n", (*server)->base_url().c_str());
  std::fflush(stdout);
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  (*server)->Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kwatt: the energy and the metrics of experiments on Grid'5000 (Kwollect)"};
  app.set_version_flag("--version", std::string("kwatt ") + KWATT_VERSION);
  app.require_subcommand(1);

  kwatt::server::ServerOptions serve_options;
  bool simulate = false;
  std::string start_clock;
  CLI::App* serve = app.add_subcommand(
      "serve", "Serve a Kwollect-compatible API over a simulated Grid'5000 testbed");
  serve->add_flag("--simulate", simulate, "Serve the simulated testbed (required for now)");
  serve->add_option("--host", serve_options.host, "Address to listen on")
      ->capture_default_str();
  serve->add_option("--port", serve_options.port, "Port to listen on; 0 picks a free port")
      ->capture_default_str();
  serve->add_option("--seed", serve_options.seed, "Seed of every simulated value")
      ->capture_default_str();
  serve->add_option("--jobs", serve_options.jobs_file,
                    "Jobs file: jobs, load phases and outages (doc/jobs_file.md)")
      ->check(CLI::ExistingFile);
  serve->add_option("--max-rows", serve_options.max_rows,
                    "Answer larger metrics queries with Kwollect's timeout error (0: no limit)")
      ->capture_default_str();
  serve->add_option("--latency-ms", serve_options.latency_ms,
                    "Delay added before every answer, in milliseconds")
      ->capture_default_str();
  serve->add_option("--fail-rate", serve_options.fail_rate,
                    "Fraction of metrics requests that fail: 503, or a body cut midway")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  serve->add_option("--auth", serve_options.auth,
                    "Require HTTP Basic credentials USER:PASSWORD");
  serve->add_option("--now", start_clock,
                    "Start the simulated clock at this instant (epoch seconds or ISO 8601)");
  serve->add_option("--reference", serve_options.reference_dir,
                    "Reference data directory instead of the embedded one (data/reference layout)");
  serve->add_option("--threads", serve_options.threads, "Requests served at once")
      ->capture_default_str();
  serve->add_flag("--log", serve_options.log_requests, "Log each request on stderr");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  if (serve->parsed()) {
    if (!start_clock.empty()) {
      auto t = kwatt::ParseKwollectTimeParameter(start_clock);
      if (!t.ok()) {
        std::fprintf(stderr, "kwatt serve: --now: %s\n", t.status().message().c_str());
        return kExitUsage;
      }
      serve_options.start_clock_at = *t;
    }
    return RunServe(serve_options, simulate);
  }
  return 0;
}
