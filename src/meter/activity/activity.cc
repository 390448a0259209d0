// The activity reader (include/kwatt/meter/activity/activity.h, doc/meter/attribution.md "Activity
// and targets").
//
// One Read: the machine's stat, then the processes, then the cgroups, then the hardware counters.
// The processes are one scan of procfs when commands or every process are selected (or the kernel
// does not list children, CONFIG_PROC_CHILDREN); otherwise the selected ones alone, and each
// tree's members and their children as PID/task/TID/children lists them: the cost of a tree is
// its size, not the machine's. Between reads the reader keeps
// a table of the processes it saw (sorted by pid), so that each process is matched with itself
// by (pid, start time) and what it used since is known exactly.
//
// Every target's counter is kept monotonic and never counts a CPU second twice:
// - a process's own time is its CPU-time clock (clock_gettime(2): every thread's, nanoseconds,
//   a thread running on another CPU up to its last scheduler tick) when procfs is the kernel's,
//   never below stat's. On a fake tree or when the clock cannot be read: the larger of stat's
//   utime + stime (exact run time, truncated to 10 ms ticks) and schedstat's run time
//   (nanoseconds, its leader thread only): both are lower bounds of the truth and monotonic, so
//   their maximum is too, and it is exact for a process that has only ever had one thread;
// - a process's children time (cutime + cstime) grows when it reaps a child: by the child's whole
//   total. When that child was counted already (a member of the same tree, or a process target
//   itself), the part counted (its last own + children time) is taken off the reaper's growth, so
//   only what it used since the last read is added. A child reaped by a process outside the
//   target keeps what was counted and loses only its last moments.
// Counters are accumulated from these increments and reported as their running maximum, so that
// a kernel's rounding (the reaper's ticks against the child's nanoseconds) never shows as time
// going back.
//
// What is shown, the machine's busy and total times too, never grows faster than the online CPUs
// can run: by at most the time since the last read times the CPUs. The kernel counts a thread
// running on another CPU only up to its last scheduler tick (1 to 10 ms, CONFIG_HZ), and stat's
// ticks are 10 ms: a short interval would show a tick's worth more than it can have used (a 1 ms
// interval, 5 ms: 5 CPUs), the next one less. The excess is carried to the next reads, so nothing
// is lost and the counter catches up as soon as the target's true rate leaves room.
#include "kwatt/meter/activity/activity.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "src/meter/activity/activity_procfs.h"

namespace kwatt::meter {

namespace {

using procfs::FileError;
using procfs::ProcessStat;

constexpr size_t kMaxCommLength = 64;  // the kernel prints at most 64 bytes of a name

// A process is (pid, start time in ticks after boot): a reused pid is another process.
struct Identity {
  int64_t pid = 0;
  int64_t start = 0;
  bool operator==(const Identity& other) const = default;
  bool operator<(const Identity& other) const {
    return pid != other.pid ? pid < other.pid : start < other.start;
  }
};

// One process as last read, and what the reader keeps about it from read to read.
struct ProcessEntry {
  int64_t pid = 0;
  int64_t ppid = 0;
  int64_t start = 0;
  int64_t own_us = 0;       // its threads' CPU time (a high-water mark)
  int64_t children_us = 0;  // cutime + cstime (a high-water mark)
  int64_t threads = 0;
  // As a kProcess target: the accumulated counter (may dip by a rounding) and its running max.
  int64_t raw_us = 0;
  int64_t reported_us = 0;
  int64_t shown_us = 0;        // reported_us, paced (see the top of this file)
  int32_t previous = -1;       // during a Read: its index in the previous table, -1 when new
  int32_t live_ancestor = -1;  // for a vanished entry of the previous table, during a Read
  bool is_target = false;      // a kProcess target (sticky: until it ends)
  bool alive = false;          // previous table, during a Read: still there now
  char state = '?';
  uint8_t comm_length = 0;
  char comm[kMaxCommLength] = {};

  Identity identity() const { return {pid, start}; }
  int64_t total_us() const { return own_us + children_us; }
  std::string_view name() const { return std::string_view(comm, comm_length); }
};

std::string ProcessKey(const char* prefix, Identity identity) {
  std::string key = prefix;
  key += std::to_string(identity.pid);
  key += ':';
  key += std::to_string(identity.start);
  return key;
}

// perf counters of one target: cycles and instructions, each possibly on several tasks or CPUs.
// A count is scaled for multiplexing over the span since the counter last ran: the count's
// increase times the increase of time_enabled over that of time_running. An interval in which
// it never ran adds nothing and is scaled with the next one in which it runs.
struct Counter {
  int handle = -1;
  PerfCount base;      // the read the next increase is counted from
  int64_t scaled = 0;  // counted so far, scaled
};

struct CounterSet {
  std::vector<Counter> cycles;
  std::vector<Counter> instructions;
  bool opened = false;
  bool failed = false;  // could not be opened or read: the target's counts are -1
  int64_t cycles_total = -1;
  int64_t instructions_total = -1;
};

int64_t ScaledIncrease(const PerfCount& base, const PerfCount& now) {
  uint64_t value = now.value - base.value;
  uint64_t enabled = now.time_enabled - base.time_enabled;
  uint64_t running = now.time_running - base.time_running;
  if (running == 0 || enabled <= running) return int64_t(value);
  unsigned __int128 scaled = (unsigned __int128)value * enabled / running;
  return scaled > (unsigned __int128)INT64_MAX ? INT64_MAX : int64_t(scaled);
}

class Counters {
 public:
  explicit Counters(std::shared_ptr<PerfEvents> perf) : perf_(std::move(perf)) {}

  // Opens cycles and instructions for each spec given (their type and config are set here).
  Status Open(std::vector<PerfEventSpec> specs, CounterSet* set) {
    set->opened = true;
    for (PerfEventSpec& spec : specs) {
      std::string what = spec.name;
      for (int event = 0; event < 2; ++event) {
        spec.type = PERF_TYPE_HARDWARE;
        spec.config = event == 0 ? PERF_COUNT_HW_CPU_CYCLES : PERF_COUNT_HW_INSTRUCTIONS;
        spec.name = (event == 0 ? "cycles of " : "instructions of ") + what;
        Result<int> handle = perf_->Open(spec);
        if (!handle.ok()) {
          Close(set);
          set->failed = true;
          return handle.status();
        }
        (event == 0 ? set->cycles : set->instructions).push_back(Counter{*handle});
      }
    }
    return Status::OK();
  }

