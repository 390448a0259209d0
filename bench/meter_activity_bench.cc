// The activity reader at scale (bench/meter_activity_bench.py runs it): a fake machine of N
// processes (hostile names, a process tree, children reaped) and a realistic cgroup v2 tree on
// tmpfs, or this machine's own /proc, read K times at a period, each read followed by the
// cputime attribution of a measured energy among every target. Prints one JSON object.
//
//   meter_activity_bench fake --root DIR --processes N --reads K --period-ms P [--keep]
//   meter_activity_bench real --reads K --period-ms P
//
// Between reads of the fake machine (and not timed): 5 % of the processes run, 20 exit (reaped by
// their parent), 20 are born, 50 cgroups use CPU.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kwatt/meter/activity/activity.h"
#include "kwatt/meter/formulas/attribution.h"
#include "src/testing/fake_procfs.h"

namespace {

using kwatt::meter::ActivityReader;
using kwatt::meter::ActivitySnapshot;
using kwatt::meter::MeterEnvironment;
using kwatt::meter::TargetSelection;
using kwatt::meter::testing::FakeProcfs;

int64_t Nanos(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "meter_activity_bench: %s\n", what.c_str());
  std::exit(1);
}

void Check(const kwatt::Status& status) {
  if (!status.ok()) Fail(status.ToString());
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t at = size_t(p * double(values.size() - 1) + 0.5);
  return values[std::min(at, values.size() - 1)];
}

// The cgroups of a busy node: systemd's services and sessions, and Kubernetes pods with their
// containers, to depth 4.
std::vector<std::string> RealisticCgroups() {
  std::vector<std::string> paths = {"/system.slice",
                                    "/user.slice",
                                    "/init.scope",
                                    "/user.slice/user-1000.slice",
                                    "/kubepods.slice",
                                    "/kubepods.slice/kubepods-burstable.slice",
                                    "/kubepods.slice/kubepods-besteffort.slice"};
  for (int i = 0; i < 60; ++i)
    paths.push_back("/system.slice/service-" + std::to_string(i) + ".service");
  for (int i = 0; i < 6; ++i) {
    paths.push_back("/user.slice/user-1000.slice/session-" + std::to_string(i) + ".scope");
  }
  for (int pod = 0; pod < 100; ++pod) {
    std::string qos = pod % 3 ? "kubepods-burstable.slice" : "kubepods-besteffort.slice";
    std::string dir =
        "/kubepods.slice/" + qos + "/kubepods-pod" + std::to_string(10000 + pod) + ".slice";
    paths.push_back(dir);
    for (int c = 0; c < 2; ++c)
      paths.push_back(dir + "/cri-containerd-" + std::to_string(pod * 2 + c) + ".scope");
  }
  return paths;
}

struct Timing {
  std::vector<double> read_ms, attribute_ms, cpu_ms;
  size_t targets = 0, processes = 0, cgroups = 0;
};

// K reads, each followed by the attribution of 100 J among the targets by their CPU time in the
// interval; `between` runs (untimed) before each read but the first.
template <typename Between>
Timing Run(ActivityReader& reader, int reads, int period_ms, Between between) {
  Timing timing;
  ActivitySnapshot previous;
  auto next = std::chrono::steady_clock::now();
  for (int i = 0; i <= reads; ++i) {
    if (i > 0) between();
    std::this_thread::sleep_until(next);
    next += std::chrono::milliseconds(period_ms);
    int64_t wall0 = Nanos(CLOCK_MONOTONIC), cpu0 = Nanos(CLOCK_THREAD_CPUTIME_ID);
    auto snapshot = reader.Read();
    if (!snapshot.ok()) Fail(snapshot.status().ToString());
    int64_t wall1 = Nanos(CLOCK_MONOTONIC);
    // Each target's CPU time in the interval (both snapshots are sorted by key).
    std::vector<int64_t> used;
    used.reserve(snapshot->targets.size());
    size_t p = 0;
    for (const auto& t : snapshot->targets) {
      while (p < previous.targets.size() && previous.targets[p].target.key < t.target.key) ++p;
      bool known = p < previous.targets.size() && previous.targets[p].target.key == t.target.key;
      used.push_back(known ? t.cpu_microseconds - previous.targets[p].cpu_microseconds : 0);
    }
    auto energy = kwatt::meter::Attribute(100'000'000, 20'000'000, used,
                                          snapshot->busy_microseconds - previous.busy_microseconds,
                                          kwatt::meter::IdlePolicy::kProportional);
    int64_t wall2 = Nanos(CLOCK_MONOTONIC), cpu2 = Nanos(CLOCK_THREAD_CPUTIME_ID);
    if (energy.target_microjoules.size() != used.size()) Fail("attribution lost targets");
    if (i > 0) {  // the first read fills the reader's tables: it is not a steady period
      timing.read_ms.push_back(double(wall1 - wall0) / 1e6);
      timing.attribute_ms.push_back(double(wall2 - wall1) / 1e6);
      timing.cpu_ms.push_back(double(cpu2 - cpu0) / 1e6);
    }
    timing.targets = snapshot->targets.size();
    timing.processes = timing.cgroups = 0;
    for (const auto& t : snapshot->targets) {
      (t.target.kind == kwatt::meter::TargetKind::kCgroup ? timing.cgroups : timing.processes)++;
    }
    previous = std::move(*snapshot);
  }
  return timing;
}

