// What the activity reader (include/kwatt/meter/activity/activity.h) reads from procfs, sysfs and a
// cgroup v2 tree: the parsers of PID/stat, PID/schedstat, stat, CPU lists and cpu.stat (pure
// functions, fuzzed: fuzz/proc_stat_fuzzer.cc), and reads of small files with one open(2) and one
// read(2) into the caller's buffer (no allocation: the reader does this 10,000 times a second).
//
// Thread safety: every function is thread-safe.
#ifndef KWATT_SRC_METER_ACTIVITY_ACTIVITY_PROCFS_H_
#define KWATT_SRC_METER_ACTIVITY_ACTIVITY_PROCFS_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kwatt/core/status.h"

namespace kwatt::meter::procfs {

// The largest count of clock ticks a parser accepts (stat's times, the machine's): 10^14 ticks
// of 100 Hz are 31,700 years of CPU time, beyond any machine, and far from overflowing the sums
// and the microseconds they become.
inline constexpr int64_t kMaxTicks = 100'000'000'000'000;

// The kernel keeps a task's command name in 16 bytes (TASK_COMM_LEN): at most 15 characters for
// a user's process (kernel workers may show longer ones).
inline constexpr size_t kMaxUserCommandLength = 15;

// The fields of PID/stat (proc(5)) the reader uses.
struct ProcessStat {
  int64_t pid = 0;
  // The command name: what lies between the first '(' and the LAST ')' (a name may hold spaces,
  // parentheses and newlines). Points into the parsed text.
  std::string_view comm;
  char state = '?';  // R, S, D, Z (a zombie: exited, not yet reaped), ...
  int64_t ppid = 0;
  // Clock ticks (sysconf(_SC_CLK_TCK)). utime + stime is the kernel's exact run time of all the
  // process's threads (live and exited), split in two and each truncated to a tick.
  int64_t utime = 0;
  int64_t stime = 0;
  int64_t cutime = 0;  // of the children it waited for (and theirs, recursively)
  int64_t cstime = 0;
  int64_t num_threads = 0;
  int64_t starttime = 0;  // clock ticks after boot
};

// Parses the text of PID/stat. Corruption naming what is wrong (no parentheses, a field missing
// or not a number).
Status ParseProcessStat(std::string_view text, ProcessStat* out);

// PID/schedstat: "RUN_NANOS WAIT_NANOS TIMESLICES". The first field is the nanoseconds the
// thread group's LEADER thread ran (not its other threads, nor its children). False when it does
// not parse.
bool ParseSchedstat(std::string_view text, int64_t* run_nanos);

// The first line of procfs stat, in clock ticks summed over CPUs.
struct MachineStat {
  int64_t busy_ticks = 0;   // user + nice + system + irq + softirq + steal (guest is in user)
  int64_t total_ticks = 0;  // busy + idle + iowait
  int cpu_lines = 0;        // the "cpuN" lines: the CPUs the kernel counts
};
// Corruption when the text does not start with a "cpu " line of at least 4 numbers.
Status ParseMachineStat(std::string_view text, MachineStat* out);

// A CPU list as sysfs writes it ("0-3,8,10-11\n") to the CPU numbers, ascending. Corruption when
// it does not parse or is empty.
Result<std::vector<int>> ParseCpuList(std::string_view text);

// The usage_usec line of a cgroup v2 cpu.stat. False when there is none.
bool ParseCgroupUsage(std::string_view text, int64_t* usage_microseconds);

// `ticks` clock ticks in microseconds, exact, saturating at the ends of int64.
int64_t TicksToMicros(int64_t ticks, int64_t ticks_per_second);

// The kernel's clock ticks per second (sysconf(_SC_CLK_TCK); 100 when it says nothing).
int64_t ClockTicksPerSecond();

// Reads the file `path` (relative to the directory `dir_fd`, or absolute) into `buffer`, at most
// `size` bytes, with one open and as few reads as it takes. Returns the bytes read, or -errno.
ssize_t ReadSmallFile(int dir_fd, const char* path, char* buffer, size_t size);

// The whole file into `out` (reused: no allocation once it is large enough). Returns 0 or -errno.
int ReadWholeFile(int dir_fd, const char* path, std::string* out);

// The Status for an errno met reading `what`: NotFound (ENOENT, ESRCH, ENOTDIR),
// PermissionDenied (EACCES, EPERM) saying to run as root or grant read access, IOError
// otherwise.
Status FileError(int error, const std::string& what);

}  // namespace kwatt::meter::procfs

#endif  // KWATT_SRC_METER_ACTIVITY_ACTIVITY_PROCFS_H_
