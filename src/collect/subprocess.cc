#include "src/collect/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

extern char** environ;

namespace kwatt::collect {
namespace {

using Clock = std::chrono::steady_clock;

std::string ErrnoText(int error) { return std::strerror(error); }

std::string DisplayOf(const std::vector<std::string>& argv, const std::string& display) {
  if (!display.empty()) return display;
  return argv.empty() ? std::string("(no program)") : argv[0];
}

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

ProcessExit ExitOf(int status) {
  ProcessExit exit;
  if (WIFEXITED(status)) {
    exit.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    exit.signal = WTERMSIG(status);
  }
  return exit;
}

// waitpid() retried on EINTR. Returns the pid, 0 (WNOHANG, still running) or -1 (errno set).
pid_t WaitPid(pid_t pid, int* status, int flags) {
  while (true) {
    pid_t got = ::waitpid(pid, status, flags);
    if (got >= 0 || errno != EINTR) return got;
  }
}

// Kills the child's process group and the child (in case it left the group), then reaps it.
ProcessExit KillGroupAndReap(pid_t pid) {
  // The child is not reaped yet, so neither its pid nor its group id can have been reused.
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
  int status = 0;
  if (WaitPid(pid, &status, 0) == pid) return ExitOf(status);
  return ProcessExit{-1, SIGKILL};
}

// read() retried on EINTR; returns bytes read, 0 at end of file, -1 with errno (EAGAIN when none).
ssize_t ReadSome(int fd, char* buffer, size_t size) {
  while (true) {
    ssize_t got = ::read(fd, buffer, size);
    if (got >= 0 || errno != EINTR) return got;
  }
}

struct Spawned {
  pid_t pid = -1;
  int out = -1;  // read end of its standard output
  int err = -1;  // read end of its standard error
};

Result<Spawned> Spawn(const std::vector<std::string>& argv, const std::string& display) {
  if (argv.empty() || argv[0].empty()) {
    return Status::InvalidArgument("no program to run");
  }
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0) {
    return Status::IOError("cannot run " + display + ": pipe: " + ErrnoText(errno));
  }
  if (::pipe2(err, O_CLOEXEC) != 0) {
    int error = errno;
    CloseFd(&out[0]);
    CloseFd(&out[1]);
    return Status::IOError("cannot run " + display + ": pipe: " + ErrnoText(error));
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  // dup2 clears O_CLOEXEC on the copies; the originals close at exec.
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);

  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // A process group of its own (so a kill reaches what it starts), no signal blocked (the caller's
  // thread may block some for a signal thread), every signal's disposition the default (SIGPIPE
  // ignored by the caller is not inherited).
  posix_spawnattr_setflags(&attributes,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attributes, 0);
  sigset_t signals;
  sigemptyset(&signals);
  posix_spawnattr_setsigmask(&attributes, &signals);
  sigfillset(&signals);
  sigdelset(&signals, SIGKILL);
  sigdelset(&signals, SIGSTOP);
  posix_spawnattr_setsigdefault(&attributes, &signals);

  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);

