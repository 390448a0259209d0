// `kwatt simulate rapl ROOT`: a simulated RAPL machine's sysfs tree (powercap zones, optionally
// perf's power PMU files) under ROOT, its counters updated in real time until killed, for
// `kwatt meter --sysfs-root ROOT`, the meter's end-to-end tests and benchmarks
// (doc/meter/sources.md "Simulated RAPL"). The power is constant per domain kind, or follows this
// machine's CPU use
// (--follow-cpu: idle + dynamic x the busy fraction of /proc/stat), so that real processes drive
// the simulated counters. ROOT/kwatt_truth holds the exact true energies at each update; --truth
// writes them as JSON on exit (SIGTERM, SIGINT, or --duration).
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "apps/kwatt/commands.h"
#include "apps/kwatt/stop_signals.h"
#include "kwatt/core/output_file.h"
#include "kwatt/core/text.h"
#include "kwatt/simulate/simulated_rapl.h"

namespace kwatt::cli {

namespace {

const char* const kKinds[] = {"package", "core", "uncore", "dram", "psys"};

struct RaplArgs {
  std::string root;
  std::string layout = "intel-server";
  std::optional<int> sockets;
  std::string watts, dynamic_watts;
  bool follow_cpu = false;
  int counter_bits = 32;
  bool exact_units = false, mmio_duplicate = false, perf_pmu = false, root_only = false;
  double period_ms = 10;
  std::optional<double> duration;
  std::string truth;
};

// "package=60,dram=10" over `defaults` (watts per kind).
Result<std::map<std::string, double>> ParseKindWatts(const std::string& option,
                                                     const std::string& text,
                                                     std::map<std::string, double> watts) {
  for (const std::string& item : SplitCommaList(text)) {
    size_t equal = item.find('=');
    std::string kind = item.substr(0, equal);
    bool known = false;
    for (const char* k : kKinds) known |= kind == k;
    if (equal == std::string::npos || !known) {
      return Status::InvalidArgument(option + ": '" + item +
                                     "' is not KIND=WATTS with KIND package, core, uncore, dram "
                                     "or psys");
    }
    std::string number = item.substr(equal + 1);
    char* end = nullptr;
    double value = std::strtod(number.c_str(), &end);
    if (number.empty() || *end != '\0' || !(value >= 0) || !std::isfinite(value) || value > 1e5) {
      return Status::InvalidArgument(option + ": '" + number + "' is not a number of watts");
    }
    watts[kind] = value;
  }
  return watts;
}

std::string KindOf(const std::string& domain) { return domain.substr(0, domain.find('-')); }

// The machine's busy fraction, from the first line of /proc/stat, over the latest window of at
// least kMinUnits of CPU time (USER_HZ units summed over the CPUs: 20 are 100 ms on 2 CPUs). Over
// a single 10 ms update the counters move by a unit or two, and a mean of such ratios is biased
// (a busy CPU of two read as a third busy); over 20 units the fraction is right to 5 %.
class BusyFraction {
  static constexpr uint64_t kMinUnits = 20;

 public:
  double Next() {
    std::ifstream stat("/proc/stat");
    std::string cpu;
    uint64_t v[8] = {0};
    stat >> cpu;
    for (uint64_t& x : v) stat >> x;
    if (!stat || cpu != "cpu") return last_fraction_;
    // user nice system idle iowait irq softirq steal
    uint64_t busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    uint64_t total = busy + v[3] + v[4];
    if (total_ > 0 && total < total_ + kMinUnits) return last_fraction_;
    if (total_ > 0) last_fraction_ = double(busy - busy_) / double(total - total_);
    busy_ = busy;
    total_ = total;
    return last_fraction_;
  }

