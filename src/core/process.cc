#include "kwatt/core/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kwatt {
namespace {

std::string ErrnoText(int error) { return std::strerror(error); }

void CloseFd(int* fd) {
  if (*fd >= 0) {
    // close() is not retried on EINTR: on Linux the descriptor is released whatever it returns.
    ::close(*fd);
    *fd = -1;
  }
}

ssize_t ReadRetrying(int fd, void* buffer, size_t size) {
  while (true) {
    ssize_t got = ::read(fd, buffer, size);
    if (got >= 0 || errno != EINTR) return got;
  }
}

// waitpid() retried on EINTR. Returns the pid, 0 (WNOHANG, still running) or -1 (errno set).
pid_t WaitPid(pid_t pid, int* status, int flags) {
  while (true) {
    pid_t got = ::waitpid(pid, status, flags);
    if (got >= 0 || errno != EINTR) return got;
  }
}

// The child could not exec: says why (its errno) on `error_fd`, and exits as a shell would.
[[noreturn]] void ChildFailed(int error_fd, int error) {
  ssize_t ignored = ::write(error_fd, &error, sizeof error);
  (void)ignored;
  _exit(error == ENOENT ? 127 : 126);
}

// In the child: standard input from /dev/null, standard output and error onto `out_fd` and
// `err_fd` (one descriptor for both, or two). False (errno set) when that fails.
bool RedirectStandardStreams(int out_fd, int err_fd) {
  int null = ::open("/dev/null", O_RDONLY);
  if (null < 0) return false;
  // dup2 clears O_CLOEXEC on the copies (the originals close at exec); a descriptor that is
  // already the one wanted (kwatt started with it closed) has its O_CLOEXEC cleared instead.
  auto onto = [](int fd, int target) {
    return fd == target ? ::fcntl(fd, F_SETFD, 0) >= 0 : ::dup2(fd, target) >= 0;
  };
  if (!onto(null, 0) || !onto(out_fd, 1) || !onto(err_fd, 2)) return false;
  if (null > 2) ::close(null);
  return true;
}

// The child, between fork and exec: async-signal-safe calls only. Never returns; an error is
// written (its errno) on `error_fd` and the child exits 127 (no such program) or 126. `out_fd`
// and `err_fd`: its standard output and error when apart or into an output file, else -1.
[[noreturn]] void RunChild(char* const* args, const SpawnOptions& options, int go_fd, int error_fd,
                           int out_fd, int err_fd) {
  if (options.apart) {
    if (::setpgid(0, 0) != 0) ChildFailed(error_fd, errno);
    if (!RedirectStandardStreams(out_fd, err_fd)) ChildFailed(error_fd, errno);
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    for (int signal_number = 1; signal_number < NSIG; ++signal_number) {
      if (signal_number == SIGKILL || signal_number == SIGSTOP) continue;
      ::sigaction(signal_number, &fallback, nullptr);  // fails only for signals glibc reserves
    }
  } else {
    if (out_fd >= 0 && !RedirectStandardStreams(out_fd, err_fd)) ChildFailed(error_fd, errno);
    ::signal(SIGPIPE, SIG_DFL);
  }
  if (go_fd >= 0) {
    char byte;
    if (ReadRetrying(go_fd, &byte, 1) != 1) _exit(127);  // the caller went away
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execvp(args[0], args);
  ChildFailed(error_fd, errno);
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

ProcessExit ProcessExit::FromWaitStatus(int status) {
  ProcessExit exit;
  if (WIFEXITED(status)) {
    exit.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    exit.signal = WTERMSIG(status);
  }
  return exit;
}

Result<Process> Process::Spawn(const std::vector<std::string>& argv, const SpawnOptions& options) {
  if (argv.empty() || argv[0].empty()) return Status::InvalidArgument("no program to run");
  if (options.apart && !options.output_file.empty()) {
    return Status::InvalidArgument("a program apart has its output in pipes, not in " +
                                   options.output_file);
  }
  Process process;
  process.apart_ = options.apart;
  process.display_ = options.display.empty() ? argv[0] : options.display;
  process.program_ = argv[0];
  auto cannot = [&](const std::string& what, int error) {
    return Status::IOError("cannot run " + process.display_ + ": " + what + ErrnoText(error));
  };
  // Each pair: [0] the parent's end, [1] the child's (error: read by the parent).
  int error[2] = {-1, -1}, go[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  int output = -1;  // the output file, written by the child
  auto close_all = [&] {
    for (int* pair : {error, go, out, err}) {
      CloseFd(&pair[0]);
      CloseFd(&pair[1]);
    }
    CloseFd(&output);
  };
  if (!options.output_file.empty()) {
    output = ::open(options.output_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (output < 0) return cannot(options.output_file + ": ", errno);
  }
  if (::pipe2(error, O_CLOEXEC) != 0) {
    int saved = errno;
    close_all();
    return cannot("pipe: ", saved);
  }
  if (options.held && ::pipe2(go, O_CLOEXEC) != 0) {
    int saved = errno;
    close_all();
    return cannot("pipe: ", saved);
  }
  if (options.apart && (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)) {
    int saved = errno;
    close_all();
    return cannot("pipe: ", saved);
  }
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);

  pid_t pid = ::fork();
  if (pid < 0) {
    int saved = errno;
    close_all();
    return cannot("fork: ", saved);
  }
  // go: the child reads [0]; out and err: the child writes [1] (or the output file).
  if (pid == 0) {
    if (output >= 0) RunChild(args.data(), options, go[0], error[1], output, output);
    RunChild(args.data(), options, go[0], error[1], out[1], err[1]);
  }
  CloseFd(&output);
  CloseFd(&error[1]);
  CloseFd(&go[0]);
  CloseFd(&out[1]);
  CloseFd(&err[1]);
  process.pid_ = pid;
  process.error_fd_ = std::exchange(error[0], -1);
  process.go_fd_ = std::exchange(go[1], -1);
  if (options.apart) {
    process.stdout_fd_ = std::exchange(out[0], -1);
    process.stderr_fd_ = std::exchange(err[0], -1);
    ::fcntl(process.stdout_fd_, F_SETFL, ::fcntl(process.stdout_fd_, F_GETFL) | O_NONBLOCK);
    ::fcntl(process.stderr_fd_, F_SETFL, ::fcntl(process.stderr_fd_, F_GETFL) | O_NONBLOCK);
  }
  if (!options.held) KWATT_RETURN_IF_ERROR(process.Release());
  return process;
}

Process::Process(Process&& other) noexcept { *this = std::move(other); }

Process& Process::operator=(Process&& other) noexcept {
  if (this == &other) return *this;
  if (running()) KillAndReap();
  CloseAll();
  pid_ = std::exchange(other.pid_, -1);
  reaped_ = other.reaped_;
  apart_ = other.apart_;
  stdout_fd_ = std::exchange(other.stdout_fd_, -1);
  stderr_fd_ = std::exchange(other.stderr_fd_, -1);
  go_fd_ = std::exchange(other.go_fd_, -1);
  error_fd_ = std::exchange(other.error_fd_, -1);
  display_ = std::move(other.display_);
  program_ = std::move(other.program_);
  return *this;
}

Process::~Process() {
  // The go pipe first: a held child reads its end of file and exits rather than exec.
  CloseAll();
  if (running()) KillAndReap();
}

void Process::CloseAll() {
  CloseFd(&go_fd_);
  CloseFd(&error_fd_);
  CloseFd(&stdout_fd_);
  CloseFd(&stderr_fd_);
}

Status Process::Release() {
  if (error_fd_ < 0 || !running()) return Status::Internal(display_ + " was released twice");
  if (go_fd_ >= 0) {
    char byte = 1;
    ssize_t written;
    do {
      written = ::write(go_fd_, &byte, 1);
    } while (written < 0 && errno == EINTR);
    CloseFd(&go_fd_);
  }
  int child_errno = 0;
  ssize_t n = ReadRetrying(error_fd_, &child_errno, sizeof child_errno);
  CloseFd(&error_fd_);
  if (n <= 0) return Status::OK();  // exec succeeded: the pipe closed with it
  int status;
  WaitPid(pid_, &status, 0);
  reaped_ = true;
  CloseFd(&stdout_fd_);
  CloseFd(&stderr_fd_);
  if (child_errno == ENOENT) {
    bool searched = program_.find('/') == std::string::npos;
    return Status::NotFound("cannot run " + display_ + ": no program " + program_ +
                            (searched ? " in PATH" : ""));
  }
  return Status::IOError("cannot run " + display_ + ": " + ErrnoText(child_errno));
}

Result<std::optional<ProcessExit>> Process::TryWait() {
  if (!running()) return Status::Internal(display_ + " is not running");
  int status = 0;
  pid_t got = WaitPid(pid_, &status, WNOHANG);
  if (got < 0) return Status::IOError("waiting for " + display_ + ": " + ErrnoText(errno));
  if (got == 0) return std::optional<ProcessExit>();
  reaped_ = true;
  return std::optional<ProcessExit>(ProcessExit::FromWaitStatus(status));
}

Result<ProcessExit> Process::Wait() {
  if (!running()) return Status::Internal(display_ + " is not running");
  int status = 0;
  rusage usage{};
  pid_t got;
  do {
    got = ::wait4(pid_, &status, 0, &usage);
  } while (got < 0 && errno == EINTR);
  if (got < 0) return Status::IOError("waiting for " + display_ + ": " + ErrnoText(errno));
  reaped_ = true;
  ProcessExit exit = ProcessExit::FromWaitStatus(status);
  exit.user_seconds = double(usage.ru_utime.tv_sec) + double(usage.ru_utime.tv_usec) / 1e6;
  exit.system_seconds = double(usage.ru_stime.tv_sec) + double(usage.ru_stime.tv_usec) / 1e6;
  return exit;
}

void Process::Signal(int signal) const {
  if (!running()) return;
  // Not reaped yet, so neither its pid nor its group id can have been reused.
  if (apart_) ::kill(-pid_, signal);
  ::kill(pid_, signal);
}

ProcessExit Process::KillAndReap() {
  if (!running()) return ProcessExit{-1, SIGKILL};
  Signal(SIGKILL);
  int status = 0;
  pid_t got = WaitPid(pid_, &status, 0);
  reaped_ = true;
  if (got == pid_) return ProcessExit::FromWaitStatus(status);
  return ProcessExit{-1, SIGKILL};
}

}  // namespace kwatt
