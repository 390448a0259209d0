#include "src/collect/ipmi_device.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>

#include "kwatt/core/text.h"
#include "src/collect/subprocess.h"

namespace kwatt::collect {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  while (true) {
    size_t at = text.find(separator);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

bool HasLineBreakOrNul(std::string_view text) {
  return text.find_first_of(std::string_view("\n\r\0", 3)) != std::string_view::npos;
}

// FNV-1a, 64 bits: a stable name for the device's directory (the same across runs).
uint64_t Fnv1a(std::string_view text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string Hex(uint64_t value) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) out[i] = kDigits[value & 15];
  return out;
}

// The first line of `text` with `secret` replaced by "***" wherever it appears.
std::string FirstLineScrubbed(std::string_view text, const std::string& secret) {
  std::string_view rest = TrimBlanks(text);
  std::string line(TrimBlanks(rest.substr(0, rest.find('\n'))));
  if (!secret.empty()) {
    for (size_t at = line.find(secret); at != std::string::npos; at = line.find(secret, at + 3)) {
      line.replace(at, secret.size(), "***");
    }
  }
  if (line.size() > 300) line = line.substr(0, 300) + "...";
  return line;
}

bool ContainsIgnoringCase(std::string_view text, std::string_view word) {
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; };
  return std::search(text.begin(), text.end(), word.begin(), word.end(),
                     [&](char a, char b) { return lower(a) == lower(b); }) != text.end();
}

struct IpmiOptions {
  std::string workaround_flags;
  std::string cipher_suite_id;
  std::string privilege_level;
  bool operator==(const IpmiOptions&) const = default;
};

Result<IpmiOptions> ParseOptions(const MetricDescription& metric) {
  IpmiOptions options;
  if (metric.url.query.empty()) return options;
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(metric.origin + ": " + what);
  };
  for (std::string_view pair : Split(metric.url.query, '&')) {
    if (pair.empty()) continue;
    size_t equals = pair.find('=');
    if (equals == std::string_view::npos) {
      return bad("IPMI option \"" + std::string(pair) + "\" has no value (key=value)");
    }
    std::string_view key = pair.substr(0, equals);
    std::string value(pair.substr(equals + 1));
    if (key == "workaround-flags") {
      bool ok = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == ',';
      });
      if (!ok) return bad("workaround-flags must be lower-case flag names separated by ','");
      options.workaround_flags = value;
    } else if (key == "cipher-suite-id") {
      bool ok =
          !value.empty() && value.size() <= 2 &&
          std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!ok) return bad("cipher-suite-id must be a number");
      options.cipher_suite_id = value;
    } else if (key == "privilege-level") {
      std::string lower;
      for (char c : value) lower += c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c;
      if (lower != "user" && lower != "operator" && lower != "admin") {
        return bad("privilege-level must be user, operator or admin");
      }
      options.privilege_level = lower;
    } else {
      return bad("unknown IPMI option \"" + std::string(key) +
                 "\" (known: workaround-flags, cipher-suite-id, privilege-level)");
    }
  }
  return options;
}

// The sensors a BMC has, for a message: "its sensors: Power, Temp, ..." (the first 10).
std::string SensorList(const std::map<std::string, std::string, std::less<>>& by_name) {
  std::string list;
  size_t shown = 0;
  for (const auto& [name, reading] : by_name) {
    if (shown++ == 10) {
      list += ", ...";
      break;
    }
    list += (list.empty() ? "" : ", ") + name;
  }
  return list.empty() ? "it lists none" : "its sensors: " + list;
}