 private:
  uint64_t busy_ = 0, total_ = 0;
  double last_fraction_ = 0;
};

int64_t MonotonicNow() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * kNanosPerSecond + ts.tv_nsec;
}

Status WriteTruthJson(const std::string& path, const RaplArgs& args,
                      const simulate::SimulatedRapl& sim, int64_t updates) {
  nlohmann::ordered_json truth;
  truth["root"] = sim.root();
  truth["layout"] = args.layout;
  truth["seconds"] = double(sim.now()) / 1e9;
  truth["nanoseconds"] = sim.now();
  truth["updates"] = updates;
  nlohmann::ordered_json domains = nlohmann::ordered_json::object();
  for (const std::string& name : sim.domains()) {
    domains[name] = {{"zone", sim.ZoneDir(name)},
                     {"microjoules", sim.TrueMicrojoulesFloor(name)},
                     {"joules", double(sim.TrueMicrojoules(name) / 1e6L)}};
  }
  truth["domains"] = std::move(domains);
  return WriteWholeFile(path, truth.dump(2) + "\n");
}

int RunRaplSimulation(const RaplArgs& args) {
  const char* kCommand = "simulate rapl";
  auto usage = [&](const std::string& message) {
    std::fprintf(stderr, "kwatt %s: %s\n", kCommand, message.c_str());
    return kExitUsage;
  };
  simulate::SimulatedRaplLayout layout;
  int sockets = args.sockets.value_or(args.layout == "intel-server" ? 2 : 1);
  if (sockets < 1 || sockets > 64) return usage("--sockets: 1 to 64");
  if (args.layout == "intel-server") {
    layout = simulate::SimulatedRaplLayout::IntelServer(sockets);
  } else if (args.layout == "intel-client") {
    if (sockets != 1) return usage("--sockets: an intel-client layout has one package");
    layout = simulate::SimulatedRaplLayout::IntelClient(args.mmio_duplicate);
  } else if (args.layout == "amd") {
    layout = simulate::SimulatedRaplLayout::Amd(sockets);
  } else {
    return usage("--layout: intel-server, intel-client or amd");
  }
  if (args.mmio_duplicate && args.layout != "intel-client") {
    return usage("--mmio-duplicate: only with --layout intel-client");
  }
  if (args.counter_bits < 8 || args.counter_bits > 32) return usage("--counter-bits: 8 to 32");
  if (!(args.period_ms >= 1 && args.period_ms <= 1000)) return usage("--period-ms: 1 to 1000");
  if (args.duration && !(*args.duration > 0 && *args.duration < 1e7)) {
    return usage("--duration: seconds, more than 0");
  }
  for (auto& zone : layout.zones) {
    int exponent = zone.kind == "dram" || args.layout == "amd" ? 16 : 14;
    zone.unit = simulate::SimulatedRaplUnit::PowerOfTwo(exponent, !args.exact_units);
    zone.counter_range = uint64_t(1) << args.counter_bits;
  }
  layout.perf_pmu = args.perf_pmu;
  layout.root_only_energy = args.root_only;

  auto idle =
      ParseKindWatts("--watts", args.watts,
                     {{"package", 60}, {"core", 30}, {"uncore", 5}, {"dram", 10}, {"psys", 80}});
  if (!idle.ok()) return usage(idle.status().message());
  auto dynamic =
      ParseKindWatts("--dynamic-watts", args.dynamic_watts,
                     {{"package", 80}, {"core", 70}, {"uncore", 10}, {"dram", 15}, {"psys", 100}});
  if (!dynamic.ok()) return usage(dynamic.status().message());
  if (!args.follow_cpu && !args.dynamic_watts.empty()) {
    return usage("--dynamic-watts: only with --follow-cpu");
  }
  auto busy = std::make_shared<double>(0.0);
  std::map<std::string, double> idle_watts = *idle, dynamic_watts = *dynamic;
  bool follow = args.follow_cpu;
  simulate::SimulatedPowerTrace trace = [=](const std::string& domain, int64_t) {
    std::string kind = KindOf(domain);
    return idle_watts.at(kind) + (follow ? dynamic_watts.at(kind) * *busy : 0.0);
  };

  StopSignals stop(StopSignals::How::kCatch);

  auto made = simulate::SimulatedRapl::Create(args.root, std::move(layout), trace);
  if (!made.ok()) return Fail("simulate rapl", made.status());
  simulate::SimulatedRapl& sim = **made;
  Status enabled = sim.EnableTruthFile();
  if (!enabled.ok()) return Fail("simulate rapl", enabled);
  BusyFraction cpu;
  if (follow) *busy = cpu.Next();
  std::printf("%s\n", args.root.c_str());
  std::fflush(stdout);

  const int64_t start = MonotonicNow();
  const auto period = int64_t(std::llround(args.period_ms * 1e6));
  const int64_t end =
      args.duration ? start + int64_t(std::llround(*args.duration * 1e9)) : INT64_MAX;
  int64_t next = start + period;
  int64_t updates = 0;
  while (!stop.requested()) {
    int64_t wake = std::min(next, end);
    timespec until{time_t(wake / kNanosPerSecond), long(wake % kNanosPerSecond)};
    int slept = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr);
    if (slept == EINTR) continue;
    int64_t now = MonotonicNow();
    Status advanced = sim.AdvanceTo(now - start);
    if (!advanced.ok()) return Fail("simulate rapl", advanced);
    ++updates;
    if (follow) *busy = cpu.Next();
    if (now >= end) break;
    next += period;
    if (next <= now) next = now + period;  // late: the missed updates are not made up
  }
  // The last update at the instant of the stop, so that the truth covers it.
  Status advanced = sim.AdvanceTo(MonotonicNow() - start);
  if (!advanced.ok()) return Fail("simulate rapl", advanced);
  ++updates;
  if (!args.truth.empty()) {
    Status written = WriteTruthJson(args.truth, args, sim, updates);
    if (!written.ok()) return Fail("simulate rapl", written);
  }
  return kExitOk;
}

}  // namespace

