// Running programs for the collector's drivers: FreeIPMI's ipmi-sensors once per poll (RunProgram)
// and the wattmeter's line stream (ChildProcess). Internal to the collect part.
//
// Programs are started by kwatt's one spawner (kwatt/core/process.h), apart from kwatt: without a
// shell, from an argv vector, with standard input from /dev/null, in a process group of its own,
// so that a deadline or a stop ends it and whatever it started. What is added here: reading its
// output to a deadline without ever blocking it on a full pipe.
//
// Thread safety: distinct runs and distinct ChildProcess objects may be used from distinct threads
// at once; one ChildProcess is used by one thread at a time.
#ifndef KWATT_SRC_COLLECT_SUBPROCESS_H_
#define KWATT_SRC_COLLECT_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "kwatt/core/process.h"
#include "kwatt/core/status.h"

namespace kwatt::collect {

using ::kwatt::ProcessExit;

struct RunOptions {
  // When the program must have ended: then its process group is killed (SIGKILL), it is reaped,
  // and the run is Unavailable "... timed out".
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // What messages show for the program (empty: argv[0]).
  std::string display;
  // The most of standard output, and of standard error, kept; the rest is read and dropped (the
  // child is never blocked on a full pipe) and the result says it was truncated.
  size_t max_output_bytes = size_t{4} << 20;
};

struct RunResult {
  ProcessExit exit;
  std::string out;  // standard output (at most max_output_bytes)
  std::string err;  // standard error (at most max_output_bytes)
  bool out_truncated = false;
  bool err_truncated = false;
};

// Runs `argv` to its end and returns how it ended with what it wrote; a program that exits non-zero
// is a RunResult, not an error. Errors: InvalidArgument for an empty argv; NotFound when the
// program does not exist, IOError when it cannot be started (not executable...), both naming it;
// Unavailable "<display> timed out after N ms" at the deadline.
Result<RunResult> RunProgram(const std::vector<std::string>& argv, const RunOptions& options = {});

// A long-running child whose standard output the caller reads line by line (the wattmeter
// stream). Its standard error is kept in a small buffer of its last lines (drained whenever
// ReadLine waits, so the child never blocks on it while the caller reads).
//
// The destructor kills the child's process group (SIGKILL) and reaps it when Stop() or Wait() did
// not.
class ChildProcess {
 public:
  struct Options {
    std::string display;  // what messages show (empty: argv[0])
    // The longest line ReadLine returns; a longer one is a Corruption error.
    size_t max_line_bytes = size_t{1} << 20;
    // How much of the end of standard error is kept.
    size_t stderr_tail_bytes = 4096;
  };

  // Starts `argv`. Errors as RunProgram's.
  static Result<ChildProcess> Start(const std::vector<std::string>& argv, const Options& options);
  static Result<ChildProcess> Start(const std::vector<std::string>& argv) {
    return Start(argv, Options());
  }

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  enum class ReadOutcome {
    kLine,     // *line holds the next line, without its '\n' (nor a '\r' before it)
    kTimeout,  // the deadline came first (call again)
    kEnd,      // standard output ended (a last line without '\n' was returned before as kLine)
  };
  // Reads the next line of standard output, waiting until `deadline` at most. Corruption for a
  // line longer than max_line_bytes; IOError when reading fails.
  Result<ReadOutcome> ReadLine(std::string* line, std::chrono::steady_clock::time_point deadline);

  // The read end of standard output (O_NONBLOCK, O_CLOEXEC), for a caller that polls it with other
  // descriptors; it stays owned by this object. Lines are then still to be taken with ReadLine.
  int stdout_fd() const { return stdout_fd_; }
  pid_t pid() const { return process_ ? process_->pid() : -1; }
  const std::string& display() const { return display_; }

  // The end of what the child wrote on standard error (at most stderr_tail_bytes).
  const std::string& stderr_tail() const { return stderr_tail_; }
  // Reads what the child wrote on standard error so far, without waiting (keeping the tail), so
  // that a child whose standard output is read elsewhere (through stdout_fd()) never blocks on a
  // full stderr pipe. ReadLine and Wait do it by themselves.
  void DrainStderr();

  // Waits until the child ends, at most until `deadline` (then Unavailable "timed out", the child
  // left running). Its standard error is drained meanwhile.
  Result<ProcessExit> Wait(std::chrono::steady_clock::time_point deadline);

  // Ends the child: SIGTERM to its process group, then SIGKILL after `grace` if it has not ended;
  // reaped. How it ended (a child that had already ended says so too).
  Result<ProcessExit> Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));

 private:
  ChildProcess() = default;
  void KillAndReap();
  void CloseAll();

  std::optional<Process> process_;  // until reaped (or moved from)
  ProcessExit exit_;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
  std::string display_;
  std::string buffer_;  // read from stdout, not yet returned
  bool stdout_ended_ = false;
  std::string stderr_tail_;
  size_t max_line_bytes_ = 0;
  size_t stderr_tail_bytes_ = 0;
};

}  // namespace kwatt::collect

#endif  // KWATT_SRC_COLLECT_SUBPROCESS_H_