class IpmiDevice : public Device {
 public:
  IpmiDevice(std::vector<MetricDescription> metrics, const DriverEnvironment& environment,
             IpmiOptions options, std::string directory, bool owns_directory)
      : metrics_(std::move(metrics)),
        program_(environment.ipmi_sensors.empty() ? "ipmi-sensors" : environment.ipmi_sensors),
        options_(std::move(options)),
        directory_(std::move(directory)),
        owns_directory_(owns_directory) {
    MetricUrl bmc = metrics_.front().url;
    bmc.path.clear();
    bmc.query.clear();
    name_ = bmc.Redacted();
    const MetricUrl& url = metrics_.front().url;
    host_argument_ = url.host;
    if (url.port != 0) {
      host_argument_ = (url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host) +
                       ":" + std::to_string(url.port);
    }
  }

  ~IpmiDevice() override {
    if (owns_directory_) {
      std::error_code ignored;
      std::filesystem::remove_all(directory_, ignored);
    }
  }

  Status Poll(const PollRequest& request, std::vector<Reading>* out) override {
    bool any = false;
    for (size_t i = 0; i < metrics_.size(); ++i) {
      if (i >= request.active.size() || request.active[i]) any = true;
    }
    if (!any) return Status::OK();

    Result<RunResult> run = RunOnce(request.deadline);
    if (!run.ok()) return run.status();
    if (!run->exit.ok() && IsCacheFailure(run->err) && Clock::now() < request.deadline) {
      // --sdr-cache-recreate handles a stale or invalid cache; whatever else went wrong with it,
      // start again from none, once.
      FlushCache();
      run = RunOnce(request.deadline);
      if (!run.ok()) return run.status();
    }
    if (!run->exit.ok()) return FailureOf(*run);

    std::map<std::string, std::string, std::less<>> by_id;
    std::map<std::string, std::string, std::less<>> by_name;
    for (internal::IpmiSensorLine& line : internal::ParseIpmiSensorsOutput(run->out)) {
      by_id[line.record_id] = line.reading;
      // The last of equal names wins, as in Kwollect (a record id is the safer path).
      by_name[line.name] = std::move(line.reading);
    }
    for (size_t i = 0; i < metrics_.size(); ++i) {
      if (i < request.active.size() && !request.active[i]) continue;
      const MetricDescription& metric = metrics_[i];
      const std::string* reading = nullptr;
      if (auto found = by_id.find(metric.url.path); found != by_id.end()) {
        reading = &found->second;
      } else if (auto named = by_name.find(metric.url.path); named != by_name.end()) {
        reading = &named->second;
      }
      if (reading == nullptr) {
        NoteProblem(PollProblem::Kind::kMissingValue, name_ + ": the BMC has no sensor \"" +
                                                          metric.url.path + "\" (" +
                                                          SensorList(by_name) + ")");
        continue;
      }
      if (*reading == "N/A" || reading->empty()) continue;  // no reading now (a sensor off)
      out->push_back(ReadingOf(metric, request.sent_at, *reading));
    }
    return Status::OK();
  }

 private:
  // Runs ipmi-sensors once, its configuration file written before and removed after.
  Result<RunResult> RunOnce(Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0)
      return Status::Unavailable(name_ + ": ipmi-sensors timed out (no time left)");
    // ipmi-sensors gives up by itself a little before it would be killed (a clearer message).
    int64_t session_ms = std::max<int64_t>(left.count() - left.count() / 10, 100);
    int64_t retransmission_ms = std::max<int64_t>(std::min<int64_t>(1000, session_ms / 2), 50);

    std::string config = directory_ + "/freeipmi-XXXXXX.conf";
    int fd = ::mkostemps(config.data(), 5, O_CLOEXEC);  // mode 0600
    if (fd < 0) {
      return Status::IOError(name_ + ": cannot make the FreeIPMI configuration file in " +
                             directory_ + ": " + std::strerror(errno));
    }
    const MetricUrl& url = metrics_.front().url;
    std::string text;
    if (!url.user.empty()) text += "username " + internal::FreeIpmiConfigArgument(url.user) + "\n";
    if (!url.password.empty()) {
      text += "password " + internal::FreeIpmiConfigArgument(url.password) + "\n";
    }
    Status written = WriteAll(fd, text);
    ::close(fd);
    struct Remove {
      std::string path;
      ~Remove() { ::unlink(path.c_str()); }
    } remove{config};
    if (!written.ok()) return written;

