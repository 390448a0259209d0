// What the meter's outputs share (src/meter/outputs/output_base.h).
#include "src/meter/outputs/output_base.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "kwatt/core/json_text.h"

namespace kwatt::meter {

namespace internal {

namespace {

std::string HostName() {
  char name[HOST_NAME_MAX + 1] = "";
  if (::gethostname(name, sizeof name) != 0) return "";
  name[HOST_NAME_MAX] = '\0';
  return name;
}

std::string ParentOf(const std::string& path) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

}  // namespace

Result<NodeIdentity> ResolveNode(const OutputOptions& options, bool need_site,
                                 const std::string& shown) {
  NodeIdentity identity{options.node, options.site};
  std::string host = HostName();
  if (identity.node.empty()) identity.node = host.substr(0, host.find('.'));
  if (identity.site.empty()) {
    // "nova-1.lyon.grid5000.fr": the site is the second label.
    const std::string suffix = ".grid5000.fr";
    size_t first = host.find('.');
    if (first != std::string::npos && host.size() > suffix.size() &&
        host.compare(host.size() - suffix.size(), suffix.size(), suffix) == 0) {
      size_t second = host.find('.', first + 1);
      identity.site = host.substr(first + 1, second - first - 1);
    }
  }
  if (identity.node.empty() || identity.node.size() > 255 ||
      identity.node.find_first_of(".,/ \t\n") != std::string::npos) {
    return Status::InvalidArgument("output '" + shown + "': the node '" + identity.node +
                                   "' is not a device id Kwollect takes (1 to 255 bytes, no '.', "
                                   "',', '/' or blank): give the node's uid (nova-1) as the node");
  }
  if (need_site && identity.site.empty()) {
    return Status::InvalidArgument("output '" + shown +
                                   "' needs a Grid'5000 site, and the host name (" + host +
                                   ") names none: end the URL with /sites/SITE, or give the site");
  }
  if (identity.site.find_first_of("/?#., \t\n") != std::string::npos) {
    return Status::InvalidArgument("output '" + shown + "': the site '" + identity.site +
                                   "' is not a site's uid (lyon, nancy...)");
  }
  return identity;
}

Status CheckWritableDirectory(const std::string& dir, const std::string& shown) {
  struct stat info;
  if (::stat(dir.c_str(), &info) != 0) {
    return Status::InvalidArgument("output '" + shown + "': the directory " + dir +
                                   " does not exist: create it first");
  }
  if (!S_ISDIR(info.st_mode)) {
    return Status::InvalidArgument("output '" + shown + "': " + dir + " is not a directory");
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return Status::PermissionDenied("output '" + shown + "': the directory " + dir +
                                    " cannot be written by this user: give one it can write to, "
                                    "or the right to write there");
  }
  return Status::OK();
}

Status CheckWritableFile(const std::string& path, const std::string& shown) {
  struct stat info;
  if (::stat(path.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode)) {
      return Status::InvalidArgument("output '" + shown + "': " + path +
                                     " is a directory: give a file's path");
    }
    if (::access(path.c_str(), W_OK) != 0) {
      return Status::PermissionDenied("output '" + shown + "': " + path +
                                      " cannot be written by this user");
    }
    if (!S_ISREG(info.st_mode)) return Status::OK();  // /dev/null, a FIFO: written through
  }
  return CheckWritableDirectory(ParentOf(path), shown);
}

Status WriteAll(int fd, std::string_view data, const std::string& name) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IOError("cannot write " + name + ": " + std::strerror(errno));
    }
    data.remove_prefix(size_t(n));
  }
  return Status::OK();
}

std::string UtcNanosText(UnixNanos t) {
  char text[kMaxTimestampLength];
  int64_t seconds = FloorDiv(t, kNanosPerSecond);
  FormatTimestamp(seconds * kNanosPerSecond, 0, text);  // "YYYY-MM-DDTHH:MM:SS+00:00"
  char fraction[12];
  std::snprintf(fraction, sizeof fraction, ".%09lldZ", static_cast<long long>(NanosOfSecond(t)));
  return std::string(text, 19) + fraction;
}

void AppendNumber(std::string* out, double value) {
  char text[kMaxNumberLength];
  out->append(text, FormatJsonNumber(std::isfinite(value) ? value : 0.0, text));
}

// SeriesOutput.

SeriesOutput::SeriesOutput(std::string name, const OutputOptions& options)
    : name_(std::move(name)),
      options_(options),
      series_(options.max_targets, options.ranking_half_life_seconds) {}

Status SeriesOutput::Begin(const MeterHeader& header) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    series_.Begin(header);
  }
  return BeginSeries(header);
}

