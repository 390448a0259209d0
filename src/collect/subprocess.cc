#include "src/collect/subprocess.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

namespace kwatt::collect {
namespace {

using Clock = std::chrono::steady_clock;

std::string ErrnoText(int error) { return std::strerror(error); }

void CloseFd(int* fd) {
  if (*fd >= 0) {
    // close() is not retried on EINTR: on Linux the descriptor is released whatever it returns.
    ::close(*fd);
    *fd = -1;
  }
}

// poll()'s timeout for `deadline`: milliseconds rounded up, at most a minute at a time (the
// caller loops), 0 when past.
int PollTimeout(Clock::time_point deadline) {
  if (deadline == Clock::time_point::max()) return 60000;
  auto now = Clock::now();
  if (deadline <= now) return 0;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
  return static_cast<int>(std::min<int64_t>(left, 60000));
}

// How the collector's programs are started: apart from kwatt (kwatt/core/process.h).
SpawnOptions Apart(const std::string& display) {
  SpawnOptions options;
  options.display = display;
  options.apart = true;
  return options;
}

// read() retried on EINTR; returns bytes read, 0 at end of file, -1 with errno (EAGAIN when none).
ssize_t ReadSome(int fd, char* buffer, size_t size) {
  while (true) {
    ssize_t got = ::read(fd, buffer, size);
    if (got >= 0 || errno != EINTR) return got;
  }
}

// Appends what `fd` has to `*text` (keeping at most `cap` bytes; `*truncated` when some were
// dropped). Returns false at end of file or on an error other than EAGAIN.
bool Drain(int fd, std::string* text, size_t cap, bool* truncated) {
  char buffer[65536];
  while (true) {
    ssize_t got = ReadSome(fd, buffer, sizeof buffer);
    if (got == 0) return false;
    if (got < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
    size_t room = cap > text->size() ? cap - text->size() : 0;
    size_t keep = std::min(room, static_cast<size_t>(got));
    text->append(buffer, keep);
    if (keep < static_cast<size_t>(got)) *truncated = true;
  }
}

std::string TimedOut(const std::string& display, Clock::time_point started) {
  auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
  return display + " timed out after " + std::to_string(elapsed.count()) + " ms";
}

}  // namespace

Result<RunResult> RunProgram(const std::vector<std::string>& argv, const RunOptions& options) {
  Clock::time_point started = Clock::now();
  KWATT_ASSIGN_OR_RETURN(Process child, Process::Spawn(argv, Apart(options.display)));
  const std::string& display = child.display();
  RunResult result;
  int fds[2] = {child.TakeStdout(), child.TakeStderr()};
  std::string* texts[2] = {&result.out, &result.err};
  bool* truncated[2] = {&result.out_truncated, &result.err_truncated};

  while (fds[0] >= 0 || fds[1] >= 0) {
    if (Clock::now() >= options.deadline) {
      CloseFd(&fds[0]);
      CloseFd(&fds[1]);
      child.KillAndReap();
      return Status::Unavailable(TimedOut(display, started));
    }
    pollfd polled[2];
    int count = 0;
    int which[2];
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0) continue;
      polled[count] = {fds[i], POLLIN, 0};
      which[count++] = i;
    }
    int ready = ::poll(polled, count, PollTimeout(options.deadline));
    if (ready < 0) {
      if (errno == EINTR) continue;
      int error = errno;
      CloseFd(&fds[0]);
      CloseFd(&fds[1]);
      child.KillAndReap();
      return Status::IOError("reading from " + display + ": poll: " + ErrnoText(error));
    }
    for (int k = 0; k < count; ++k) {
      if (polled[k].revents == 0) continue;
      int i = which[k];
      if (!Drain(fds[i], texts[i], options.max_output_bytes, truncated[i])) CloseFd(&fds[i]);
    }
  }

  // Both pipes are closed: the child has ended or is about to (or closed them and runs on).
  auto pause = std::chrono::microseconds(200);
  while (true) {
    KWATT_ASSIGN_OR_RETURN(std::optional<ProcessExit> ended, child.TryWait());
    if (ended) {
      result.exit = *ended;
      return result;
    }
    if (Clock::now() >= options.deadline) {
      child.KillAndReap();
      return Status::Unavailable(TimedOut(display, started));
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, options.deadline - Clock::now()));
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
}

// ChildProcess.

Result<ChildProcess> ChildProcess::Start(const std::vector<std::string>& argv,
                                         const Options& options) {
  KWATT_ASSIGN_OR_RETURN(Process process, Process::Spawn(argv, Apart(options.display)));
  ChildProcess child;
  child.stdout_fd_ = process.TakeStdout();
  child.stderr_fd_ = process.TakeStderr();
  child.display_ = process.display();
  child.process_.emplace(std::move(process));
  child.max_line_bytes_ = options.max_line_bytes;
  child.stderr_tail_bytes_ = options.stderr_tail_bytes;
  return child;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept { *this = std::move(other); }

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this == &other) return *this;
  KillAndReap();
  CloseAll();
  process_ = std::move(other.process_);
  other.process_.reset();
  exit_ = other.exit_;
  stdout_fd_ = std::exchange(other.stdout_fd_, -1);
  stderr_fd_ = std::exchange(other.stderr_fd_, -1);
  display_ = std::move(other.display_);
  buffer_ = std::move(other.buffer_);
  stdout_ended_ = other.stdout_ended_;
  stderr_tail_ = std::move(other.stderr_tail_);
  max_line_bytes_ = other.max_line_bytes_;
  stderr_tail_bytes_ = other.stderr_tail_bytes_;
  return *this;
}