    std::vector<std::string> argv = {
        program_,
        "--config-file=" + config,
        "--driver-type=LAN_2_0",
        "--hostname=" + host_argument_,
        "--sdr-cache-directory=" + directory_,
        "--sdr-cache-recreate",
        "--quiet-cache",
        "--comma-separated-output",
        "--no-header-output",
        "--session-timeout=" + std::to_string(session_ms),
        "--retransmission-timeout=" + std::to_string(retransmission_ms)};
    if (!options_.workaround_flags.empty()) {
      argv.push_back("--workaround-flags=" + options_.workaround_flags);
    }
    if (!options_.cipher_suite_id.empty()) {
      argv.push_back("--cipher-suite-id=" + options_.cipher_suite_id);
    }
    if (!options_.privilege_level.empty()) {
      argv.push_back("--privilege-level=" + options_.privilege_level);
    }
    RunOptions run_options;
    run_options.deadline = deadline;
    run_options.display = "ipmi-sensors";
    run_options.max_output_bytes = size_t{1} << 20;
    Result<RunResult> run = RunProgram(argv, run_options);
    if (!run.ok()) return run.status().WithContext(name_);
    return run;
  }

  Status WriteAll(int fd, std::string_view text) {
    while (!text.empty()) {
      ssize_t wrote = ::write(fd, text.data(), text.size());
      if (wrote < 0 && errno == EINTR) continue;
      if (wrote <= 0) {
        return Status::IOError(
            name_ + ": cannot write the FreeIPMI configuration file: " + std::strerror(errno));
      }
      text.remove_prefix(static_cast<size_t>(wrote));
    }
    return Status::OK();
  }

  static bool IsCacheFailure(std::string_view err) { return ContainsIgnoringCase(err, "cache"); }

  void FlushCache() {
    std::error_code ignored;
    std::filesystem::remove_all(std::filesystem::path(directory_) / ".freeipmi", ignored);
  }

  Status FailureOf(const RunResult& run) const {
    std::string line = FirstLineScrubbed(run.err, metrics_.front().url.password);
    if (line.empty()) line = FirstLineScrubbed(run.out, metrics_.front().url.password);
    std::string message = name_ + ": ipmi-sensors " + run.exit.Describe();
    if (!line.empty()) message += ": " + line;
    if (ContainsIgnoringCase(line, "password invalid") ||
        ContainsIgnoringCase(line, "username invalid") ||
        ContainsIgnoringCase(line, "k_g invalid") ||
        ContainsIgnoringCase(line, "privilege level cannot be obtained")) {
      return Status::Unauthenticated(message);
    }
    if (ContainsIgnoringCase(line, "connection timeout") ||
        ContainsIgnoringCase(line, "session timeout")) {
      return Status::Unavailable(message + " (timed out)");
    }
    return Status::Unavailable(message);
  }

  std::vector<MetricDescription> metrics_;
  std::string program_;
  IpmiOptions options_;
  std::string directory_;
  bool owns_directory_;
  std::string name_;           // the BMC, redacted: "ipmisensor://user:***@host:623/"
  std::string host_argument_;  // HOST or HOST:PORT
};

