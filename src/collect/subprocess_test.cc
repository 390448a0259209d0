#include "src/collect/subprocess.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "src/testing/temp_dir.h"

namespace kwatt::collect::subprocess_test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::vector<std::string> Shell(const std::string& script) { return {"/bin/sh", "-c", script}; }

RunOptions Within(milliseconds limit) {
  RunOptions options;
  options.deadline = Clock::now() + limit;
  return options;
}

// Whether `pid` is gone (or a zombie waiting for init) within 2 s: its pidfd turns readable when
// it exits.
bool Gone(pid_t pid) {
  int fd = int(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;  // already reaped
  pollfd exited{fd, POLLIN, 0};
  int ready = ::poll(&exited, 1, 2000);
  ::close(fd);
  return ready == 1;
}

TEST(RunProgramTest, CapturesOutputsAndExitStatus) {
  Result<RunResult> run =
      RunProgram(Shell("echo out; echo err >&2; exit 3"), Within(milliseconds(5000)));
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->out, "out\n");
  EXPECT_EQ(run->err, "err\n");
  EXPECT_EQ(run->exit.exit_code, 3);
  EXPECT_EQ(run->exit.signal, 0);
  EXPECT_FALSE(run->exit.ok());
  EXPECT_EQ(run->exit.Describe(), "exited with status 3");
}

TEST(RunProgramTest, ArgumentsAreNotInterpretedByAShell) {
  Result<RunResult> run = RunProgram({"/bin/echo", "a b", "$HOME", ";", "*"});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->out, "a b $HOME ; *\n");
  EXPECT_TRUE(run->exit.ok());
}

TEST(RunProgramTest, FindsAProgramInPath) {
  Result<RunResult> run = RunProgram({"echo", "hi"});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->out, "hi\n");
}

TEST(RunProgramTest, StandardInputIsEmpty) {
  Result<RunResult> run = RunProgram({"cat"}, Within(milliseconds(5000)));
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->out, "");
  EXPECT_TRUE(run->exit.ok());
}

TEST(RunProgramTest, ReportsASignal) {
  Result<RunResult> run = RunProgram(Shell("kill -9 $$"), Within(milliseconds(5000)));
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->exit.signal, SIGKILL);
  EXPECT_EQ(run->exit.exit_code, -1);
  EXPECT_NE(run->exit.Describe().find("signal 9"), std::string::npos);
}

TEST(RunProgramTest, MissingProgramIsNotFound) {
  Result<RunResult> absolute = RunProgram({"/nonexistent/kwatt-program", "x"});
  EXPECT_EQ(absolute.status().code(), Status::Code::kNotFound) << absolute.status().ToString();
  Result<RunResult> searched = RunProgram({"kwatt-no-such-program-anywhere"});
  EXPECT_EQ(searched.status().code(), Status::Code::kNotFound) << searched.status().ToString();
  EXPECT_EQ(RunProgram({}).status().code(), Status::Code::kInvalidArgument);
}

TEST(RunProgramTest, NotExecutableIsAnIOErrorShowingTheDisplayForm) {
  kwatt::testing::TempDir dir;
  std::string path = (dir.root() / "script").string();
  std::ofstream(path) << "#!/bin/sh\necho hi\n";
  ::chmod(path.c_str(), 0600);
  RunOptions options;
  options.display = "my-tool for host";
  Result<RunResult> run = RunProgram({path, "--password=secret"}, options);
  if (::geteuid() == 0 && run.ok()) GTEST_SKIP() << "root may execute it";
  EXPECT_EQ(run.status().code(), Status::Code::kIOError) << run.status().ToString();
  EXPECT_NE(run.status().message().find("my-tool for host"), std::string::npos);
  EXPECT_EQ(run.status().message().find("secret"), std::string::npos);
}

TEST(RunProgramTest, DeadlineKillsTheChildAndWhatItStarted) {
  kwatt::testing::TempDir dir;
  std::string pid_file = (dir.root() / "pid").string();
  Clock::time_point start = Clock::now();
  // The grandchild keeps the pipes open: the run must still end at the deadline, and kill it.
  Result<RunResult> run =
      RunProgram(Shell("sleep 30 & echo $! > " + pid_file + "; wait"), Within(milliseconds(300)));
  auto elapsed = Clock::now() - start;
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), Status::Code::kUnavailable);
  EXPECT_NE(run.status().message().find("timed out"), std::string::npos) << run.status().ToString();
  EXPECT_LT(elapsed, milliseconds(2000));
  std::ifstream file(pid_file);
  pid_t grandchild = 0;
  file >> grandchild;
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(Gone(grandchild));
}

