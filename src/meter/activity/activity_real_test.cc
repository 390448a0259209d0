// The activity reader on this machine's own /proc and cgroup v2 tree, with real processes whose
// CPU use is known. The truth each check holds the reader to is the kernel's, read another way:
// a process's CPU clock (clock_getcpuclockid), wait4's resource usage, CFS's weights. Every bound
// holds on a loaded machine: nothing here depends on getting a core to oneself.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "kwatt/core/own_cpu.h"
#include "kwatt/meter/activity/activity.h"
#include "src/meter/activity/activity_procfs.h"

namespace kwatt::meter::activity_real_test {
namespace {

int64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * kNanosPerSecond + ts.tv_nsec;
}

int64_t OwnCpuNanos() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return int64_t(ts.tv_sec) * kNanosPerSecond + ts.tv_nsec;
}

// The kernel's own count of a process's CPU time (all its threads), in microseconds.
int64_t KernelCpuMicros(pid_t pid) {
  clockid_t clock;
  if (clock_getcpuclockid(pid, &clock) != 0) return -1;
  timespec ts;
  if (clock_gettime(clock, &ts) != 0) return -1;
  return int64_t(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

int64_t TickMicros() { return 1'000'000 / procfs::ClockTicksPerSecond(); }

// A child that spins `duty` of every 100 ms (1.0: all the time), on `cpu` when >= 0, at `nice`,
// until killed. Only async-signal-safe calls after fork.
pid_t Spinner(double duty, int cpu = -1, int nice = 0) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
  }
  if (nice != 0) setpriority(PRIO_PROCESS, 0, nice);
  const int64_t period = 100 * kNanosPerMilli;
  int64_t cycle = MonotonicNanos();
  volatile uint64_t sink = 0;
  while (true) {
    int64_t busy_until = cycle + int64_t(duty * double(period));
    while (MonotonicNanos() < busy_until) sink = sink + 1;
    cycle += period;
    if (duty < 1.0) {
      timespec until{time_t(cycle / kNanosPerSecond), long(cycle % kNanosPerSecond)};
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr);
    }
  }
}

