// `kwatt collect --config DIR --store URI`: polls the devices of Kwollect's metric descriptions
// into a store (doc/collect.md). `kwatt jobs add|list|end`: the store's jobs (which promote
// optional metrics).
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "apps/kwatt/commands.h"
#include "kwatt/collect/collector.h"
#include "kwatt/collect/config.h"
#include "kwatt/collect/metrics_endpoint.h"
#include "kwatt/core/text.h"
#include "kwatt/jobs/job.h"
#include "kwatt/simulate/testbed.h"
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

struct JobsArgs {
  std::string store, site, user = "kwatt", nodes, types, start, stop, at, from, testbed;
  int64_t id = 0;
  bool json = false, running = false, replace = false;
};

// The nodes of a job of `site` as `--nodes` names them (nova-1, nova-1.lyon,
// nova-1.lyon.grid5000.fr): their uids, each once, each a node of the site in `testbed`.
Result<std::vector<std::string>> JobNodes(const std::string& list, const std::string& site,
                                          const simulate::Testbed& testbed,
                                          const std::string& testbed_file) {
  const simulate::Site* known = testbed.FindSite(site);
  if (!known) {
    std::string sites;
    for (const auto& other : testbed.sites()) sites += (sites.empty() ? "" : ", ") + other->uid;
    return Status::InvalidArgument(
        "--site " + site + " is not a site of " +
        (testbed_file.empty() ? "Grid'5000" : testbed_file) + " (" + sites + ")" +
        (testbed_file.empty() ? ": for a lab's own nodes, give its description with --testbed "
                                "FILE (doc/store.md, \"Describing a testbed\")"
                              : ""));
  }
  std::vector<std::string> uids;
  for (const std::string& text : SplitCommaList(list)) {
    std::string quoted = "--nodes: \"" + text + "\"";
    std::optional<jobs::JobNodeName> name = jobs::SplitJobNodeName(text);
    if (!name) {
      return Status::InvalidArgument(quoted +
                                     " is not a node name: give a node uid (nova-1) or FQDN "
                                     "(nova-1.lyon.grid5000.fr)");
    }
    if (!name->site.empty() && name->site != site) {
      return Status::InvalidArgument(quoted + " is a node of site " + name->site +
                                     ", but the job is of site " + site +
                                     " (--site): an OAR job lives on one site");
    }
    if (std::find(uids.begin(), uids.end(), name->uid) != uids.end()) {
      return Status::InvalidArgument(quoted + " is " + name->uid +
                                     " again: list each node of a job once");
    }
    std::string unknown = testbed.UnknownNode(*known, name->uid);
    if (!unknown.empty()) return Status::InvalidArgument(quoted + ": " + unknown);
    uids.push_back(name->uid);
  }
  if (uids.empty()) return Status::InvalidArgument("--nodes names no node");
  return uids;
}

