// The command `kwatt meter -- COMMAND ARGS` measures: started held before exec(), so that the
// meter can take its first reading (and know the process) before the command does anything, then
// released. It inherits kwatt's standard input, output and error, its environment and its
// working directory; the signals kwatt blocks are unblocked for it.
#ifndef KWATT_APPS_KWATT_MEASURED_COMMAND_H_
#define KWATT_APPS_KWATT_MEASURED_COMMAND_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "kwatt/core/status.h"

namespace kwatt::cli {

// How the command ended, and what it used.
struct CommandExit {
  int exit_code = -1;                           // its exit status when it exited, else -1
  int signal = 0;                               // the signal that ended it, else 0
  double user_seconds = 0, system_seconds = 0;  // its CPU time and its reaped children's

  // The status kwatt exits with: the command's own, or 128 + the signal, as a shell does.
  int ShellStatus() const { return signal ? 128 + signal : exit_code; }
  // "exited with status 0", "was killed by signal 9 (Killed)".
  std::string Describe() const;
};

class MeasuredCommand {
 public:
  // Forks a child that waits for Release() before exec'ing `argv` (argv[0] looked up in PATH).
  // InvalidArgument for an empty argv; IOError when fork or a pipe fails.
  static Result<MeasuredCommand> Spawn(const std::vector<std::string>& argv);

  MeasuredCommand(MeasuredCommand&& other) noexcept;
  MeasuredCommand& operator=(MeasuredCommand&&) = delete;
  // A child never released is killed and reaped.
  ~MeasuredCommand();

  pid_t pid() const { return pid_; }

  // Lets the child exec. NotFound when the program does not exist, PermissionDenied when it
  // cannot be run, IOError otherwise, each naming it (the child has then exited with 127 or 126
  // and is reaped).
  Status Release();

  // Waits for the child's end (retrying on EINTR). REQUIRES: Release() returned OK.
  Result<CommandExit> Wait();

  // Sends `signal` to the child (SIGTERM passed on).
  void Signal(int signal) const;

 private:
  MeasuredCommand() = default;
  pid_t pid_ = -1;
  int go_fd_ = -1;     // written to release the child
  int error_fd_ = -1;  // the child's exec error (errno), or end of file once exec succeeded
  std::string program_;
  bool reaped_ = false;
};

}  // namespace kwatt::cli

#endif  // KWATT_APPS_KWATT_MEASURED_COMMAND_H_
