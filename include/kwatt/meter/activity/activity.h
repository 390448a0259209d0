// What the software on the machine did: CPU time per process, process tree or cgroup v2, and
// hardware counters (cycles, instructions) where the kernel allows them; the machine's busy and
// total CPU time. The meter shares measured energy among targets by it (attribution.h).
//
// Sources (doc/meter/attribution.md):
// - processes: procfs PID/stat (utime, stime, cutime, cstime; the command name may hold spaces
//   and parentheses: it is what lies between the first '(' and the last ')'), PID/schedstat for
//   nanosecond run times where the kernel has it; a process is known by (pid, start time), so a
//   reused pid is a new target;
// - process trees: a process and its descendants; what reaped children used is kept (the
//   parent's cutime/cstime), what a descendant used between the last read and its exit is lost
//   unless its parent reaps it (said in doc/meter/attribution.md); a cgroup is exact where a tree
//   cannot be;
// - cgroups v2: cpu.stat's usage_usec, hierarchical (what exited tasks used stays counted);
// - hardware counters: perf_event_open per process (inherit) or per cgroup and CPU, multiplexing
//   scaled by time_enabled / time_running;
// - the machine: procfs stat's first line (busy: user, nice, system, irq, softirq, steal; total:
//   those plus idle and iowait) and the online CPUs.
//
// Thread safety: an ActivityReader is used by one thread at a time.
#ifndef KWATT_METER_ACTIVITY_ACTIVITY_H_
#define KWATT_METER_ACTIVITY_ACTIVITY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/core/time.h"
#include "kwatt/meter/environment/environment.h"

namespace kwatt::meter {

enum class TargetKind {
  kProcess,      // one process (its threads, and the children it reaped)
  kProcessTree,  // a process and every descendant it has
  kCgroup,       // a cgroup v2 and its descendant cgroups
};

// "process", "tree", "cgroup".
const char* TargetKindName(TargetKind kind);

// What a share of energy is given to.
struct Target {
  TargetKind kind = TargetKind::kProcess;
  // Unique over the meter's life: "pid:1234:987654" (pid and start time in clock ticks since
  // boot, so that a reused pid is another target), "tree:1234:987654" (a process tree by its
  // root), "cgroup:/system.slice/nginx.service".
  std::string key;
  // What reports show: the command name ("python3", "my (odd) name") or the cgroup path.
  std::string name;
  int64_t pid = 0;  // the process, or the tree's root; 0 for a cgroup
};

// A target's activity, counted from an origin that stays fixed while the target lives.
struct TargetSample {
  Target target;
  int64_t cpu_microseconds = 0;  // CPU time (user + system), descendants' included for trees
  // Hardware counters, scaled for multiplexing; -1 when not read.
  int64_t cycles = -1;
  int64_t instructions = -1;
};

// One read of everything.
struct ActivitySnapshot {
  int64_t monotonic_nanos = 0;        // when it was read (Clock::MonotonicNanos)
  UnixNanos wall = 0;                 // the same instant on the wall clock
  int cpus = 0;                       // online CPUs
  int64_t busy_microseconds = 0;      // CPU time not idle, summed over CPUs, since boot
  int64_t total_microseconds = 0;     // CPU time idle included, summed over CPUs, since boot
  std::vector<TargetSample> targets;  // the targets alive now, sorted by key
};

// Which targets to follow. Several may be given; a process selected twice is one target.
struct TargetSelection {
  std::vector<int64_t> pids;  // these processes (trees when `trees`)
  bool trees = true;          // a selected pid is a kProcessTree, else a kProcess
  // These cgroups (paths below the cgroup root, "/system.slice/nginx.service"), each with its
  // descendants.
  std::vector<std::string> cgroups;
  // Every process whose command name (PID/comm) is one of these, each a kProcess.
  std::vector<std::string> commands;
  bool all_processes = false;  // every process, each a kProcess
  // Every cgroup down to this depth below the root (1: its children), each a kCgroup; 0: none.
  int cgroup_depth = 0;
  // Hardware counters (cycles, instructions) for every target; Open fails, naming the permission
  // or the missing PMU, when the kernel refuses them.
  bool hardware_counters = false;
  // The pid of the process that is the selected trees' subreaper (prctl PR_SET_CHILD_SUBREAPER:
  // `kwatt meter -- CMD` is its command's), 0 when none: a process it adopted (a descendant of
  // the tree whose parent exited, reparented to it) is a member of the first tree, even when no
  // read saw it before (a daemon that double-forked within a period). The subreaper's own CPU
  // time is not counted.
  int64_t adopter_pid = 0;
};

class ActivityReader {
 public:
  // Checks the selection against the machine (a pid that does not exist, a cgroup that does not,
  // a procfs or cgroup tree that cannot be read: NotFound or PermissionDenied naming it, before
  // anything runs) and opens the hardware counters.
  static Result<std::unique_ptr<ActivityReader>> Open(const MeterEnvironment& environment,
                                                      const TargetSelection& selection);
  virtual ~ActivityReader() = default;

  // Reads every target now. A target that vanished since the last read is simply absent; a
  // selected pid or cgroup that vanished is not an error (a command that ended). Errors only when
  // the machine-wide counters cannot be read.
  [[nodiscard]] virtual Result<ActivitySnapshot> Read() = 0;
  // The same, the snapshot stamped `monotonic_nanos` and `wall`: the time of the reading it goes
  // with (the meter's energy sample, taken just before). A target's CPU time never grows by more
  // than the time between two stamps times the online CPUs, so with the sample's stamps no
  // interval the energy is divided over shows more CPU than it could hold.
  [[nodiscard]] virtual Result<ActivitySnapshot> ReadAt(int64_t monotonic_nanos,
                                                        UnixNanos wall) = 0;
};

}  // namespace kwatt::meter

#endif  // KWATT_METER_ACTIVITY_ACTIVITY_H_
