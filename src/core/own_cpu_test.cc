#include "kwatt/core/own_cpu.h"

#include <gtest/gtest.h>
#include <time.h>

#include <atomic>
#include <thread>

namespace kwatt {
namespace {

int64_t ThreadNanos() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return int64_t(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

// Spins until this thread used `nanos` of CPU; returns what it used from the call.
int64_t Spin(int64_t nanos) {
  int64_t start = ThreadNanos();
  volatile uint64_t sink = 0;
  while (ThreadNanos() - start < nanos) {
    for (int i = 0; i < 10000; ++i) sink = sink + i;
  }
  return ThreadNanos() - start;
}

constexpr int64_t kSpin = 40'000'000;  // 40 ms of CPU

TEST(OwnCpu, AThreadsScopeCountsWhatItUsedAndNothingElseIsCounted) {
  int64_t before = OwnCpuNanos();
  std::thread([] { Spin(kSpin); }).join();  // not kwatt's
  int64_t unscoped = OwnCpuNanos() - before;
  EXPECT_LT(unscoped, kSpin / 4);

  before = OwnCpuNanos();
  int64_t used = 0;
  std::thread([&] {
    OwnCpuScope scope;
    used = Spin(kSpin);
  }).join();
  int64_t counted = OwnCpuNanos() - before;
  EXPECT_GE(counted, used);
  EXPECT_LT(counted, used + kSpin / 4);
}

TEST(OwnCpu, AnOpenScopeIsCountedUpToNowAndANestedOneCountsNothingMore) {
  std::atomic<int> step{0};
  int64_t used = 0;
  int64_t before = OwnCpuNanos();
  std::thread worker([&] {
    OwnCpuScope scope;
    {
      OwnCpuScope nested;
      used = Spin(kSpin);
    }
    step = 1;
    while (step != 2) std::this_thread::yield();
  });
  while (step != 1) std::this_thread::yield();
  int64_t while_open = OwnCpuNanos() - before;  // the worker's scope is open, its spin counted
  EXPECT_GE(while_open, used);
  EXPECT_LT(while_open, used + kSpin);  // once, not twice (the yields add a little)
  step = 2;
  worker.join();
  EXPECT_GE(OwnCpuNanos() - before, while_open);  // never decreases
}

}  // namespace
}  // namespace kwatt