// The jobs `kwatt jobs add` is asked to add, checked (ids, times, nodes) before the store is
// opened.
Result<std::vector<jobs::Job>> JobsToAdd(const JobsArgs& args, bool id_given, UnixNanos now) {
  simulate::Testbed::Options testbed_options;
  testbed_options.description_file = args.testbed;
  std::vector<jobs::Job> jobs;
  if (!args.from.empty()) {
    if (id_given || !args.nodes.empty() || !args.site.empty()) {
      return Status::InvalidArgument(
          "--from takes its jobs' sites, ids and nodes from the file: "
          "give no --site, --id or --nodes with it");
    }
    KWATT_ASSIGN_OR_RETURN(jobs::JobSet set, jobs::JobSet::Load(args.from));
    // Its sites and nodes checked against the testbed's, as the server checks a jobs file.
    KWATT_ASSIGN_OR_RETURN(std::unique_ptr<simulate::Testbed> testbed,
                           simulate::Testbed::Build(testbed_options, set));
    for (const jobs::Job& job : testbed->jobs().jobs) {
      for (const std::string& type : job.types) {
        KWATT_RETURN_IF_ERROR(collect::CheckJobType(type).WithContext(
            args.from + ": job " + job.site + "/" + std::to_string(job.uid)));
      }
      jobs.push_back(job);
    }
    return jobs;
  }
  if (args.site.empty() || args.nodes.empty()) {
    return Status::InvalidArgument("give --site and --nodes (or --from a jobs file)");
  }
  if (id_given && args.id <= 0) {
    return Status::InvalidArgument("--id " + std::to_string(args.id) +
                                   ": an OAR job id is a positive integer (or leave --id out: "
                                   "one more than the site's highest)");
  }
  if (args.replace && !id_given) {
    return Status::InvalidArgument("--replace replaces the job of an --id: give it");
  }
  jobs::Job job;
  job.site = args.site;
  job.user = args.user;
  job.uid = args.id;
  KWATT_ASSIGN_OR_RETURN(std::unique_ptr<simulate::Testbed> testbed,
                         simulate::Testbed::Build(testbed_options, jobs::JobSet()));
  KWATT_ASSIGN_OR_RETURN(job.nodes, JobNodes(args.nodes, args.site, *testbed, args.testbed));
  job.types = SplitCommaList(args.types);
  for (const std::string& type : job.types) {
    KWATT_RETURN_IF_ERROR(collect::CheckJobType(type).WithContext("--types"));
  }
  job.started_at = now;
  auto time_of = [&](const std::string& text, const char* option) -> Result<UnixNanos> {
    Result<UnixNanos> t = ParseUserTime(text, now);
    if (!t.ok()) return Status::InvalidArgument(std::string(option) + ": " + t.status().message());
    return t;
  };
  if (!args.start.empty()) {
    KWATT_ASSIGN_OR_RETURN(job.started_at, time_of(args.start, "--start"));
  }
  if (!args.stop.empty()) {
    KWATT_ASSIGN_OR_RETURN(UnixNanos stop, time_of(args.stop, "--stop"));
    if (stop <= job.started_at) return Status::InvalidArgument("--stop is not after --start");
    job.stopped_at = stop;
  }
  jobs.push_back(std::move(job));
  return jobs;
}

}  // namespace

Runner RegisterCollect(CLI::App* app) {
  struct Args {
    std::string config, store = "kwatt.store", site, id = "kwatt-collect", listen, spool;
    std::string duration;
    int flush_ms = 500;
    int64_t memory_rows = 1'000'000;
    bool check = false, quiet = false;
  };
  auto args = std::make_shared<Args>();
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
    Result<collect::CollectConfig> config = collect::ReadCollectConfig(args->config);
    if (!config.ok()) return Fail("collect", config.status());
    std::optional<double> duration;
    if (!args->duration.empty()) {
      Result<double> seconds = ParseDuration(args->duration, "--duration");
      if (!seconds.ok()) return Fail("collect", seconds.status());
      duration = *seconds;
    }
    std::string listen_host;
    int listen_port = 0;
    if (!args->listen.empty()) {
      Status parsed = ParseListen(args->listen, &listen_host, &listen_port);
      if (!parsed.ok()) return Fail("collect", parsed);
    }
    bool optional = false;
    std::map<std::string, int> schemes;
    std::set<std::string> devices;
    for (const auto& metric : config->metrics) {
      optional = optional || metric.optional;
      if (devices.insert(metric.url.DeviceKey()).second) ++schemes[metric.url.scheme];
    }
    if (optional && args->site.empty() && !args->check) {
      return Fail("collect",
                  Status::InvalidArgument(
                      "the configuration has optional metrics, which the monitor jobs of a site "
                      "switch on: give --site (the site of the jobs in the store)"));
    }
    if (!args->check) RaiseOpenFileLimit(devices.size());
    collect::CollectorOptions options;
    options.site = args->site;
    options.collector_id = args->id;
    options.spool_dir = args->spool;
    options.memory_rows = size_t(std::max<int64_t>(args->memory_rows, 1));
    options.flush_interval = std::chrono::milliseconds(args->flush_ms);
    // A database server may be down when the collector starts: rows wait for it. A file that
    // cannot be opened is a mistake to say at once.
    options.start_without_store = store::IsPostgresUri(args->store);
    // The embedded store's file: its deletion or replacement seen.
    if (!options.start_without_store && !args->check) options.store_file = args->store;
    std::string uri = args->store;
    collect::StoreOpener opener = [uri]() { return store::OpenStore(uri, /*create=*/true); };
    if (args->check) {
      // Devices are made (their paths checked) without touching the store.
      opener = []() -> Result<std::unique_ptr<store::Store>> {
        return std::unique_ptr<store::Store>();
      };
    }
    // Signals are taken by this thread alone (sigwait): every other thread must block them.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    // One collector per store: a second one would write every row again.
    std::unique_ptr<store::WriterLock> lock;
    if (!args->check) {
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
    if (args->check) {
      // Each device read once: a sensor or OID it does not have is a mistake of the
      // configuration; a device that cannot be reached now may only be down.
      collect::Collector::ProbeReport probe = (*collector)->Probe();
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
                  config->metrics.size(), config->files.size(), devices.size(), summary.c_str());
      return kExitOk;
    }
    std::unique_ptr<collect::MetricsEndpoint> endpoint;
    if (!args->listen.empty()) {
      Result<std::unique_ptr<collect::MetricsEndpoint>> started =
          collect::MetricsEndpoint::Start(collector->get(), listen_host, listen_port);
      if (!started.ok()) return Fail("collect", started.status());
      endpoint = std::move(*started);
      listen_port = endpoint->port();
    }
    (*collector)->Start();
    if (!args->quiet) {
      std::fprintf(stderr, "kwatt collect: %zu metrics, %zu devices (%s) into %s%s\n",
                   config->metrics.size(), devices.size(), summary.c_str(),
                   ShownStoreUri(uri).c_str(),
                   args->listen.empty() ? ""
                                        : (", metrics on http://" + listen_host + ":" +
                                           std::to_string(listen_port) + "/metrics")
                                              .c_str());
    }
    if (!args->listen.empty()) {
      std::printf("http://%s:%d/metrics\n", listen_host.c_str(), listen_port);
      std::fflush(stdout);
    }
    if (duration) {
      timespec timeout{time_t(*duration), long((*duration - double(time_t(*duration))) * 1e9)};
      sigtimedwait(&signals, nullptr, &timeout);
    } else {
      int signal_number = 0;
      sigwait(&signals, &signal_number);
    }
    Status stopped = (*collector)->Stop();
    endpoint.reset();  // stops serving
    collect::CollectorStats stats = (*collector)->Stats();
    int64_t errors = 0, overruns = 0, polls = 0, late = 0;
    for (const auto& device : stats.devices) {
      errors += device.errors;
      overruns += device.overruns;
      polls += device.polls;
      late += device.late;
    }
    if (!args->quiet) {
      std::fprintf(stderr,
                   "kwatt collect: %lld rows written, %lld polls (%lld late, %lld overruns, %lld "
                   "failed), %lld rows spooled, %lld dropped\n",
                   (long long)stats.rows_written, (long long)polls, (long long)late,
                   (long long)overruns, (long long)errors, (long long)stats.rows_spooled,
                   (long long)stats.rows_dropped);
    }
    if (!stopped.ok()) return Fail("collect", stopped);
    return kExitOk;
  };
}

