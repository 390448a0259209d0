// `kwatt collect --config DIR --store URI`: polls the devices of Kwollect's metric descriptions
// into a store (doc/collect.md).
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "apps/kwatt/commands.h"
#include "apps/kwatt/stop_signals.h"
#include "kwatt/collect/collector.h"
#include "kwatt/collect/config.h"
#include "kwatt/core/text.h"
#include "kwatt/http/metrics_server.h"
#include "kwatt/store/open_store.h"
#include "kwatt/store/writer_lock.h"

namespace kwatt::cli {
namespace {

// An HTTP device (Prometheus, JSON) holds a connection and the wakeup pair of its libcurl poller:
// three open files each, other devices fewer. The soft limit (1024 on most systems) is raised to
// the hard one; when even that is short of what the devices need, say so (their polls, and the
// store, would fail).
void RaiseOpenFileLimit(size_t devices) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  rlim_t needed = rlim_t(3 * devices + 64);
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < needed) {
    std::fprintf(stderr,
                 "kwatt collect: warning: %zu devices need about %llu open files, the limit is "
                 "%llu (ulimit -n): polls and writes will fail\n",
                 devices, (unsigned long long)needed, (unsigned long long)limit.rlim_cur);
  }
}

// `kwatt collect`'s options.
struct CollectArgs {
  std::string config, store = "kwatt.store", site, id = "kwatt-collect", listen, spool;
  std::string duration;
  int flush_ms = 500;
  int64_t memory_rows = 1'000'000;
  bool check = false, quiet = false;
};

// --check: each device read once. A sensor or OID it does not have is a mistake of the
// configuration (exit 2); a device that cannot be reached now may only be down (a warning).
int CheckConfiguration(collect::Collector& collector, const collect::CollectConfig& config,
                       size_t devices, const std::string& summary) {
  collect::Collector::ProbeReport probe = collector.Probe();
  for (const std::string& line : probe.failed) {
    std::fprintf(stderr, "kwatt collect: warning: %s\n", line.c_str());
  }
  if (!probe.missing.empty()) {
    for (const std::string& line : probe.missing) {
      std::fprintf(stderr, "kwatt collect: %s\n", line.c_str());
    }
    std::fprintf(stderr,
                 "kwatt collect: %zu values the configuration names are not on their "
                 "devices: fix the descriptions\n",
                 probe.missing.size());
    return kExitUsage;
  }
  std::printf("%zu metrics from %zu files, %zu devices (%s): the configuration is valid\n",
              config.metrics.size(), config.files.size(), devices, summary.c_str());
  return kExitOk;
}

// The end line: rows written, polls and how they went, rows spooled and dropped.
void PrintCollectStats(const collect::CollectorStats& stats) {
  int64_t errors = 0, overruns = 0, polls = 0, late = 0;
  for (const auto& device : stats.devices) {
    errors += device.errors;
    overruns += device.overruns;
    polls += device.polls;
    late += device.late;
  }
  std::fprintf(stderr,
               "kwatt collect: %lld rows written, %lld polls (%lld late, %lld overruns, %lld "
               "failed), %lld rows spooled, %lld dropped\n",
               (long long)stats.rows_written, (long long)polls, (long long)late,
               (long long)overruns, (long long)errors, (long long)stats.rows_spooled,
               (long long)stats.rows_dropped);
}

