// The system clock's SleepUntil: it reaches its deadline (short sleeps by clock_nanosleep, long
// ones on a condition variable then clock_nanosleep), and a stop request ends a long sleep at once.
// The processes' CPU-time clocks: the kernel's for its procfs, none for another tree.
#include "kwatt/meter/environment/environment.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <stop_token>
#include <thread>

namespace kwatt::meter::environment_test {
namespace {

constexpr int64_t kMs = 1'000'000;  // nanoseconds

TEST(SystemClockSleep, ReachesTheDeadlineOfAShortAndOfALongSleep) {
  auto clock = SystemClock();
  std::stop_source stoppable;
  for (int64_t millis : {0, 3, 19, 25, 120}) {
    for (std::stop_token token : {stoppable.get_token(), std::stop_token()}) {
      const int64_t deadline = clock->MonotonicNanos() + millis * kMs;
      EXPECT_TRUE(clock->SleepUntil(deadline, token)) << millis;
      EXPECT_GE(clock->MonotonicNanos(), deadline) << millis;
    }
  }
}

TEST(SystemClockSleep, AStopRequestEndsALongSleepBeforeItsDeadline) {
  auto clock = SystemClock();
  std::stop_source stop;
  const int64_t deadline = clock->MonotonicNanos() + 60'000 * kMs;  // a minute
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    stop.request_stop();
  });
  EXPECT_FALSE(clock->SleepUntil(deadline, stop.get_token()));
  stopper.join();
  // Long before the deadline (a sleep deaf to stops would wake only 20 ms before it).
  EXPECT_LT(clock->MonotonicNanos(), deadline - 30'000 * kMs);
}

TEST(SystemClockSleep, AStoppedTokenReturnsAtOnce) {
  auto clock = SystemClock();
  std::stop_source stop;
  stop.request_stop();
  EXPECT_FALSE(clock->SleepUntil(clock->MonotonicNanos() + 60'000 * kMs, stop.get_token()));
}

int64_t ProcessCpuNanos() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return int64_t(ts.tv_sec) * kNanosPerSecond + ts.tv_nsec;
}

TEST(SystemProcessCpuClocks, ReadTheKernelsClockOfAnyProcessOfItsProcfs) {
  auto clocks = SystemProcessCpuClocks("/proc");
  ASSERT_NE(clocks, nullptr);
  volatile uint64_t sink = 0;
  for (int i = 0; i < 10'000'000; ++i) sink = sink + 1;
  const int64_t before = ProcessCpuNanos();
  const int64_t read = clocks->Nanos(::getpid());
  const int64_t after = ProcessCpuNanos();
  EXPECT_GE(read, before);
  EXPECT_LE(read, after);
  // Another process's, with no privilege: a child that spun, then exited and was reaped.
  pid_t child = fork();
  if (child == 0) {
    for (int i = 0; i < 20'000'000; ++i) sink = sink + 1;
    pause();
    _exit(0);
  }
  ::usleep(100'000);
  EXPECT_GT(clocks->Nanos(child), 0);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(clocks->Nanos(child), -1);
  EXPECT_EQ(clocks->Nanos(0), -1);
  EXPECT_EQ(clocks->Nanos(-5), -1);
}

TEST(SystemProcessCpuClocks, NoneForATreeThatIsNotTheKernelsProcfs) {
  EXPECT_EQ(SystemProcessCpuClocks("/nonexistent-procfs"), nullptr);
  auto tree = std::filesystem::temp_directory_path() / ("fake-proc-" + std::to_string(getpid()));
  std::filesystem::create_directories(tree);
  std::filesystem::create_symlink("1", tree / "self");  // names another process than this one
  EXPECT_EQ(SystemProcessCpuClocks(tree.string()), nullptr);
  std::filesystem::remove_all(tree);
}

}  // namespace
}  // namespace kwatt::meter::environment_test