  void Read(CounterSet* set) {
    if (!set->opened || set->failed) return;
    int64_t totals[2] = {0, 0};
    for (int event = 0; event < 2; ++event) {
      for (Counter& counter : event == 0 ? set->cycles : set->instructions) {
        Result<PerfCount> count = perf_->Read(counter.handle);
        if (!count.ok()) {
          set->failed = true;
          break;
        }
        if (count->value < counter.base.value || count->time_enabled < counter.base.time_enabled ||
            count->time_running < counter.base.time_running) {
          counter.base = *count;  // a counter never goes back; if one does, count from here
        } else if (count->time_running > counter.base.time_running) {
          counter.scaled += ScaledIncrease(counter.base, *count);
          counter.base = *count;
        }
        totals[event] += counter.scaled;
      }
    }
    if (set->failed) {
      Close(set);
      set->failed = true;
      set->cycles_total = set->instructions_total = -1;
      return;
    }
    set->cycles_total = totals[0];
    set->instructions_total = totals[1];
  }

  void Close(CounterSet* set) {
    for (auto* list : {&set->cycles, &set->instructions}) {
      for (Counter& counter : *list) perf_->Close(counter.handle);
      list->clear();
    }
  }

 private:
  std::shared_ptr<PerfEvents> perf_;
};

struct TreeTarget {
  Identity root;
  std::string key;
  std::string name;               // the root's command name, as last seen
  std::vector<Identity> members;  // sorted; the root and every descendant seen, until they end
  bool started = false;
  int64_t raw_us = 0;
  int64_t reported_us = 0;
  int64_t shown_us = 0;
  CounterSet counters;
};

struct CgroupTarget {
  std::string key;
  uint64_t inode = 0;          // the incarnation counted now
  int64_t earlier_us = 0;      // what earlier incarnations of the path used
  int64_t last_usage_us = -1;  // usage_usec of the current incarnation at the last read
  int64_t reported_us = 0;
  int64_t shown_us = 0;
  bool selected = false;     // by path (else found by depth)
  bool present = false;      // in this read
  bool was_present = false;  // in the previous read
  CounterSet counters;
};

// A reused buffer and the relative path "PID/stat" built without allocation.
struct PathBuffer {
  char text[64];
  const char* Make(std::string_view pid, const char* file) {
    size_t n = std::min(pid.size(), size_t(40));
    std::memcpy(text, pid.data(), n);
    text[n] = '/';
    std::strcpy(text + n + 1, file);
    return text;
  }
};

class ActivityReaderImpl : public ActivityReader {
 public:
  ActivityReaderImpl(const MeterEnvironment& environment, const TargetSelection& selection)
      : environment_(environment), selection_(selection), counters_(environment.perf) {}

  ~ActivityReaderImpl() override {
    for (auto& [identity, set] : process_counters_) counters_.Close(&set);
    for (TreeTarget& tree : trees_) counters_.Close(&tree.counters);
    for (auto& [path, cgroup] : cgroups_) counters_.Close(&cgroup.counters);
    if (procfs_fd_ >= 0) ::close(procfs_fd_);
    if (cgroup_fd_ >= 0) ::close(cgroup_fd_);
  }

  Status Init();
  Result<ActivitySnapshot> Read() override;
  Result<ActivitySnapshot> ReadAt(int64_t monotonic_nanos, UnixNanos wall) override;

 private:
  Status ReadMachine(ActivitySnapshot* snapshot);
  // Reads PID/stat (and schedstat) into `entry`.
  enum class ProcessRead { kRead, kGone, kUnreadable };
  ProcessRead ReadProcess(std::string_view pid_text, ProcessEntry* entry);
  // Adds the process to current_: as read, or, when it could not be read but did not end (out of
  // file descriptors, a damaged file), as it was at the last read, so that it neither ends nor
  // starts again.
  void AddProcess(std::string_view pid_text);
  // Takes kwatt's own work in the process (a meter measuring the process it runs in) off its time.
  void ExcludeOwnWork(ProcessEntry* entry) const {
    int64_t own = process_cpu_->OwnNanos(entry->pid) / 1000;
    if (own > 0) entry->own_us = std::max<int64_t>(entry->own_us - own, 0);
  }
  Status ScanProcesses();
  // Without a scan: the selected processes, the trees' members and their children, sorted by pid.
  // A child the kernel's list missed (one changing while it is read) is found at the next read,
  // with all it used since it started; one that ended meanwhile is in its reaper's children time.
  void ReadFollowedProcesses();
  // Appends the children of `pid` (every thread's) to `out`; false when they cannot be listed.
  bool ListChildren(int64_t pid, int64_t threads, std::vector<int64_t>* out);
  bool InSomeTree(Identity identity) const;
  const ProcessEntry* FindCurrent(Identity identity) const;
  int32_t FindPrevious(int64_t pid) const;
  int32_t FindCurrentIndex(int64_t pid) const;
  void MatchWithPrevious();
  void FindLiveAncestors();
  void UpdateProcessTargets();
  void UpdateTrees();
  // by_parent_ from current_, and the range of a pid's children in it.
  void IndexChildren();
  std::pair<std::vector<int32_t>::const_iterator, std::vector<int32_t>::const_iterator> Children(
      int64_t pid) const;
  void UpdateCgroups();
  void EnumerateCgroups(const std::string& path, int depth, std::vector<std::string>* out);
  std::vector<PerfEventSpec> ProcessSpecs(int64_t pid, std::string_view name);
  std::vector<PerfEventSpec> CgroupSpecs(const std::string& path);
  // Init's steps: the selected pids (as processes or trees) and command names, checked; the
  // selected cgroups, checked and opened; the hardware counters of the trees and processes.
  Status SelectProcesses();
  Status SelectCgroups();
  Status OpenSelectedCounters();
  Status ProbeCounters();
  void AddSamples(ActivitySnapshot* snapshot);
  // How much of `ancestor`'s growth of children time (cur index) is time counted already: what
  // the vanished entries in `sum_all` (every one whose nearest live ancestor it is) or, failing
  // that, `sum_direct` (its own children among them) had used at the last read.
  int64_t AlreadyCounted(int32_t ancestor, int64_t sum_all, int64_t sum_direct) const;

