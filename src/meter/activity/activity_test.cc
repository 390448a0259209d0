// The activity reader on fake procfs and cgroup trees (src/testing/fake_procfs.h), and hardware
// counters through a PerfEvents that replays counts.
#include "kwatt/meter/activity/activity.h"

#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "src/testing/fake_procfs.h"
#include "src/testing/temp_dir.h"

namespace kwatt::meter::activity_test {
namespace {

using testing::FakeProcfs;
using Process = FakeProcfs::Process;

constexpr int64_t kMs = 1'000'000;  // nanoseconds
int64_t TickMicros() { return 1'000'000 / FakeProcfs::TicksPerSecond(); }

class SteppedClock : public Clock {
 public:
  int64_t MonotonicNanos() override { return now_ += step; }
  UnixNanos WallNanos() override { return 1'745'000'000 * kNanosPerSecond + now_; }
  bool SleepUntil(int64_t, std::stop_token) override { return true; }
  int64_t step = kNanosPerSecond;  // between reads

 private:
  int64_t now_ = 0;
};

// perf_event_open replayed: every open counter of a task or cgroup advances when the test says.
class ReplayPerfEvents : public PerfEvents {
 public:
  struct Counter {
    PerfEventSpec spec;
    PerfCount count;
    bool open = true;
  };
  Result<int> Open(const PerfEventSpec& spec) override {
    if (!refusal.ok()) return refusal;
    counters.push_back({spec});
    return int(counters.size() - 1);
  }
  Result<PerfCount> Read(int handle) override {
    if (handle < 0 || size_t(handle) >= counters.size() || !counters[handle].open) {
      ADD_FAILURE() << "read of a handle not open: " << handle;
      return Status::IOError("bad handle");
    }
    return counters[handle].count;
  }
  void Close(int handle) override {
    if (handle < 0 || size_t(handle) >= counters.size() || !counters[handle].open) {
      ADD_FAILURE() << "close of a handle not open: " << handle;
      return;
    }
    counters[handle].open = false;
  }
  // Every open counter on task `pid` (or cgroup path ending in `cgroup`): its event counts
  // `per_event` (cycles; instructions twice that), enabled `enabled` ns, on the PMU `running`.
  void Advance(int pid, const std::string& cgroup, uint64_t per_event, uint64_t enabled,
               uint64_t running) {
    for (Counter& c : counters) {
      if (!c.open) continue;
      bool match = cgroup.empty() ? (c.spec.cgroup.empty() && c.spec.pid == pid)
                                  : c.spec.cgroup.ends_with(cgroup);
      if (!match) continue;
      c.count.value += c.spec.config == PERF_COUNT_HW_INSTRUCTIONS ? 2 * per_event : per_event;
      c.count.time_enabled += enabled;
      c.count.time_running += running;
    }
  }
  int OpenCount() const {
    return int(std::count_if(counters.begin(), counters.end(), [](auto& c) { return c.open; }));
  }
  Status refusal;
  std::vector<Counter> counters;
};

class ActivityTest : public ::testing::Test {
 protected:
  ActivityTest() : fake_(temp_.root(), 4) {
    environment_ = fake_.environment();
    environment_.clock = clock_;
    environment_.perf = perf_;
    EXPECT_TRUE(fake_.SetMachineTicks(1000, 10, 200, 5000, 30, 4, 6, 2, 50).ok());
  }

  void AddProcess(int64_t pid, int64_t ppid, const std::string& comm, int64_t user_ms = 0,
                  int64_t children_ms = 0, int64_t start = -1) {
    Process p;
    p.pid = pid;
    p.ppid = ppid;
    p.comm = comm;
    p.start_ticks = start >= 0 ? start : 1000 + pid;
    p.user_nanos = user_ms * kMs;
    p.children_user_nanos = children_ms * kMs;
    ASSERT_TRUE(fake_.Add(p).ok());
  }

  std::unique_ptr<ActivityReader> Open(const TargetSelection& selection) {
    auto reader = ActivityReader::Open(environment_, selection);
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    return reader.ok() ? std::move(*reader) : nullptr;
  }

  ActivitySnapshot Read(ActivityReader& reader) {
    auto snapshot = reader.Read();
    EXPECT_TRUE(snapshot.ok()) << snapshot.status().ToString();
    return snapshot.ok() ? std::move(*snapshot) : ActivitySnapshot();
  }

  static const TargetSample* Find(const ActivitySnapshot& s, const std::string& key) {
    for (const TargetSample& t : s.targets) {
      if (t.target.key == key) return &t;
    }
    return nullptr;
  }
  static std::string Key(const char* kind, int64_t pid) {
    return std::string(kind) + ":" + std::to_string(pid) + ":" + std::to_string(1000 + pid);
  }

