#include "src/meter/activity/activity_procfs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "kwatt/core/text.h"

namespace kwatt::meter::procfs {

namespace {

// The next blank-separated token of `text` from `*at`, or "" at the end.
std::string_view NextToken(std::string_view text, size_t* at) {
  size_t i = *at;
  while (i < text.size() && IsBlank(text[i])) ++i;
  size_t start = i;
  while (i < text.size() && !IsBlank(text[i])) ++i;
  *at = i;
  return text.substr(start, i - start);
}

// A decimal integer, optionally negative, filling the whole token.
bool ParseInteger(std::string_view token, int64_t* out) {
  if (token.empty()) return false;
  auto [end, error] = std::from_chars(token.data(), token.data() + token.size(), *out);
  return error == std::errc() && end == token.data() + token.size();
}

}  // namespace

Status ParseProcessStat(std::string_view text, ProcessStat* out) {
  size_t open = text.find('(');
  size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return Status::Corruption("a process's stat has no command name in parentheses");
  }
  // "PID (NAME) ...": the pid, then blanks, then the name.
  std::string_view pid = text.substr(0, open);
  while (!pid.empty() && IsBlank(pid.back())) pid.remove_suffix(1);
  if (pid.size() == open || !ParseInteger(pid, &out->pid) || out->pid <= 0) {
    return Status::Corruption("a process's stat does not start with its pid");
  }
  out->comm = text.substr(open + 1, close - open - 1);
  // The fields after the name, numbered as in proc(5) from 3 (state).
  std::string_view rest = text.substr(close + 1);
  size_t at = 0;
  std::string_view state = NextToken(rest, &at);
  if (state.size() != 1) return Status::Corruption("a process's stat has no state after its name");
  out->state = state[0];
  struct Wanted {
    int field;
    int64_t* value;
    const char* name;
  };
  const Wanted wanted[] = {
      {4, &out->ppid, "ppid"},           {14, &out->utime, "utime"},
      {15, &out->stime, "stime"},        {16, &out->cutime, "cutime"},
      {17, &out->cstime, "cstime"},      {20, &out->num_threads, "num_threads"},
      {22, &out->starttime, "starttime"}};
  int field = 3;
  for (const Wanted& w : wanted) {
    std::string_view token;
    while (field < w.field) {
      token = NextToken(rest, &at);
      ++field;
      if (token.empty()) break;
    }
    if (token.empty()) {
      return Status::Corruption(std::string("a process's stat ends before its ") + w.name +
                                " (field " + std::to_string(w.field) + ")");
    }
    if (!ParseInteger(token, w.value)) {
      return Status::Corruption(std::string("a process's stat has a ") + w.name +
                                " that is not an integer: '" + std::string(token.substr(0, 32)) +
                                "'");
    }
  }
  if (out->utime < 0 || out->stime < 0 || out->cutime < 0 || out->cstime < 0 ||
      out->starttime < 0 || out->ppid < 0) {
    return Status::Corruption("a process's stat has a negative time or ppid");
  }
  if (out->utime > kMaxTicks || out->stime > kMaxTicks || out->cutime > kMaxTicks ||
      out->cstime > kMaxTicks || out->starttime > kMaxTicks) {
    return Status::Corruption("a process's stat has a time beyond any machine's");
  }
  return Status::OK();
}

bool ParseSchedstat(std::string_view text, int64_t* run_nanos) {
  size_t at = 0;
  return ParseInteger(NextToken(text, &at), run_nanos) && *run_nanos >= 0;
}

Status ParseMachineStat(std::string_view text, MachineStat* out) {
  *out = MachineStat();
  size_t line_end = text.find('\n');
  std::string_view first = text.substr(0, line_end);
  size_t at = 0;
  if (NextToken(first, &at) != "cpu") {
    return Status::Corruption("the machine's stat does not start with its \"cpu\" line");
  }
  // user nice system idle iowait irq softirq steal guest guest_nice (older kernels stop early).
  int64_t values[8] = {0};
  int count = 0;
  for (; count < 8; ++count) {
    std::string_view token = NextToken(first, &at);
    if (token.empty()) break;
    if (!ParseInteger(token, &values[count]) || values[count] < 0 || values[count] > kMaxTicks) {
      return Status::Corruption("the machine's stat has a \"cpu\" field that is not a count: '" +
                                std::string(token.substr(0, 32)) + "'");
    }
  }
  if (count < 4) {
    return Status::Corruption("the machine's stat has fewer than 4 numbers on its \"cpu\" line");
  }
  const int64_t user = values[0], nice = values[1], system = values[2], idle = values[3],
                iowait = values[4], irq = values[5], softirq = values[6], steal = values[7];
  out->busy_ticks = user + nice + system + irq + softirq + steal;
  out->total_ticks = out->busy_ticks + idle + iowait;
  // The per-CPU lines follow the first one.
  while (line_end != std::string_view::npos) {
    size_t start = line_end + 1;
    line_end = text.find('\n', start);
    std::string_view line = text.substr(
        start, line_end == std::string_view::npos ? std::string_view::npos : line_end - start);
    if (line.size() < 4 || line.substr(0, 3) != "cpu" || line[3] < '0' || line[3] > '9') break;
    ++out->cpu_lines;
  }
  return Status::OK();
}

