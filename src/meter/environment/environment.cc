#include "kwatt/meter/environment/environment.h"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>

#include "kwatt/core/own_cpu.h"

namespace kwatt::meter {

namespace {

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

class SystemPerfEventsImpl : public PerfEvents {
 public:
  explicit SystemPerfEventsImpl(std::string procfs_root) : procfs_root_(std::move(procfs_root)) {}

  Result<int> Open(const PerfEventSpec& spec) override {
    perf_event_attr attr{};
    attr.size = sizeof(attr);
    attr.type = spec.type;
    attr.config = spec.config;
    attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    attr.inherit = spec.inherit ? 1 : 0;
    attr.disabled = 0;
    int cgroup_fd = -1;
    unsigned long flags = PERF_FLAG_FD_CLOEXEC;
    pid_t pid = spec.pid;
    if (!spec.cgroup.empty()) {
      cgroup_fd = ::open(spec.cgroup.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (cgroup_fd < 0) {
        int error = errno;
        return Status::NotFound("cgroup " + spec.cgroup + " cannot be opened for perf (" +
                                std::strerror(error) + ")");
      }
      pid = cgroup_fd;
      flags |= PERF_FLAG_PID_CGROUP;
    }
    long fd = syscall(SYS_perf_event_open, &attr, pid, spec.cpu, -1, flags);
    int error = errno;
    if (cgroup_fd >= 0) ::close(cgroup_fd);
    if (fd >= 0) return int(fd);
    std::string what = "perf_event_open of " + (spec.name.empty() ? "an event" : spec.name);
    if (error == EACCES || error == EPERM) {
      std::string paranoid = ReadFirstLine(procfs_root_ + "/sys/kernel/perf_event_paranoid");
      return Status::PermissionDenied(
          what + " was refused (" + std::strerror(error) + "): kernel.perf_event_paranoid is " +
          (paranoid.empty() ? std::string("unknown") : paranoid) +
          "; run as root, give the program CAP_PERFMON (Linux 5.8+; CAP_SYS_ADMIN before), or "
          "lower it (`sudo sysctl kernel.perf_event_paranoid=0` for system-wide and cgroup "
          "counters, 1 for a process's own, -1 for everything)");
    }
    if (error == ENOENT || error == ENODEV || error == EOPNOTSUPP || error == EINVAL) {
      return Status::NotFound(what + " is not available on this machine (" + std::strerror(error) +
                              ")");
    }
    return Status::IOError(what + " failed: " + std::strerror(error));
  }

  Result<PerfCount> Read(int handle) override {
    uint64_t values[3] = {0, 0, 0};
    ssize_t n;
    do {
      n = ::read(handle, values, sizeof(values));
    } while (n < 0 && errno == EINTR);
    if (n != ssize_t(sizeof(values))) {
      int error = errno;
      return Status::IOError(std::string("reading a perf counter failed: ") +
                             (n < 0 ? std::strerror(error) : "short read"));
    }
    return PerfCount{values[0], values[1], values[2]};
  }

  void Close(int handle) override { ::close(handle); }

 private:
  std::string procfs_root_;
};

class SystemProcessCpuClocksImpl : public ProcessCpuClocks {
 public:
  int64_t Nanos(int64_t pid) override {
    clockid_t id;
    if (pid <= 0 || pid > INT32_MAX || clock_getcpuclockid(pid_t(pid), &id) != 0) return -1;
    timespec ts{};
    if (clock_gettime(id, &ts) != 0) return -1;
    return int64_t(ts.tv_sec) * kNanosPerSecond + ts.tv_nsec;
  }
  int64_t OwnNanos(int64_t pid) override { return pid == self_ ? OwnCpuNanos() : 0; }

 private:
  const int64_t self_ = ::getpid();
};

}  // namespace

std::shared_ptr<PerfEvents> SystemPerfEvents(std::string procfs_root) {
  return std::make_shared<SystemPerfEventsImpl>(std::move(procfs_root));
}

std::shared_ptr<ProcessCpuClocks> SystemProcessCpuClocks(const std::string& procfs_root) {
  char target[32];
  ssize_t n = ::readlink((procfs_root + "/self").c_str(), target, sizeof target - 1);
  if (n <= 0) return nullptr;
  target[n] = '\0';
  if (std::to_string(::getpid()) != target) return nullptr;
  static const std::shared_ptr<ProcessCpuClocks> clocks =
      std::make_shared<SystemProcessCpuClocksImpl>();
  return clocks;
}

Result<std::string> CgroupRoot(const MeterEnvironment& environment) {
  if (!environment.cgroup_root.empty()) return environment.cgroup_root;
  std::string mounts_path = environment.procfs_root + "/mounts";
  std::ifstream mounts(mounts_path);
  if (!mounts)
    return Status::NotFound("cannot read " + mounts_path + " to find the cgroup v2 tree");
  std::string line;
  while (std::getline(mounts, line)) {
    std::istringstream fields(line);
    std::string device, mount_point, type;
    fields >> device >> mount_point >> type;
    if (type == "cgroup2") return mount_point;
  }
  return Status::NotFound("no cgroup v2 file system is mounted (" + mounts_path +
                          " has no cgroup2 line): cgroups cannot be measured here");
}

std::string HostName(const MeterEnvironment& environment) {
  if (!environment.hostname.empty()) return environment.hostname;
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

}  // namespace kwatt::meter