  pid_t pid = -1;
  bool search_path = argv[0].find('/') == std::string::npos;
  int error = search_path
                  ? ::posix_spawnp(&pid, args[0], &actions, &attributes, args.data(), environ)
                  : ::posix_spawn(&pid, args[0], &actions, &attributes, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  CloseFd(&out[1]);
  CloseFd(&err[1]);
  if (error != 0) {
    CloseFd(&out[0]);
    CloseFd(&err[0]);
    if (error == ENOENT) {
      return Status::NotFound("cannot run " + display + ": no program " + argv[0] +
                              (search_path ? " in PATH" : ""));
    }
    return Status::IOError("cannot run " + display + ": " + ErrnoText(error));
  }
  ::fcntl(out[0], F_SETFL, ::fcntl(out[0], F_GETFL) | O_NONBLOCK);
  ::fcntl(err[0], F_SETFL, ::fcntl(err[0], F_GETFL) | O_NONBLOCK);
  return Spawned{pid, out[0], err[0]};
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

std::string ProcessExit::Describe() const {
  if (signal != 0) {
    const char* name = ::strsignal(signal);
    return "was killed by signal " + std::to_string(signal) +
           (name ? std::string(" (") + name + ")" : "");
  }
  if (exit_code >= 0) return "exited with status " + std::to_string(exit_code);
  return "ended in an unknown way";
}

Result<RunResult> RunProgram(const std::vector<std::string>& argv, const RunOptions& options) {
  std::string display = DisplayOf(argv, options.display);
  Clock::time_point started = Clock::now();
  KWATT_ASSIGN_OR_RETURN(Spawned child, Spawn(argv, display));
  RunResult result;
  int fds[2] = {child.out, child.err};
  std::string* texts[2] = {&result.out, &result.err};
  bool* truncated[2] = {&result.out_truncated, &result.err_truncated};

  while (fds[0] >= 0 || fds[1] >= 0) {
    if (Clock::now() >= options.deadline) {
      CloseFd(&fds[0]);
      CloseFd(&fds[1]);
      KillGroupAndReap(child.pid);
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
      KillGroupAndReap(child.pid);
      return Status::IOError("reading from " + display + ": poll: " + ErrnoText(error));
    }
    for (int k = 0; k < count; ++k) {
      if (polled[k].revents == 0) continue;
      int i = which[k];
      if (!Drain(fds[i], texts[i], options.max_output_bytes, truncated[i])) CloseFd(&fds[i]);
    }
  }

  // Both pipes are closed: the child has ended or is about to (or closed them and runs on).
  int status = 0;
  auto pause = std::chrono::microseconds(200);
  while (true) {
    pid_t got = WaitPid(child.pid, &status, WNOHANG);
    if (got == child.pid) break;
    if (got < 0) return Status::IOError("waiting for " + display + ": " + ErrnoText(errno));
    if (Clock::now() >= options.deadline) {
      KillGroupAndReap(child.pid);
      return Status::Unavailable(TimedOut(display, started));
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, options.deadline - Clock::now()));
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
  result.exit = ExitOf(status);
  return result;
}

// ChildProcess.

Result<ChildProcess> ChildProcess::Start(const std::vector<std::string>& argv,
                                         const Options& options) {
  std::string display = DisplayOf(argv, options.display);
  KWATT_ASSIGN_OR_RETURN(Spawned spawned, Spawn(argv, display));
  ChildProcess child;
  child.pid_ = spawned.pid;
  child.stdout_fd_ = spawned.out;
  child.stderr_fd_ = spawned.err;
  child.display_ = std::move(display);
  child.max_line_bytes_ = options.max_line_bytes;
  child.stderr_tail_bytes_ = options.stderr_tail_bytes;
  return child;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept { *this = std::move(other); }

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this == &other) return *this;
  KillAndReap();
  CloseAll();
  pid_ = std::exchange(other.pid_, -1);
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
  if (pid_ > 0) exit_ = KillGroupAndReap(pid_);
  pid_ = -1;
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
  if (pid_ < 0) return exit_;
  Clock::time_point started = Clock::now();
  auto pause = std::chrono::milliseconds(1);
  while (true) {
    int status = 0;
    pid_t got = WaitPid(pid_, &status, WNOHANG);
    if (got == pid_) {
      pid_ = -1;
      exit_ = ExitOf(status);
      DrainStderr();
      return exit_;
    }
    if (got < 0) return Status::IOError("waiting for " + display_ + ": " + ErrnoText(errno));
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
  if (pid_ < 0) return exit_;
  ::kill(-pid_, SIGTERM);
  ::kill(pid_, SIGTERM);
  Result<ProcessExit> exit = Wait(Clock::now() + grace);
  if (exit.ok()) return exit;
  if (exit.status().code() != Status::Code::kUnavailable) return exit.status();
  KillAndReap();
  DrainStderr();
  return exit_;
}

}  // namespace kwatt::collect