Runner RegisterSimulateRapl(CLI::App* simulate) {
  auto args = std::make_shared<RaplArgs>();
  CLI::App* command = simulate->add_subcommand(
      "rapl",
      "A simulated RAPL machine's powercap tree under ROOT, its counters updated in real time "
      "until killed (for kwatt meter --sysfs-root ROOT)");
  command->add_option("root", args->root, "The directory that plays /sys")
      ->required()
      ->check(NonEmptyPath());
  command
      ->add_option("--layout", args->layout,
                   "intel-server (package, dram per socket), intel-client (package, core, "
                   "uncore, psys), amd (package, core per socket; no dram)")
      ->capture_default_str();
  command->add_option("--sockets", args->sockets, "Packages (default: 2 for intel-server, else 1)");
  command
      ->add_option("--watts", args->watts,
                   "Constant power per domain kind, the idle power with --follow-cpu "
                   "(package=60,core=30,uncore=5,dram=10,psys=80)")
      ->capture_default_str();
  command->add_flag("--follow-cpu", args->follow_cpu,
                    "Power = --watts + --dynamic-watts x this machine's busy CPU fraction "
                    "(/proc/stat), so that real processes drive the simulated counters");
  command->add_option("--dynamic-watts", args->dynamic_watts,
                      "Power at 100 % busy above --watts, per kind "
                      "(package=80,core=70,uncore=10,dram=15,psys=100)");
  command
      ->add_option("--counter-bits", args->counter_bits,
                   "The hardware counters' width: 32 as RAPL's; fewer force many wraps "
                   "(2^16 counts of 2^-14 J wrap at 4 J)")
      ->capture_default_str();
  command->add_flag("--exact-units", args->exact_units,
                    "energy_uj in the exact unit (2^-14 J) rather than the kernel's truncated "
                    "nanojoules (61035 nJ)");
  command->add_flag("--mmio-duplicate", args->mmio_duplicate,
                    "intel-rapl-mmio:0 on package-0's counter too (intel-client)");
  command->add_flag("--perf-pmu", args->perf_pmu,
                    "Also write perf's power PMU files (bus/event_source/devices/power): only "
                    "in-process tests can open its counters; the kernel refuses them");
  command->add_flag("--root-only", args->root_only,
                    "energy_uj readable by root only (mode 0400, as Linux 5.10+)");
  command->add_option("--period-ms", args->period_ms, "Update period, 1 to 1000 ms")
      ->capture_default_str();
  command->add_option("--duration", args->duration, "Seconds to run (default: until killed)");
  command
      ->add_option("--truth", args->truth,
                   "Writes on exit each domain's exact true energy since the start (JSON)")
      ->check(NonEmptyPath());
  return [command, args]() -> int {
    if (!command->parsed()) return -1;
    return RunRaplSimulation(*args);
  };
}

}  // namespace kwatt::cli
