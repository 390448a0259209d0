// A fake machine for the activity reader's tests and benchmark (internal): a procfs tree
// (PID/stat, PID/schedstat, PID/status, PID/task/TID, PID/task/PID/children, stat), a sysfs tree
// (the online CPUs) and a cgroup v2 tree (directories with cpu.stat), under one directory, written
// as the kernel writes them.
//
// Each process's CPU time is kept in nanoseconds (the truth) and written as the kernel does:
// clock ticks truncated in stat, nanoseconds of the leader thread in schedstat; a reap moves the
// child's whole total into its parent's cutime/cstime, as wait(2) does. Every file is replaced by
// rename(2), so a reader never sees half a file.
//
// Thread safety: a FakeProcfs belongs to one thread; readers may read its files meanwhile.
#ifndef KWATT_SRC_TESTING_FAKE_PROCFS_H_
#define KWATT_SRC_TESTING_FAKE_PROCFS_H_

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/meter/environment/environment.h"

namespace kwatt::meter::testing {

class FakeProcfs {
 public:
  struct Process {
    int64_t pid = 0;
    int64_t ppid = 1;
    std::string comm = "sleep";  // any bytes: spaces, parentheses, newlines are written as is
    char state = 'S';
    int64_t start_ticks = 0;  // starttime: clock ticks after boot
    // The truth, in nanoseconds: the process's threads (live and exited), and its reaped
    // children's totals.
    int64_t user_nanos = 0;
    int64_t system_nanos = 0;
    int64_t children_user_nanos = 0;
    int64_t children_system_nanos = 0;
    // Its threads' ids (task/TID); empty: the process alone.
    std::vector<int64_t> thread_ids;
    // schedstat's run time (the leader thread's alone): -1 for user + system (one thread);
    // -2 to write no schedstat file at all (a kernel without it).
    int64_t leader_nanos = -1;
  };

  // Lays out an empty machine of `cpus` CPUs under `root` (made if missing): ROOT/proc,
  // ROOT/sys, ROOT/cgroup.
  explicit FakeProcfs(std::filesystem::path root, int cpus = 4);

  // procfs_root, sysfs_root and cgroup_root set to the fake trees; the clock and perf left as
  // the defaults (tests replace them).
  MeterEnvironment environment() const;
  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path procfs() const { return root_ / "proc"; }
  std::filesystem::path cgroups() const { return root_ / "cgroup"; }

  // Processes. Errors only from the file system.
  Status Add(const Process& process);
  // The process as kept (null when unknown). After changing it, Write(pid).
  Process* Find(int64_t pid);
  Status Write(int64_t pid);
  // Adds CPU time to a process and writes it.
  Status Run(int64_t pid, int64_t user_nanos, int64_t system_nanos = 0);
  // The process exits: a zombie (state Z) that still shows its times.
  Status Exit(int64_t pid);
  // Its parent waits for it: its totals (its own and its children's) go to the parent's children
  // times, and its directory goes away.
  Status Reap(int64_t pid);
  // It goes away without adding to anyone (autoreaped, or reaped by a process not in the tree).
  Status Vanish(int64_t pid);
  // Its parent exited: it now has `new_ppid` for parent.
  Status Reparent(int64_t pid, int64_t new_ppid);
  const std::map<int64_t, Process>& processes() const { return processes_; }
  // Whether PID/task/PID/children lists each process's children (a kernel with
  // CONFIG_PROC_CHILDREN; all of them under the leader thread): true by default. Set before
  // adding processes.
  void SetChildrenFiles(bool written) { children_files_ = written; }
  // The processes' CPU-time clocks as the kernel's would read them: the truth, user + system
  // nanoseconds (-1 for a pid it does not have, or a zombie's: the kernel's clock of an exited
  // process cannot be read). For MeterEnvironment::process_cpu; it reads this fake as it is then.
  std::shared_ptr<ProcessCpuClocks> CpuClocks() const;

  // The machine's stat: ticks summed over CPUs. `busy` is split into user and system, `idle`
  // into idle and iowait; guest counts (already inside user) are written too.
  Status SetMachineTicks(int64_t user, int64_t nice, int64_t system, int64_t idle, int64_t iowait,
                         int64_t irq, int64_t softirq, int64_t steal, int64_t guest = 0);
  // Writes sys/devices/system/cpu/online as `text` ("" removes it: the cpuN lines of stat count).
  Status SetOnlineText(const std::string& text);

  // cgroups: `path` below the root ("/system.slice/a.service"), parents made as needed.
  Status AddCgroup(const std::string& path, int64_t usage_microseconds = 0);
  Status SetCgroupUsage(const std::string& path, int64_t usage_microseconds);
  // Removes the cgroup's directory (and its descendants').
  Status RemoveCgroup(const std::string& path);

  // Clock ticks per second written in stat (the machine's own, as the reader assumes).
  static int64_t TicksPerSecond();

 private:
  Status WriteFile(const std::filesystem::path& path, const std::string& text);
  Status WriteMachine();
  Status WriteChildren(int64_t pid);

  std::filesystem::path root_;
  int cpus_;
  bool children_files_ = true;
  std::map<int64_t, Process> processes_;
  std::map<int64_t, std::set<int64_t>> children_;  // by parent
  int64_t machine_[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
};

}  // namespace kwatt::meter::testing

#endif  // KWATT_SRC_TESTING_FAKE_PROCFS_H_