TEST(RunProgramTest, DeadlineAppliesAfterTheOutputsClose) {
  Clock::time_point start = Clock::now();
  Result<RunResult> run =
      RunProgram(Shell("exec >/dev/null 2>&1; sleep 30"), Within(milliseconds(300)));
  EXPECT_EQ(run.status().code(), Status::Code::kUnavailable) << run.status().ToString();
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
}

TEST(RunProgramTest, BigOutputsOnBothStreams) {
  Result<RunResult> run =
      RunProgram(Shell("head -c 3000000 /dev/zero; head -c 2000000 /dev/zero >&2; echo end"),
                 Within(milliseconds(20000)));
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->out.size(), 3000004u);
  EXPECT_EQ(run->err.size(), 2000000u);
  EXPECT_FALSE(run->out_truncated);
  EXPECT_TRUE(run->exit.ok());
}

TEST(RunProgramTest, OutputBeyondTheCapIsDroppedWithoutBlockingTheChild) {
  RunOptions options = Within(milliseconds(20000));
  options.max_output_bytes = 1000;
  Result<RunResult> run = RunProgram(Shell("head -c 5000000 /dev/zero; echo done >&2"), options);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->out.size(), 1000u);
  EXPECT_TRUE(run->out_truncated);
  EXPECT_EQ(run->err, "done\n");
  EXPECT_FALSE(run->err_truncated);
  EXPECT_TRUE(run->exit.ok());
}

// The descriptors a child inherits from this process whatever we do: 0, 1, 2 and those open
// without FD_CLOEXEC (a test runner's own).
std::set<std::string> InheritedDescriptors() {
  std::set<std::string> fds = {"0", "1", "2"};
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::string name = entry.path().filename().string();
    int fd = std::atoi(name.c_str());
    int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0 && !(flags & FD_CLOEXEC)) fds.insert(name);
  }
  return fds;
}