  ::kwatt::testing::TempDir temp_{"kwatt_activity", ::kwatt::testing::ShmBase()};
  FakeProcfs fake_;
  std::shared_ptr<ReplayPerfEvents> perf_ = std::make_shared<ReplayPerfEvents>();
  std::shared_ptr<SteppedClock> clock_ = std::make_shared<SteppedClock>();
  MeterEnvironment environment_;
};

TEST_F(ActivityTest, MachineBusyTotalAndOnlineCpus) {
  auto reader = Open({});
  ActivitySnapshot s = Read(*reader);
  int64_t tick = TickMicros();
  EXPECT_EQ(s.busy_microseconds, (1000 + 10 + 200 + 4 + 6 + 2) * tick);  // guest is in user
  EXPECT_EQ(s.total_microseconds, s.busy_microseconds + (5000 + 30) * tick);
  EXPECT_EQ(s.cpus, 4);
  EXPECT_TRUE(s.targets.empty());
  EXPECT_GT(s.monotonic_nanos, 0);
  EXPECT_GT(s.wall, 1'745'000'000 * kNanosPerSecond);
  // CPUs by stat's cpuN lines (the CPUs its times are summed over), whatever another sysfs tree
  // says (a simulated RAPL machine's, given as the sysfs root).
  ASSERT_TRUE(fake_.SetOnlineText("0-7\n").ok());
  EXPECT_EQ(Read(*reader).cpus, 4);
  ASSERT_TRUE(fake_.SetOnlineText("").ok());
  EXPECT_EQ(Read(*reader).cpus, 4);
}

TEST_F(ActivityTest, OpenFailsWhenTheMachineCannotBeReadAndReadFailsWhenItNoLongerCan) {
  environment_.procfs_root = (temp_.root() / "nowhere").string();
  auto missing = ActivityReader::Open(environment_, {});
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
  EXPECT_NE(missing.status().message().find("nowhere"), std::string::npos);
  environment_ = fake_.environment();
  auto reader = Open({});
  std::filesystem::remove(fake_.procfs() / "stat");
  auto failed = reader->Read();
  EXPECT_EQ(failed.status().code(), Status::Code::kNotFound);
  EXPECT_NE(failed.status().message().find("/stat"), std::string::npos);
}

TEST_F(ActivityTest, AProcessIsItsOwnTimeAndItsReapedChildrenInMicroseconds) {
  AddProcess(100, 1, "my (odd) name", 1234, 5000);
  AddProcess(200, 1, "other", 50);
  TargetSelection selection;
  selection.pids = {100};
  selection.trees = false;
  auto reader = Open(selection);
  ActivitySnapshot s = Read(*reader);
  ASSERT_EQ(s.targets.size(), 1u);
  const TargetSample& t = s.targets[0];
  EXPECT_EQ(t.target.kind, TargetKind::kProcess);
  EXPECT_EQ(t.target.key, Key("pid", 100));
  EXPECT_EQ(t.target.name, "my (odd) name");
  EXPECT_EQ(t.target.pid, 100);
  // Its own 1.234 s exact from schedstat, its children's 5 s from ticks.
  EXPECT_EQ(t.cpu_microseconds, 1'234'000 + 5'000'000);
  EXPECT_EQ(t.cycles, -1);
  EXPECT_EQ(t.instructions, -1);
  ASSERT_TRUE(fake_.Run(100, 3 * kMs + 456'000, 1 * kMs).ok());
  EXPECT_EQ(Read(*reader).targets[0].cpu_microseconds, 1'234'000 + 5'000'000 + 4'456);
}

TEST_F(ActivityTest, WithoutSchedstatTheTicksCountAndAMultithreadedLeaderDoesNotHideThem) {
  Process p;
  p.pid = 300;
  p.comm = "threads";
  p.start_ticks = 1300;
  p.user_nanos = 2'345 * kMs;  // 2.345 s: stat shows 234 ticks
  p.leader_nanos = 100 * kMs;  // its leader thread ran 0.1 s, the others the rest
  p.thread_ids = {300, 301, 302};
  ASSERT_TRUE(fake_.Add(p).ok());
  p.pid = 400;
  p.start_ticks = 1400;
  p.leader_nanos = -2;  // no schedstat
  p.thread_ids = {};
  ASSERT_TRUE(fake_.Add(p).ok());
  TargetSelection selection;
  selection.pids = {300, 400};
  selection.trees = false;
  auto reader = Open(selection);
  ActivitySnapshot s = Read(*reader);
  ASSERT_EQ(s.targets.size(), 2u);
  int64_t ticks = 2'345'000 / TickMicros() * TickMicros();
  EXPECT_EQ(s.targets[0].cpu_microseconds, ticks);
  EXPECT_EQ(s.targets[1].cpu_microseconds, ticks);
}

TEST_F(ActivityTest, TheProcessCpuClockIsExactForEveryThreadAndStatServesWhenItCannotBeRead) {
  Process p;
  p.pid = 300;
  p.comm = "threads";
  p.start_ticks = 1300;
  p.user_nanos = 2'345 * kMs;  // stat shows 234 ticks, schedstat the leader's 0.1 s
  p.leader_nanos = 100 * kMs;
  p.thread_ids = {300, 301, 302};
  ASSERT_TRUE(fake_.Add(p).ok());
  environment_.process_cpu = fake_.CpuClocks();
  TargetSelection selection;
  selection.pids = {300};
  selection.trees = false;
  auto reader = Open(selection);
  EXPECT_EQ(Read(*reader).targets.at(0).cpu_microseconds, 2'345'000);
  // 3.7 ms more: the clock tells it, where stat's ticks would tell 0 or 10 ms.
  ASSERT_TRUE(fake_.Run(300, 3'700'000).ok());
  EXPECT_EQ(Read(*reader).targets.at(0).cpu_microseconds, 2'348'700);
  // A zombie's clock cannot be read: stat's ticks (2.34 s) serve, and the counter does not go
  // back.
  ASSERT_TRUE(fake_.Exit(300).ok());
  EXPECT_EQ(Read(*reader).targets.at(0).cpu_microseconds, 2'348'700);
}

TEST_F(ActivityTest, ACounterNeverGrowsFasterThanTheCpusAndCatchesUpWithWhatItHeldBack) {
  AddProcess(100, 1, "late", 1000);
  ASSERT_TRUE(fake_.AddCgroup("/batch", 2'000'000).ok());
  TargetSelection selection;
  selection.pids = {100};
  selection.trees = false;
  selection.cgroups = {"/batch"};
  auto reader = Open(selection);
  ActivitySnapshot s = Read(*reader);  // the first read: everything since each start
  EXPECT_EQ(Find(s, Key("pid", 100))->cpu_microseconds, 1'000'000);
  EXPECT_EQ(Find(s, "cgroup:/batch")->cpu_microseconds, 2'000'000);
  // Reads 1 ms apart on 4 CPUs: 4 ms at most each. The kernel shows 30 ms at once (a tick's
  // worth counted late), the cgroup 10 ms.
  clock_->step = kNanosPerMilli;
  ASSERT_TRUE(fake_.Run(100, 30 * kMs).ok());
  ASSERT_TRUE(fake_.SetCgroupUsage("/batch", 2'010'000).ok());
  // The machine's busy time: two ticks (20 ms) more in user time.
  const int64_t busy = s.busy_microseconds;
  ASSERT_TRUE(fake_.SetMachineTicks(1002, 10, 200, 5000, 30, 4, 6, 2, 50).ok());
  std::vector<int64_t> process, cgroup, machine;
  for (int i = 0; i < 9; ++i) {
    s = Read(*reader);
    process.push_back(Find(s, Key("pid", 100))->cpu_microseconds - 1'000'000);
    cgroup.push_back(Find(s, "cgroup:/batch")->cpu_microseconds - 2'000'000);
    machine.push_back(s.busy_microseconds - busy);
  }
  EXPECT_EQ(machine, (std::vector<int64_t>{4'000, 8'000, 12'000, 16'000, 20'000, 20'000, 20'000,
                                           20'000, 20'000}));
  EXPECT_EQ(process, (std::vector<int64_t>{4'000, 8'000, 12'000, 16'000, 20'000, 24'000, 28'000,
                                           30'000, 30'000}));
  EXPECT_EQ(cgroup, (std::vector<int64_t>{4'000, 8'000, 10'000, 10'000, 10'000, 10'000, 10'000,
                                          10'000, 10'000}));
  // ReadAt: the stamps given (the meter's energy sample) pace the counter, not the reader's clock.
  // 3 ms after the last read: 12 ms of the 20 ms the kernel shows (the reader's clock: 1 ms, 4).
  ASSERT_TRUE(fake_.Run(100, 20 * kMs).ok());
  s = reader->ReadAt(clock_->MonotonicNanos() + 2 * kNanosPerMilli, s.wall).value();
  EXPECT_EQ(Find(s, Key("pid", 100))->cpu_microseconds - 1'000'000, 30'000 + 12'000);
  // A process born since the last read used at most the time since, on every CPU.
  selection.commands = {"newborn"};
  reader = Open(selection);
  (void)Read(*reader);
  AddProcess(300, 1, "newborn", 6);
  EXPECT_EQ(Find(Read(*reader), Key("pid", 300))->cpu_microseconds, 4'000);
  EXPECT_EQ(Find(Read(*reader), Key("pid", 300))->cpu_microseconds, 6'000);
}

TEST_F(ActivityTest, AFakeProcfsIsNotReadWithTheKernelsClocks) {
  EXPECT_EQ(SystemProcessCpuClocks(fake_.procfs().string()), nullptr);
  // Its pids would otherwise be read as this machine's: pid 1 is the fake's process here.
  AddProcess(1, 0, "fake-init", 10);
  TargetSelection selection;
  selection.pids = {1};
  selection.trees = false;
  auto reader = Open(selection);
  EXPECT_EQ(Read(*reader).targets.at(0).cpu_microseconds, 10'000);
}

TEST_F(ActivityTest, AVanishedSelectedProcessIsAbsentAndItsReusedPidIsNotIt) {
  AddProcess(100, 1, "first", 10);
  TargetSelection selection;
  selection.pids = {100};
  selection.trees = false;
  auto reader = Open(selection);
  EXPECT_EQ(Read(*reader).targets.size(), 1u);
  ASSERT_TRUE(fake_.Vanish(100).ok());
  EXPECT_TRUE(Read(*reader).targets.empty());
  AddProcess(100, 1, "second", 10, 0, /*start=*/99999);  // the pid reused
  EXPECT_TRUE(Read(*reader).targets.empty());
}

TEST_F(ActivityTest, AProcessThatCannotBeReadForAWhileNeitherEndsNorStartsAgain) {
  AddProcess(100, 1, "a", 10);
  AddProcess(101, 1, "b", 20);
  auto reader = Open({.all_processes = true});
  EXPECT_EQ(Read(*reader).targets.size(), 2u);
  // Its stat unreadable (here a directory: read(2) fails with EISDIR, as it would with EMFILE).
  ASSERT_TRUE(fake_.Run(100, 5 * kMs).ok());
  std::filesystem::remove(fake_.procfs() / "100/stat");
  std::filesystem::create_directory(fake_.procfs() / "100/stat");
  ActivitySnapshot s = Read(*reader);
  ASSERT_EQ(s.targets.size(), 2u);
  EXPECT_EQ(Find(s, Key("pid", 100))->cpu_microseconds, 10'000);  // as at the last read
  std::filesystem::remove(fake_.procfs() / "100/stat");
  ASSERT_TRUE(fake_.Write(100).ok());
  EXPECT_EQ(Find(Read(*reader), Key("pid", 100))->cpu_microseconds, 15'000);
}

TEST_F(ActivityTest, AllProcessesKeyedByPidAndStartSoAReusedPidIsANewTarget) {
  AddProcess(100, 1, "first", 10);
  AddProcess(101, 1, "steady", 20);
  TargetSelection selection;
  selection.all_processes = true;
  auto reader = Open(selection);
  ActivitySnapshot s = Read(*reader);
  ASSERT_EQ(s.targets.size(), 2u);
  EXPECT_EQ(s.targets[0].target.key, Key("pid", 100));
  ASSERT_TRUE(fake_.Vanish(100).ok());
  AddProcess(100, 1, "second", 7, 0, /*start=*/50000);
  s = Read(*reader);
  ASSERT_EQ(s.targets.size(), 2u);
  EXPECT_EQ(s.targets[0].target.key, "pid:100:50000");
  EXPECT_EQ(s.targets[0].target.name, "second");
  EXPECT_EQ(s.targets[0].cpu_microseconds, 7'000);  // counted from its own start
  EXPECT_EQ(s.targets[1].target.key, Key("pid", 101));
}

TEST_F(ActivityTest, SelectionsCombineAndAProcessSelectedTwiceIsOneTarget) {
  AddProcess(100, 1, "python3", 1);
  AddProcess(101, 1, "python3", 2);
  AddProcess(102, 1, "nginx", 3);
  AddProcess(103, 1, "bash", 4);
  AddProcess(105, 1, "bash", 5000);
  TargetSelection selection;
  selection.pids = {100, 103, 103};
  selection.trees = false;
  selection.commands = {"python3", "nginx", "python3"};
  auto reader = Open(selection);
  ActivitySnapshot s = Read(*reader);
  std::vector<std::string> keys;
  for (auto& t : s.targets) keys.push_back(t.target.key);
  EXPECT_EQ(keys, (std::vector<std::string>{Key("pid", 100), Key("pid", 101), Key("pid", 102),
                                            Key("pid", 103)}));
  // A process that takes a selected name later becomes a target, counted from the last read; one
  // that drops it stays one. A new one counts from its start.
  AddProcess(104, 1, "python3", 5);
  fake_.Find(101)->comm = "renamed";
  ASSERT_TRUE(fake_.Write(101).ok());
  fake_.Find(105)->comm = "nginx";
  ASSERT_TRUE(fake_.Run(105, 7 * kMs).ok());
  s = Read(*reader);
  EXPECT_EQ(s.targets.size(), 6u);
  EXPECT_EQ(Find(s, Key("pid", 101))->target.name, "renamed");
  EXPECT_EQ(Find(s, Key("pid", 104))->cpu_microseconds, 5'000);
  EXPECT_EQ(Find(s, Key("pid", 105))->cpu_microseconds, 7'000);
  // Every process at once: one target each, those selected before included.
  selection.all_processes = true;
  reader = Open(selection);
  EXPECT_EQ(Read(*reader).targets.size(), 6u);
}

TEST_F(ActivityTest, OpenRefusesABadSelectionNamingIt) {
  AddProcess(100, 1, "x");
  struct Case {
    TargetSelection selection;
    Status::Code code;
    std::string says;
  };
  std::vector<Case> cases;
  cases.push_back({{.pids = {4242}}, Status::Code::kNotFound, "process 4242"});
  cases.push_back({{.pids = {0}}, Status::Code::kInvalidArgument, "pid 0"});
  cases.push_back({{.pids = {-5}}, Status::Code::kInvalidArgument, "pid -5"});
  cases.push_back({{.commands = {""}}, Status::Code::kInvalidArgument, "empty command"});
  cases.push_back({{.commands = {"a_very_long_program"}},
                   Status::Code::kInvalidArgument,
                   "select 'a_very_long_pro'"});
  cases.push_back({{.cgroups = {"system.slice"}}, Status::Code::kInvalidArgument, "system.slice"});
  cases.push_back({{.cgroups = {"/a/../b"}}, Status::Code::kInvalidArgument, "/a/../b"});
  cases.push_back({{.cgroups = {"/nope"}}, Status::Code::kNotFound, "/nope"});
  cases.push_back({{.cgroup_depth = -1}, Status::Code::kInvalidArgument, "depth -1"});
  for (const Case& c : cases) {
    auto reader = ActivityReader::Open(environment_, c.selection);
    EXPECT_EQ(reader.status().code(), c.code) << reader.status().ToString();
    EXPECT_NE(reader.status().message().find(c.says), std::string::npos)
        << reader.status().ToString();
  }
}

TEST_F(ActivityTest, AThreadIdIsRefusedNamingItsProcess) {
  AddProcess(100, 1, "x");
  // procfs shows a thread's directory when asked by its id; its status names its process.
  ASSERT_TRUE(std::filesystem::create_directory(fake_.procfs() / "101"));
  std::filesystem::copy_file(fake_.procfs() / "100/stat", fake_.procfs() / "101/stat");
  std::ofstream(fake_.procfs() / "101/status") << "Name:\tx\nTgid:\t100\nPid:\t101\n";
  auto reader = ActivityReader::Open(environment_, {.pids = {101}});
  EXPECT_EQ(reader.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(reader.status().message().find("thread of process 100"), std::string::npos);
}

TEST_F(ActivityTest, ATreeCountsItsDescendantsAndKeepsWhatReapedChildrenUsed) {
  AddProcess(1, 0, "init");
  AddProcess(100, 1, "sh", 100);
  AddProcess(101, 100, "worker", 200);
  AddProcess(102, 101, "helper (x)", 300);
  AddProcess(103, 1, "elsewhere", 5000);
  auto reader = Open({.pids = {100}});
  ActivitySnapshot s = Read(*reader);
  ASSERT_EQ(s.targets.size(), 1u);
  EXPECT_EQ(s.targets[0].target.kind, TargetKind::kProcessTree);
  EXPECT_EQ(s.targets[0].target.key, Key("tree", 100));
  EXPECT_EQ(s.targets[0].target.name, "sh");
  EXPECT_EQ(s.targets[0].cpu_microseconds, 600'000);
  // A new grandchild runs; a child's child exits and is reaped by it: nothing lost.
  AddProcess(104, 101, "new", 40);
  ASSERT_TRUE(fake_.Run(102, 7 * kMs).ok());
  ASSERT_TRUE(fake_.Exit(102).ok());
  EXPECT_EQ(Read(*reader).targets[0].cpu_microseconds, 647'000);  // the zombie still shows
  ASSERT_TRUE(fake_.Reap(102).ok());
  // Reaped: its time is now in 101's cutime, in ticks; the tree does not count it twice.
  int64_t after_reap = Read(*reader).targets[0].cpu_microseconds;
  EXPECT_LE(after_reap, 647'000);
  EXPECT_GE(after_reap, 647'000 - 2 * TickMicros());
  // Work after the reap counts at once; the counter never went back. 102's 307 ms show as 30
  // ticks in 101's cutime: the kernel's rounding, 7 ms that the next tick of cutime will bring.
  ASSERT_TRUE(fake_.Run(100, 50 * kMs).ok());
  EXPECT_EQ(Read(*reader).targets[0].cpu_microseconds, 697'000 - 7'000);
}

TEST_F(ActivityTest, ATreeCounterStaysMonotonicWhenTheReapersTicksLag) {
  AddProcess(1, 0, "init");
  AddProcess(100, 1, "sh");
  auto reader = Open({.pids = {100}});
  Read(*reader);
  // A child that used 19.999 ms: reaped, its parent's cutime shows one tick.
  AddProcess(101, 100, "c");
  Read(*reader);
  ASSERT_TRUE(fake_.Run(101, 19'999'000).ok());
  int64_t before = Read(*reader).targets[0].cpu_microseconds;
  EXPECT_EQ(before, 19'999);
  ASSERT_TRUE(fake_.Reap(101).ok());
  EXPECT_EQ(Read(*reader).targets[0].cpu_microseconds, before);  // held, not gone back
  ASSERT_TRUE(fake_.Run(100, 5 * kMs).ok());
  int64_t after = Read(*reader).targets[0].cpu_microseconds;
  EXPECT_GE(after, before);
  EXPECT_LE(after, before + 5'000);
}

TEST_F(ActivityTest, ATreeKeepsWhatAChildReapedElsewhereUsedAndADaemonStaysInIt) {
  AddProcess(1, 0, "init");
  AddProcess(100, 1, "sh", 100);
  AddProcess(101, 100, "child", 200);
  AddProcess(102, 101, "daemon", 300);
  auto reader = Open({.pids = {100}});
  EXPECT_EQ(Read(*reader).targets[0].cpu_microseconds, 600'000);
  // 101 exits, reaped by 100; its child 102 is adopted by init and goes on.
  ASSERT_TRUE(fake_.Run(101, 10 * kMs).ok());
  ASSERT_TRUE(fake_.Reap(101).ok());
  ASSERT_TRUE(fake_.Reparent(102, 1).ok());
  ASSERT_TRUE(fake_.Run(102, 30 * kMs).ok());
  ActivitySnapshot s = Read(*reader);
  // 100's cutime grew by 210 ms (ticks: exact here), of which 200 were counted already.
  EXPECT_EQ(s.targets[0].cpu_microseconds, 600'000 + 10'000 + 30'000);
  // The daemon ends, reaped by init: what it used until the last read stays.
  ASSERT_TRUE(fake_.Vanish(102).ok());
  EXPECT_EQ(Read(*reader).targets[0].cpu_microseconds, 640'000);
  // The root ends too (reaped outside the tree): the tree is gone.
  ASSERT_TRUE(fake_.Vanish(100).ok());
  EXPECT_TRUE(Read(*reader).targets.empty());
}

// issue 22, item 10: `kwatt meter -- CMD` is its command's subreaper; a background child orphaned
// before any read saw it is reparented to kwatt, and is the command's.
TEST_F(ActivityTest, ProcessesTheSubreaperAdoptedAreTheTreesEvenUnseenBefore) {
  AddProcess(1, 0, "init");
  AddProcess(50, 1, "kwatt", 900);
  AddProcess(100, 50, "sh", 10);
  auto reader = Open({.pids = {100}, .adopter_pid = 50});
  EXPECT_EQ(Read(*reader).targets[0].cpu_microseconds, 10'000);
  // Within a period: sh starts a subshell 101 that starts 102 in the background and exits; 102
  // is reparented to kwatt before any read saw either.
  AddProcess(102, 50, "daemon", 300);
  ActivitySnapshot s = Read(*reader);
  ASSERT_EQ(s.targets.size(), 1u);
  EXPECT_EQ(s.targets[0].cpu_microseconds, 10'000 + 300'000);  // kwatt's own 900 ms not counted
  ASSERT_TRUE(fake_.Run(102, 200 * kMs).ok());
  EXPECT_EQ(Read(*reader).targets[0].cpu_microseconds, 510'000);
}

// The processes' clocks of the fake, recording which pids were read, and with kwatt's own work in
// one process.
class RecordingClocks : public ProcessCpuClocks {
 public:
  explicit RecordingClocks(std::shared_ptr<ProcessCpuClocks> clocks) : clocks_(std::move(clocks)) {}
  int64_t Nanos(int64_t pid) override {
    asked.insert(pid);
    return clocks_->Nanos(pid);
  }
  int64_t OwnNanos(int64_t pid) override { return pid == own_pid ? own_nanos : 0; }
  std::set<int64_t> asked;
  int64_t own_pid = 0, own_nanos = 0;

 private:
  std::shared_ptr<ProcessCpuClocks> clocks_;
};

// A tree of 100 -> 101 -> 102 among 500 other processes, then 101 starts 103, 102 exits and is
// reaped, 103 starts 104: the tree's count at each read, and the pids the reader read.
void RunATreeAmongOthers(FakeProcfs& fake, ActivityReader& reader, RecordingClocks& clocks,
                         std::set<int64_t>* asked) {
  auto read = [&] {
    clocks.asked.clear();
    auto s = reader.Read();
    EXPECT_TRUE(s.ok());
    asked->insert(clocks.asked.begin(), clocks.asked.end());
    EXPECT_EQ(s->targets.size(), 1u);
    return s->targets.empty() ? -1 : s->targets[0].cpu_microseconds;
  };
  EXPECT_EQ(read(), 600'000);
  Process p;
  p.pid = 103;
  p.ppid = 101;
  p.comm = "late";
  p.start_ticks = 1103;
  p.user_nanos = 40 * kMs;
  ASSERT_TRUE(fake.Add(p).ok());
  ASSERT_TRUE(fake.Run(102, 7 * kMs).ok());
  ASSERT_TRUE(fake.Exit(102).ok());
  EXPECT_EQ(read(), 647'000);
  ASSERT_TRUE(fake.Reap(102).ok());
  p.pid = 104;
  p.ppid = 103;
  p.comm = "later";
  p.start_ticks = 1104;
  p.user_nanos = 50 * kMs;
  ASSERT_TRUE(fake.Add(p).ok());
  ASSERT_TRUE(fake.Run(500, 1000 * kMs).ok());  // not the tree's
  // 102's 307 ms show as 30 ticks in 101's cutime (see ATreeCountsItsDescendants...).
  EXPECT_EQ(read(), 647'000 - 7'000 + 50'000);
}

TEST_F(ActivityTest, ATreeIsReadThroughItsChildrenListsNotByScanningEveryProcess) {
  for (bool listed : {true, false}) {
    SCOPED_TRACE(listed ? "children listed" : "no children lists: every process scanned");
    ::kwatt::testing::TempDir temp("kwatt_activity", ::kwatt::testing::ShmBase());
    FakeProcfs fake(temp.root(), 4);
    fake.SetChildrenFiles(listed);
    ASSERT_TRUE(fake.SetMachineTicks(1000, 10, 200, 5000, 30, 4, 6, 2, 50).ok());
    Process p;
    for (auto [pid, ppid, ms] :
         {std::tuple{1, 0, 0}, {100, 1, 100}, {101, 100, 200}, {102, 101, 300}}) {
      p.pid = pid;
      p.ppid = ppid;
      p.start_ticks = 1000 + pid;
      p.user_nanos = ms * kMs;
      ASSERT_TRUE(fake.Add(p).ok());
    }
    for (int64_t pid = 200; pid < 700; ++pid) {
      p.pid = pid;
      p.ppid = 1;
      p.start_ticks = 1000 + pid;
      p.user_nanos = pid * kMs;
      ASSERT_TRUE(fake.Add(p).ok());
    }
    MeterEnvironment environment = fake.environment();
    environment.clock = clock_;
    auto clocks = std::make_shared<RecordingClocks>(fake.CpuClocks());
    environment.process_cpu = clocks;
    auto reader = ActivityReader::Open(environment, {.pids = {100}});
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    std::set<int64_t> asked;
    RunATreeAmongOthers(fake, **reader, *clocks, &asked);
    if (listed) {
      // The tree's members and nothing else (103 and 104 found in their parents' lists).
      EXPECT_EQ(asked, (std::set<int64_t>{100, 101, 102, 103, 104}));
    } else {
      EXPECT_TRUE(asked.count(500) && asked.count(1));
    }
  }
}

TEST_F(ActivityTest, KwattsOwnWorkInAMeasuredProcessIsNeverItsShare) {
  // A meter running inside process 100 (kwatt.measure): its threads' 30 ms, then 80 ms, are taken
  // off the process's time; what the process's other threads and its children use counts.
  AddProcess(1, 0, "init");
  AddProcess(100, 1, "python3", 500);
  AddProcess(101, 100, "child", 200);
  auto clocks = std::make_shared<RecordingClocks>(fake_.CpuClocks());
  clocks->own_pid = 100;
  clocks->own_nanos = 30 * kMs;
  environment_.process_cpu = clocks;
  auto reader = Open({.pids = {100}});
  EXPECT_EQ(Read(*reader).targets.at(0).cpu_microseconds, 670'000);
  ASSERT_TRUE(fake_.Run(100, 70 * kMs).ok());  // 50 ms of it the meter's
  clocks->own_nanos = 80 * kMs;
  ASSERT_TRUE(fake_.Run(101, 10 * kMs).ok());
  EXPECT_EQ(Read(*reader).targets.at(0).cpu_microseconds, 700'000);
  auto alone = Open({.pids = {100}, .trees = false});
  EXPECT_EQ(Read(*alone).targets.at(0).cpu_microseconds, 570'000 - 80'000);
}

TEST_F(ActivityTest, ATreeWhoseRootEndedLivesOnInItsDescendants) {
  AddProcess(1, 0, "init");
  AddProcess(100, 1, "launcher", 10);
  AddProcess(101, 100, "server", 20);
  auto reader = Open({.pids = {100}});
  EXPECT_EQ(Read(*reader).targets[0].cpu_microseconds, 30'000);
  ASSERT_TRUE(fake_.Vanish(100).ok());
  ASSERT_TRUE(fake_.Reparent(101, 1).ok());
  ASSERT_TRUE(fake_.Run(101, 5 * kMs).ok());
  ActivitySnapshot s = Read(*reader);
  ASSERT_EQ(s.targets.size(), 1u);
  EXPECT_EQ(s.targets[0].target.key, Key("tree", 100));
  EXPECT_EQ(s.targets[0].target.name, "launcher");
  EXPECT_EQ(s.targets[0].cpu_microseconds, 35'000);
}

TEST_F(ActivityTest, ChildAndGrandchildReapedInOneIntervalAreNotCountedTwice) {
  AddProcess(1, 0, "init");
  AddProcess(100, 1, "make", 100);
  AddProcess(101, 100, "sh", 20);
  AddProcess(102, 101, "cc", 300);
  auto reader = Open({.pids = {100}});
  EXPECT_EQ(Read(*reader).targets[0].cpu_microseconds, 420'000);
  ASSERT_TRUE(fake_.Run(102, 40 * kMs).ok());
  ASSERT_TRUE(fake_.Reap(102).ok());  // by sh
  ASSERT_TRUE(fake_.Run(101, 1 * kMs).ok());
  ASSERT_TRUE(fake_.Reap(101).ok());  // by make
  // 461 ms used; make's cutime shows 36 ticks of the 36.1 its children used.
  EXPECT_EQ(Read(*reader).targets[0].cpu_microseconds, 461'000 - 1'000);
}

TEST_F(ActivityTest, AChildLeftToTheKernelByItsParentKeepsWhatItUsed) {
  // The parent ignores SIGCHLD: the child is reaped by the kernel and its time goes nowhere.
  AddProcess(1, 0, "init");
  AddProcess(100, 1, "server", 100);
  AddProcess(101, 100, "handler", 300);
  auto reader = Open({.pids = {100}});
  Read(*reader);
  ASSERT_TRUE(fake_.Run(100, 2 * kMs).ok());
  ASSERT_TRUE(fake_.Vanish(101).ok());
  EXPECT_EQ(Read(*reader).targets[0].cpu_microseconds, 402'000);
}

TEST_F(ActivityTest, AllProcessesNeverCountAReapedChildTwice) {
  // Process targets: a parent's cutime grows by what its children used; the children were
  // targets of their own, so only their last moments are added to the parent.
  AddProcess(1, 0, "init");
  AddProcess(100, 1, "make", 100);
  AddProcess(101, 100, "cc", 300);
  auto reader = Open({.all_processes = true});
  ActivitySnapshot s = Read(*reader);
  EXPECT_EQ(Find(s, Key("pid", 100))->cpu_microseconds, 100'000);
  EXPECT_EQ(Find(s, Key("pid", 101))->cpu_microseconds, 300'000);
  ASSERT_TRUE(fake_.Run(101, 20 * kMs).ok());
  ASSERT_TRUE(fake_.Reap(101).ok());
  // A child that lived less than a period was never seen: its time is the parent's.
  AddProcess(102, 100, "short", 0);
  ASSERT_TRUE(fake_.Run(102, 30 * kMs).ok());
  ASSERT_TRUE(fake_.Reap(102).ok());
  s = Read(*reader);
  EXPECT_EQ(Find(s, Key("pid", 101)), nullptr);
  EXPECT_EQ(Find(s, Key("pid", 100))->cpu_microseconds, 100'000 + 20'000 + 30'000);
  // Selected alone, a process's reaped children are all its own.
  reader = Open({.pids = {100}, .trees = false});
  AddProcess(103, 100, "cc", 0);
  EXPECT_EQ(Read(*reader).targets[0].cpu_microseconds, 100'000 + 320'000 + 30'000);
  ASSERT_TRUE(fake_.Run(103, 40 * kMs).ok());
  ASSERT_TRUE(fake_.Reap(103).ok());
  EXPECT_EQ(Read(*reader).targets[0].cpu_microseconds, 100'000 + 320'000 + 30'000 + 40'000);
}

// Random process lives on a fake tree of 1,000 processes: forks, runs, exits reaped by their
// parents (children first, sometimes a child and its parent within one period). Every counter is
// monotonic, and what the targets' counters grew by adds up to the CPU time truly used, within
// the reapers' tick rounding: all processes (no second counting), and each tree.
TEST_F(ActivityTest, RandomLivesAddUpToTheTruthAndCountersNeverGoBack) {
  std::mt19937_64 random(5);
  AddProcess(1, 0, "init");
  int64_t next_pid = 2;
  std::vector<int64_t> roots;
  std::map<int64_t, int64_t> root_of;  // pid -> the tree root it descends from (0: none)
  std::map<int64_t, int> children;     // pid -> live children
  for (int i = 0; i < 1000; ++i) {
    int64_t parent = i < 20 ? 1 : 2 + int64_t(random() % (next_pid - 2));
    int64_t pid = next_pid++;
    AddProcess(pid, parent, "p" + std::to_string(pid), int64_t(random() % 500), 0, pid);
    ++children[parent];
    root_of[pid] = parent == 1 ? pid : root_of[parent];
    if (parent == 1 && roots.size() < 5) roots.push_back(pid);
  }
  TargetSelection all{.all_processes = true};
  TargetSelection trees{.pids = roots};
  auto all_reader = Open(all);
  auto tree_reader = Open(trees);
  std::map<std::string, int64_t> first, last;
  std::map<std::string, int64_t> tree_first, tree_last;
  auto observe = [&](ActivityReader& reader, std::map<std::string, int64_t>* first_seen,
                     std::map<std::string, int64_t>* last_seen, bool baseline) {
    ActivitySnapshot s = Read(reader);
    for (const TargetSample& t : s.targets) {
      auto it = last_seen->find(t.target.key);
      if (it != last_seen->end()) {
        ASSERT_GE(t.cpu_microseconds, it->second) << t.target.key;
      } else {
        (*first_seen)[t.target.key] = baseline ? t.cpu_microseconds : 0;
      }
      (*last_seen)[t.target.key] = t.cpu_microseconds;
    }
  };
  observe(*all_reader, &first, &last, true);
  observe(*tree_reader, &tree_first, &tree_last, true);
  int64_t used = 0, reaps = 0;
  std::map<int64_t, int64_t> used_by_tree;
  for (int period = 0; period < 30; ++period) {
    for (int op = 0; op < 100; ++op) {
      const auto& procs = fake_.processes();
      auto it = std::next(procs.begin(), 1 + random() % (procs.size() - 1));
      int64_t pid = it->first;
      int choice = int(random() % 10);
      if (choice < 6) {
        int64_t nanos = int64_t(random() % 30'000'000);
        ASSERT_TRUE(fake_.Run(pid, nanos, nanos / 3).ok());
        used += nanos + nanos / 3;
        used_by_tree[root_of[pid]] += nanos + nanos / 3;
      } else if (choice < 8) {
        int64_t child = next_pid++;
        AddProcess(child, pid, "c", 0, 0, 100000 + child);
        ++children[pid];
        root_of[child] = root_of[pid];
        int64_t nanos = int64_t(random() % 10'000'000);
        ASSERT_TRUE(fake_.Run(child, nanos).ok());
        used += nanos;
        used_by_tree[root_of[pid]] += nanos;
      } else {
        // A leaf whose parent is not init exits and is reaped; sometimes its parent follows.
        int64_t parent = it->second.ppid;
        if (children[pid] > 0 || parent == 1) continue;
        ASSERT_TRUE(fake_.Reap(pid).ok());
        --children[parent];
        ++reaps;
        int64_t grandparent = fake_.Find(parent)->ppid;
        if (choice == 9 && children[parent] == 0 && grandparent != 1) {
          ASSERT_TRUE(fake_.Reap(parent).ok());
          --children[grandparent];
          ++reaps;
        }
      }
    }
    observe(*all_reader, &first, &last, false);
    observe(*tree_reader, &tree_first, &tree_last, false);
  }
  int64_t counted = 0;
  for (auto& [key, value] : last) counted += value - first[key];
  // Each reap may hide up to two ticks in the reaper's rounding; nothing more.
  int64_t slack = 2 * TickMicros() * reaps;
  EXPECT_LE(std::abs(counted - used / 1000), slack + 1000)
      << "counted " << counted << " used " << used / 1000 << " reaps " << reaps;
  for (int64_t root : roots) {
    std::string key = "tree:" + std::to_string(root) + ":" + std::to_string(root);
    ASSERT_TRUE(tree_last.count(key)) << key;
    int64_t grown = tree_last[key] - tree_first[key];
    EXPECT_LE(std::abs(grown - used_by_tree[root] / 1000), slack + 1000) << key;
    EXPECT_GT(grown, 0);
  }
}

TEST_F(ActivityTest, CgroupsBySelectionAndDepthHierarchicalVanishingAndMadeAgain) {
  ASSERT_TRUE(fake_.AddCgroup("/system.slice", 9'000).ok());
  ASSERT_TRUE(fake_.AddCgroup("/system.slice/nginx.service", 5'000).ok());
  ASSERT_TRUE(fake_.AddCgroup("/system.slice/nginx.service/worker", 1'000).ok());
  ASSERT_TRUE(fake_.AddCgroup("/user.slice", 7'000).ok());
  TargetSelection selection;
  selection.cgroups = {"/system.slice/nginx.service/", "/system.slice/nginx.service/worker"};
  selection.cgroup_depth = 2;
  auto reader = Open(selection);
  ActivitySnapshot s = Read(*reader);
  std::vector<std::string> keys;
  for (auto& t : s.targets) keys.push_back(t.target.key);
  EXPECT_EQ(keys, (std::vector<std::string>{
                      "cgroup:/system.slice", "cgroup:/system.slice/nginx.service",
                      "cgroup:/system.slice/nginx.service/worker", "cgroup:/user.slice"}));
  const TargetSample* nginx = Find(s, "cgroup:/system.slice/nginx.service");
  EXPECT_EQ(nginx->target.kind, TargetKind::kCgroup);
  EXPECT_EQ(nginx->target.name, "/system.slice/nginx.service");
  EXPECT_EQ(nginx->target.pid, 0);
  EXPECT_EQ(nginx->cpu_microseconds, 5'000);
  // A new cgroup appears; one goes away; one is made again between two reads (a service
  // restarted): its count goes on from where it was.
  ASSERT_TRUE(fake_.AddCgroup("/machine.slice", 3).ok());
  ASSERT_TRUE(fake_.RemoveCgroup("/user.slice").ok());
  ASSERT_TRUE(fake_.SetCgroupUsage("/system.slice/nginx.service", 6'000).ok());
  s = Read(*reader);
  EXPECT_NE(Find(s, "cgroup:/machine.slice"), nullptr);
  EXPECT_EQ(Find(s, "cgroup:/user.slice"), nullptr);
  EXPECT_EQ(Find(s, "cgroup:/system.slice/nginx.service")->cpu_microseconds, 6'000);
  ASSERT_TRUE(fake_.RemoveCgroup("/system.slice/nginx.service").ok());
  ASSERT_TRUE(fake_.AddCgroup("/system.slice/nginx.service", 250).ok());
  s = Read(*reader);
  EXPECT_EQ(Find(s, "cgroup:/system.slice/nginx.service")->cpu_microseconds, 6'250);
  // Gone at a read: when it comes back it is a new target under the same key, from its creation.
  ASSERT_TRUE(fake_.RemoveCgroup("/system.slice/nginx.service").ok());
  s = Read(*reader);
  EXPECT_EQ(Find(s, "cgroup:/system.slice/nginx.service"), nullptr);
  EXPECT_EQ(Find(s, "cgroup:/system.slice/nginx.service/worker"), nullptr);
  ASSERT_TRUE(fake_.AddCgroup("/system.slice/nginx.service", 40).ok());
  s = Read(*reader);
  EXPECT_EQ(Find(s, "cgroup:/system.slice/nginx.service")->cpu_microseconds, 40);
  ASSERT_TRUE(fake_.AddCgroup("/user.slice", 10).ok());
  EXPECT_EQ(Find(Read(*reader), "cgroup:/user.slice")->cpu_microseconds, 10);
}

TEST_F(ActivityTest, TheCgroupRootComesFromMountsWhenNotGiven) {
  environment_.cgroup_root.clear();
  std::ofstream(fake_.procfs() / "mounts")
      << "proc /proc proc rw 0 0\ncgroup2 " << fake_.cgroups().string() << " cgroup2 rw 0 0\n";
  ASSERT_TRUE(fake_.AddCgroup("/a", 42).ok());
  auto reader = Open({.cgroups = {"/a"}});
  EXPECT_EQ(Read(*reader).targets[0].cpu_microseconds, 42);
  std::ofstream(fake_.procfs() / "mounts") << "proc /proc proc rw 0 0\n";
  EXPECT_EQ(ActivityReader::Open(environment_, {.cgroup_depth = 1}).status().code(),
            Status::Code::kNotFound);
}

TEST_F(ActivityTest, ProcessesTreesAndCgroupsTogetherSortedByKey) {
  AddProcess(1, 0, "init");
  AddProcess(100, 1, "a");
  AddProcess(99, 100, "b");
  ASSERT_TRUE(fake_.AddCgroup("/z", 1).ok());
  auto reader = Open({.pids = {100}, .cgroups = {"/z"}, .all_processes = true});
  std::vector<std::string> keys;
  for (auto& t : Read(*reader).targets) keys.push_back(t.target.key);
  // Sorted as text: "pid:100:..." before "pid:1:...".
  EXPECT_EQ(keys, (std::vector<std::string>{"cgroup:/z", Key("pid", 100), Key("pid", 1),
                                            Key("pid", 99), Key("tree", 100)}));
}

TEST_F(ActivityTest, HardwareCountersScaledForMultiplexing) {
  AddProcess(1, 0, "init");
  Process p;
  p.pid = 100;
  p.comm = "app";
  p.start_ticks = 1100;
  p.thread_ids = {100, 105};
  ASSERT_TRUE(fake_.Add(p).ok());
  auto reader = Open({.pids = {100}, .trees = false, .hardware_counters = true});
  // The probe on kwatt's own process was closed; one counter per thread and event, inherited.
  ASSERT_EQ(perf_->OpenCount(), 4);
  for (auto& c : perf_->counters) {
    if (!c.open) continue;
    EXPECT_TRUE(c.spec.inherit);
    EXPECT_EQ(c.spec.type, uint32_t(PERF_TYPE_HARDWARE));
    EXPECT_EQ(c.spec.cpu, -1);
    EXPECT_TRUE(c.spec.pid == 100 || c.spec.pid == 105);
  }
  // On the PMU all the time: counts as they are.
  perf_->Advance(100, "", 1000, 100, 100);
  perf_->Advance(105, "", 500, 100, 100);
  ActivitySnapshot s = Read(*reader);
  EXPECT_EQ(s.targets[0].cycles, 1500);
  EXPECT_EQ(s.targets[0].instructions, 3000);
  // Multiplexed: on the PMU a quarter of the time, so counts x 4.
  perf_->Advance(100, "", 1000, 400, 100);
  s = Read(*reader);
  EXPECT_EQ(s.targets[0].cycles, 1500 + 4000);
  EXPECT_EQ(s.targets[0].instructions, 3000 + 8000);
  // Never on the PMU in a period: nothing known yet; the next period scales both.
  perf_->Advance(100, "", 0, 400, 0);
  EXPECT_EQ(Read(*reader).targets[0].cycles, 5500);
  perf_->Advance(100, "", 300, 200, 200);  // 600 enabled since it last ran, 200 running
  EXPECT_EQ(Read(*reader).targets[0].cycles, 5500 + 900);
  // The process ends: its counters are closed.
  ASSERT_TRUE(fake_.Vanish(100).ok());
  EXPECT_TRUE(Read(*reader).targets.empty());
  EXPECT_EQ(perf_->OpenCount(), 0);
}

TEST_F(ActivityTest, HardwareCountersOfNewProcessesTreesAndCgroupsOnEveryCpu) {
  AddProcess(1, 0, "init");
  AddProcess(100, 1, "root");
  AddProcess(101, 100, "child");
  ASSERT_TRUE(fake_.AddCgroup("/job", 10).ok());
  auto reader =
      Open({.pids = {100}, .cgroups = {"/job"}, .commands = {"worker"}, .hardware_counters = true});
  // The tree: its root and its child, 2 events each; no worker yet.
  EXPECT_EQ(perf_->OpenCount(), 4);
  ActivitySnapshot s = Read(*reader);
  // The cgroup: 2 events on each of the 4 CPUs, opened at its first read.
  EXPECT_EQ(perf_->OpenCount(), 4 + 8);
  int cgroup_cpus = 0;
  for (auto& c : perf_->counters) {
    if (!c.open || c.spec.cgroup.empty()) continue;
    EXPECT_EQ(c.spec.cgroup, fake_.cgroups().string() + "/job");
    EXPECT_GE(c.spec.cpu, 0);
    ++cgroup_cpus;
  }
  EXPECT_EQ(cgroup_cpus, 8);
  perf_->Advance(100, "", 10, 1, 1);
  perf_->Advance(101, "", 20, 1, 1);
  perf_->Advance(0, "/job", 7, 2, 1);  // on each CPU, multiplexed: 14 each
  AddProcess(102, 1, "worker");
  s = Read(*reader);
  EXPECT_EQ(Find(s, Key("tree", 100))->cycles, 30);
  EXPECT_EQ(Find(s, Key("tree", 100))->instructions, 60);
  EXPECT_EQ(Find(s, "cgroup:/job")->cycles, 4 * 14);
  EXPECT_EQ(Find(s, Key("pid", 102))->cycles, 0);  // opened now
  EXPECT_EQ(perf_->OpenCount(), 4 + 8 + 2);
  perf_->Advance(102, "", 5, 1, 1);
  EXPECT_EQ(Find(Read(*reader), Key("pid", 102))->cycles, 5);
  ASSERT_TRUE(fake_.RemoveCgroup("/job").ok());
  ASSERT_TRUE(fake_.Vanish(102).ok());
  Read(*reader);
  EXPECT_EQ(perf_->OpenCount(), 4);
  reader.reset();
  EXPECT_EQ(perf_->OpenCount(), 0);
}

TEST_F(ActivityTest, HardwareCountersRefusedFailOpenWithThePerfEventsReason) {
  AddProcess(100, 1, "x");
  perf_->refusal = Status::PermissionDenied(
      "perf_event_open of cycles was refused: kernel.perf_event_paranoid is 2; give CAP_PERFMON");
  auto reader = ActivityReader::Open(environment_, {.pids = {100}, .hardware_counters = true});
  EXPECT_EQ(reader.status().code(), Status::Code::kPermissionDenied);
  EXPECT_NE(reader.status().message().find("CAP_PERFMON"), std::string::npos);
  perf_->refusal = Status::NotFound("perf_event_open of cycles is not available on this machine");
  reader = ActivityReader::Open(environment_, {.cgroup_depth = 1, .hardware_counters = true});
  EXPECT_EQ(reader.status().code(), Status::Code::kNotFound);
  EXPECT_EQ(perf_->OpenCount(), 0);
  // Without hardware counters nothing is asked of perf.
  EXPECT_TRUE(ActivityReader::Open(environment_, {.pids = {100}}).ok());
}

}  // namespace
}  // namespace kwatt::meter::activity_test