Runner RegisterJobs(CLI::App* app) {
  auto args = std::make_shared<JobsArgs>();
  CLI::App* command = app->add_subcommand(
      "jobs", "The jobs of a store: add, list, end (monitor jobs switch on optional metrics)");
  command->require_subcommand(1);
  auto add_store = [&](CLI::App* sub) {
    sub->add_option("--store", args->store, "The store (a file or postgresql://...)")
        ->required()
        ->check(NonEmptyPath());
  };
  CLI::App* add = command->add_subcommand("add", "Add a job (or the jobs of a jobs file)");
  add_store(add);
  add->add_option("--site", args->site, "Its site");
  CLI::Option* id_option = add->add_option(
      "--id", args->id, "Its id, a positive integer (default: one more than the site's highest)");
  add->add_flag("--replace", args->replace,
                "Replace the site's job of that id when it has one (else an existing id is "
                "refused)");
  add->add_option("--user", args->user, "Its user")->capture_default_str();
  add->add_option("--nodes", args->nodes,
                  "Its nodes: nova-1,nova-2 (or nova-1.lyon, nova-1.lyon.grid5000.fr)");
  add->add_option("--types", args->types, "Its OAR types: monitor, monitor=wattmetre_power_watt");
  add->add_option("--start", args->start, "When it started (default: now)");
  add->add_option("--stop", args->stop, "When it stopped (default: still running)");
  add->add_option("--from", args->from,
                  "A jobs file (the simulator's format, doc/jobs_file.md): add its jobs");
  add->add_option("--testbed", args->testbed,
                  "A lab's testbed description (doc/store.md), whose nodes the jobs' must be "
                  "(default: Grid'5000's sites)");
  CLI::App* list = command->add_subcommand("list", "List a site's jobs");
  add_store(list);
  list->add_option("--site", args->site, "The site")->required();
  list->add_flag("--running", args->running, "Only the jobs running now");
  list->add_flag("--json", args->json, "One JSON object per job");
  CLI::App* end = command->add_subcommand("end", "End a running job");
  add_store(end);
  end->add_option("id", args->id, "The job's id")->required();
  end->add_option("--site", args->site, "Its site")->required();
  end->add_option("--at", args->at, "When it ended (default: now)");
  return [command, add, end, id_option, args]() -> int {
    if (!command->parsed()) return -1;
    UnixNanos now = WallClockNow();
    auto time_of = [&](const std::string& text, const char* option) -> Result<UnixNanos> {
      Result<UnixNanos> t = ParseUserTime(text, now);
      if (!t.ok())
        return Status::InvalidArgument(std::string(option) + ": " + t.status().message());
      return t;
    };
    if (add->parsed()) {
      bool id_given = id_option->count() > 0;
      Result<std::vector<jobs::Job>> jobs = JobsToAdd(*args, id_given, now);
      if (!jobs.ok()) return Fail("jobs add", jobs.status());
      Result<std::unique_ptr<store::Store>> opened = store::OpenStore(args->store, true);
      if (!opened.ok()) return Fail("jobs add", opened.status());
      for (const jobs::Job& job : *jobs) {
        // One transaction each: processes adding jobs at once get distinct ids, keep every job.
        Result<int64_t> id = job.uid;
        if (args->replace) {
          Status put = (*opened)->PutJob(job);
          if (!put.ok()) id = put;
        } else {
          id = (*opened)->AddJob(job, /*next_id=*/args->from.empty() && !id_given);
        }
        if (!id.ok()) return Fail("jobs add", id.status());
        std::printf("%lld\n", (long long)*id);
      }
      return kExitOk;
    }
    Result<std::unique_ptr<store::Store>> opened = store::OpenStore(args->store, false);
    if (!opened.ok()) return Fail("jobs", opened.status());
    store::Store& target = **opened;
    if (end->parsed()) {
      Result<jobs::Job> job = target.GetJob(args->site, args->id);
      if (!job.ok()) return Fail("jobs end", job.status());
      UnixNanos at = now;
      if (!args->at.empty()) {
        Result<UnixNanos> t = time_of(args->at, "--at");
        if (!t.ok()) return Fail("jobs end", t.status());
        at = *t;
      }
      if (job->stopped_at) {
        return Fail("jobs end", Status::InvalidArgument("job " + std::to_string(args->id) +
                                                        " ended already, at " +
                                                        FormatParisTimestamp(*job->stopped_at)));
      }
      if (at <= job->started_at) {
        return Fail("jobs end",
                    Status::InvalidArgument("the end is not after the job's start (" +
                                            FormatParisTimestamp(job->started_at) + ")"));
      }
      job->stopped_at = at;
      Status put = target.PutJob(*job);
      if (!put.ok()) return Fail("jobs end", put);
      return kExitOk;
    }
    Result<std::vector<jobs::Job>> jobs = target.Jobs(args->site, INT64_MIN, INT64_MAX);
    if (!jobs.ok()) return Fail("jobs list", jobs.status());
    for (const jobs::Job& job : *jobs) {
      bool running = job.started_at <= now && (!job.stopped_at || *job.stopped_at > now);
      if (args->running && !running) continue;
      if (args->json) {
        nlohmann::json object = {
            {"site", job.site},
            {"id", job.uid},
            {"user", job.user},
            {"nodes", job.nodes},
            {"types", job.types},
            {"start", FormatParisTimestamp(job.started_at)},
            {"stop", job.stopped_at ? nlohmann::json(FormatParisTimestamp(*job.stopped_at))
                                    : nlohmann::json()}};
        std::printf("%s\n", object.dump().c_str());
      } else {
        std::string nodes, types;
        for (const auto& node : job.nodes) nodes += (nodes.empty() ? "" : ",") + node;
        for (const auto& type : job.types) types += (types.empty() ? "" : ",") + type;
        std::printf("%lld\t%s\t%s\t%s\t%s\t%s\n", (long long)job.uid, job.user.c_str(),
                    FormatParisTimestamp(job.started_at).c_str(),
                    job.stopped_at ? FormatParisTimestamp(*job.stopped_at).c_str() : "running",
                    nodes.c_str(), types.empty() ? "-" : types.c_str());
      }
    }
    return kExitOk;
  };
}

}  // namespace kwatt::cli