// The device's private directory: under `cache_dir` when given (kept, so the SDR cache outlives
// the collector), else a temporary one (removed with the device).
Result<std::pair<std::string, bool>> MakeDirectory(const MetricUrl& url,
                                                   const std::string& cache_dir) {
  if (cache_dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/kwatt-ipmi-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      return Status::IOError("cannot make a temporary directory " + pattern + ": " +
                             std::strerror(errno));
    }
    return std::make_pair(pattern, true);
  }
  std::error_code error;
  std::filesystem::create_directories(cache_dir, error);
  if (error) {
    return Status::IOError("cannot make the IPMI cache directory " + cache_dir + ": " +
                           error.message());
  }
  std::string safe_host;
  for (char c : url.host) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '-';
    safe_host += plain ? c : '_';
  }
  std::string key =
      url.user + '\n' + url.password + '\n' + url.host + '\n' + std::to_string(url.port);
  std::string directory =
      cache_dir + "/" + safe_host + "_" + std::to_string(url.port) + "_" + Hex(Fnv1a(key));
  if (::mkdir(directory.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::IOError("cannot make the IPMI cache directory " + directory + ": " +
                           std::strerror(errno));
  }
  struct stat info;
  if (::stat(directory.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    return Status::IOError(directory + " is not a directory");
  }
  ::chmod(directory.c_str(), 0700);  // the configuration file holding the password is made there
  return std::make_pair(directory, false);
}

}  // namespace

namespace internal {

std::vector<IpmiSensorLine> ParseIpmiSensorsOutput(std::string_view text) {
  std::vector<IpmiSensorLine> lines;
  for (std::string_view line : Split(text, '\n')) {
    line = TrimBlanks(line);
    if (line.empty()) continue;
    std::vector<std::string_view> fields = Split(line, ',');
    size_t count = fields.size();
    if (count < 6) continue;
    // The event (last) starts with a quote; a name holding commas pushes the rest right.
    size_t event = count - 1;
    for (size_t i = 5; i < count; ++i) {
      if (!TrimBlanks(fields[i]).empty() && TrimBlanks(fields[i]).front() == '\'') {
        event = i;
        break;
      }
    }
    size_t reading = event - 2;
    IpmiSensorLine parsed;
    parsed.record_id = std::string(TrimBlanks(fields[0]));
    std::string name;
    for (size_t i = 1; i + 1 < reading; ++i) {
      if (i > 1) name += ',';
      name += fields[i];
    }
    parsed.name = std::string(TrimBlanks(name));
    parsed.reading = std::string(TrimBlanks(fields[reading]));
    lines.push_back(std::move(parsed));
  }
  return lines;
}

std::string FreeIpmiConfigArgument(std::string_view value) {
  std::string out = "\"";
  for (char c : value) {
    if (c == '\\' || c == '#' || c == '"') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

}  // namespace internal

Result<std::unique_ptr<Device>> MakeIpmiDevice(const std::vector<MetricDescription>& metrics,
                                               const DriverEnvironment& environment) {
  if (metrics.empty()) return Status::InvalidArgument("an IPMI device needs a metric");
  const MetricUrl& first = metrics.front().url;
  KWATT_ASSIGN_OR_RETURN(IpmiOptions options, ParseOptions(metrics.front()));
  for (const MetricDescription& metric : metrics) {
    const MetricUrl& url = metric.url;
    auto bad = [&](const std::string& what) {
      return Status::InvalidArgument(metric.origin + ": " + url.Redacted() + ": " + what);
    };
    if (url.scheme != "ipmisensor") return bad("not an ipmisensor:// URL");
    if (url.host.empty()) return bad("no BMC host");
    if (url.path.empty()) return bad("no sensor name (ipmisensor://USER:PASS@HOST/SENSOR)");
    if (HasLineBreakOrNul(url.user) || HasLineBreakOrNul(url.password)) {
      return bad("the user or password holds a line break or NUL");
    }
    if (url.host != first.host || url.port != first.port || url.user != first.user ||
        url.password != first.password) {
      return bad("not the BMC of " + metrics.front().origin);
    }
    KWATT_ASSIGN_OR_RETURN(IpmiOptions own, ParseOptions(metric));
    if (!(own == options))
      return bad("IPMI options differ from those of " + metrics.front().origin);
  }
  KWATT_ASSIGN_OR_RETURN(auto directory, MakeDirectory(first, environment.ipmi_cache_dir));
  return std::unique_ptr<Device>(new IpmiDevice(metrics, environment, std::move(options),
                                                std::move(directory.first), directory.second));
}

}  // namespace kwatt::collect
