#include "src/collect/wattmetre.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <utility>

#include "kwatt/core/text.h"
#include "kwatt/core/yaml_json.h"
#include "src/collect/subprocess.h"

namespace kwatt::collect {
namespace {

using nlohmann::json;

// EPOCH[.FRACTION] to nanoseconds, from the digits (no floating point: exact). Digits past the
// ninth of the fraction are dropped (toward the earlier instant).
bool ParseEpoch(std::string_view s, UnixNanos* out) {
  s = TrimBlanks(s);
  if (s.empty()) return false;
  const char* p = s.data();
  const char* end = p + s.size();
  if (*p == '+') ++p;
  constexpr int64_t kMaxSeconds = INT64_MAX / kNanosPerSecond - 1;
  int64_t seconds = 0;
  const char* digits = p;
  while (p < end && *p >= '0' && *p <= '9') {
    seconds = seconds * 10 + (*p - '0');
    if (seconds > kMaxSeconds) return false;
    ++p;
  }
  bool has_seconds = p > digits;
  int64_t nanos = 0;
  bool has_fraction = false;
  if (p < end && *p == '.') {
    ++p;
    int64_t scale = kNanosPerSecond;
    while (p < end && *p >= '0' && *p <= '9') {
      scale /= 10;  // 0 after nine digits: the rest weigh nothing
      nanos += (*p - '0') * scale;
      has_fraction = true;
      ++p;
    }
  }
  if (p != end || !(has_seconds || has_fraction)) return false;
  *out = seconds * kNanosPerSecond + nanos;
  return true;
}

// The common case of a port's value, "[-]DIGITS[.DIGITS]" with at most 15 significant digits:
// the digits as an integer (exact in a double) divided by a power of ten (exact up to 1e22),
// which IEEE division rounds correctly, so the same double as from_chars, several times faster.
// False when the text is of another form (from_chars decides then).
bool FastDecimal(const char* p, const char* end, double* value) {
  static constexpr double kPowers[] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
  bool negative = p < end && *p == '-';
  if (negative) ++p;
  uint64_t mantissa = 0;
  int significant = 0;  // digits from the first non-zero one
  int fraction_digits = 0;
  bool any_digit = false;
  bool point = false;
  for (; p < end; ++p) {
    char c = *p;
    if (c >= '0' && c <= '9') {
      mantissa = mantissa * 10 + uint64_t(c - '0');
      any_digit = true;
      if (mantissa != 0) ++significant;
      if (point) ++fraction_digits;
      if (significant > 15 || fraction_digits > 15) return false;
    } else if (c == '.' && !point) {
      point = true;
    } else {
      return false;
    }
  }
  if (!any_digit) return false;
  *value = double(mantissa) / kPowers[fraction_digits];
  if (negative) *value = -*value;
  return true;
}

// A port's field: false for garbage; `*present` false for an empty field.
bool ParseValue(std::string_view s, double* value, bool* present) {
  if (!s.empty() && (IsBlank(s.front()) || IsBlank(s.back()))) s = TrimBlanks(s);
  if (s.empty()) {
    *present = false;
    return true;
  }
  const char* p = s.data();
  const char* end = p + s.size();
  if (*p == '+') {
    ++p;
    if (p == end || *p == '-' || *p == '+') return false;
  }
  if (FastDecimal(p, end, value)) {
    *present = true;
    return true;
  }
  auto [ptr, ec] = std::from_chars(p, end, *value);
  if (ec != std::errc() || ptr != end || !std::isfinite(*value)) return false;
  *present = true;
  return true;
}

// Splits `line` at commas, calling field(index, text) for each; stops when field returns false.
template <typename F>
bool ForEachField(std::string_view line, F&& field) {
  const char* p = line.data();
  const char* end = p + line.size();
  size_t index = 0;
  while (true) {
    const char* comma = static_cast<const char*>(std::memchr(p, ',', size_t(end - p)));
    const char* stop = comma ? comma : end;
    if (!field(index++, std::string_view(p, size_t(stop - p)))) return false;
    if (!comma) return true;
    p = comma + 1;
  }
}

void AddPort(WattmetreEntry* out, double value, bool present) {
  out->values.push_back(present ? value : 0.0);
  out->has_value.push_back(present ? 1 : 0);
}

// Adds one port's field (a value, or none when empty) to the entry; false, with *ok false, when
// it is not a number (the line is then malformed).
bool ReadPortField(std::string_view field, WattmetreEntry* out, bool* ok) {
  double value = 0;
  bool present = false;
  if (!ParseValue(field, &value, &present)) {
    *ok = false;
    return false;
  }
  AddPort(out, value, present);
  return true;
}

WattmetreLine ParseV2(std::string_view line, WattmetreEntry* out) {
  // DBG,DBG,EPOCH,OK,P0,P1,...
  bool ok = true;
  bool marked_bad = false;
  size_t fields = 0;
  bool complete = ForEachField(line, [&](size_t i, std::string_view f) {
    fields = i + 1;
    if (i < 2) return true;
    if (i == 2) {
      if (!ParseEpoch(f, &out->time)) ok = false;
      return true;  // the status field decides first whether the line counts
    }
    if (i == 3) {
      if (TrimBlanks(f) != "OK") {
        marked_bad = true;
        return false;
      }
      if (!ok) return false;
      return true;
    }
    return ReadPortField(f, out, &ok);
  });
  if (marked_bad) return WattmetreLine::kSkipped;
  if (!complete || !ok || fields < 5) return WattmetreLine::kMalformed;
  return WattmetreLine::kEntry;
}

WattmetreLine ParseV3(std::string_view line, WattmetreEntry* out) {
  // EPOCH,true,F2..F5,P0,X0,P1,X1,...,T1..T5
  size_t fields = size_t(std::count(line.begin(), line.end(), ',')) + 1;
  bool ok = true;
  bool marked_bad = false;
  size_t ports = fields >= 11 ? (fields - 11) / 2 : 0;
  size_t last_port_field = 6 + 2 * ports;  // one past
  // Stops at the trailer on purpose: whether it read every field does not matter.
  (void)ForEachField(line, [&](size_t i, std::string_view f) {
    if (i == 0) {
      if (!ParseEpoch(f, &out->time)) ok = false;
      return true;
    }
    if (i == 1) {
      if (TrimBlanks(f) != "true") {
        marked_bad = true;
        return false;
      }
      return ok && fields >= 11;
    }
    if (i >= last_port_field) return false;  // the trailer: not read
    if (i < 6 || i % 2 != 0) return true;
    return ReadPortField(f, out, &ok);
  });
  if (marked_bad) return WattmetreLine::kSkipped;
  if (!ok || fields < 11 || out->values.size() != ports) return WattmetreLine::kMalformed;
  return WattmetreLine::kEntry;
}

Status OpenError(const std::string& what, int error) {
  std::string message = what + ": " + std::strerror(error);
  return error == ENOENT ? Status::NotFound(message) : Status::IOError(message);
}

std::string JsonString(std::string_view s) { return json(std::string(s)).dump(); }

// The URL as messages show it: a wattmeter's has no credentials to hide (user and password are
// left out all the same).
std::string StreamName(const MetricUrl& url) {
  std::string name = "wattmetre://" + url.host + "/" + url.path;
  if (!url.query.empty()) name += "?" + url.query;
  return name;
}

}  // namespace

WattmetreLine ParseWattmetreLine(std::string_view line, int version, WattmetreEntry* out) {
  out->values.clear();
  out->has_value.clear();
  out->time = 0;
  // Strip the line's end (Python's strip(), as Kwollect reads).
  while (!line.empty() && IsBlank(line.back())) line.remove_suffix(1);
  while (!line.empty() && IsBlank(line.front())) line.remove_prefix(1);
  if (line.empty()) return WattmetreLine::kSkipped;
  if (version == 2) return ParseV2(line, out);
  if (version == 3) return ParseV3(line, out);
  return WattmetreLine::kMalformed;
}

Result<std::map<std::string, std::string>> ReadWattmetreMapping(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return OpenError("the wattmeter mapping file " + path, errno);
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return Status::IOError("the wattmeter mapping file " + path + ": read failed");
  std::string where = "the wattmeter mapping file " + path;
  KWATT_ASSIGN_OR_RETURN(std::string text, kwatt::internal::YamlToJson(buffer.str(), where));
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) {
    return Status::InvalidArgument(where +
                                   ": not a mapping of nodes to their ports "
                                   "(nova-1: [wattmetre1-port0, wattmetre1-port1])");
  }
  if (doc.empty()) return Status::InvalidArgument(where + ": holds no node");
  std::map<std::string, std::string> node_of_port;
  for (const auto& [node, ports] : doc.items()) {
    std::string entry = where + ", node " + JsonString(node);
    if (node.empty()) return Status::InvalidArgument(where + ": a node with an empty name");
    if (!ports.is_array()) {
      return Status::InvalidArgument(entry + ": its ports are not a list ([wattmetre1-port0])");
    }
    for (const json& port : ports) {
      if (!port.is_string() || port.get_ref<const std::string&>().empty()) {
        return Status::InvalidArgument(entry + ": " + port.dump() + " is not a port name");
      }
      const std::string& name = port.get_ref<const std::string&>();
      auto [it, inserted] = node_of_port.emplace(name, node);
      if (!inserted) {
        return Status::InvalidArgument(entry + ": port " + JsonString(name) +
                                       " is already given to node " + JsonString(it->second));
      }
    }
  }
  return node_of_port;
}