Status SeriesOutput::Write(const IntervalReport& report) {
  if (report.domains.size() != series_.header().domains.size()) {
    return Status::Internal("a report with " + std::to_string(report.domains.size()) +
                            " domains, where the header has " +
                            std::to_string(series_.header().domains.size()));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    series_.Add(report, &points_);
    ++stats_.reports;
  }
  return WriteSeries(report, points_);
}

std::string SeriesOutput::SaveState() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return series_.Save();
}

Status SeriesOutput::RestoreState(std::string_view state) {
  std::lock_guard<std::mutex> lock(mutex_);
  return series_.Restore(state);
}

OutputStats SeriesOutput::Stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::vector<std::string> SeriesOutput::Notes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return notes_;
}

void SeriesOutput::AddNote(std::string note) {
  std::lock_guard<std::mutex> lock(mutex_);
  notes_.push_back(std::move(note));
}

// HttpRowOutput.

Status HttpRowOutput::WriteSeries(const IntervalReport& report,
                                  const std::vector<SeriesPoint>& points) {
  items_.clear();
  Encode(report, points, &items_);
  Clock::time_point now = Clock::now();
  for (std::string& item : items_) {
    pending_.push_back(std::move(item));
    pending_since_.push_back(now);
  }
  int64_t overflow = int64_t(pending_.size()) - std::max<int64_t>(1, options_.max_buffered_rows);
  Status dropped;
  if (overflow > 0) {
    pending_.erase(pending_.begin(), pending_.begin() + overflow);
    pending_since_.erase(pending_since_.begin(), pending_since_.begin() + overflow);
    std::string why;
    UpdateStats([&](OutputStats& s) {
      s.rows_dropped += overflow;
      why = s.last_error;
    });
    dropped = Status::Unavailable(name_ + ": " + std::to_string(overflow) +
                                  " rows dropped, the oldest (" +
                                  std::to_string(options_.max_buffered_rows) +
                                  " rows wait already" + (why.empty() ? "" : ": " + why) + ")");
  }
  Status transient;
  Status refused = SendDue(/*force=*/false, &transient);
  UpdateStats([&](OutputStats& s) { s.rows_pending = int64_t(pending_.size()); });
  if (!refused.ok()) return refused;
  return dropped;
}

Status HttpRowOutput::SendDue(bool force, Status* transient) {
  Status refused;
  const size_t batch = size_t(std::max<int64_t>(1, options_.max_rows_per_request));
  while (!pending_.empty()) {
    Clock::time_point now = Clock::now();
    if (!force) {
      if (now < next_attempt_) break;
      bool due = pending_.size() >= batch ||
                 now - pending_since_.front() >=
                     std::chrono::duration<double>(std::max(0.0, options_.flush_seconds));
      if (!due) break;
    }
    size_t count = std::min(pending_.size(), batch);
    Status sent = Send(Body(pending_, count));
    bool kept = sent.code() == Status::Code::kUnavailable;
    UpdateStats([&](OutputStats& s) {
      ++s.requests;
      if (sent.ok()) {
        s.rows_written += int64_t(count);
        return;
      }
      ++s.failed_requests;
      s.last_error = sent.message();
      if (!kept) s.rows_dropped += int64_t(count);
    });
    if (kept) {
      next_attempt_ = now + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(retry_.Failed()));
      *transient = sent;
      break;
    }
    retry_.Succeeded();
    pending_.erase(pending_.begin(), pending_.begin() + ptrdiff_t(count));
    pending_since_.erase(pending_since_.begin(), pending_since_.begin() + ptrdiff_t(count));
    if (!sent.ok()) {
      refused = Status(sent).WithContext(name_ + ": " + std::to_string(count) +
                                         " rows refused and dropped");
    }
  }
  return refused;
}

Status HttpRowOutput::Finish() {
  Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(std::max(0.0, options_.finish_seconds)));
  Status refused;
  Status transient;
  while (!pending_.empty() && !abandoned_) {
    transient = Status::OK();
    Status status = SendDue(/*force=*/true, &transient);
    if (!status.ok()) refused = status;
    if (pending_.empty() || transient.ok()) continue;
    Clock::time_point now = Clock::now();
    if (now >= deadline || abandoned_) break;
    // The peer does not take them now: try again shortly, until the deadline.
    auto wait = std::min<Clock::duration>(deadline - now, std::chrono::milliseconds(200));
    std::this_thread::sleep_for(wait);
  }
  int64_t left = int64_t(pending_.size());
  UpdateStats([&](OutputStats& s) {
    s.rows_pending = 0;
    s.rows_dropped += left;
  });
  pending_.clear();
  pending_since_.clear();
  if (left > 0) {
    return Status::Unavailable(
        std::to_string(left) + " rows could not be sent " +
        (abandoned_ ? std::string("(given up at a second stop signal") : "before the end (") +
        (transient.ok() ? "" : (abandoned_ ? "; " : "") + transient.message()) +
        "); they are lost");
  }
  return refused;
}

}  // namespace internal

}  // namespace kwatt::meter
