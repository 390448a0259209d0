// What the power meter reads from the machine, injected: the roots of sysfs, procfs and the
// cgroup v2 tree, the clocks, perf_event_open(2) and NVML's library (doc/meter/README.md).
//
// Production uses the machine's own (MeterEnvironment's defaults); tests give a simulated sysfs
// tree (a directory), a fake procfs, a ManualClock and a PerfEvents that replays a trace.
//
// Thread safety: SystemClock() and SystemPerfEvents() are safe from any thread; a PerfEvents
// handle is read by one thread at a time.
#ifndef KWATT_METER_ENVIRONMENT_ENVIRONMENT_H_
#define KWATT_METER_ENVIRONMENT_ENVIRONMENT_H_

#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>

#include "kwatt/core/clock.h"
#include "kwatt/core/status.h"
#include "kwatt/core/time.h"

namespace kwatt::meter {

// The clocks the meter reads and sleeps on: core's (kwatt/core/clock.h).
using ::kwatt::Clock;
using ::kwatt::SystemClock;

// What perf_event_open(2) is asked to count.
struct PerfEventSpec {
  uint32_t type = 0;    // PERF_TYPE_HARDWARE, or a dynamic PMU's type (power's, from sysfs)
  uint64_t config = 0;  // the event (PERF_COUNT_HW_CPU_CYCLES, or power's energy-pkg config)
  int cpu = -1;         // the CPU counted on; -1: every CPU the task runs on (needs pid >= 0)
  int pid = -1;         // a process (thread group); -1: every task on `cpu`
  // A cgroup v2 directory (an absolute path): count the tasks in it on `cpu` (PERF_FLAG_PID_CGROUP,
  // `pid` ignored; needs cpu >= 0).
  std::string cgroup;
  bool inherit = false;  // count the process's children created after the open too
  std::string name;      // for messages: "power/energy-pkg/ on CPU 0"
};

// One read of a counter (PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING).
struct PerfCount {
  uint64_t value = 0;
  uint64_t time_enabled = 0;  // ns the counter was enabled
  uint64_t time_running = 0;  // ns it was on the PMU (less than enabled when multiplexed)
};

// perf_event_open(2), read(2) and close(2) of counters, behind an interface so that tests replay
// traces.
class PerfEvents {
 public:
  virtual ~PerfEvents() = default;
  // Opens a counter, counting from now. Errors: NotFound when the PMU or event does not exist on
  // this machine (ENOENT, ENODEV, EOPNOTSUPP); PermissionDenied naming what to grant (the value of
  // kernel.perf_event_paranoid and the setting that allows the open, CAP_PERFMON) on EACCES/EPERM;
  // IOError otherwise. Returns a handle for Read and Close.
  virtual Result<int> Open(const PerfEventSpec& spec) = 0;
  virtual Result<PerfCount> Read(int handle) = 0;
  virtual void Close(int handle) = 0;
};

// The kernel's perf_event_open(2). `procfs_root` is where permission messages read
// sys/kernel/perf_event_paranoid from.
std::shared_ptr<PerfEvents> SystemPerfEvents(std::string procfs_root = "/proc");

// A process's CPU time in nanoseconds: all its threads, live and exited, what procfs stat's
// utime + stime count but not truncated to clock ticks (10 ms each), which make a short interval's
// rate jump by a tick's worth.
class ProcessCpuClocks {
 public:
  virtual ~ProcessCpuClocks() = default;
  // -1 when the process is gone or its clock cannot be read.
  virtual int64_t Nanos(int64_t pid) = 0;
  // What of Nanos(pid) is kwatt's own work (include/kwatt/core/own_cpu.h: a meter running in the
  // process it measures), which the reader takes off: never charged to a target.
  virtual int64_t OwnNanos(int64_t /*pid*/) { return 0; }
};

// The kernel's CPU-time clocks of processes (clock_getcpuclockid(3), clock_gettime(2): any
// process's, no privilege needed), with this process's own kwatt work (OwnCpuNanos) as its
// OwnNanos, when `procfs_root` is the kernel's procfs of this process's pid namespace (its "self"
// names this process); null otherwise (a fake tree: its pids are not the kernel's).
std::shared_ptr<ProcessCpuClocks> SystemProcessCpuClocks(const std::string& procfs_root = "/proc");

// Everything the meter reads from outside. Paths have no trailing '/'.
struct MeterEnvironment {
  // sysfs: class/powercap (RAPL zones), bus/event_source/devices (perf PMUs), devices/system/cpu.
  std::string sysfs_root = "/sys";
  // procfs: PID/stat, stat, mounts, sys/kernel/perf_event_paranoid, sys/kernel/random/boot_id.
  std::string procfs_root = "/proc";
  // The cgroup v2 hierarchy; empty: the cgroup2 mount that procfs_root/mounts names.
  std::string cgroup_root;
  // NVML's library, loaded with dlopen(3) when GPUs are asked for (a path, or a name the dynamic
  // loader searches).
  std::string nvml_library = "libnvidia-ml.so.1";
  // The machine's name in reports (PowerAPI's `sensor`); empty: gethostname(2).
  std::string hostname;
  std::shared_ptr<Clock> clock = SystemClock();
  std::shared_ptr<PerfEvents> perf = SystemPerfEvents();
  // Processes' exact CPU times; null: SystemProcessCpuClocks(procfs_root), so that a fake procfs
  // is read alone.
  std::shared_ptr<ProcessCpuClocks> process_cpu;
};

// The cgroup v2 root of `environment`: its cgroup_root when set, else the mount point of the
// first cgroup2 file system in procfs_root/mounts. NotFound when there is none.
Result<std::string> CgroupRoot(const MeterEnvironment& environment);

// The machine's name: environment.hostname when set, else gethostname(2).
std::string HostName(const MeterEnvironment& environment);

}  // namespace kwatt::meter

#endif  // KWATT_METER_ENVIRONMENT_ENVIRONMENT_H_