// --- WattmetreAverager ---

WattmetreAverager::WattmetreAverager(WattmetreOptions options) : options_(std::move(options)) {
  if (options_.metric.empty()) options_.metric = std::string(kWattmetreMetric);
  scale_ = options_.scale_factor.value_or(1.0);
}

WattmetreAverager::Port& WattmetreAverager::PortAt(size_t index) {
  while (ports_.size() <= index) {
    Port port;
    port.device_id = options_.wattmetre_id + "-port" + std::to_string(ports_.size());
    auto mapped = options_.nodes.find(port.device_id);
    if (mapped != options_.nodes.end()) port.node = mapped->second;
    for (const auto& label : options_.labels) {
      if (!port.node.empty() && label.first == "_device_alias") continue;
      port.labels.push_back(label);
    }
    if (!port.node.empty()) port.labels.emplace_back("_device_alias", JsonString(port.node));
    ports_.push_back(std::move(port));
  }
  return ports_[index];
}

void WattmetreAverager::Add(const WattmetreEntry& entry, const StreamSource::Promoted& promoted,
                            std::vector<Reading>* out) {
  int64_t second = FloorDiv(entry.time, kNanosPerSecond);
  if (second_ && second != *second_) {
    if (second < *second_) {
      ++counts_.backwards;
    } else if (second > *second_ + 1) {
      ++counts_.gaps;
      counts_.missing_seconds += second - *second_ - 1;
    }
    Emit(promoted, out);
  } else if (!second_ && previous_ && second > *previous_ + 1) {
    ++counts_.gaps;  // since an earlier stream's (or Flush's) last second
    counts_.missing_seconds += second - *previous_ - 1;
  }
  second_ = second;
  ++counts_.lines;
  auto index = uint32_t(times_.size());
  times_.push_back(entry.time);
  for (size_t i = 0; i < entry.values.size(); ++i) {
    if (!entry.has_value[i]) continue;
    Port& port = PortAt(i);
    double v = entry.values[i];
    port.sum += v;
    ++port.count;
    port.values.emplace_back(index, v);
  }
}