// The child sees only its standard descriptors (and those the test runner left inheritable): the
// pipes of runs made at the same time by other threads never leak into it.
TEST(RunProgramTest, NoDescriptorLeaksAcrossConcurrentRuns) {
  const std::set<std::string> expected = InheritedDescriptors();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([t, &failures, &expected] {
      for (int i = 0; i < 15; ++i) {
        std::string tag = std::to_string(t) + "-" + std::to_string(i);
        // No pipeline in the script: a shell holds a pipeline's pipes while it starts it.
        Result<RunResult> run = RunProgram({"/bin/sh", "-c", "echo $0; ls /proc/$$/fd", tag},
                                           Within(milliseconds(10000)));
        std::set<std::string> seen;
        std::string first;
        if (run.ok()) {
          std::istringstream lines(run->out);
          std::getline(lines, first);
          for (std::string line; std::getline(lines, line);) seen.insert(line);
        }
        if (!run.ok() || first != tag || seen != expected || !run->exit.ok()) {
          ++failures;
          ADD_FAILURE() << (run.ok() ? run->out + run->err : run.status().ToString());
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(ChildProcessTest, ReadsLinesThenTheEnd) {
  Result<ChildProcess> child =
      ChildProcess::Start(Shell("echo one; printf 'two\\r\\n'; echo; printf last"));
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  std::vector<std::string> lines;
  std::string line;
  auto deadline = Clock::now() + milliseconds(5000);
  while (true) {
    Result<ChildProcess::ReadOutcome> outcome = child->ReadLine(&line, deadline);
    ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
    ASSERT_NE(*outcome, ChildProcess::ReadOutcome::kTimeout);
    if (*outcome == ChildProcess::ReadOutcome::kEnd) break;
    lines.push_back(line);
  }
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two", "", "last"}));
  Result<ProcessExit> exit = child->Wait(Clock::now() + milliseconds(5000));
  ASSERT_TRUE(exit.ok()) << exit.status().ToString();
  EXPECT_TRUE(exit->ok());
}

TEST(ChildProcessTest, TimeoutThenStopWithSigterm) {
  Result<ChildProcess> child = ChildProcess::Start({"sleep", "30"});
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  std::string line;
  Result<ChildProcess::ReadOutcome> outcome =
      child->ReadLine(&line, Clock::now() + milliseconds(100));
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(*outcome, ChildProcess::ReadOutcome::kTimeout);
  Result<ProcessExit> exit = child->Stop();
  ASSERT_TRUE(exit.ok()) << exit.status().ToString();
  EXPECT_EQ(exit->signal, SIGTERM);
  // Stopping again says the same.
  EXPECT_EQ(child->Stop()->signal, SIGTERM);
}

TEST(ChildProcessTest, AChildIgnoringSigtermIsKilledAfterTheGrace) {
  Result<ChildProcess> child =
      ChildProcess::Start(Shell("trap '' TERM; echo ready; while :; do sleep 0.05; done"));
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  std::string line;
  ASSERT_EQ(*child->ReadLine(&line, Clock::now() + milliseconds(5000)),
            ChildProcess::ReadOutcome::kLine);
  EXPECT_EQ(line, "ready");
  Clock::time_point start = Clock::now();
  Result<ProcessExit> exit = child->Stop(milliseconds(200));
  ASSERT_TRUE(exit.ok()) << exit.status().ToString();
  EXPECT_EQ(exit->signal, SIGKILL);
  EXPECT_GE(Clock::now() - start, milliseconds(200));
  EXPECT_LT(Clock::now() - start, milliseconds(3000));
}

TEST(ChildProcessTest, KeepsTheEndOfStandardError) {
  ChildProcess::Options options;
  options.stderr_tail_bytes = 10;
  Result<ChildProcess> child =
      ChildProcess::Start(Shell("echo first-line-lost >&2; echo 'oops!' >&2; exit 4"), options);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  std::string line;
  EXPECT_EQ(*child->ReadLine(&line, Clock::now() + milliseconds(5000)),
            ChildProcess::ReadOutcome::kEnd);
  Result<ProcessExit> exit = child->Wait(Clock::now() + milliseconds(5000));
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->exit_code, 4);
  EXPECT_EQ(child->stderr_tail(), "ost\noops!\n");
}

TEST(ChildProcessTest, ALineTooLongIsCorruption) {
  ChildProcess::Options options;
  options.max_line_bytes = 100;
  Result<ChildProcess> child =
      ChildProcess::Start(Shell("head -c 300000 /dev/zero | tr '\\0' a; echo"), options);
  ASSERT_TRUE(child.ok());
  std::string line;
  Result<ChildProcess::ReadOutcome> outcome =
      child->ReadLine(&line, Clock::now() + milliseconds(5000));
  EXPECT_EQ(outcome.status().code(), Status::Code::kCorruption);
}

TEST(ChildProcessTest, WaitTimesOutOnARunningChild) {
  Result<ChildProcess> child = ChildProcess::Start({"sleep", "30"});
  ASSERT_TRUE(child.ok());
  Result<ProcessExit> exit = child->Wait(Clock::now() + milliseconds(50));
  EXPECT_EQ(exit.status().code(), Status::Code::kUnavailable);
  EXPECT_NE(exit.status().message().find("timed out"), std::string::npos);
}

TEST(ChildProcessTest, DestructionKillsAndReaps) {
  pid_t pid = 0;
  {
    Result<ChildProcess> child = ChildProcess::Start({"sleep", "30"});
    ASSERT_TRUE(child.ok());
    pid = child->pid();
    ChildProcess moved = std::move(child).value();  // the moved-from object owns nothing
    EXPECT_EQ(moved.pid(), pid);
  }
  EXPECT_NE(::kill(pid, 0), 0);  // reaped: no such process
}

TEST(ChildProcessTest, MissingProgram) {
  ChildProcess::Options options;
  options.display = "wattmetre-read";
  Result<ChildProcess> child = ChildProcess::Start({"/nonexistent/wattmetre-read"}, options);
  EXPECT_EQ(child.status().code(), Status::Code::kNotFound);
  EXPECT_NE(child.status().message().find("wattmetre-read"), std::string::npos);
}

}  // namespace
}  // namespace kwatt::collect::subprocess_test