void Print(const char* mode, const Timing& t, int period_ms, double setup_s) {
  double cpu_share = 0;
  for (double ms : t.cpu_ms) cpu_share += ms;
  cpu_share = cpu_share / (double(t.cpu_ms.size()) * period_ms);
  std::vector<double> total;
  for (size_t i = 0; i < t.read_ms.size(); ++i) total.push_back(t.read_ms[i] + t.attribute_ms[i]);
  std::printf(
      "{\"mode\": \"%s\", \"reads\": %zu, \"targets\": %zu, \"process_targets\": %zu, "
      "\"cgroup_targets\": %zu, \"period_ms\": %d, \"read_median_ms\": %.3f, "
      "\"read_p99_ms\": %.3f, \"attribute_median_ms\": %.3f, \"total_median_ms\": %.3f, "
      "\"total_p99_ms\": %.3f, \"total_max_ms\": %.3f, \"cpu_median_ms\": %.3f, "
      "\"cpu_percent\": %.3f, \"setup_s\": %.1f}\n",
      mode, t.read_ms.size(), t.targets, t.processes, t.cgroups, period_ms,
      Percentile(t.read_ms, 0.5), Percentile(t.read_ms, 0.99), Percentile(t.attribute_ms, 0.5),
      Percentile(total, 0.5), Percentile(total, 0.99), Percentile(total, 1.0),
      Percentile(t.cpu_ms, 0.5), 100 * cpu_share, setup_s);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) Fail("usage: meter_activity_bench fake|real [options]");
  std::string mode = argv[1];
  std::string root;
  int processes = 10'000, reads = 30, period_ms = 1000;
  bool keep = false;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Fail(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--root") {
      root = value();
    } else if (arg == "--processes") {
      processes = std::stoi(value());
    } else if (arg == "--reads") {
      reads = std::stoi(value());
    } else if (arg == "--period-ms") {
      period_ms = std::stoi(value());
    } else if (arg == "--keep") {
      keep = true;
    } else {
      Fail("unknown option " + arg);
    }
  }
  if (mode == "real") {
    auto reader = ActivityReader::Open(MeterEnvironment(), {.all_processes = true});
    if (!reader.ok()) Fail(reader.status().ToString());
    Print("real", Run(**reader, reads, period_ms, [] {}), period_ms, 0);
    return 0;
  }
  if (mode != "fake" || root.empty()) Fail("fake needs --root DIR");
  auto setup_start = std::chrono::steady_clock::now();
  std::filesystem::remove_all(root);
  FakeProcfs fake(root, 64);
  std::mt19937_64 random(42);
  const char* hostile[] = {"my (odd) name",  "a) R 1 2 (b", "tab\there", "new\nline",     "(((",
                           "kworker/3:1-ev", "python3",     "java",      "nginx: worker", "sh"};
  Check(fake.SetMachineTicks(100'000, 500, 30'000, 900'000, 2'000, 100, 300, 0));
  FakeProcfs::Process p;
  p.pid = 1;
  p.ppid = 0;
  p.comm = "systemd";
  Check(fake.Add(p));
  int64_t next_pid = 2;
  auto add = [&](int64_t parent) {
    FakeProcfs::Process q;
    q.pid = next_pid++;
    q.ppid = parent;
    q.comm = hostile[random() % 10];
    q.start_ticks = 1000 + q.pid;
    q.user_nanos = int64_t(random() % 10'000'000'000);
    q.system_nanos = int64_t(random() % 1'000'000'000);
    Check(fake.Add(q));
    return q.pid;
  };
  // Half the processes children of init, the others descendants of earlier ones (trees).
  for (int i = 1; i < processes; ++i) {
    int64_t parent = (i % 2 || next_pid < 10) ? 1 : 2 + int64_t(random() % (next_pid - 2));
    add(parent);
  }
  std::vector<std::string> cgroups = RealisticCgroups();
  std::map<std::string, int64_t> usage;
  for (const std::string& path : cgroups) {
    usage[path] = int64_t(random() % 1'000'000'000);
    Check(fake.AddCgroup(path, usage[path]));
  }
  double setup_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - setup_start).count();

  TargetSelection selection;
  selection.all_processes = true;
  selection.cgroup_depth = 4;
  selection.pids = {2, 4};  // two process trees too
  auto reader = ActivityReader::Open(fake.environment(), selection);
  if (!reader.ok()) Fail(reader.status().ToString());
  Timing timing = Run(**reader, reads, period_ms, [&] {
    const auto& procs = fake.processes();
    std::vector<int64_t> pids;
    pids.reserve(procs.size());
    for (const auto& [pid, process] : procs) pids.push_back(pid);
    for (size_t i = 0; i < pids.size() / 20; ++i) {
      int64_t pid = pids[random() % pids.size()];
      Check(fake.Run(pid, int64_t(random() % 50'000'000), int64_t(random() % 5'000'000)));
    }
    for (int i = 0; i < 20; ++i) {  // leaves exit, reaped by their parent
      int64_t pid = pids[1 + random() % (pids.size() - 1)];
      const FakeProcfs::Process* q = fake.Find(pid);
      if (q == nullptr || q->ppid <= 1) continue;
      bool leaf = true;
      for (const auto& [other, process] : procs) {
        if (process.ppid == pid) {
          leaf = false;
          break;
        }
      }
      if (leaf) Check(fake.Reap(pid));
    }
    for (int i = 0; i < 20; ++i) add(pids[random() % pids.size()] % 2 ? 1 : 2);
    for (int i = 0; i < 50; ++i) {
      const std::string& path = cgroups[random() % cgroups.size()];
      usage[path] += int64_t(random() % 100'000);
      Check(fake.SetCgroupUsage(path, usage[path]));
    }
  });
  Print("fake", timing, period_ms, setup_s);
  if (!keep) std::filesystem::remove_all(root);
  return 0;
}