void WattmetreAverager::Flush(const StreamSource::Promoted& promoted, std::vector<Reading>* out) {
  if (second_) Emit(promoted, out);
  second_.reset();
}

void WattmetreAverager::Emit(const StreamSource::Promoted& promoted, std::vector<Reading>* out) {
  previous_ = second_;
  UnixNanos start = *second_ * kNanosPerSecond;
  for (Port& port : ports_) {
    if (port.count == 0) continue;
    bool every_value = promoted && promoted(port.device_id, port.node, options_.metric);
    auto add = [&](UnixNanos time, double value) {
      Reading r;
      r.time = time;
      r.device_id = port.device_id;
      r.metric_id = options_.metric;
      r.value = options_.scale_factor ? value * scale_ : value;
      r.labels = port.labels;
      out->push_back(std::move(r));
      ++counts_.rows;
    };
    if (every_value) {
      for (const auto& [index, value] : port.values) add(times_[index], value);
    } else {
      add(start, port.sum / double(port.count));
    }
    port.sum = 0;
    port.count = 0;
    port.values.clear();
  }
  times_.clear();
  ++counts_.seconds;
}

// --- WattmetreSource ---

WattmetreOpener OpenWattmetrePath(std::string path) {
  return [path]() -> Result<WattmetreStream> {
    if (path == "-") {
      int fd = ::fcntl(0, F_DUPFD_CLOEXEC, 0);
      if (fd < 0) return OpenError("standard input", errno);
      return WattmetreStream{fd, nullptr};
    }
    // O_NONBLOCK: a FIFO opens without waiting for its writer, a serial line without waiting for
    // its carrier; reads are driven by poll() and retried on EAGAIN.
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) return OpenError("the wattmeter stream " + path, errno);
    struct stat st;
    if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
      ::close(fd);
      return Status::InvalidArgument("the wattmeter stream " + path + " is a directory");
    }
    return WattmetreStream{fd, nullptr, S_ISREG(st.st_mode)};
  };
}

