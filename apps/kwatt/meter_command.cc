// `kwatt meter`: the software-defined power meter (doc/meter/README.md).
//
//   kwatt meter [OPTIONS] -- COMMAND ARGS   measures one command, prints its energy like perf stat
//   kwatt meter [OPTIONS] --duration 10m    the daemon: targets by pid, cgroup, command name, all
//   kwatt meter record -o activity.jsonl    the activity alone, shared later by kwatt energy
//   kwatt meter smartwatts ...              the smartwatts formula on hwpc-sensor's reports
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "apps/kwatt/commands.h"
#include "apps/kwatt/stop_signals.h"
#include "kwatt/core/process.h"
#include "kwatt/core/text.h"
#include "kwatt/core/version.h"
#include "kwatt/kwollect/client_options.h"
#include "kwatt/meter/activity/activity_record.h"
#include "kwatt/meter/kwollect/open_meter.h"
#include "kwatt/meter/pipeline/replay.h"

namespace kwatt::cli {

namespace {

// What the machine is read from (tests and simulations point these elsewhere).
struct EnvironmentArgs {
  std::string sysfs_root, procfs_root, cgroup_root, nvml_library, hostname;
};

void AddEnvironmentOptions(CLI::App* command, EnvironmentArgs* args) {
  CLI::Option_group* group = command->add_option_group("Machine (a simulated one for tests)");
  group->add_option("--sysfs-root", args->sysfs_root,
                    "Read sysfs here (kwatt simulate rapl's tree) instead of /sys");
  group->add_option("--procfs-root", args->procfs_root, "Read procfs here instead of /proc");
  group->add_option("--cgroup-root", args->cgroup_root,
                    "The cgroup v2 tree (default: the cgroup2 mount in /proc/mounts)");
  group->add_option("--nvml-library", args->nvml_library,
                    "NVML's library (default: libnvidia-ml.so.1 as the loader finds it)");
  group->add_option("--hostname", args->hostname, "This machine's name in reports");
}

meter::MeterEnvironment MakeEnvironment(const EnvironmentArgs& args) {
  meter::MeterEnvironment environment;
  if (!args.sysfs_root.empty()) environment.sysfs_root = args.sysfs_root;
  if (!args.procfs_root.empty()) {
    environment.procfs_root = args.procfs_root;
    environment.perf = meter::SystemPerfEvents(args.procfs_root);
  }
  environment.cgroup_root = args.cgroup_root;
  if (!args.nvml_library.empty()) environment.nvml_library = args.nvml_library;
  environment.hostname = args.hostname;
  return environment;
}

// Which targets energy is shared among.
struct TargetArgs {
  std::vector<int64_t> pids;
  std::vector<std::string> cgroups, commands;
  bool all_processes = false, no_trees = false, counters = false;
  int cgroup_depth = 0;
};

void AddTargetOptions(CLI::App* command, TargetArgs* args) {
  CLI::Option_group* group = command->add_option_group("Targets");
  group->add_option("--pid", args->pids, "A process and its descendants (repeatable)");
  group->add_option("--cgroup", args->cgroups,
                    "A cgroup v2, below the cgroup root: /system.slice/nginx.service (repeatable)");
  group->add_option("--command", args->commands,
                    "Every process of this command name (as ps -o comm shows it; repeatable)");
  group->add_flag("--all-processes", args->all_processes, "Every process, each a target");
  group
      ->add_option("--cgroups", args->cgroup_depth,
                   "Every cgroup down to this depth below the root, each a target")
      ->check(CLI::Range(0, 16));
  group->add_flag("--no-trees", args->no_trees, "--pid: the process alone, not its descendants");
  group->add_flag("--counters", args->counters,
                  "Hardware counters (cycles, instructions) for every target");
}

meter::TargetSelection MakeSelection(const TargetArgs& args) {
  meter::TargetSelection selection;
  selection.pids = args.pids;
  selection.trees = !args.no_trees;
  selection.cgroups = args.cgroups;
  selection.commands = args.commands;
  selection.all_processes = args.all_processes;
  selection.cgroup_depth = args.cgroup_depth;
  selection.hardware_counters = args.counters;
  return selection;
}

bool SelectsNothing(const meter::TargetSelection& s) {
  return s.pids.empty() && s.cgroups.empty() && s.commands.empty() && !s.all_processes &&
         s.cgroup_depth == 0;
}

std::chrono::nanoseconds ToNanos(double seconds) {
  return std::chrono::nanoseconds(int64_t(std::llround(seconds * 1e9)));
}

// The command to measure or record, if any: started held before exec (its process is a target
// from the first read, with all it starts), and added to `selection`. kwatt is the subreaper of
// its descendants: one whose parent exits is reparented to kwatt rather than to init, so that
// the command's tree keeps it (a daemon started in the background and orphaned within a period).
// It inherits kwatt's standard input, output and error, process group, environment and working
// directory; the signals kwatt blocks are unblocked for it.
Result<std::optional<Process>> SpawnHeld(const std::vector<std::string>& argv,
                                         meter::TargetSelection* selection) {
  std::optional<Process> command;
  if (argv.empty()) return command;
  if (argv[0].empty()) return Status::InvalidArgument("no command to measure: give one after --");
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0) selection->adopter_pid = ::getpid();
  SpawnOptions options;
  options.held = true;
  KWATT_ASSIGN_OR_RETURN(Process spawned, Process::Spawn(argv, options));
  command.emplace(std::move(spawned));
  selection->pids.push_back(command->pid());
  selection->trees = true;
  return command;
}

// The processes kwatt adopted as the command's subreaper that still run (its background children
// orphaned when it exited), but `command` itself: "1234 sleep" each, from /proc/self's tasks'
// children lists.
std::vector<std::string> StillRunning(pid_t command) {
  std::vector<std::string> out;
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", error)) {
    std::ifstream children(task.path() / "children");
    pid_t pid;
    while (children >> pid) {
      if (pid == command) continue;
      std::string comm;
      std::ifstream(std::filesystem::path("/proc") / std::to_string(pid) / "comm") >> comm;
      out.push_back(std::to_string(pid) + " " + ForTerminal(comm));
    }
  }
  return out;
}