// Runs `kwatt collect` until a stop signal or --duration.
int RunCollect(const CollectArgs& args) {
  Result<collect::CollectConfig> config = collect::ReadCollectConfig(args.config);
  if (!config.ok()) return Fail("collect", config.status());
  std::optional<double> duration;
  if (!args.duration.empty()) {
    Result<double> seconds = ParseDuration(args.duration, "--duration");
    if (!seconds.ok()) return Fail("collect", seconds.status());
    duration = *seconds;
  }
  std::string listen_host;
  int listen_port = 0;
  if (!args.listen.empty()) {
    Status parsed = ParseListen(args.listen, &listen_host, &listen_port);
    if (!parsed.ok()) return Fail("collect", parsed);
  }
  bool optional = false;
  std::map<std::string, int> schemes;
  std::set<std::string> devices;
  for (const auto& metric : config->metrics) {
    optional = optional || metric.optional;
    if (devices.insert(metric.url.DeviceKey()).second) ++schemes[metric.url.scheme];
  }
  if (optional && args.site.empty() && !args.check) {
    return Fail("collect",
                Status::InvalidArgument(
                    "the configuration has optional metrics, which the monitor jobs of a site "
                    "switch on: give --site (the site of the jobs in the store)"));
  }
  if (!args.check) RaiseOpenFileLimit(devices.size());
  collect::CollectorOptions options;
  options.site = args.site;
  options.collector_id = args.id;
  options.spool_dir = args.spool;
  options.memory_rows = size_t(std::max<int64_t>(args.memory_rows, 1));
  options.flush_interval = std::chrono::milliseconds(args.flush_ms);
  // A database server may be down when the collector starts: rows wait for it. A file that
  // cannot be opened is a mistake to say at once.
  options.start_without_store = store::IsPostgresUri(args.store);
  // The embedded store's file: its deletion or replacement seen.
  if (!options.start_without_store && !args.check) options.store_file = args.store;
  std::string uri = args.store;
  collect::StoreOpener opener = [uri]() { return store::OpenStore(uri, /*create=*/true); };
  if (args.check) {
    // Devices are made (their paths checked) without touching the store.
    opener = []() -> Result<std::unique_ptr<store::Store>> {
      return std::unique_ptr<store::Store>();
    };
  }
  // Signals are taken by this thread alone: every other thread, started after, blocks them.
  StopSignals stop(StopSignals::How::kBlock);
  // One collector per store: a second one would write every row again.
  std::unique_ptr<store::WriterLock> lock;
  if (!args.check) {
    Result<std::unique_ptr<store::WriterLock>> taken =
        store::TakeWriterLock(uri, ShownStoreUri(uri), "collector");
    if (taken.ok()) {
      lock = std::move(taken).value();
    } else if (taken.status().code() == Status::Code::kUnavailable) {
      // PostgreSQL down: rows wait for it (below); the lock cannot be asked now.
      std::fprintf(stderr,
                   "kwatt collect: warning: no other collector can be ruled out on %s: %s\n",
                   ShownStoreUri(uri).c_str(), taken.status().message().c_str());
    } else {
      return Fail("collect", taken.status());
    }
  }
  Result<std::unique_ptr<collect::Collector>> collector =
      collect::Collector::Create(*config, opener, options);
  if (!collector.ok()) return Fail("collect", collector.status());
  std::string summary;
  for (const auto& [scheme, count] : schemes) {
    summary += (summary.empty() ? "" : ", ") + std::to_string(count) + " " + scheme;
  }
  if (args.check) return CheckConfiguration(**collector, *config, devices.size(), summary);
  std::unique_ptr<http::MetricsServer> endpoint;
  if (!args.listen.empty()) {
    const collect::Collector* serving = collector->get();
    Result<std::unique_ptr<http::MetricsServer>> bound = http::MetricsServer::Bind(
        listen_host, listen_port, [serving] { return serving->PrometheusText(); },
        "kwatt collect: its metrics are at /metrics\n");
    Status started = bound.ok() ? (*bound)->Serve() : bound.status();
    if (!started.ok()) return Fail("collect", started.WithContext("--listen"));
    endpoint = std::move(*bound);
    listen_port = endpoint->port();
  }
  (*collector)->Start();
  if (!args.quiet) {
    std::fprintf(stderr, "kwatt collect: %zu metrics, %zu devices (%s) into %s%s\n",
                 config->metrics.size(), devices.size(), summary.c_str(),
                 ShownStoreUri(uri).c_str(),
                 args.listen.empty() ? ""
                                     : (", metrics on http://" + listen_host + ":" +
                                        std::to_string(listen_port) + "/metrics")
                                           .c_str());
  }
  if (!args.listen.empty()) {
    std::printf("http://%s:%d/metrics\n", listen_host.c_str(), listen_port);
    std::fflush(stdout);
  }
  if (duration) {
    stop.Wait(std::chrono::nanoseconds(int64_t(*duration * 1e9)));
  } else {
    stop.Wait();
  }
  Status stopped = (*collector)->Stop();
  endpoint.reset();  // stops serving
  if (!args.quiet) PrintCollectStats((*collector)->Stats());
  if (!stopped.ok()) return Fail("collect", stopped);
  return kExitOk;
}

}  // namespace

Runner RegisterCollect(CLI::App* app) {
  auto args = std::make_shared<CollectArgs>();
  CLI::App* command = app->add_subcommand(
      "collect",
      "Poll the devices of Kwollect's metric description files (Prometheus, SNMP, IPMI, JSON, "
      "wattmeter streams) into a store (doc/collect.md)");
  command->add_option("--config", args->config, "Directory of metric description files")
      ->required()
      ->check(NonEmptyPath());
  command
      ->add_option("--store", args->store,
                   "The store: a file (the embedded store, made when missing) or "
                   "postgresql://USER@HOST/DB")
      ->capture_default_str()
      ->check(NonEmptyPath());
  command->add_option("--site", args->site,
                      "Site whose monitor jobs in the store switch on optional metrics");
  command->add_option("--id", args->id, "Device id of the collector's own metrics in the store")
      ->capture_default_str();
  command->add_option("--listen", args->listen,
                      "Serve the collector's own metrics (Prometheus text) on HOST:PORT/metrics");
  command->add_option("--spool", args->spool,
                      "Directory for rows the store could not take once memory is full");
  command
      ->add_option("--memory-rows", args->memory_rows, "Rows kept in memory while the store fails")
      ->capture_default_str();
  command->add_option("--flush-interval", args->flush_ms, "Milliseconds between writes")
      ->capture_default_str()
      ->check(CLI::Range(10, 1000));
  command->add_option("--duration", args->duration, "Stop after this long (90s, 10m, 2h)");
  command->add_flag("--check", args->check,
                    "Read the configuration, make every device, print what would run, and exit");
  command->add_flag("--quiet", args->quiet, "No start and end lines");
  return [command, args]() -> int {
    if (!command->parsed()) return -1;
    return RunCollect(*args);
  };
}

}  // namespace kwatt::cli
