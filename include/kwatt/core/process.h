// Starting a program as a child process, and how it ended: the one spawner of kwatt, used by the
// collector's drivers (ipmi-sensors once per poll, the wattmeter's line stream:
// kwatt/collect's subprocess), by `kwatt meter -- COMMAND` (the command it measures) and by the
// tests' starters of peer programs (snmpd, ipmi_sim: their output into a log file).
//
// A program is run without a shell, from an argv vector (argv[0] looked up in PATH when it holds
// no '/'), with no signal blocked and SIGPIPE's default disposition (kwatt ignores SIGPIPE). No
// descriptor of the caller's leaks into it (every descriptor made here is O_CLOEXEC). Every
// system call is retried on EINTR. A failure to start it (no such program, not executable) is
// known before Spawn returns, or before Release returns for a held child.
//
// Messages name the program by a display form the caller gives (by default argv[0]): argv may be
// shown to the operator, so a caller whose argv is sensitive gives a redacted one; a secret never
// belongs in argv anyway (ps shows it to every user of the machine).
//
// Thread safety: distinct Process objects may be used from distinct threads at once (the child
// calls only async-signal-safe functions between fork and exec); one Process is used by one
// thread at a time.
#ifndef KWATT_CORE_PROCESS_H_
#define KWATT_CORE_PROCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kwatt/core/status.h"

namespace kwatt {

// How a child ended.
struct ProcessExit {
  int exit_code = -1;  // its exit status when it exited, else -1
  int signal = 0;      // the signal that ended it, else 0
  // Its CPU time and that of its reaped children, when Process::Wait reaped it (else 0).
  double user_seconds = 0, system_seconds = 0;

  bool ok() const { return signal == 0 && exit_code == 0; }
  // The status a shell gives it: its own, or 128 + the signal.
  int ShellStatus() const { return signal ? 128 + signal : exit_code; }
  // "exited with status 2", "was killed by signal 9 (Killed)".
  std::string Describe() const;

  // The exit a wait status (waitpid's) says.
  static ProcessExit FromWaitStatus(int status);
};

struct SpawnOptions {
  // What messages show for the program (empty: argv[0]).
  std::string display;
  // Apart from kwatt: in a process group of its own (so that a kill of the group ends whatever
  // it started, and a terminal's ^C does not reach it), standard input from /dev/null, standard
  // output and error into pipes that the caller reads (stdout_fd, stderr_fd), and every signal's
  // disposition the default. Else it shares kwatt's process group, standard input, output and
  // error, and the dispositions kwatt was started with (nohup's SIGHUP ignored), SIGPIPE's apart.
  bool apart = false;
  // Held before exec until Release(), so that the caller can know the process (and start
  // measuring it) before the program does anything.
  bool held = false;
  // Non-empty: standard input from /dev/null, standard output and error both into this file,
  // created (mode 0600) or truncated; for a program whose output is only read when something
  // went wrong (a test's peer: its log). Not with `apart`, whose output goes into pipes.
  std::string output_file;
};

// A child process, owned until it is reaped. The destructor kills one not reaped (SIGKILL, to
// its group too when it has one of its own) and reaps it.
class Process {
 public:
  // Starts `argv`. InvalidArgument for an empty argv or `output_file` with `apart`; NotFound
  // "cannot run <display>: no program <argv[0]>[ in PATH]" when the program does not exist (for a
  // held child: from Release); IOError "cannot run <display>: ..." when it cannot be started (not
  // executable, no pipe, an output_file that cannot be opened...).
  static Result<Process> Spawn(const std::vector<std::string>& argv,
                               const SpawnOptions& options = {});

  Process(Process&& other) noexcept;
  Process& operator=(Process&& other) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();

  // Its process id (kept once it is reaped; -1 once moved from).
  pid_t pid() const { return pid_; }
  const std::string& display() const { return display_; }
  // Whether it is not reaped yet.
  bool running() const { return pid_ > 0 && !reaped_; }

  // With `apart`: the read ends of its standard output and error (O_NONBLOCK, O_CLOEXEC); the
  // caller takes them (closes them), -1 afterwards or without `apart`.
  int TakeStdout() { return std::exchange(stdout_fd_, -1); }
  int TakeStderr() { return std::exchange(stderr_fd_, -1); }

  // A held child: lets it exec. Errors as Spawn's, the child then reaped. Internal when it was
  // not held or was released already.
  Status Release();

  // Whether it has ended, without waiting: its exit (it is reaped), or nullopt while it runs.
  // IOError when waitpid fails.
  Result<std::optional<ProcessExit>> TryWait();
  // Waits until it ends and reaps it, with its CPU time. Internal when it is reaped already.
  Result<ProcessExit> Wait();
  // Sends `signal` to it, and to its process group when it has one of its own. Nothing once
  // reaped.
  void Signal(int signal) const;
  // Kills it (SIGKILL, as Signal) and reaps it. How it ended (ended by SIGKILL when it cannot be
  // told).
  ProcessExit KillAndReap();

 private:
  Process() = default;
  void CloseAll();

  pid_t pid_ = -1;  // -1 once moved from
  bool reaped_ = false;
  bool apart_ = false;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
  int go_fd_ = -1;     // held: written to release it
  int error_fd_ = -1;  // held: its exec error (errno), or end of file once exec succeeded
  std::string display_;
  std::string program_;  // argv[0]
};

}  // namespace kwatt

#endif  // KWATT_CORE_PROCESS_H_