WattmetreSource::WattmetreSource(WattmetreSourceOptions options) : options_(std::move(options)) {}

WattmetreCounts WattmetreSource::counts() const {
  WattmetreCounts c = averager_counts_;
  c.lines = line_counts_.lines;
  c.skipped_lines = line_counts_.skipped_lines;
  c.malformed_lines = line_counts_.malformed_lines;
  c.stalls = line_counts_.stalls;
  return c;
}

void WattmetreSource::Publish(const WattmetreCounts& running) {
  WattmetreCounts c = counts();
  c.seconds += running.seconds;
  c.gaps += running.gaps;
  c.missing_seconds += running.missing_seconds;
  c.backwards += running.backwards;
  c.rows += running.rows;
  std::lock_guard lock(published_mutex_);
  published_ = c;
}

std::vector<std::pair<std::string, int64_t>> WattmetreSource::Counters() const {
  std::lock_guard lock(published_mutex_);
  const WattmetreCounts& c = published_;
  return {{"lines", c.lines},
          {"skipped_lines", c.skipped_lines},
          {"malformed_lines", c.malformed_lines},
          {"gaps", c.gaps},
          {"missing_seconds", c.missing_seconds},
          {"backwards", c.backwards},
          {"stalls", c.stalls}};
}

namespace {

// A line as messages quote it: its first 60 bytes, control characters and non-ASCII escaped.
std::string LineExcerpt(std::string_view line) {
  std::string out = "\"";
  for (size_t i = 0; i < line.size() && i < 60; ++i) {
    auto c = static_cast<unsigned char>(line[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += char(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  out += line.size() > 60 ? "...\"" : "\"";
  return out;
}

}  // namespace

Status WattmetreSource::Run(std::stop_token stop, const Promoted& promoted, const Emit& emit,
                            const Say& say) {
  if (!options_.open) return Status::Internal(options_.name + ": no way to open the stream");
  KWATT_ASSIGN_OR_RETURN(WattmetreStream stream, options_.open());
  const int fd = stream.fd;
  const bool regular_file = stream.regular_file;
  // Closes the stream however Run returns, then lets its owner finish (a child reaped).
  struct Closer {
    WattmetreStream* stream;
    Status Close() {
      if (stream->fd < 0) return Status::OK();
      ::close(stream->fd);
      stream->fd = -1;
      return stream->finish ? stream->finish() : Status::OK();
    }
    ~Closer() { (void)Close(); }  // only on an early return, whose status says more
  } closer{&stream};

  using SteadyClock = std::chrono::steady_clock;
  WattmetreAverager averager(options_.averager);
  if (last_second_) averager.ContinueAfter(*last_second_);
  WattmetreEntry entry;
  std::vector<Reading> out;
  // Since the last reading (or the opening): when, and what was read that gave none.
  SteadyClock::time_point last_entry = SteadyClock::now();
  bool entry_read = false;
  int64_t lines_since_entry = 0;
  int64_t malformed_since_entry = 0;
  std::string malformed_last;  // its first 61 bytes: excerpted only when said
  auto malformed = [&](std::string_view text) {
    ++line_counts_.malformed_lines;
    ++malformed_since_entry;
    malformed_last.assign(text.substr(0, 61));
    ++malformed_unsaid_;
    auto now = SteadyClock::now();
    if (malformed_said_ && now - *malformed_said_ < std::chrono::minutes(1)) return;
    if (say) {
      say(options_.name + ": " + std::to_string(malformed_unsaid_) +
          (malformed_unsaid_ == 1 ? " line does" : " lines do") +
          " not read as the wattmeter's version " + std::to_string(options_.version) +
          " lines, dropped (the last: " + LineExcerpt(malformed_last) +
          "); is the stream the wattmeter's, and its version right (?version=2 or 3)?");
    }
    malformed_said_ = now;
    malformed_unsaid_ = 0;
  };
  auto line = [&](std::string_view text) {
    ++line_counts_.lines;
    ++lines_since_entry;
    switch (ParseWattmetreLine(text, options_.version, &entry)) {
      case WattmetreLine::kEntry:
        averager.Add(entry, promoted, &out);
        entry_read = true;
        lines_since_entry = 0;
        malformed_since_entry = 0;
        break;
      case WattmetreLine::kSkipped:
        if (!TrimBlanks(text).empty()) ++line_counts_.skipped_lines;
        break;
      case WattmetreLine::kMalformed:
        malformed(text);
        break;
    }
  };
  auto deliver = [&] {
    Publish(averager.counts());
    if (out.empty()) return;
    std::vector<Reading> batch;
    batch.swap(out);
    emit(std::move(batch));
  };

  // A line longer than this is no wattmeter's (42 ports * ~10 characters): counted malformed
  // and dropped up to its end.
  constexpr size_t kMaxLine = 1 << 20;
  std::string pending;
  bool discarding = false;
  std::vector<char> buffer(1 << 16);
  Status end;
  bool ended = false;
  // On stop, what the stream already holds (a pipe's buffer: a second or so of lines) is read
  // before closing, up to kDrainBytes (a regular file is not read to its end then).
  constexpr size_t kDrainBytes = 1 << 20;
  bool draining = false;
  size_t drained = 0;
  // Whether the stream has given no reading for stall_ms (then `end` says so).
  auto stalled = [&] {
    auto silent = SteadyClock::now() - last_entry;
    if (regular_file || silent < std::chrono::milliseconds(options_.stall_ms)) return false;
    ++line_counts_.stalls;
    char seconds[32];  // the bound, not the time measured: the same stall says the same words
    std::snprintf(seconds, sizeof seconds, "%g", options_.stall_ms / 1000.0);
    std::string what =
        lines_since_entry == 0
            ? std::string(" (nothing read")
            : " (" + std::to_string(lines_since_entry) + " lines read, " +
                  std::to_string(malformed_since_entry) + " of them not wattmeter lines" +
                  (malformed_last.empty() ? "" : ", the last " + LineExcerpt(malformed_last));
    end = Status::Unavailable(options_.name + ": no reading for " + std::string(seconds) + " s" +
                              what + "); the stream is closed and opened again" +
                              (lines_since_entry == 0 && line_counts_.lines == 0
                                   ? " (is the wattmeter's writer running?)"
                                   : ""));
    return true;
  };
  while (true) {
    if (!draining && stop.stop_requested()) draining = true;
    if (draining && drained >= kDrainBytes) break;
    if (stream.tend) stream.tend();
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, draining ? 0 : options_.poll_timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      end = Status::IOError(options_.name + ": poll: " + std::strerror(errno));
      break;
    }
    if (ready == 0) {
      if (draining) break;
      if (stalled()) break;
      continue;
    }
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n > 0 && draining) drained += size_t(n);
    if (n < 0) {
      if (errno == EAGAIN && draining) break;
      if (errno == EINTR || errno == EAGAIN) continue;
      end = Status::IOError(options_.name + ": read: " + std::strerror(errno));
      break;
    }
    if (n == 0) {
      ended = true;
      break;
    }
    const char* p0 = buffer.data();
    const char* chunk_end = p0 + n;
    while (p0 < chunk_end) {
      const char* nl = static_cast<const char*>(std::memchr(p0, '\n', size_t(chunk_end - p0)));
      if (!nl) {
        if (!discarding) {
          pending.append(p0, size_t(chunk_end - p0));
          if (pending.size() > kMaxLine) {
            ++line_counts_.lines;
            ++lines_since_entry;
            malformed(pending);
            pending.clear();
            discarding = true;
          }
        }
        break;
      }
      if (discarding) {
        discarding = false;
      } else if (pending.empty()) {
        line(std::string_view(p0, size_t(nl - p0)));
      } else {
        pending.append(p0, size_t(nl - p0));
        line(pending);
        pending.clear();
      }
      p0 = nl + 1;
    }
    deliver();
    if (entry_read) {
      last_entry = SteadyClock::now();
      entry_read = false;
    } else if (!draining && stalled()) {
      break;
    }
  }
  if (!pending.empty() && !discarding) line(pending);
  averager.Flush(promoted, &out);
  deliver();
  Status finished = closer.Close();
  if (ended && finished.ok() && regular_file) {
    end = Status::OK();
  } else if (ended) {
    end = finished.ok() ? Status::Unavailable(options_.name + ": the stream ended after " +
                                              std::to_string(line_counts_.lines) + " lines")
                        : finished.WithContext(options_.name);
  }

  const WattmetreCounts& a = averager.counts();
  averager_counts_.seconds += a.seconds;
  averager_counts_.gaps += a.gaps;
  averager_counts_.missing_seconds += a.missing_seconds;
  averager_counts_.backwards += a.backwards;
  averager_counts_.rows += a.rows;
  if (averager.last_second()) last_second_ = averager.last_second();
  Publish({});
  return end;
}

// --- From descriptions ---

Result<WattmetreSourceOptions> WattmetreSourceOptionsOf(const MetricDescription& metric) {
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(metric.origin + ": " + what);
  };
  const MetricUrl& url = metric.url;
  if (url.scheme != "wattmetre") return bad("not a wattmetre:// URL (" + url.scheme + "://)");
  if (url.host.empty()) return bad("the URL names no wattmeter (wattmetre://wattmetre1/-)");
  WattmetreSourceOptions options;
  options.name = StreamName(url);
  std::string_view query = url.query;
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair == "version=2") {
      options.version = 2;
    } else if (pair == "version=3") {
      options.version = 3;
    } else if (pair.starts_with("version=")) {
      return bad("wattmeter version " + std::string(pair.substr(8)) + ": only 2 and 3 are read");
    } else if (!pair.empty()) {
      return bad("unknown URL parameter " + std::string(pair) + " (only version=2 or version=3)");
    }
  }
  if (!metric.command.empty() && !url.path.empty()) {
    return bad("both a stream path (" + url.path + ") and a command: give one");
  }
  if (metric.command.empty() && url.path.empty()) {
    return bad("no stream: give its path in the URL (wattmetre://" + url.host +
               "/dev/ttyUSB0, or /- for standard input) or a command");
  }
  if (metric.command.empty()) {
    options.open = OpenWattmetrePath(url.path == "-" ? url.path : "/" + url.path);
  }
  options.averager.wattmetre_id = url.host;
  options.averager.metric = metric.name.empty() ? std::string(kWattmetreMetric) : metric.name;
  options.averager.labels = metric.labels;
  options.averager.scale_factor = metric.scale_factor;
  if (!metric.mapping_file.empty()) {
    auto nodes = ReadWattmetreMapping(metric.mapping_file);
    if (!nodes.ok()) return nodes.status().WithContext(metric.origin);
    options.averager.nodes = std::move(*nodes);
  }
  return options;
}