  MeterEnvironment environment_;
  TargetSelection selection_;
  Counters counters_;
  std::shared_ptr<ProcessCpuClocks> process_cpu_;   // null: stat and schedstat alone
  int64_t last_read_nanos_ = -1;                    // the last snapshot's monotonic_nanos
  int64_t busy_shown_us_ = 0, total_shown_us_ = 0;  // the machine's times, paced
  int64_t ticks_per_second_ = procfs::ClockTicksPerSecond();
  int procfs_fd_ = -1;
  int cgroup_fd_ = -1;
  std::string cgroup_root_;
  bool scan_ = false;  // every process is read (commands, all processes; trees without children)
  std::vector<Identity> selected_processes_;  // pids selected as kProcess targets
  std::vector<ProcessEntry> previous_, current_;
  std::vector<TreeTarget> trees_;
  std::map<std::string, CgroupTarget> cgroups_;      // by path
  std::map<Identity, CounterSet> process_counters_;  // of kProcess targets
  std::vector<int> online_cpus_;
  std::string stat_buffer_;
  std::string children_buffer_;
  // ReadFollowedProcesses's and ListChildren's work lists (kept: no allocation once grown).
  std::vector<int64_t> followed_, found_children_, thread_ids_;
  std::unordered_set<int64_t> expanded_;
  std::vector<int32_t> by_parent_;  // current_ indices ordered by ppid
};

Status ActivityReaderImpl::Init() {
  procfs_fd_ = ::open(environment_.procfs_root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (procfs_fd_ < 0) {
    return FileError(errno, "procfs (" + environment_.procfs_root + ")")
        .WithContext("activity cannot be read");
  }
  process_cpu_ = environment_.process_cpu ? environment_.process_cpu
                                          : SystemProcessCpuClocks(environment_.procfs_root);
  ActivitySnapshot probe;
  KWATT_RETURN_IF_ERROR(ReadMachine(&probe));

  KWATT_RETURN_IF_ERROR(SelectProcesses());
  scan_ = !selection_.commands.empty() || selection_.all_processes;
  if (!scan_ && !trees_.empty()) {
    // Children listed by the kernel (a kernel without CONFIG_PROC_CHILDREN, or a fake tree
    // without the files: every process is scanned instead).
    std::vector<int64_t> children;
    scan_ = !ListChildren(trees_.front().root.pid, 1, &children);
  }
  KWATT_RETURN_IF_ERROR(SelectCgroups());
  if (selection_.hardware_counters) KWATT_RETURN_IF_ERROR(OpenSelectedCounters());
  return Status::OK();
}

Status ActivityReaderImpl::SelectProcesses() {
  for (int64_t pid : selection_.pids) {
    if (pid <= 0) {
      return Status::InvalidArgument("pid " + std::to_string(pid) +
                                     " is not a process id: give a positive pid");
    }
    std::string text = std::to_string(pid);
    ProcessEntry entry;
    if (ReadProcess(text, &entry) != ProcessRead::kRead) {
      return Status::NotFound("process " + text + " does not exist (no readable " +
                              environment_.procfs_root + "/" + text + "/stat)");
    }
    // A thread's id reads like a process there: refuse it, naming its process.
    std::string status;
    if (procfs::ReadWholeFile(procfs_fd_, (text + "/status").c_str(), &status) == 0) {
      size_t at = status.find("\nTgid:");
      int64_t tgid = 0;
      if (at != std::string::npos) {
        const char* begin = status.data() + at + 6;
        while (*begin == ' ' || *begin == '\t') ++begin;
        std::from_chars(begin, status.data() + status.size(), tgid);
      }
      if (tgid > 0 && tgid != pid) {
        return Status::InvalidArgument(text + " is a thread of process " + std::to_string(tgid) +
                                       ": select the process, " + std::to_string(tgid));
      }
    }
    if (selection_.trees) {
      bool known = std::any_of(trees_.begin(), trees_.end(),
                               [&](const TreeTarget& t) { return t.root == entry.identity(); });
      if (!known) {
        TreeTarget tree;
        tree.root = entry.identity();
        tree.key = ProcessKey("tree:", tree.root);
        tree.name = std::string(entry.name());
        tree.members.push_back(tree.root);
        trees_.push_back(std::move(tree));
      }
    } else if (std::find(selected_processes_.begin(), selected_processes_.end(),
                         entry.identity()) == selected_processes_.end()) {
      selected_processes_.push_back(entry.identity());
    }
  }
  for (const std::string& command : selection_.commands) {
    if (command.empty()) {
      return Status::InvalidArgument("an empty command name was selected: give a process name");
    }
    if (command.size() > procfs::kMaxUserCommandLength) {
      return Status::InvalidArgument(
          "command name '" + command + "' is longer than the " +
          std::to_string(procfs::kMaxUserCommandLength) +
          " characters Linux keeps of a process's name (TASK_COMM_LEN), so no process can match "
          "it: select '" +
          command.substr(0, procfs::kMaxUserCommandLength) +
          "', the name ps and /proc/PID/comm show");
    }
  }
  return Status::OK();
}

Status ActivityReaderImpl::SelectCgroups() {
  if (selection_.cgroup_depth < 0) {
    return Status::InvalidArgument("cgroup depth " + std::to_string(selection_.cgroup_depth) +
                                   " is negative: give 0 (none) or more");
  }
  if (!selection_.cgroups.empty() || selection_.cgroup_depth > 0) {
    KWATT_ASSIGN_OR_RETURN(cgroup_root_, CgroupRoot(environment_));
    cgroup_fd_ = ::open(cgroup_root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cgroup_fd_ < 0) return FileError(errno, "the cgroup v2 tree " + cgroup_root_);
    for (std::string path : selection_.cgroups) {
      while (path.size() > 1 && path.back() == '/') path.pop_back();
      bool bad = path.empty() || path[0] != '/' || path.find('\0') != std::string::npos ||
                 path.find("//") != std::string::npos;
      for (size_t at = 0; !bad && at != std::string::npos; at = path.find('/', at + 1)) {
        std::string_view part =
            std::string_view(path).substr(at + 1, path.find('/', at + 1) - at - 1);
        bad = part == "." || part == "..";
      }
      if (bad) {
        return Status::InvalidArgument("cgroup '" + path +
                                       "' is not a path below the cgroup root: give one such as "
                                       "/system.slice/nginx.service");
      }
      std::string file = path == "/" ? "cpu.stat" : path.substr(1) + "/cpu.stat";
      char buffer[4096];
      ssize_t n = procfs::ReadSmallFile(cgroup_fd_, file.c_str(), buffer, sizeof buffer);
      if (n < 0) {
        return FileError(int(-n), "cgroup " + path + " (" + cgroup_root_ + path + "/cpu.stat)");
      }
      int64_t usage = 0;
      if (!procfs::ParseCgroupUsage(std::string_view(buffer, size_t(n)), &usage)) {
        return Status::NotFound(cgroup_root_ + path +
                                "/cpu.stat has no usage_usec: is it a cgroup v2 directory?");
      }
      CgroupTarget& target = cgroups_[path];
      target.key = "cgroup:" + path;
      target.selected = true;
    }
  }
  return Status::OK();
}

Status ActivityReaderImpl::OpenSelectedCounters() {
  KWATT_RETURN_IF_ERROR(ProbeCounters());
  // The counters of the trees and selected processes count from now: a tree's on every
  // process it has now, with `inherit`, so that what they start later is counted too.
  if (!trees_.empty()) {
    KWATT_RETURN_IF_ERROR(ScanProcesses());
    IndexChildren();
  }
  for (TreeTarget& tree : trees_) {
    std::vector<int32_t> members;
    if (const ProcessEntry* root = FindCurrent(tree.root)) {
      members.push_back(int32_t(root - current_.data()));
    }
    std::vector<PerfEventSpec> specs;
    for (size_t i = 0; i < members.size(); ++i) {
      const ProcessEntry& member = current_[members[i]];
      for (PerfEventSpec& spec : ProcessSpecs(member.pid, member.name())) {
        specs.push_back(std::move(spec));
      }
      auto [first, last] = Children(member.pid);
      members.insert(members.end(), first, last);
    }
    if (specs.empty()) continue;  // it ended already: the tree will be absent
    KWATT_RETURN_IF_ERROR(counters_.Open(std::move(specs), &tree.counters));
  }
  current_.clear();
  for (Identity identity : selected_processes_) {
    CounterSet& set = process_counters_[identity];
    KWATT_RETURN_IF_ERROR(counters_.Open(ProcessSpecs(identity.pid, ""), &set));
  }
  return Status::OK();
}

Status ActivityReaderImpl::ProbeCounters() {
  // Whether the kernel allows the counters at all, before anything runs: on this process for
  // processes, on the cgroup root for cgroups.
  std::vector<PerfEventSpec> specs;
  bool processes =
      !selection_.pids.empty() || !selection_.commands.empty() || selection_.all_processes;
  if (processes || cgroup_fd_ < 0) {
    for (PerfEventSpec spec : ProcessSpecs(::getpid(), "kwatt")) specs.push_back(spec);
  }
  if (cgroup_fd_ >= 0) {
    std::vector<PerfEventSpec> cgroup = CgroupSpecs("/");
    if (!cgroup.empty()) specs.push_back(cgroup.front());
  }
  for (PerfEventSpec& spec : specs) spec.name = "a probe: " + spec.name;
  CounterSet probe;
  Status status = counters_.Open(specs, &probe);
  counters_.Close(&probe);
  return status;
}

std::vector<PerfEventSpec> ActivityReaderImpl::ProcessSpecs(int64_t pid, std::string_view name) {
  // Every thread the process has now (perf counts a task; `inherit` adds the threads and children
  // it creates later).
  std::vector<int64_t> tasks;
  std::string task_dir = environment_.procfs_root + "/" + std::to_string(pid) + "/task";
  if (DIR* dir = ::opendir(task_dir.c_str())) {
    while (dirent* entry = ::readdir(dir)) {
      int64_t tid = 0;
      auto [end, error] =
          std::from_chars(entry->d_name, entry->d_name + std::strlen(entry->d_name), tid);
      if (error == std::errc() && *end == '\0' && tid > 0) tasks.push_back(tid);
    }
    ::closedir(dir);
  }
  if (std::find(tasks.begin(), tasks.end(), pid) == tasks.end()) tasks.push_back(pid);
  std::sort(tasks.begin(), tasks.end());
  std::vector<PerfEventSpec> specs;
  for (int64_t tid : tasks) {
    PerfEventSpec spec;
    spec.pid = int(tid);
    spec.cpu = -1;
    spec.inherit = true;
    spec.name = "process " + std::to_string(pid);
    if (!name.empty()) spec.name += " (" + std::string(name) + ")";
    if (tid != pid) spec.name += ", thread " + std::to_string(tid);
    specs.push_back(std::move(spec));
  }
  return specs;
}

std::vector<PerfEventSpec> ActivityReaderImpl::CgroupSpecs(const std::string& path) {
  std::vector<PerfEventSpec> specs;
  for (int cpu : online_cpus_) {
    PerfEventSpec spec;
    spec.cgroup = path == "/" ? cgroup_root_ : cgroup_root_ + path;
    spec.cpu = cpu;
    spec.name = "cgroup " + path + " on CPU " + std::to_string(cpu);
    specs.push_back(std::move(spec));
  }
  return specs;
}

Status ActivityReaderImpl::ReadMachine(ActivitySnapshot* snapshot) {
  int error = procfs::ReadWholeFile(procfs_fd_, "stat", &stat_buffer_);
  if (error != 0) return FileError(-error, environment_.procfs_root + "/stat");
  procfs::MachineStat machine;
  Status parsed = procfs::ParseMachineStat(stat_buffer_, &machine);
  if (!parsed.ok()) return parsed.WithContext(environment_.procfs_root + "/stat");
  snapshot->busy_microseconds = procfs::TicksToMicros(machine.busy_ticks, ticks_per_second_);
  snapshot->total_microseconds = procfs::TicksToMicros(machine.total_ticks, ticks_per_second_);
  char buffer[4096];
  std::string online = environment_.sysfs_root + "/devices/system/cpu/online";
  ssize_t n = procfs::ReadSmallFile(AT_FDCWD, online.c_str(), buffer, sizeof buffer);
  Result<std::vector<int>> cpus = Status::NotFound("");
  if (n > 0) cpus = procfs::ParseCpuList(std::string_view(buffer, size_t(n)));
  if (cpus.ok()) {
    online_cpus_ = std::move(*cpus);
  } else {
    online_cpus_.clear();
    for (int cpu = 0; cpu < machine.cpu_lines; ++cpu) online_cpus_.push_back(cpu);
  }
  // stat has a cpuN line per online CPU, the CPUs its busy and total times are summed over: the
  // count of the kernel the activity is read from, where the sysfs list may be another tree's (a
  // simulated RAPL machine's). The list serves the counters opened on each CPU.
  snapshot->cpus = machine.cpu_lines > 0 ? machine.cpu_lines : int(online_cpus_.size());
  return Status::OK();
}

ActivityReaderImpl::ProcessRead ActivityReaderImpl::ReadProcess(std::string_view pid_text,
                                                                ProcessEntry* entry) {
  char buffer[4096];
  PathBuffer path;
  ssize_t n = procfs::ReadSmallFile(procfs_fd_, path.Make(pid_text, "stat"), buffer, sizeof buffer);
  if (n == 0 || n == -ENOENT || n == -ESRCH) return ProcessRead::kGone;
  if (n < 0) return ProcessRead::kUnreadable;
  ProcessStat stat;
  if (!procfs::ParseProcessStat(std::string_view(buffer, size_t(n)), &stat).ok()) {
    return ProcessRead::kUnreadable;
  }
  entry->pid = stat.pid;
  entry->ppid = stat.ppid;
  entry->start = stat.starttime;
  entry->state = stat.state;
  entry->threads = stat.num_threads;
  entry->comm_length = uint8_t(std::min(stat.comm.size(), kMaxCommLength));
  std::memcpy(entry->comm, stat.comm.data(), entry->comm_length);
  entry->own_us = procfs::TicksToMicros(stat.utime + stat.stime, ticks_per_second_);
  entry->children_us = procfs::TicksToMicros(stat.cutime + stat.cstime, ticks_per_second_);
  // The process's CPU-time clock is exact; without it, the leader's nanoseconds refine the ticks
  // (see the top of this file).
  if (process_cpu_) {
    int64_t nanos = process_cpu_->Nanos(stat.pid);
    if (nanos >= 0) {
      entry->own_us = std::max(entry->own_us, nanos / 1000);
      ExcludeOwnWork(entry);
      return ProcessRead::kRead;
    }
  }
  n = procfs::ReadSmallFile(procfs_fd_, path.Make(pid_text, "schedstat"), buffer, sizeof buffer);
  int64_t run_nanos = 0;
  if (n > 0 && procfs::ParseSchedstat(std::string_view(buffer, size_t(n)), &run_nanos)) {
    entry->own_us = std::max(entry->own_us, run_nanos / 1000);
  }
  if (process_cpu_) ExcludeOwnWork(entry);
  return ProcessRead::kRead;
}

void ActivityReaderImpl::AddProcess(std::string_view pid_text) {
  current_.emplace_back();
  switch (ReadProcess(pid_text, &current_.back())) {
    case ProcessRead::kRead:
      return;
    case ProcessRead::kGone:
      current_.pop_back();
      return;
    case ProcessRead::kUnreadable: {
      int64_t pid = 0;
      std::from_chars(pid_text.data(), pid_text.data() + pid_text.size(), pid);
      int32_t before = FindPrevious(pid);
      if (before >= 0) {
        current_.back() = previous_[before];
      } else {
        current_.pop_back();
      }
      return;
    }
  }
}

Status ActivityReaderImpl::ScanProcesses() {
  current_.clear();
  int fd = ::openat(procfs_fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* dir = fd >= 0 ? ::fdopendir(fd) : nullptr;
  if (dir == nullptr) {
    int error = errno;
    if (fd >= 0) ::close(fd);
    return procfs::FileError(error, "the process list of " + environment_.procfs_root);
  }
  while (dirent* item = ::readdir(dir)) {
    const char* name = item->d_name;
    if (name[0] < '1' || name[0] > '9') continue;
    size_t length = std::strlen(name);
    if (length > 20 ||
        std::any_of(name, name + length, [](char c) { return c < '0' || c > '9'; })) {
      continue;
    }
    AddProcess(std::string_view(name, length));
  }
  ::closedir(dir);
  // procfs lists pids in ascending order; another tree may not.
  if (!std::is_sorted(current_.begin(), current_.end(),
                      [](const ProcessEntry& a, const ProcessEntry& b) { return a.pid < b.pid; })) {
    std::sort(current_.begin(), current_.end(),
              [](const ProcessEntry& a, const ProcessEntry& b) { return a.pid < b.pid; });
  }
  return Status::OK();
}

bool ActivityReaderImpl::ListChildren(int64_t pid, int64_t threads, std::vector<int64_t>* out) {
  // Each thread's children are its own file: a single-threaded process's is its leader's; a
  // process of several threads has each listed under task/.
  std::string pid_text = std::to_string(pid);
  thread_ids_.clear();
  if (threads <= 1) {
    thread_ids_.push_back(pid);
  } else {
    int fd = ::openat(procfs_fd_, (pid_text + "/task").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR* dir = fd >= 0 ? ::fdopendir(fd) : nullptr;
    if (dir == nullptr) {
      if (fd >= 0) ::close(fd);
      return false;
    }
    while (dirent* item = ::readdir(dir)) {
      int64_t tid = 0;
      const char* name = item->d_name;
      auto [end, error] = std::from_chars(name, name + std::strlen(name), tid);
      if (error == std::errc() && *end == '\0' && tid > 0) thread_ids_.push_back(tid);
    }
    ::closedir(dir);
  }
  bool listed = false;
  for (int64_t tid : thread_ids_) {
    std::string file = pid_text + "/task/" + std::to_string(tid) + "/children";
    if (procfs::ReadWholeFile(procfs_fd_, file.c_str(), &children_buffer_) != 0) continue;
    listed = true;
    const char* at = children_buffer_.data();
    const char* end = at + children_buffer_.size();
    while (at < end) {
      int64_t child = 0;
      auto [next, error] = std::from_chars(at, end, child);
      if (error != std::errc()) {
        ++at;
        continue;
      }
      if (child > 0) out->push_back(child);
      at = next;
    }
  }
  return listed;
}

bool ActivityReaderImpl::InSomeTree(Identity identity) const {
  return std::any_of(trees_.begin(), trees_.end(), [&](const TreeTarget& tree) {
    return std::binary_search(tree.members.begin(), tree.members.end(), identity);
  });
}

void ActivityReaderImpl::ReadFollowedProcesses() {
  current_.clear();
  // Processes followed alone (selected, not trees): read, their children not looked at.
  std::vector<int64_t>& alone = followed_;
  alone.clear();
  for (const ProcessEntry& entry : previous_) {
    if (!InSomeTree(entry.identity())) alone.push_back(entry.pid);
  }
  for (Identity identity : selected_processes_) alone.push_back(identity.pid);
  std::sort(alone.begin(), alone.end());
  alone.erase(std::unique(alone.begin(), alone.end()), alone.end());
  for (int64_t pid : alone) AddProcess(std::to_string(pid));
  // The trees: their roots and members, what the subreaper adopted, then the children of each
  // process read, until none is new. A pid is read once.
  std::vector<int64_t>& pending = found_children_;
  pending.clear();
  for (const TreeTarget& tree : trees_) {
    pending.push_back(tree.root.pid);
    for (Identity member : tree.members) pending.push_back(member.pid);
  }
  if (selection_.adopter_pid > 0) ListChildren(selection_.adopter_pid, 2, &pending);
  expanded_.clear();
  for (size_t i = 0; i < pending.size(); ++i) {
    int64_t pid = pending[i];
    if (std::binary_search(alone.begin(), alone.end(), pid) || !expanded_.insert(pid).second) {
      continue;
    }
    size_t before = current_.size();
    AddProcess(std::to_string(pid));
    if (current_.size() == before) continue;  // gone
    ListChildren(pid, current_.back().threads, &pending);
  }
  std::sort(current_.begin(), current_.end(),
            [](const ProcessEntry& a, const ProcessEntry& b) { return a.pid < b.pid; });
}

int32_t ActivityReaderImpl::FindPrevious(int64_t pid) const {
  auto it = std::lower_bound(previous_.begin(), previous_.end(), pid,
                             [](const ProcessEntry& e, int64_t p) { return e.pid < p; });
  return it != previous_.end() && it->pid == pid ? int32_t(it - previous_.begin()) : -1;
}

int32_t ActivityReaderImpl::FindCurrentIndex(int64_t pid) const {
  auto it = std::lower_bound(current_.begin(), current_.end(), pid,
                             [](const ProcessEntry& e, int64_t p) { return e.pid < p; });
  return it != current_.end() && it->pid == pid ? int32_t(it - current_.begin()) : -1;
}

const ProcessEntry* ActivityReaderImpl::FindCurrent(Identity identity) const {
  int32_t at = FindCurrentIndex(identity.pid);
  return at >= 0 && current_[at].start == identity.start ? &current_[at] : nullptr;
}

void ActivityReaderImpl::MatchWithPrevious() {
  // Both tables are sorted by pid: one merge.
  size_t p = 0;
  for (ProcessEntry& entry : previous_) {
    entry.alive = false;
    entry.live_ancestor = -1;
  }
  for (size_t c = 0; c < current_.size(); ++c) {
    ProcessEntry& now = current_[c];
    while (p < previous_.size() && previous_[p].pid < now.pid) ++p;
    now.previous = -1;
    if (p < previous_.size() && previous_[p].pid == now.pid && previous_[p].start == now.start) {
      ProcessEntry& before = previous_[p];
      before.alive = true;
      before.live_ancestor = int32_t(c);
      now.previous = int32_t(p);
      now.own_us = std::max(now.own_us, before.own_us);
      now.children_us = std::max(now.children_us, before.children_us);
      now.is_target = before.is_target;
      now.raw_us = before.raw_us;
      now.reported_us = before.reported_us;
      now.shown_us = before.shown_us;
    }
  }
}

void ActivityReaderImpl::FindLiveAncestors() {
  // For each process that vanished: the nearest ancestor still alive (by the parents it had at
  // the last read), which reaped it or will reap what it left. MatchWithPrevious set
  // live_ancestor to the current index of every live entry; here the vanished ones get theirs.
  constexpr int32_t kUnresolved = -1, kVisiting = -2, kNone = -3;
  std::vector<int32_t> chain;
  for (size_t i = 0; i < previous_.size(); ++i) {
    if (previous_[i].alive || previous_[i].live_ancestor != kUnresolved) continue;
    chain.clear();
    int32_t at = int32_t(i);
    int32_t result = kNone;
    while (true) {
      ProcessEntry& entry = previous_[at];
      if (entry.alive || entry.live_ancestor >= 0 || entry.live_ancestor == kNone) {
        result = entry.live_ancestor;  // a live one, or a vanished one already resolved
        break;
      }
      if (entry.live_ancestor == kVisiting) break;  // a cycle: cannot happen in a kernel's tree
      entry.live_ancestor = kVisiting;
      chain.push_back(at);
      int32_t parent = entry.ppid > 0 ? FindPrevious(entry.ppid) : -1;
      if (parent < 0) break;
      at = parent;
    }
    for (int32_t link : chain) previous_[link].live_ancestor = result;
  }
  for (ProcessEntry& entry : previous_) {
    if (entry.live_ancestor < 0) entry.live_ancestor = -1;
  }
}

int64_t ActivityReaderImpl::AlreadyCounted(int32_t ancestor, int64_t sum_all,
                                           int64_t sum_direct) const {
  const ProcessEntry& now = current_[ancestor];
  int64_t grown = now.children_us - previous_[now.previous].children_us;
  // The reaper's cutime and cstime are each truncated to a tick: its growth may show up to two
  // ticks less than the child's exact total.
  int64_t tolerance = 2 * procfs::TicksToMicros(1, ticks_per_second_);
  if (grown + tolerance >= sum_all) return sum_all;
  if (grown + tolerance >= sum_direct) return sum_direct;
  return 0;  // not reaped by it (it ignores SIGCHLD, or they were reparented): nothing to undo
}

void ActivityReaderImpl::UpdateProcessTargets() {
  // Vanished process targets, summed per nearest live ancestor that is a target too; their
  // counters closed.
  std::unordered_map<int32_t, std::pair<int64_t, int64_t>> reaped;  // ancestor -> (all, direct)
  for (const ProcessEntry& gone : previous_) {
    if (gone.alive || !gone.is_target) continue;
    auto counters = process_counters_.find(gone.identity());
    if (counters != process_counters_.end()) {
      counters_.Close(&counters->second);
      process_counters_.erase(counters);
    }
    if (gone.live_ancestor < 0) continue;
    const ProcessEntry& ancestor = current_[gone.live_ancestor];
    if (!ancestor.is_target || ancestor.previous < 0) continue;
    auto& sums = reaped[gone.live_ancestor];
    sums.first += gone.total_us();
    if (gone.ppid == ancestor.pid) sums.second += gone.total_us();
  }
  for (size_t c = 0; c < current_.size(); ++c) {
    ProcessEntry& entry = current_[c];
    if (!entry.is_target) {
      bool selected = selection_.all_processes ||
                      std::find(selected_processes_.begin(), selected_processes_.end(),
                                entry.identity()) != selected_processes_.end();
      for (size_t i = 0; !selected && i < selection_.commands.size(); ++i) {
        selected = selection_.commands[i] == entry.name();
      }
      if (!selected) continue;
      entry.is_target = true;
      // Counted from its start when it is new since the last read (or this is the first), else
      // from the last read (it took a selected name since): a consumer may take all of a new
      // target's count as used in the interval.
      entry.raw_us = entry.reported_us =
          entry.previous < 0 ? entry.total_us()
                             : entry.total_us() - previous_[entry.previous].total_us();
      if (selection_.hardware_counters) {
        CounterSet& set = process_counters_[entry.identity()];
        if (!set.opened && !counters_.Open(ProcessSpecs(entry.pid, entry.name()), &set).ok()) {
          set.failed = true;  // it ended meanwhile, or no file descriptor is left: -1
        }
      }
      continue;
    }
    const ProcessEntry& before = previous_[entry.previous];  // is_target came from it
    int64_t increase = entry.total_us() - before.total_us();
    auto it = reaped.find(int32_t(c));
    if (it != reaped.end()) {
      increase -= AlreadyCounted(int32_t(c), it->second.first, it->second.second);
    }
    entry.raw_us += increase;
    entry.reported_us = std::max(entry.reported_us, entry.raw_us);
  }
}

void ActivityReaderImpl::IndexChildren() {
  by_parent_.resize(current_.size());
  for (size_t i = 0; i < current_.size(); ++i) by_parent_[i] = int32_t(i);
  std::sort(by_parent_.begin(), by_parent_.end(), [&](int32_t a, int32_t b) {
    return current_[a].ppid != current_[b].ppid ? current_[a].ppid < current_[b].ppid : a < b;
  });
}

std::pair<std::vector<int32_t>::const_iterator, std::vector<int32_t>::const_iterator>
ActivityReaderImpl::Children(int64_t pid) const {
  auto first = std::partition_point(by_parent_.begin(), by_parent_.end(),
                                    [&](int32_t at) { return current_[at].ppid < pid; });
  auto last = std::partition_point(first, by_parent_.cend(),
                                   [&](int32_t at) { return current_[at].ppid == pid; });
  return {first, last};
}

void ActivityReaderImpl::UpdateTrees() {
  if (trees_.empty()) return;
  IndexChildren();
  std::vector<int32_t> live;  // current indices of the live members
  std::vector<Identity> kept;
  std::unordered_map<int32_t, std::pair<int64_t, int64_t>> reaped;
  for (TreeTarget& tree : trees_) {
    live.clear();
    kept.clear();
    reaped.clear();
    int64_t increase = 0;
    // Members still alive, and the vanished ones by their nearest live ancestor.
    for (Identity member : tree.members) {
      int32_t at = FindCurrentIndex(member.pid);
      if (at >= 0 && current_[at].start == member.start) {
        live.push_back(at);
        kept.push_back(member);
        continue;
      }
      if (!tree.started) continue;  // gone before the first read
      int32_t gone_at = FindPrevious(member.pid);
      if (gone_at < 0 || previous_[gone_at].start != member.start) continue;
      const ProcessEntry& gone = previous_[gone_at];
      if (gone.live_ancestor < 0) continue;
      const ProcessEntry& ancestor = current_[gone.live_ancestor];
      if (!std::binary_search(tree.members.begin(), tree.members.end(), ancestor.identity())) {
        continue;  // reaped outside the tree: what was counted stays, its last moments are lost
      }
      auto& sums = reaped[gone.live_ancestor];
      sums.first += gone.total_us();
      if (gone.ppid == ancestor.pid) sums.second += gone.total_us();
    }
    // The live members' increases, less what was counted already of what they reaped.
    for (int32_t at : live) {
      const ProcessEntry& now = current_[at];
      if (!tree.started) {
        increase += now.total_us();
        continue;
      }
      if (now.previous < 0) continue;  // missed by the last scan (unreadable then): from now on
      increase += now.total_us() - previous_[now.previous].total_us();
      auto it = reaped.find(at);
      if (it != reaped.end()) increase -= AlreadyCounted(at, it->second.first, it->second.second);
    }
    // The processes the subreaper adopted are the first tree's, with what they used since they
    // were born (they were not members: no read saw them; those seen are members already).
    if (selection_.adopter_pid > 0 && &tree == &trees_.front()) {
      auto [first, last] = Children(selection_.adopter_pid);
      for (auto it = first; it != last; ++it) {
        const ProcessEntry& child = current_[*it];
        if (std::binary_search(tree.members.begin(), tree.members.end(), child.identity())) {
          continue;
        }
        kept.push_back(child.identity());
        live.push_back(*it);
        increase += child.total_us();
      }
    }
    // New descendants of live members: all they used counts (they were born since the last read).
    for (size_t i = 0; i < live.size(); ++i) {
      auto [first, last] = Children(current_[live[i]].pid);
      for (auto it = first; it != last; ++it) {
        const ProcessEntry& child = current_[*it];
        if (child.start < current_[live[i]].start) continue;  // a pid's older namesake: not ours
        // Each child has one parent, listed once in `live`: it is met once.
        if (std::binary_search(tree.members.begin(), tree.members.end(), child.identity())) {
          continue;
        }
        kept.push_back(child.identity());
        live.push_back(*it);
        increase += child.total_us();
      }
    }
    std::sort(kept.begin(), kept.end());
    kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
    tree.members.swap(kept);
    if (const ProcessEntry* root = FindCurrent(tree.root)) tree.name = std::string(root->name());
    if (!tree.started) {
      tree.started = true;
      tree.raw_us = tree.reported_us = increase;
    } else {
      tree.raw_us += increase;
      tree.reported_us = std::max(tree.reported_us, tree.raw_us);
    }
    if (tree.members.empty()) counters_.Close(&tree.counters);
  }
}

void ActivityReaderImpl::EnumerateCgroups(const std::string& path, int depth,
                                          std::vector<std::string>* out) {
  if (depth <= 0) return;
  int fd = ::openat(cgroup_fd_, path == "/" ? "." : path.c_str() + 1,
                    O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    ::close(fd);
    return;
  }
  size_t first = out->size();
  while (dirent* item = ::readdir(dir)) {
    if (item->d_name[0] == '.') continue;
    bool directory = item->d_type == DT_DIR;
    if (item->d_type == DT_UNKNOWN) {
      struct stat info;
      directory =
          ::fstatat(fd, item->d_name, &info, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(info.st_mode);
    }
    if (directory) out->push_back((path == "/" ? "/" : path + "/") + item->d_name);
  }
  ::closedir(dir);
  size_t last = out->size();
  for (size_t i = first; i < last; ++i) EnumerateCgroups(std::string((*out)[i]), depth - 1, out);
}

void ActivityReaderImpl::UpdateCgroups() {
  if (cgroup_fd_ < 0) return;
  std::vector<std::string> found;
  EnumerateCgroups("/", selection_.cgroup_depth, &found);
  for (auto& [path, target] : cgroups_) {
    target.was_present = target.present;
    target.present = false;
  }
  for (const std::string& path : found) {
    CgroupTarget& target = cgroups_[path];
    if (target.key.empty()) target.key = "cgroup:" + path;
    target.present = true;  // listed: read below
  }
  char buffer[4096];
  std::string file;
  for (auto& [path, target] : cgroups_) {
    bool listed = target.present || target.selected;
    target.present = false;
    struct stat info;
    const char* relative = path == "/" ? "." : path.c_str() + 1;
    if (listed && ::fstatat(cgroup_fd_, relative, &info, 0) == 0 && S_ISDIR(info.st_mode)) {
      file = path == "/" ? "cpu.stat" : path.substr(1) + "/cpu.stat";
      ssize_t n = procfs::ReadSmallFile(cgroup_fd_, file.c_str(), buffer, sizeof buffer);
      int64_t usage = 0;
      if (n > 0 && procfs::ParseCgroupUsage(std::string_view(buffer, size_t(n)), &usage)) {
        target.present = true;
        uint64_t inode = uint64_t(info.st_ino);
        if (target.last_usage_us >= 0 && !target.was_present) {
          // Back after a read that saw it gone: a new target under the same key, counted from its
          // creation.
          target.earlier_us = target.reported_us = target.shown_us = 0;
        } else if (target.last_usage_us >= 0 &&
                   (inode != target.inode || usage < target.last_usage_us)) {
          // Removed and made again between two reads (a service restarted): the path's count goes
          // on from where it was.
          target.earlier_us = target.reported_us;
          counters_.Close(&target.counters);
          target.counters = CounterSet();
        }
        target.inode = inode;
        target.last_usage_us = usage;
        target.reported_us = std::max(target.reported_us, target.earlier_us + usage);
        if (selection_.hardware_counters && !target.counters.opened &&
            !counters_.Open(CgroupSpecs(path), &target.counters).ok()) {
          target.counters.failed = true;
        }
      }
    }
    if (!target.present && target.counters.opened) {  // gone: its counters too
      counters_.Close(&target.counters);
      target.counters = CounterSet();
    }
  }
}

void ActivityReaderImpl::AddSamples(ActivitySnapshot* snapshot) {
  // The most CPU time a target can have used since the last read (unbounded on the first read,
  // whose counts are since each target's start).
  const int64_t room = last_read_nanos_ < 0
                           ? INT64_MAX
                           : std::max<int64_t>(snapshot->monotonic_nanos - last_read_nanos_, 0) /
                                 1000 * std::max(snapshot->cpus, 1);
  last_read_nanos_ = snapshot->monotonic_nanos;
  auto paced = [room](int64_t* shown, int64_t reported) {
    if (reported > *shown) *shown = reported - *shown > room ? *shown + room : reported;
    return *shown;
  };
  // The machine's times are ticks per CPU: a short interval may show one more on each.
  snapshot->busy_microseconds = paced(&busy_shown_us_, snapshot->busy_microseconds);
  snapshot->total_microseconds = paced(&total_shown_us_, snapshot->total_microseconds);
  auto counted = [&](CounterSet* set, TargetSample* sample) {
    if (!selection_.hardware_counters) return;
    counters_.Read(set);
    sample->cycles = set->failed ? -1 : set->cycles_total;
    sample->instructions = set->failed ? -1 : set->instructions_total;
  };
  for (ProcessEntry& entry : current_) {
    if (!entry.is_target) continue;
    TargetSample sample;
    sample.target.kind = TargetKind::kProcess;
    sample.target.key = ProcessKey("pid:", entry.identity());
    sample.target.name = std::string(entry.name());
    sample.target.pid = entry.pid;
    sample.cpu_microseconds = paced(&entry.shown_us, entry.reported_us);
    if (selection_.hardware_counters) counted(&process_counters_[entry.identity()], &sample);
    snapshot->targets.push_back(std::move(sample));
  }
  for (TreeTarget& tree : trees_) {
    if (tree.members.empty()) continue;
    TargetSample sample;
    sample.target.kind = TargetKind::kProcessTree;
    sample.target.key = tree.key;
    sample.target.name = tree.name;
    sample.target.pid = tree.root.pid;
    sample.cpu_microseconds = paced(&tree.shown_us, tree.reported_us);
    counted(&tree.counters, &sample);
    snapshot->targets.push_back(std::move(sample));
  }
  for (auto& [path, target] : cgroups_) {
    if (!target.present) continue;
    TargetSample sample;
    sample.target.kind = TargetKind::kCgroup;
    sample.target.key = target.key;
    sample.target.name = path;
    sample.cpu_microseconds = paced(&target.shown_us, target.reported_us);
    counted(&target.counters, &sample);
    snapshot->targets.push_back(std::move(sample));
  }
  std::sort(
      snapshot->targets.begin(), snapshot->targets.end(),
      [](const TargetSample& a, const TargetSample& b) { return a.target.key < b.target.key; });
}

Result<ActivitySnapshot> ActivityReaderImpl::Read() {
  const int64_t monotonic = environment_.clock->MonotonicNanos();
  return ReadAt(monotonic, environment_.clock->WallNanos());
}

Result<ActivitySnapshot> ActivityReaderImpl::ReadAt(int64_t monotonic_nanos, UnixNanos wall) {
  ActivitySnapshot snapshot;
  snapshot.monotonic_nanos = monotonic_nanos;
  snapshot.wall = wall;
  KWATT_RETURN_IF_ERROR(ReadMachine(&snapshot));
  if (scan_) {
    KWATT_RETURN_IF_ERROR(ScanProcesses());
  } else {
    ReadFollowedProcesses();
  }
  MatchWithPrevious();
  FindLiveAncestors();
  UpdateProcessTargets();
  UpdateTrees();
  UpdateCgroups();
  AddSamples(&snapshot);
  if (!scan_) {
    // Without a scan, only the selected processes and the trees' members are followed.
    std::erase_if(current_,
                  [&](const ProcessEntry& e) { return !e.is_target && !InSomeTree(e.identity()); });
  }
  previous_.swap(current_);
  return snapshot;
}

}  // namespace

Result<std::unique_ptr<ActivityReader>> ActivityReader::Open(const MeterEnvironment& environment,
                                                             const TargetSelection& selection) {
  auto reader = std::make_unique<ActivityReaderImpl>(environment, selection);
  KWATT_RETURN_IF_ERROR(reader->Init());
  return std::unique_ptr<ActivityReader>(std::move(reader));
}

const char* TargetKindName(TargetKind kind) {
  switch (kind) {
    case TargetKind::kProcess:
      return "process";
    case TargetKind::kProcessTree:
      return "tree";
    case TargetKind::kCgroup:
      return "cgroup";
  }
  return "process";
}

}  // namespace kwatt::meter
