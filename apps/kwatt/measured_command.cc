#include "apps/kwatt/measured_command.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kwatt::cli {

std::string CommandExit::Describe() const {
  if (signal) {
    return "was killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  }
  return "exited with status " + std::to_string(exit_code);
}

namespace {

ssize_t ReadRetrying(int fd, void* buffer, size_t size) {
  ssize_t n;
  do {
    n = ::read(fd, buffer, size);
  } while (n < 0 && errno == EINTR);
  return n;
}

}  // namespace

Result<MeasuredCommand> MeasuredCommand::Spawn(const std::vector<std::string>& argv) {
  if (argv.empty() || argv[0].empty()) {
    return Status::InvalidArgument("no command to measure: give one after --");
  }
  int go[2], error[2];
  if (::pipe2(go, O_CLOEXEC) != 0) return Status::IOError(std::string("pipe: ") + strerror(errno));
  if (::pipe2(error, O_CLOEXEC) != 0) {
    int saved = errno;
    ::close(go[0]);
    ::close(go[1]);
    return Status::IOError(std::string("pipe: ") + strerror(saved));
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    int saved = errno;
    for (int fd : {go[0], go[1], error[0], error[1]}) ::close(fd);
    return Status::IOError(std::string("fork: ") + strerror(saved));
  }
  if (pid == 0) {
    // The child: only async-signal-safe calls until exec.
    ::close(go[1]);
    ::close(error[0]);
    char byte;
    if (ReadRetrying(go[0], &byte, 1) != 1) _exit(127);  // kwatt went away
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::execvp(args[0], args.data());
    int saved = errno;
    ssize_t ignored = ::write(error[1], &saved, sizeof(saved));
    (void)ignored;
    _exit(saved == ENOENT ? 127 : 126);
  }
  ::close(go[0]);
  ::close(error[1]);
  MeasuredCommand command;
  command.pid_ = pid;
  command.go_fd_ = go[1];
  command.error_fd_ = error[0];
  command.program_ = argv[0];
  return command;
}

MeasuredCommand::MeasuredCommand(MeasuredCommand&& other) noexcept
    : pid_(other.pid_),
      go_fd_(other.go_fd_),
      error_fd_(other.error_fd_),
      program_(std::move(other.program_)),
      reaped_(other.reaped_) {
  other.pid_ = -1;
  other.go_fd_ = other.error_fd_ = -1;
  other.reaped_ = true;
}

MeasuredCommand::~MeasuredCommand() {
  if (go_fd_ >= 0) ::close(go_fd_);
  if (error_fd_ >= 0) ::close(error_fd_);
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    int status;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

Status MeasuredCommand::Release() {
  if (go_fd_ < 0) return Status::Internal("the measured command was released twice");
  char byte = 1;
  ssize_t written;
  do {
    written = ::write(go_fd_, &byte, 1);
  } while (written < 0 && errno == EINTR);
  ::close(go_fd_);
  go_fd_ = -1;
  int child_errno = 0;
  ssize_t n = ReadRetrying(error_fd_, &child_errno, sizeof(child_errno));
  ::close(error_fd_);
  error_fd_ = -1;
  if (n <= 0) return Status::OK();  // exec succeeded: the pipe closed with it
  int status;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  std::string what = "cannot run " + program_ + ": " + strerror(child_errno);
  if (child_errno == ENOENT) return Status::NotFound(what);
  if (child_errno == EACCES || child_errno == EPERM) return Status::PermissionDenied(what);
  return Status::IOError(what);
}

Result<CommandExit> MeasuredCommand::Wait() {
  if (reaped_ || pid_ <= 0) return Status::Internal("the measured command is not running");
  int status = 0;
  rusage usage{};
  pid_t got;
  do {
    got = ::wait4(pid_, &status, 0, &usage);
  } while (got < 0 && errno == EINTR);
  if (got < 0) return Status::IOError(std::string("waiting for the command: ") + strerror(errno));
  reaped_ = true;
  CommandExit exit;
  if (WIFEXITED(status)) exit.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) exit.signal = WTERMSIG(status);
  exit.user_seconds = double(usage.ru_utime.tv_sec) + double(usage.ru_utime.tv_usec) / 1e6;
  exit.system_seconds = double(usage.ru_stime.tv_sec) + double(usage.ru_stime.tv_usec) / 1e6;
  return exit;
}

void MeasuredCommand::Signal(int signal) const {
  if (pid_ > 0 && !reaped_) ::kill(pid_, signal);
}

}  // namespace kwatt::cli