// The exit status of kwatt when the command could not be released (run): as a shell's.
int ReleaseFailed(const char* name, const Status& status) {
  std::fprintf(stderr, "kwatt %s: %s\n", name, status.message().c_str());
  return status.code() == Status::Code::kNotFound ? 127 : 126;
}

// Until the command exits: SIGTERM is passed on to it; SIGINT from a terminal reaches it
// directly (it is in kwatt's process group), so kwatt only waits for it to end. It is looked at
// without being reaped, so that a last read still sees its process.
void WaitForExit(StopSignals& signals, const Process& command) {
  while (true) {
    int got = signals.WaitAny();
    if (got == SIGTERM) command.Signal(SIGTERM);
    if (got != SIGCHLD && got != SIGTERM) continue;
    siginfo_t child{};
    if (waitid(P_PID, id_t(command.pid()), &child, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        child.si_pid == command.pid()) {
      return;
    }
  }
}

// meter.Stop(), during which a second stop signal gives up the rows the outputs still send (they
// are counted lost); said once when the outputs have been sending for a second. Each output gives
// up at its deadline (`deadline_seconds`, OutputOptions::finish_seconds); should one not, the rows
// are given up 2 s after it, so that a stop never takes longer.
Status StopMeter(StopSignals& signals, meter::Meter& meter, bool quiet, double deadline_seconds) {
  std::atomic<bool> done{false};
  Status stopped;
  std::thread stopper([&] {
    stopped = meter.Stop();
    done = true;
  });
  const auto began = std::chrono::steady_clock::now();
  bool said = false, abandoned = false;
  while (!done) {
    int got = signals.Wait(std::chrono::milliseconds(50));
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    const bool late = elapsed > deadline_seconds + 2;
    if ((got != 0 || late) && !abandoned) {
      abandoned = true;
      meter.Abandon();
      if (!quiet) {
        std::fprintf(stderr, "kwatt meter: %sgiving up the rows still to send\n",
                     late ? "the outputs' deadline has passed: " : "");
      }
    }
    if (!said && !abandoned && !quiet &&
        std::chrono::steady_clock::now() - began > std::chrono::seconds(1)) {
      std::string sending;
      for (const auto& [name, rows] : meter.PendingRows()) {
        if (rows > 0) {
          sending += (sending.empty() ? "" : ", ") + ForTerminal(name) + " (" +
                     std::to_string(rows) + " rows)";
        }
      }
      if (!sending.empty()) {
        said = true;
        std::fprintf(stderr,
                     "kwatt meter: stopping: still sending %s until its peer takes them, for "
                     "at most %.0f s more; SIGINT or SIGTERM again gives them up\n",
                     sending.c_str(), std::max(0.0, deadline_seconds - 1));
      }
    }
  }
  stopper.join();
  return stopped;
}

// Waits for a stop signal, at most `seconds` when given.
void WaitForStop(StopSignals& signals, std::optional<double> seconds) {
  if (seconds) {
    signals.Wait(ToNanos(*seconds));
  } else {
    signals.Wait();
  }
}

std::string Joules(int64_t microjoules) {
  char text[64];
  double joules = double(microjoules) / 1e6;
  std::snprintf(text, sizeof(text),
                joules >= 100 ? "%.1f J"
                : joules >= 1 ? "%.3f J"
                              : "%.6f J",
                joules);
  return text;
}

std::string Percent(int64_t part, int64_t whole) {
  if (whole <= 0) return "-";
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f %%", 100.0 * double(part) / double(whole));
  return text;
}

std::string Watts(int64_t microjoules, double seconds) {
  if (!(seconds > 0)) return "-";
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f W", double(microjoules) / 1e6 / seconds);
  return text;
}

// Whether `inner`'s energy is part of `outer`'s: a package's cores and uncore (power planes 0
// and 1) lie within it; psys (the platform) holds the other RAPL domains, and a node's wattmeter
// everything.
bool DomainWithin(const meter::Domain& inner, const meter::Domain& outer) {
  if (&inner == &outer) return false;
  if (outer.kind == "node") return inner.kind != "node";
  if (outer.kind == "psys") return inner.source == "rapl" && inner.kind != "psys";
  return outer.kind == "package" && (inner.kind == "core" || inner.kind == "uncore") &&
         inner.source == outer.source && inner.socket == outer.socket;
}

// What the idle policy gave the command, for the summary.
std::string IdlePolicyLine(const std::string& policy) {
  if (policy == "none") {
    return "idle policy none: the idle power is kept apart, not in the command's share";
  }
  if (policy == "equal") {
    return "idle policy equal: the idle power is split evenly among the targets, the command's "
           "part in its share";
  }
  return "idle policy proportional: the command's share holds the idle power in proportion to its "
         "CPU time";
}

// The energy of the command (the tree of `pid`), perf stat's way. `seconds`: its run;
// `period`: the meter's. A mean power is the energy over the span it was measured on, never over
// a shorter one (a 2 ms command's share of a 1 s interval is no 500 W).
void PrintCommandSummary(const meter::MeterTotals& totals, const std::string& command_text,
                         int64_t pid, const ProcessExit& exit, double seconds, double period,
                         const std::string& idle_policy, int cpus) {
  const meter::MeterTotals::TargetTotal* tree = nullptr;
  for (const auto& t : totals.targets) {
    if (t.target.kind == meter::TargetKind::kProcessTree && t.target.pid == pid) tree = &t;
  }
  const double span = double(totals.end - totals.start) / 1e9;
  const bool shorter_than_a_period = seconds < period;
  std::fprintf(stderr, "\n kwatt meter: '%s' %s after %.2f s\n\n",
               ForTerminal(command_text).c_str(), exit.Describe().c_str(), seconds);
  std::fprintf(stderr, "   %-9s %-14s %16s %16s %9s %13s\n", "source", "domain", "measured",
               "command", "share", "command mean");
  std::vector<size_t> outer;  // the domains within no other: they do not overlap
  for (size_t d = 0; d < totals.domains.size(); ++d) {
    const meter::Domain& domain = totals.domains[d];
    bool within = false;
    for (const auto& other : totals.domains) within = within || DomainWithin(domain, other);
    if (!within) outer.push_back(d);
    int64_t measured = totals.measured_microjoules[d];
    int64_t mine = tree ? tree->microjoules[d] : 0;
    std::string flags = meter::DescribeDomainFlags(totals.flags[d]);
    std::fprintf(stderr, "   %-9s %-14s %16s %16s %9s %13s%s%s\n",
                 ForTerminal(domain.source).c_str(), ForTerminal(domain.name).c_str(),
                 Joules(measured).c_str(), Joules(mine).c_str(), Percent(mine, measured).c_str(),
                 shorter_than_a_period ? "-" : Watts(mine, span).c_str(),
                 flags.empty() ? "" : "  (", flags.empty() ? "" : (flags + ")").c_str());
  }
  if (outer.size() > 1) {
    int64_t measured = 0, mine = 0;
    std::string names;
    for (size_t d : outer) {
      measured += totals.measured_microjoules[d];
      mine += tree ? tree->microjoules[d] : 0;
      names += (names.empty() ? "" : "+") + ForTerminal(totals.domains[d].name);
    }
    std::fprintf(stderr, "   %-24s %16s %16s %9s %13s\n",
                 outer.size() == totals.domains.size() ? "total" : "total, outer domains",
                 Joules(measured).c_str(), Joules(mine).c_str(), Percent(mine, measured).c_str(),
                 shorter_than_a_period ? "-" : Watts(mine, span).c_str());
    if (outer.size() != totals.domains.size()) std::fprintf(stderr, "   (%s)\n", names.c_str());
  }
  double cpu_seconds = tree ? double(tree->cpu_microseconds) / 1e6 : 0;
  std::fprintf(
      stderr,
      "\n   the command used %.2f s of CPU (%.1f %% of %d CPUs); kernel: %.2f s user, %.2f "
      "s system\n",
      cpu_seconds, seconds > 0 && cpus > 0 ? 100 * cpu_seconds / (seconds * cpus) : 0, cpus,
      exit.user_seconds, exit.system_seconds);
  std::fprintf(stderr, "   %s\n", IdlePolicyLine(idle_policy).c_str());
  std::string idle;
  for (size_t d = 0; d < totals.domains.size(); ++d) {
    const double watts = totals.idle_watts[d], uncertainty = totals.idle_uncertainty_watts[d];
    char text[96];
    if (watts < 0) {
      std::snprintf(text, sizeof text, "none yet");
    } else if (uncertainty > 0 && uncertainty >= watts) {
      std::snprintf(text, sizeof text, "at most %.2f W (the load hardly varied)", watts);
    } else if (uncertainty > 0) {
      std::snprintf(text, sizeof text, "%.2f W +- %.2f W", watts, uncertainty);
    } else {
      std::snprintf(text, sizeof text, "%.2f W", watts);
    }
    idle += (idle.empty() ? "" : ", ") + ForTerminal(totals.domains[d].name) + " " + text;
  }
  if (!idle.empty())
    std::fprintf(stderr, "   idle power (learned, else given): %s\n", idle.c_str());
  if (shorter_than_a_period) {
    std::fprintf(stderr,
                 "   the command ran %.3f s, less than a period (%g s): its share is of the %.3f s "
                 "measured, no mean power of its own (give a shorter --period)\n",
                 seconds, period, span);
  }
  std::string overlaps;
  for (const auto& inner : totals.domains) {
    for (const auto& outer_domain : totals.domains) {
      if (!DomainWithin(inner, outer_domain)) continue;
      overlaps += (overlaps.empty() ? "" : ", ") + ForTerminal(inner.name) + " within " +
                  ForTerminal(outer_domain.name);
    }
  }
  if (!overlaps.empty()) {
    std::fprintf(stderr, "   domains overlap (%s): do not add those up\n", overlaps.c_str());
  }
  std::fprintf(stderr, "\n");
}

void PrintLines(const char* kind, const std::vector<std::string>& lines) {
  for (const auto& line : lines) {
    std::fprintf(stderr, "kwatt meter: %s: %s\n", kind, ForTerminal(line).c_str());
  }
}

// The command as one short line: its words, line breaks as spaces, at most 60 characters.
std::string CommandText(const std::vector<std::string>& words) {
  std::string text;
  for (const auto& word : words) text += (text.empty() ? "" : " ") + word;
  for (char& c : text) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

struct MeterArgs {
  EnvironmentArgs environment;
  TargetArgs targets;
  std::vector<std::string> sources, rapl_domains, outputs, idle_power, command;
  std::string rapl_path = "auto", node, metric, api, config, period = "1s", read_period, duration,
              idle_policy = "proportional", listen, state, output_node, site, formula = "cputime";
  SmartWattsModelArgs smartwatts;
  int max_targets = 10;
  bool check = false, quiet = false, verbose = false, no_attribution = false;
};

Result<meter::MeterConfig> MakeConfig(const MeterArgs& args) {
  meter::MeterConfig config;
  config.environment = MakeEnvironment(args.environment);
  for (const std::string& list : args.sources) {
    for (std::string& name : SplitCommaList(list)) config.sources.push_back(std::move(name));
  }
  KWATT_ASSIGN_OR_RETURN(config.rapl.path, meter::ParseRaplPath(args.rapl_path));
  for (const std::string& list : args.rapl_domains) {
    for (std::string& name : SplitCommaList(list)) config.rapl.domains.push_back(std::move(name));
  }
  // The node's own power through Kwollect, and the credentials of a kwollect: output.
  config.kwollect.node = args.node;
  config.kwollect.metric = args.metric;
  std::string credentials = args.config.empty() ? kwollect::DefaultConfigPath() : args.config;
  KWATT_RETURN_IF_ERROR(kwollect::LoadClientOptions(credentials, &config.kwollect.client));
  if (!args.api.empty()) kwollect::SetApiUrl(args.api, &config.kwollect.client);
  config.output_options.credentials_file = args.config;
  config.output_options.node = args.output_node;
  config.output_options.site = args.site;
  config.output_options.max_targets = args.max_targets;
  config.output_options.kwatt_version = KwattVersion();

  config.targets = MakeSelection(args.targets);
  config.attribute = !args.no_attribution;
  config.outputs = args.outputs;
  if (!args.listen.empty()) {
    KWATT_RETURN_IF_ERROR(ParseListen(args.listen, &config.listen_host, &config.listen_port));
  }
  meter::MeterOptions& options = config.options;
  KWATT_ASSIGN_OR_RETURN(double period, ParseDuration(args.period, "--period"));
  options.period = ToNanos(period);
  if (!args.read_period.empty()) {
    KWATT_ASSIGN_OR_RETURN(double read, ParseDuration(args.read_period, "--read-period"));
    options.read_period = ToNanos(read);
  }
  options.formula.name = args.formula;
  KWATT_RETURN_IF_ERROR(meter::ValidateFormulaName(args.formula).WithContext("--formula"));
  SmartWattsModelArgs smartwatts = args.smartwatts;
  KWATT_RETURN_IF_ERROR(ResolveSmartWattsModelOptions(&smartwatts));
  options.formula.smartwatts = smartwatts.options;
  KWATT_ASSIGN_OR_RETURN(options.formula.idle_policy, meter::ParseIdlePolicy(args.idle_policy));
  KWATT_ASSIGN_OR_RETURN(options.formula.idle_watts, ParseIdlePower(args.idle_power));
  options.state_file = args.state;
  return config;
}

int RunMeter(const MeterArgs& args) {
  const char* kName = "meter";  // Fail() and ReleaseFailed() print "kwatt meter: ..."
  // A closed pipe (-o jsonl:- | head) is an output that fails like any other (EPIPE, counted and
  // said), not a signal that ends the meter and its other outputs (the command run with `--`
  // gets SIGPIPE's default back, kwatt/core/process.h).
  std::signal(SIGPIPE, SIG_IGN);
  Result<meter::MeterConfig> made = MakeConfig(args);
  if (!made.ok()) return Fail(kName, made.status());
  meter::MeterConfig config = std::move(*made);
  const double period_seconds = double(config.options.period.count()) / 1e9;
  std::optional<double> duration;
  if (!args.duration.empty()) {
    Result<double> seconds = ParseDuration(args.duration, "--duration");
    if (!seconds.ok()) return Fail(kName, seconds.status());
    duration = *seconds;
  }
  const bool with_command = !args.command.empty();
  if (with_command && duration) {
    return Fail(kName, Status::InvalidArgument(
                           "--duration and a command exclude each other: the command's run is "
                           "what is measured"));
  }
  if (!with_command && config.attribute && SelectsNothing(config.targets) && !args.check) {
    return Fail(kName, Status::InvalidArgument(
                           "no target: give a command after --, or --pid, --cgroup, --command, "
                           "--all-processes or --cgroups (or --no-attribution to measure the "
                           "machine alone)"));
  }
  if (!with_command && config.outputs.empty() && config.listen_port < 0 && !args.check) {
    return Fail(kName, Status::InvalidArgument(
                           "no output: give -o csv:FILE, -o jsonl:FILE (- for standard output), "
                           "--listen HOST:PORT... (doc/meter/outputs.md, Outputs)"));
  }
  // Signals are taken by the main thread alone: every other thread, started after, blocks them;
  // the measured command gets them unblocked (SpawnHeld).
  StopSignals signals(StopSignals::How::kBlock, {SIGCHLD});
  Result<std::optional<Process>> command = SpawnHeld(args.command, &config.targets);
  if (!command.ok()) return Fail(kName, command.status());
  if (*command) config.attribute = true;
  const double deadline_seconds = config.output_options.finish_seconds;
  Result<meter::OpenedMeter> opened = meter::OpenMeter(std::move(config));
  if (!opened.ok()) return Fail(kName, opened.status());  // the held command is killed
  meter::Meter& meter = *opened->meter;
  if (!args.quiet) PrintLines("warning", opened->warnings);
  if (args.verbose || args.check) PrintLines("note", opened->notes);
  if (args.check) {
    std::printf("domains:\n");
    for (const auto& d : meter.header().domains) {
      std::printf("  %s %s (%s): %s\n", ForTerminal(d.source).c_str(), ForTerminal(d.name).c_str(),
                  ForTerminal(d.kind).c_str(), ForTerminal(d.origin).c_str());
    }
    std::printf("the configuration is valid\n");
    return kExitOk;
  }
  Status started = meter.Start();
  if (!started.ok()) return Fail(kName, started);
  if (opened->server) {
    if (Status serving = opened->server->Serve(); !serving.ok()) {
      Status stopped = meter.Stop();  // what it measured is written; the error is the endpoint's
      (void)stopped;
      return Fail(kName, serving.WithContext("--listen"));
    }
    std::printf("%s\n", opened->server->url().c_str());
    std::fflush(stdout);
  }
  if (!args.quiet && !with_command) {
    std::fprintf(stderr, "kwatt meter: %zu domains, a report every %s%s\n",
                 meter.header().domains.size(), args.period.c_str(),
                 opened->server ? (", metrics on " + opened->server->url()).c_str() : "");
  }

  int exit_code = kExitOk;
  if (*command) {
    Process& measured = **command;
    const int64_t begun = WallClockNow();
    Status released = measured.Release();
    if (!released.ok()) {
      (void)meter.Stop();
      return ReleaseFailed(kName, released);
    }
    WaitForExit(signals, measured);
    const double seconds = double(WallClockNow() - begun) / 1e9;
    // The command's run is what is measured: processes it left running are not, from now on.
    if (std::vector<std::string> left = StillRunning(measured.pid()); !left.empty()) {
      std::string list;
      for (size_t i = 0; i < left.size() && i < 5; ++i) list += (i ? ", " : "") + left[i];
      if (left.size() > 5) list += ", ...";
      std::fprintf(stderr,
                   "kwatt meter: the command exited leaving %zu process%s running (%s), measured "
                   "up to its exit only: to measure them, have the command wait for them (the "
                   "shell's `wait`), or measure them with --pid\n",
                   left.size(), left.size() == 1 ? "" : "es", list.c_str());
    }
    Status stopped = StopMeter(signals, meter, args.quiet, deadline_seconds);
    Result<ProcessExit> exit = measured.Wait();
    if (!stopped.ok()) {
      std::fprintf(stderr, "kwatt meter: %s\n", ForTerminal(stopped.message()).c_str());
    }
    if (!exit.ok()) return Fail(kName, exit.status());
    if (!args.quiet) {
      PrintCommandSummary(meter.Totals(), CommandText(args.command), measured.pid(), *exit, seconds,
                          period_seconds, meter.header().idle_policy,
                          int(std::thread::hardware_concurrency()));
    }
    exit_code = exit->ShellStatus();
  } else {
    WaitForStop(signals, duration);
    Status stopped = StopMeter(signals, meter, args.quiet, deadline_seconds);
    meter::MeterHealth health = meter.Health();
    if (!args.quiet) {
      meter::MeterTotals totals = meter.Totals();
      std::string energies;
      for (size_t d = 0; d < totals.domains.size(); ++d) {
        energies += (energies.empty() ? "" : ", ") + ForTerminal(totals.domains[d].name) + " " +
                    Joules(totals.measured_microjoules[d]);
      }
      // Dropped reports named by output: "3 reports dropped (jsonl:- 3)".
      int64_t dropped = 0;
      std::string by_output;
      for (const auto& [name, count] : health.dropped_reports) {
        dropped += count;
        if (count > 0) {
          by_output +=
              (by_output.empty() ? " (" : ", ") + ForTerminal(name) + " " + std::to_string(count);
        }
      }
      if (!by_output.empty()) by_output += ")";
      std::fprintf(stderr,
                   "kwatt meter: %" PRId64 " reports, %" PRId64 " reads (%" PRId64 " late, %" PRId64
                   " missed), %" PRId64 " reports dropped%s; %s\n",
                   health.reports, health.ticks, health.late_ticks, health.missed_ticks, dropped,
                   by_output.c_str(), energies.c_str());
    }
    if (!stopped.ok()) return Fail(kName, stopped);
  }
  return exit_code;
}

// `kwatt meter record`: the activity alone, for `kwatt energy ARCHIVE --activity FILE`.
struct RecordArgs {
  EnvironmentArgs environment;
  TargetArgs targets;
  std::string output, period = "1s", duration;
  std::vector<std::string> command;
  bool quiet = false;
};

int RunRecord(const RecordArgs& args) {
  const char* kName = "meter record";
  meter::MeterEnvironment environment = MakeEnvironment(args.environment);
  meter::TargetSelection selection = MakeSelection(args.targets);
  Result<double> period = ParseDuration(args.period, "--period");
  if (!period.ok()) return Fail(kName, period.status());
  std::optional<double> duration;
  if (!args.duration.empty()) {
    Result<double> seconds = ParseDuration(args.duration, "--duration");
    if (!seconds.ok()) return Fail(kName, seconds.status());
    duration = *seconds;
  }
  const bool with_command = !args.command.empty();
  if (with_command && duration) {
    return Fail(kName, Status::InvalidArgument("--duration and a command exclude each other"));
  }
  if (!with_command && SelectsNothing(selection)) {
    return Fail(kName, Status::InvalidArgument(
                           "no target: give a command after --, or --pid, --cgroup, --command, "
                           "--all-processes or --cgroups"));
  }
  // Signals are taken by the main thread alone: every other thread, started after, blocks them;
  // the measured command gets them unblocked (SpawnHeld).
  StopSignals signals(StopSignals::How::kBlock, {SIGCHLD});
  Result<std::optional<Process>> command = SpawnHeld(args.command, &selection);
  if (!command.ok()) return Fail(kName, command.status());
  Result<std::unique_ptr<meter::ActivityReader>> reader =
      meter::ActivityReader::Open(environment, selection);
  if (!reader.ok()) return Fail(kName, reader.status());
  Result<std::unique_ptr<meter::ActivityRecordWriter>> writer = meter::ActivityRecordWriter::Create(
      args.output, meter::MakeActivityRecordHeader(environment, selection,
                                                   std::string("kwatt ") + KwattVersion()));
  if (!writer.ok()) return Fail(kName, writer.status());
  std::stop_source stop;
  Status recorded;
  std::thread recorder([&] {
    recorded = meter::RecordActivity(**reader, **writer, *environment.clock, ToNanos(*period),
                                     stop.get_token());
  });
  if (*command) {
    Status released = (*command)->Release();
    if (!released.ok()) {
      stop.request_stop();
      recorder.join();
      return ReleaseFailed(kName, released);
    }
    WaitForExit(signals, **command);
  } else {
    WaitForStop(signals, duration);
  }
  stop.request_stop();
  recorder.join();
  int exit_code = kExitOk;
  if (*command) {
    Result<ProcessExit> exit = (*command)->Wait();
    if (!exit.ok()) return Fail(kName, exit.status());
    exit_code = exit->ShellStatus();
  }
  if (!args.quiet) {
    std::fprintf(stderr, "kwatt meter record: %" PRId64 " snapshots in %s\n",
                 (*writer)->snapshots(), args.output.c_str());
  }
  if (!recorded.ok()) return Fail(kName, recorded);
  return exit_code;
}

}  // namespace

Runner RegisterMeter(CLI::App* app) {
  auto args = std::make_shared<MeterArgs>();
  CLI::App* command = app->add_subcommand(
      "meter",
      "The software-defined power meter: which process, cgroup or command used the energy "
      "(RAPL, GPUs, the node's wattmeter through Kwollect; doc/meter/README.md)");
  command->positionals_at_end();
  CLI::Option_group* sources = command->add_option_group("Sources");
  sources->add_option("--source", args->sources,
                      "rapl, nvml, kwollect (repeatable; default: every local source found)");
  sources->add_option("--rapl-path", args->rapl_path, "auto, perf or powercap")
      ->capture_default_str();
  sources->add_option("--rapl-domains", args->rapl_domains,
                      "RAPL domains to read, by name or kind: package,dram-0 (default: all)");
  sources->add_option("--node", args->node,
                      "--source kwollect: the node (default: this machine's host name)");
  sources->add_option("--metric", args->metric,
                      "--source kwollect: the power metric (default: the best, as kwatt energy "
                      "chooses)");
  sources->add_option("--api", args->api, "Kwollect's API (default: from the config file)");
  sources->add_option("--config", args->config,
                      "Credentials file (default: ~/.python-grid5000.yaml)");
  AddTargetOptions(command, &args->targets);
  CLI::Option_group* formula = command->add_option_group("Formula");
  formula
      ->add_option("--formula", args->formula,
                   "cputime (by CPU time) or smartwatts (RAPL's package and dram domains by "
                   "models on the targets' cycles and instructions; doc/meter/attribution.md)")
      ->capture_default_str();
  formula->add_option("--idle-policy", args->idle_policy, "none, proportional or equal")
      ->capture_default_str();
  formula->add_option("--idle-power", args->idle_power,
                      "Idle power by domain kind or name: package=12.5,dram=2 (default: learned)");
  formula->add_flag("--no-attribution", args->no_attribution,
                    "Read no activity: the machine's energy alone");
  CLI::Option_group* smartwatts_options =
      command->add_option_group("Smartwatts", "The models' options, with --formula smartwatts");
  AddSmartWattsModelOptions(smartwatts_options, &args->smartwatts);
  CLI::Option_group* timing = command->add_option_group("Timing");
  timing->add_option("--period", args->period, "Each report's interval: 1s, 100ms, 1ms")
      ->capture_default_str();
  timing->add_option("--read-period", args->read_period,
                     "Read the energy counters at least this often (default: the period, shorter "
                     "when their wrap period needs it)");
  timing->add_option("--duration", args->duration, "Stop after this long (90s, 10m, 2h)");
  CLI::Option_group* outputs = command->add_option_group("Outputs");
  outputs->add_option("-o,--output", args->outputs,
                      "csv:FILE, jsonl:FILE (- for stdout), influxdb:URL/DB, kwollect:URL, "
                      "textfile:PATH, archive:DIR, powerapi-csv:DIR, powerapi-json:FILE "
                      "(repeatable)");
  outputs->add_option(
      "--listen", args->listen,
      "Serve Prometheus metrics on HOST:PORT/metrics (port 0: a free one, printed)");
  outputs->add_option("--state", args->state,
                      "State file: totals that survive a restart (neither lost nor counted twice)");
  outputs->add_option("--output-node", args->output_node,
                      "Device id of the rows written (default: the host name up to its first '.')");
  outputs->add_option("--site", args->site, "Grid'5000 site of the rows written");
  outputs
      ->add_option("--max-targets", args->max_targets,
                   "Targets with series of their own in Prometheus, Kwollect, InfluxDB...")
      ->capture_default_str();
  AddEnvironmentOptions(command, &args->environment);
  command->add_flag("--check", args->check,
                    "Open every source, target and output, print what would run, and exit");
  command->add_flag("-q,--quiet", args->quiet, "No warnings, no summary");
  command->add_flag("-v,--verbose", args->verbose, "Say how each source is read");
  command->add_option("command", args->command, "The command to measure, after --");

  auto record_args = std::make_shared<RecordArgs>();
  CLI::App* record = command->add_subcommand(
      "record",
      "Record the activity alone (-o activity.jsonl): kwatt energy ARCHIVE --activity FILE "
      "shares the node's archived energy among its processes after the fact");
  record->positionals_at_end();
  record->add_option("-o,--output", record_args->output, "The record (- for standard output)")
      ->required()
      ->check(NonEmptyPath());
  record->add_option("--period", record_args->period, "Between snapshots")->capture_default_str();
  record->add_option("--duration", record_args->duration, "Stop after this long");
  AddTargetOptions(record, &record_args->targets);
  AddEnvironmentOptions(record, &record_args->environment);
  record->add_flag("-q,--quiet", record_args->quiet, "No end line");
  record->add_option("command", record_args->command, "The command to record, after --");

  Runner smartwatts = RegisterMeterSmartwatts(command);
  return [command, record, args, record_args, smartwatts]() -> int {
    if (!command->parsed()) return -1;
    if (record->parsed()) return RunRecord(*record_args);
    int code = smartwatts();
    if (code >= 0) return code;
    return RunMeter(*args);
  };
}

}  // namespace kwatt::cli