Result<std::vector<int>> ParseCpuList(std::string_view text) {
  std::vector<int> cpus;
  text = TrimBlanks(text);
  auto bad = [&] {
    return Status::Corruption("a CPU list that does not parse: '" +
                              std::string(text.substr(0, 64)) + "'");
  };
  if (text.empty()) return bad();
  std::string_view rest = text;
  while (true) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    size_t dash = item.find('-');
    int64_t first = 0, last = 0;
    if (!ParseInteger(item.substr(0, dash), &first)) return bad();
    last = first;
    if (dash != std::string_view::npos && !ParseInteger(item.substr(dash + 1), &last)) {
      return bad();
    }
    // 65,536 CPUs is far above what a kernel supports (CONFIG_NR_CPUS <= 8192).
    if (first < 0 || last < first || last >= 65536) return bad();
    if (!cpus.empty() && first <= cpus.back()) return bad();
    for (int64_t cpu = first; cpu <= last; ++cpu) cpus.push_back(int(cpu));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return cpus;
}

bool ParseCgroupUsage(std::string_view text, int64_t* usage_microseconds) {
  size_t at = 0;
  while (true) {
    std::string_view key = NextToken(text, &at);
    if (key.empty()) return false;
    std::string_view value = NextToken(text, &at);
    if (key == "usage_usec") {
      return ParseInteger(value, usage_microseconds) && *usage_microseconds >= 0;
    }
  }
}

int64_t TicksToMicros(int64_t ticks, int64_t ticks_per_second) {
  constexpr int64_t kMicrosPerSecond = 1'000'000;
  __int128 micros = (__int128)(ticks / ticks_per_second) * kMicrosPerSecond +
                    (__int128)(ticks % ticks_per_second) * kMicrosPerSecond / ticks_per_second;
  return micros > INT64_MAX ? INT64_MAX : micros < INT64_MIN ? INT64_MIN : int64_t(micros);
}

int64_t ClockTicksPerSecond() {
  static const int64_t ticks = [] {
    long value = ::sysconf(_SC_CLK_TCK);
    return value > 0 ? int64_t(value) : int64_t(100);
  }();
  return ticks;
}

namespace {

// Reads `fd` into `buffer` until it is full or the file ends: the bytes read, or -errno.
ssize_t ReadFull(int fd, char* buffer, size_t size) {
  size_t total = 0;
  while (total < size) {
    ssize_t n = ::read(fd, buffer + total, size - total);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    if (n == 0) break;
    total += size_t(n);
  }
  return ssize_t(total);
}

}  // namespace

ssize_t ReadSmallFile(int dir_fd, const char* path, char* buffer, size_t size) {
  int fd = ::openat(dir_fd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return -errno;
  ssize_t n = ReadFull(fd, buffer, size);
  ::close(fd);
  return n;
}

int ReadWholeFile(int dir_fd, const char* path, std::string* out) {
  int fd = ::openat(dir_fd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return -errno;
  if (out->size() < 4096) out->resize(4096);
  size_t total = 0;
  while (true) {
    ssize_t n = ReadFull(fd, out->data() + total, out->size() - total);
    if (n < 0) {
      ::close(fd);
      return int(n);
    }
    total += size_t(n);
    if (total < out->size()) break;  // the file ended before the buffer did
    out->resize(out->size() * 2);
  }
  ::close(fd);
  out->resize(total);
  return 0;
}

Status FileError(int error, const std::string& what) {
  std::string reason = std::strerror(error);
  if (error == ENOENT || error == ESRCH || error == ENOTDIR) {
    return Status::NotFound(what + " does not exist (" + reason + ")");
  }
  if (error == EACCES || error == EPERM) {
    return Status::PermissionDenied("reading " + what + " was refused (" + reason +
                                    "): run as root or as the owner, or grant read access to it");
  }
  return Status::IOError("reading " + what + " failed: " + reason);
}

}  // namespace kwatt::meter::procfs