void KillAndReap(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

const TargetSample* Find(const ActivitySnapshot& s, int64_t pid, TargetKind kind) {
  for (const TargetSample& t : s.targets) {
    if (t.target.pid == pid && t.target.kind == kind) return &t;
  }
  return nullptr;
}

// Reads `reader` now, bracketed by the kernel's clocks of `pids`: before[i] <= the truth at the
// read <= after[i].
ActivitySnapshot ReadBracketed(ActivityReader& reader, const std::vector<pid_t>& pids,
                               std::vector<int64_t>* before, std::vector<int64_t>* after) {
  before->clear();
  after->clear();
  for (pid_t pid : pids) before->push_back(KernelCpuMicros(pid));
  auto snapshot = reader.Read();
  for (pid_t pid : pids) after->push_back(KernelCpuMicros(pid));
  EXPECT_TRUE(snapshot.ok()) << snapshot.status().ToString();
  return snapshot.ok() ? *snapshot : ActivitySnapshot();
}

TEST(ActivityRealProcesses, CpuTimesAgreeWithTheKernelsClocksAndSharesWithTheDutyCycles) {
  pid_t full = Spinner(1.0);
  pid_t quarter = Spinner(0.25);
  std::vector<pid_t> pids = {full, quarter};
  auto reader = ActivityReader::Open(MeterEnvironment(), {.pids = {full, quarter}, .trees = false});
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::vector<int64_t> before0, after0, before1, after1;
  int64_t wall0 = MonotonicNanos();
  ActivitySnapshot s0 = ReadBracketed(**reader, pids, &before0, &after0);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  int64_t wall1 = MonotonicNanos();
  ActivitySnapshot s1 = ReadBracketed(**reader, pids, &before1, &after1);
  KillAndReap(full);
  KillAndReap(quarter);
  ASSERT_EQ(s0.targets.size(), 2u);
  ASSERT_EQ(s1.targets.size(), 2u);
  double wall_micros = double(wall1 - wall0) / 1000;
  double shares[2];
  for (int i = 0; i < 2; ++i) {
    const TargetSample* at0 = Find(s0, pids[i], TargetKind::kProcess);
    const TargetSample* at1 = Find(s1, pids[i], TargetKind::kProcess);
    ASSERT_TRUE(at0 && at1);
    // What the reader says is what the kernel's clock said (it reads that clock).
    EXPECT_GE(at0->cpu_microseconds, before0[i]);
    EXPECT_LE(at0->cpu_microseconds, after0[i]);
    EXPECT_GE(at1->cpu_microseconds, before1[i]);
    EXPECT_LE(at1->cpu_microseconds, after1[i]);
    shares[i] = double(at1->cpu_microseconds - at0->cpu_microseconds) / wall_micros;
  }
  // The quarter spinner never runs more than its duty cycle (its spins end at wall-clock
  // deadlines); the full one gets at least as much as it whatever the load.
  EXPECT_LE(shares[1], 0.30) << "quarter " << shares[1];
  EXPECT_GT(shares[1], 0.0) << "quarter " << shares[1];
  EXPECT_GE(shares[0], 0.8 * shares[1]) << "full " << shares[0] << " quarter " << shares[1];
  EXPECT_LE(shares[0], 1.02) << "full " << shares[0];
  std::printf("  CPU shares over %.1f s: %.3f (spinning), %.3f (25 %% duty cycle)\n",
              wall_micros / 1e6, shares[0], shares[1]);
}

TEST(ActivityRealProcesses, AMultithreadedProcessNeverUsesMoreThanTheCpusInAShortInterval) {
  // This process spins two threads and is read every millisecond. The kernel counts a thread
  // running on another CPU up to its last scheduler tick: an interval would jump by a tick's
  // worth (4 ms in 1 ms at CONFIG_HZ=250). The reader holds the excess back for later reads.
  std::atomic<bool> stop = false;
  std::vector<std::jthread> spinners;
  for (int i = 0; i < 2; ++i) {
    spinners.emplace_back([&stop] {
      volatile uint64_t sink = 0;
      while (!stop.load(std::memory_order_relaxed)) sink = sink + 1;
    });
  }
  auto reader = ActivityReader::Open(MeterEnvironment(), {.pids = {::getpid()}, .trees = false});
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  // Bracketed by the kernel's clock of this process (its reaped children's time, in the counter
  // too, does not change here).
  std::vector<int64_t> first_before, first_after;
  std::vector<ActivitySnapshot> snapshots = {
      ReadBracketed(**reader, {::getpid()}, &first_before, &first_after)};
  const int64_t end = MonotonicNanos() + 500 * kNanosPerMilli;
  while (MonotonicNanos() < end) {
    auto s = (*reader)->Read();
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    snapshots.push_back(std::move(*s));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  stop = true;
  spinners.clear();
  // What was held back is shown as soon as there is room: 30 ms later, the kernel's count.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  std::vector<int64_t> before, after;
  ActivitySnapshot last = ReadBracketed(**reader, {::getpid()}, &before, &after);
  const TargetSample* self = Find(last, ::getpid(), TargetKind::kProcess);
  ASSERT_TRUE(self);
  const TargetSample* first = Find(snapshots[0], ::getpid(), TargetKind::kProcess);
  ASSERT_TRUE(first);
  EXPECT_GE(self->cpu_microseconds - first->cpu_microseconds, before[0] - first_after[0]);
  EXPECT_LE(self->cpu_microseconds - first->cpu_microseconds, after[0] - first_before[0]);
  ASSERT_GT(snapshots.size(), 50u);
  double worst = 0, total = 0;
  for (size_t i = 1; i < snapshots.size(); ++i) {
    const TargetSample* before = Find(snapshots[i - 1], ::getpid(), TargetKind::kProcess);
    const TargetSample* after = Find(snapshots[i], ::getpid(), TargetKind::kProcess);
    ASSERT_TRUE(before && after);
    double cpu = double(after->cpu_microseconds - before->cpu_microseconds);
    double wall = double(snapshots[i].monotonic_nanos - snapshots[i - 1].monotonic_nanos) / 1000;
    ASSERT_GE(cpu, 0);
    EXPECT_LE(cpu, std::ceil(wall) * snapshots[i].cpus)
        << "interval " << i << ": " << cpu << " us of CPU in " << wall << " us";
    worst = std::max(worst, cpu / wall);
    total += cpu;
  }
  EXPECT_GT(total, 0);
  std::printf("  %zu reads, at most %.2f CPUs in an interval on %d CPUs\n", snapshots.size(), worst,
              snapshots.back().cpus);
}

TEST(ActivityRealProcesses, TwoSpinnersOnOneCpuShareItByTheirNiceWeights) {
  // CFS/EEVDF gives runnable tasks on one CPU time in proportion to their weights, whatever else
  // runs there: nice 0 weighs 1024, nice 5 weighs 335 (kernel/sched/core.c), a ratio of 3.06.
  pid_t heavy = Spinner(1.0, 0, 0);
  pid_t light = Spinner(1.0, 0, 5);
  auto reader = ActivityReader::Open(MeterEnvironment(), {.pids = {heavy, light}, .trees = false});
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto s0 = (*reader)->Read();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  auto s1 = (*reader)->Read();
  KillAndReap(heavy);
  KillAndReap(light);
  ASSERT_TRUE(s0.ok() && s1.ok());
  auto used = [&](pid_t pid) {
    return double(Find(*s1, pid, TargetKind::kProcess)->cpu_microseconds -
                  Find(*s0, pid, TargetKind::kProcess)->cpu_microseconds);
  };
  double ratio = used(heavy) / std::max(1.0, used(light));
  EXPECT_GT(ratio, 2.3) << "heavy " << used(heavy) << " us, light " << used(light) << " us";
  EXPECT_LT(ratio, 4.0) << "heavy " << used(heavy) << " us, light " << used(light) << " us";
  std::printf("  nice 0 / nice 5 on one CPU: %.2f (weights: 3.06)\n", ratio);
}

TEST(ActivityRealProcesses, AShellsTreeKeepsWhatItsReapedChildrenUsed) {
  // A shell runs four busy shells one after the other (each reaped by it), then sleeps.
  pid_t root = fork();
  if (root == 0) {
    setpgid(0, 0);
    execl("/bin/sh", "sh", "-c",
          "for k in 1 2 3 4; do sh -c 'i=0; while [ $i -lt 60000 ]; do i=$((i+1)); done'; done; "
          "exec sleep 60",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(root, root);
  auto reader = ActivityReader::Open(MeterEnvironment(), {.pids = {root}});
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  int64_t last = -1;
  int reads = 0, members_seen = 0;
  const int64_t deadline = MonotonicNanos() + 120 * kNanosPerSecond;
  std::string name;
  while (MonotonicNanos() < deadline) {
    auto s = (*reader)->Read();
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    const TargetSample* tree = Find(*s, root, TargetKind::kProcessTree);
    ASSERT_NE(tree, nullptr);
    ASSERT_GE(tree->cpu_microseconds, last) << "the tree's counter went back";
    last = tree->cpu_microseconds;
    name = tree->target.name;
    ++reads;
    if (name == "sleep") break;  // the loops are done: the shell became `sleep`
    std::ifstream children("/proc/" + std::to_string(root) + "/task/" + std::to_string(root) +
                           "/children");
    int64_t child = 0;
    if (children >> child) ++members_seen;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(name, "sleep") << "the shell did not finish its loops in 2 minutes";
  // Stop it, read once more, then reap it: wait4 gives its time and its reaped children's.
  kill(root, SIGSTOP);
  waitpid(root, nullptr, WUNTRACED);
  auto final = (*reader)->Read();
  ASSERT_TRUE(final.ok());
  int64_t counted = Find(*final, root, TargetKind::kProcessTree)->cpu_microseconds;
  kill(root, SIGKILL);
  rusage usage{};
  ASSERT_EQ(wait4(root, nullptr, 0, &usage), root);
  int64_t truth = int64_t(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1'000'000 +
                  usage.ru_utime.tv_usec + usage.ru_stime.tv_usec;
  EXPECT_GT(truth, 20'000) << "the loops hardly ran";
  // The shell's and its children's times, each rounded to ticks by the kernel, within a few.
  EXPECT_NEAR(double(counted), double(truth), double(4 * TickMicros()))
      << reads << " reads, children seen running in " << members_seen;
  EXPECT_GT(members_seen, 0);
  std::printf("  tree: %lld us counted, %lld us by wait4, over %d reads\n",
              static_cast<long long>(counted), static_cast<long long>(truth), reads);
}

// Spins this thread until it used `nanos` of CPU; returns what it used.
int64_t SpinThread(int64_t nanos) {
  auto now = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return int64_t(ts.tv_sec) * kNanosPerSecond + ts.tv_nsec;
  };
  int64_t start = now();
  volatile uint64_t sink = 0;
  while (now() - start < nanos) sink = sink + 1;
  return now() - start;
}

TEST(ActivityRealProcesses, KwattsOwnThreadsAreNeverTheMeasuredProcesss) {
  // This process as a tree (kwatt.measure's target): a thread counted as kwatt's own work
  // (OwnCpuScope, as the meter's threads are) adds nothing to it; a thread of "the user" adds what
  // it used.
  auto reader = ActivityReader::Open(MeterEnvironment(), {.pids = {getpid()}});
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto count = [&] {
    auto s = (*reader)->Read();
    EXPECT_TRUE(s.ok());
    const TargetSample* t = Find(*s, getpid(), TargetKind::kProcessTree);
    EXPECT_NE(t, nullptr);
    return t ? t->cpu_microseconds : -1;
  };
  const int64_t kSpin = 150 * kNanosPerMilli;
  int64_t before = count();
  int64_t own = 0;
  std::thread([&] {
    OwnCpuScope scope;
    own = SpinThread(kSpin);
  }).join();
  int64_t after_own = count();
  EXPECT_LT(after_own - before, own / 1000 / 5) << "kwatt's own " << own / 1000 << " us";
  int64_t user = 0;
  std::thread([&] { user = SpinThread(kSpin); }).join();
  int64_t after_user = count();
  EXPECT_GE(after_user - after_own, user / 1000 - 2 * TickMicros());
  EXPECT_LT(after_user - after_own, user / 1000 + own / 1000 / 5);
}

TEST(ActivityRealProcesses, EveryProcessOfThisMachineAndTheMachineItself) {
  auto reader = ActivityReader::Open(MeterEnvironment(), {.all_processes = true});
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto s = (*reader)->Read();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->cpus, int(sysconf(_SC_NPROCESSORS_ONLN)));
  EXPECT_GT(s->busy_microseconds, 0);
  EXPECT_GT(s->total_microseconds, s->busy_microseconds);
  const TargetSample* self = Find(*s, ::getpid(), TargetKind::kProcess);
  ASSERT_NE(self, nullptr);
  std::ifstream comm("/proc/self/comm");
  std::string name;
  std::getline(comm, name);
  EXPECT_EQ(self->target.name, name);
  EXPECT_GT(s->targets.size(), 3u);
  EXPECT_TRUE(std::is_sorted(s->targets.begin(), s->targets.end(),
                             [](auto& a, auto& b) { return a.target.key < b.target.key; }));
}

TEST(ActivityRealProcesses, HardwareCountersWhereTheKernelHasThem) {
  auto reader = ActivityReader::Open(
      MeterEnvironment(), {.pids = {::getpid()}, .trees = false, .hardware_counters = true});
  if (!reader.ok()) {
    GTEST_SKIP() << "the kernel refuses hardware counters here: " << reader.status().ToString();
  }
  auto s0 = (*reader)->Read();
  int64_t until = OwnCpuNanos() + 100 * kNanosPerMilli;
  volatile uint64_t sink = 0;
  while (OwnCpuNanos() < until) sink = sink + 1;
  auto s1 = (*reader)->Read();
  ASSERT_TRUE(s0.ok() && s1.ok());
  const TargetSample* before = Find(*s0, ::getpid(), TargetKind::kProcess);
  const TargetSample* after = Find(*s1, ::getpid(), TargetKind::kProcess);
  EXPECT_GT(after->cycles, before->cycles + 10'000'000);  // 100 ms at >= 100 MHz
  EXPECT_GT(after->instructions, before->instructions);
}

// A cgroup v2 of the test's own, removed afterwards; skips when none can be made here.
class RealCgroup {
 public:
  RealCgroup() {
    auto root = CgroupRoot(MeterEnvironment());
    if (!root.ok()) {
      why_not_ = root.status().ToString();
      return;
    }
    root_ = *root;
    static int counter = 0;
    name_ = "/kwatt_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    if (::mkdir((root_ + name_).c_str(), 0755) != 0) {
      why_not_ = "cannot make a cgroup under " + root_ + ": " + std::strerror(errno);
      name_.clear();
    }
  }
  ~RealCgroup() {
    for (auto it = made_.rbegin(); it != made_.rend(); ++it) ::rmdir((root_ + *it).c_str());
    if (!name_.empty()) ::rmdir((root_ + name_).c_str());
  }
  bool ok() const { return !name_.empty(); }
  const std::string& why_not() const { return why_not_; }
  const std::string& path() const { return name_; }
  std::string Child(const std::string& leaf) {
    std::string path = name_ + "/" + leaf;
    if (::mkdir((root_ + path).c_str(), 0755) == 0) made_.push_back(path);
    return path;
  }
  bool Move(pid_t pid, const std::string& path) {
    std::ofstream procs(root_ + path + "/cgroup.procs");
    procs << pid << std::flush;
    return bool(procs);
  }
  bool Remove(const std::string& path) {
    bool removed = ::rmdir((root_ + path).c_str()) == 0;
    if (removed) made_.erase(std::find(made_.begin(), made_.end(), path));
    return removed;
  }

 private:
  std::string root_, name_, why_not_;
  std::vector<std::string> made_;
};

// A child that waits until told (a byte on a pipe), then spins until it used `cpu_millis` of CPU
// and exits.
struct Worker {
  pid_t pid = -1;
  int go = -1;
};
Worker StartWorker(int64_t cpu_millis) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[1]);
    char byte;
    if (read(fds[0], &byte, 1) != 1) _exit(1);
    int64_t until = OwnCpuNanos() + cpu_millis * kNanosPerMilli;
    volatile uint64_t sink = 0;
    while (OwnCpuNanos() < until) sink = sink + 1;
    _exit(0);
  }
  close(fds[0]);
  return {pid, fds[1]};
}
int64_t RunWorker(Worker worker) {
  char byte = 'x';
  EXPECT_EQ(write(worker.go, &byte, 1), 1);
  close(worker.go);
  rusage usage{};
  EXPECT_EQ(wait4(worker.pid, nullptr, 0, &usage), worker.pid);
  return int64_t(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1'000'000 +
         usage.ru_utime.tv_usec + usage.ru_stime.tv_usec;
}

TEST(ActivityRealCgroups, ACgroupCountsItsTasksAndKeepsWhatExitedTasksAndRemovedChildrenUsed) {
  RealCgroup cgroup;
  if (!cgroup.ok()) GTEST_SKIP() << "no writable cgroup v2 here: " << cgroup.why_not();
  std::string sub = cgroup.Child("sub");
  Worker first = StartWorker(300);
  Worker second = StartWorker(200);
  ASSERT_TRUE(cgroup.Move(first.pid, cgroup.path()));
  ASSERT_TRUE(cgroup.Move(second.pid, sub));
  auto reader = ActivityReader::Open(MeterEnvironment(), {.cgroups = {cgroup.path()}});
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto by_depth = ActivityReader::Open(MeterEnvironment(), {.cgroup_depth = 2});
  ASSERT_TRUE(by_depth.ok()) << by_depth.status().ToString();
  auto value = [&](ActivityReader& r, const std::string& path) -> int64_t {
    auto s = r.Read();
    EXPECT_TRUE(s.ok());
    for (auto& t : s->targets) {
      if (t.target.key == "cgroup:" + path) return t.cpu_microseconds;
    }
    return -1;
  };
  int64_t start = value(**reader, cgroup.path());
  EXPECT_GE(start, 0);
  EXPECT_LT(start, 20'000);  // the workers waited
  EXPECT_GE(value(**by_depth, sub), 0);
  // The first worker spins and exits (reaped): its time stays counted.
  int64_t first_used = RunWorker(first);
  int64_t after_first = value(**reader, cgroup.path());
  EXPECT_NEAR(double(after_first - start), double(first_used), 5'000.0);
  // The second, in the child cgroup, which is then removed: counted in its parent still.
  int64_t second_used = RunWorker(second);
  ASSERT_TRUE(cgroup.Remove(sub));
  EXPECT_EQ(value(**by_depth, sub), -1);  // gone from the snapshot
  int64_t after_second = value(**reader, cgroup.path());
  EXPECT_NEAR(double(after_second - after_first), double(second_used), 5'000.0);
  std::printf("  cgroup: %lld us counted for %lld us used by two exited workers\n",
              static_cast<long long>(after_second - start),
              static_cast<long long>(first_used + second_used));
  // The cgroup removed: absent, not an error.
  reader->reset();
}

TEST(ActivityRealCgroups, ARemovedSelectedCgroupIsAbsentNotAnError) {
  RealCgroup cgroup;
  if (!cgroup.ok()) GTEST_SKIP() << "no writable cgroup v2 here: " << cgroup.why_not();
  std::string sub = cgroup.Child("gone");
  auto reader = ActivityReader::Open(MeterEnvironment(), {.cgroups = {sub}});
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto s = (*reader)->Read();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->targets.size(), 1u);
  ASSERT_TRUE(cgroup.Remove(sub));
  s = (*reader)->Read();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->targets.empty());
}

}  // namespace
}  // namespace kwatt::meter::activity_real_test
