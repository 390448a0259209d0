#include "kwatt/http/access_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <deque>
#include <mutex>
#include <thread>

#include "kwatt/core/text.h"

namespace kwatt::http {
namespace {

// Query parameters whose values are credentials.
bool IsSecretKey(std::string_view key) {
  std::string lower = PercentDecode(key);
  for (char& c : lower) c = (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c;
  for (std::string_view word :
       {"pass", "pwd", "token", "key", "secret", "auth", "session", "signature", "credential"}) {
    if (lower.find(word) != std::string::npos) return true;
  }
  return false;
}

// Quotes, backslashes and control bytes escaped as Apache does (\" \\ \xHH).
void AppendEscaped(std::string* out, std::string_view text) {
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(char(c));
    } else if (c < 0x20 || c >= 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      out->append(hex);
    } else {
      out->push_back(char(c));
    }
  }
}

void AppendField(std::string* out, std::string_view text) {
  if (text.empty()) {
    out->push_back('-');
  } else {
    AppendEscaped(out, text);
  }
}

}  // namespace

struct AccessLog::Impl {
  int fd = -1;
  bool owned = false;
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::string> lines;
  size_t dropped = 0;
  bool closing = false;
  std::thread writer;

  void Run() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      cv.wait(lock, [this] { return closing || !lines.empty(); });
      if (lines.empty()) return;
      std::string batch;
      if (dropped > 0) {
        batch = "kwatt: the access log could not keep up: " + std::to_string(dropped) +
                " lines were dropped\n";
        dropped = 0;
      }
      while (!lines.empty() && batch.size() < (1 << 20)) {
        batch += lines.front();
        lines.pop_front();
      }
      lock.unlock();
      for (size_t done = 0; done < batch.size();) {
        ssize_t n = ::write(fd, batch.data() + done, batch.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;  // a full disk or a closed terminal: the lines are lost, not the server
        done += size_t(n);
      }
      lock.lock();
    }
  }
};

AccessLog::AccessLog(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

AccessLog::~AccessLog() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->closing = true;
  }
  impl_->cv.notify_all();
  if (impl_->writer.joinable()) impl_->writer.join();
  if (impl_->owned) ::close(impl_->fd);
}

Result<std::shared_ptr<AccessLog>> AccessLog::Open(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  if (path.empty() || path == "-") {
    impl->fd = STDERR_FILENO;
  } else {
    impl->fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (impl->fd < 0) {
      return Status::IOError("cannot open the access log " + path + ": " + std::strerror(errno) +
                             " (give a file in a directory you can write, or - for stderr)");
    }
    impl->owned = true;
  }
  Impl* raw = impl.get();
  try {
    impl->writer = std::thread([raw] { raw->Run(); });
  } catch (const std::system_error& e) {
    if (impl->owned) ::close(impl->fd);
    return Status::IOError(std::string("cannot start the access log's thread: ") + e.what());
  }
  return std::shared_ptr<AccessLog>(new AccessLog(std::move(impl)));
}

void AccessLog::Write(const AccessRecord& record) {
  std::string line = Format(record);
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (impl_->lines.size() >= kMaxQueuedLines) {
      ++impl_->dropped;
      return;
    }
    impl_->lines.push_back(std::move(line));
  }
  impl_->cv.notify_one();
}

std::string AccessLog::Redacted(std::string_view target) {
  size_t question = target.find('?');
  if (question == std::string_view::npos) return std::string(target);
  std::string out(target.substr(0, question + 1));
  std::string_view query = target.substr(question + 1);
  while (true) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    size_t eq = pair.find('=');
    if (eq != std::string_view::npos && IsSecretKey(pair.substr(0, eq))) {
      out.append(pair.substr(0, eq + 1));
      out.append("REDACTED");
    } else {
      out.append(pair);
    }
    if (amp == std::string_view::npos) break;
    out.push_back('&');
    query = query.substr(amp + 1);
  }
  return out;
}

std::string AccessLog::Format(const AccessRecord& record) {
  std::string line;
  line.reserve(256);
  AppendField(&line, record.client);
  line.append(" - ");
  AppendField(&line, record.user);
  std::time_t seconds = std::chrono::system_clock::to_time_t(record.time);
  std::tm tm{};
  ::gmtime_r(&seconds, &tm);
  char when[40];
  std::strftime(when, sizeof(when), " [%d/%b/%Y:%H:%M:%S +0000] \"", &tm);
  line.append(when);
  if (record.method.empty()) {
    line.push_back('-');  // no request could be read (a refusal at the request line)
  } else {
    AppendEscaped(&line, record.method);
    line.push_back(' ');
    AppendEscaped(&line, Redacted(record.target));
    line.append(" HTTP/1.1");
  }
  line.append("\" ");
  line.append(std::to_string(record.status));
  line.push_back(' ');
  line.append(record.bytes > 0 ? std::to_string(record.bytes) : "-");
  line.append(" \"");
  AppendField(&line, record.referer);
  line.append("\" \"");
  AppendField(&line, record.user_agent);
  line.append("\" ");
  line.append(std::to_string(record.duration.count()));
  line.push_back('\n');
  return line;
}

}  // namespace kwatt::http