ChildProcess::~ChildProcess() {
  KillAndReap();
  CloseAll();
}

void ChildProcess::KillAndReap() {
  if (process_) exit_ = process_->KillAndReap();
  process_.reset();
}

void ChildProcess::CloseAll() {
  CloseFd(&stdout_fd_);
  CloseFd(&stderr_fd_);
}

void ChildProcess::DrainStderr() {
  if (stderr_fd_ < 0) return;
  char buffer[4096];
  while (true) {
    ssize_t got = ReadSome(stderr_fd_, buffer, sizeof buffer);
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
      CloseFd(&stderr_fd_);
      return;
    }
    if (got < 0) return;
    stderr_tail_.append(buffer, static_cast<size_t>(got));
    if (stderr_tail_.size() > stderr_tail_bytes_) {
      stderr_tail_.erase(0, stderr_tail_.size() - stderr_tail_bytes_);
    }
  }
}

Result<ChildProcess::ReadOutcome> ChildProcess::ReadLine(std::string* line,
                                                         Clock::time_point deadline) {
  while (true) {
    size_t newline = buffer_.find('\n');
    if (newline != std::string::npos) {
      size_t end = newline > 0 && buffer_[newline - 1] == '\r' ? newline - 1 : newline;
      line->assign(buffer_, 0, end);
      buffer_.erase(0, newline + 1);
      return ReadOutcome::kLine;
    }
    if (buffer_.size() > max_line_bytes_) {
      return Status::Corruption(display_ + " wrote a line longer than " +
                                std::to_string(max_line_bytes_) + " bytes");
    }
    if (stdout_ended_ || stdout_fd_ < 0) {
      if (!buffer_.empty()) {
        line->swap(buffer_);
        buffer_.clear();
        if (!line->empty() && line->back() == '\r') line->pop_back();
        return ReadOutcome::kLine;
      }
      return ReadOutcome::kEnd;
    }
    pollfd polled[2] = {{stdout_fd_, POLLIN, 0}, {stderr_fd_, POLLIN, 0}};
    int ready = ::poll(polled, stderr_fd_ >= 0 ? 2 : 1, PollTimeout(deadline));
    if (ready < 0) {
      if (errno == EINTR) continue;
      return Status::IOError("reading from " + display_ + ": poll: " + ErrnoText(errno));
    }
    if (stderr_fd_ >= 0 && polled[1].revents != 0) DrainStderr();
    if (polled[0].revents != 0) {
      char buffer[65536];
      while (true) {
        ssize_t got = ReadSome(stdout_fd_, buffer, sizeof buffer);
        if (got > 0) {
          buffer_.append(buffer, static_cast<size_t>(got));
          if (buffer_.size() > max_line_bytes_ + sizeof buffer) break;
          continue;
        }
        if (got == 0) {
          stdout_ended_ = true;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
          return Status::IOError("reading from " + display_ + ": " + ErrnoText(errno));
        }
        break;
      }
      continue;
    }
    if (ready == 0 && Clock::now() >= deadline) return ReadOutcome::kTimeout;
  }
}

Result<ProcessExit> ChildProcess::Wait(Clock::time_point deadline) {
  if (!process_) return exit_;
  Clock::time_point started = Clock::now();
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    KWATT_ASSIGN_OR_RETURN(std::optional<ProcessExit> ended, process_->TryWait());
    if (ended) {
      process_.reset();
      exit_ = *ended;
      DrainStderr();
      return exit_;
    }
    if (Clock::now() >= deadline) return Status::Unavailable(TimedOut(display_, started));
    auto until = std::min(deadline, Clock::now() + pause);
    if (stderr_fd_ >= 0) {
      pollfd polled = {stderr_fd_, POLLIN, 0};
      if (::poll(&polled, 1, PollTimeout(until)) > 0) DrainStderr();
    } else {
      std::this_thread::sleep_until(until);
    }
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

Result<ProcessExit> ChildProcess::Stop(std::chrono::milliseconds grace) {
  if (!process_) return exit_;
  process_->Signal(SIGTERM);  // its process group and itself
  Result<ProcessExit> exit = Wait(Clock::now() + grace);
  if (exit.ok()) return exit;
  if (exit.status().code() != Status::Code::kUnavailable) return exit.status();
  KillAndReap();
  DrainStderr();
  return exit_;
}

}  // namespace kwatt::collect