Result<std::unique_ptr<StreamSource>> MakeWattmetreSource(
    const std::vector<MetricDescription>& metrics, const DriverEnvironment& environment) {
  (void)environment;
  if (metrics.empty()) return Status::InvalidArgument("a wattmeter stream without a description");
  if (metrics.size() > 1) {
    std::string origins;
    for (const MetricDescription& m : metrics) origins += (origins.empty() ? "" : "; ") + m.origin;
    return Status::InvalidArgument("one description per wattmeter stream, but " +
                                   std::to_string(metrics.size()) + " describe " +
                                   StreamName(metrics[0].url) + ": " + origins);
  }
  KWATT_ASSIGN_OR_RETURN(WattmetreSourceOptions options, WattmetreSourceOptionsOf(metrics[0]));
  if (!options.open) {
    // A command's standard output: started by each run, stopped when it ends.
    std::vector<std::string> argv = metrics[0].command;
    std::string name = options.name;
    options.open = [argv, name]() -> Result<WattmetreStream> {
      ChildProcess::Options child_options;
      child_options.display = argv[0];
      KWATT_ASSIGN_OR_RETURN(ChildProcess started, ChildProcess::Start(argv, child_options));
      auto child = std::make_shared<ChildProcess>(std::move(started));
      int fd = ::fcntl(child->stdout_fd(), F_DUPFD_CLOEXEC, 0);
      if (fd < 0) return OpenError("the output of " + argv[0], errno);
      WattmetreStream stream;
      stream.fd = fd;
      stream.tend = [child] { child->DrainStderr(); };
      stream.finish = [child, name]() -> Status {
        Result<ProcessExit> exit = child->Stop(std::chrono::milliseconds(2000));
        if (!exit.ok()) return exit.status();
        // Stopped by us (SIGTERM) is how a run ends on stop: not a failure.
        if (exit->ok() || exit->signal == SIGTERM) return Status::OK();
        std::string tail = child->stderr_tail();
        while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) tail.pop_back();
        size_t last_line = tail.rfind('\n');
        if (last_line != std::string::npos) tail = tail.substr(last_line + 1);
        return Status::Unavailable(child->display() + " " + exit->Describe() +
                                   (tail.empty() ? "" : ": " + tail));
      };
      return stream;
    };
  }
  return std::unique_ptr<StreamSource>(std::make_unique<WattmetreSource>(std::move(options)));
}

}  // namespace kwatt::collect
