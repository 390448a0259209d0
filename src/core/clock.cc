// The system's clocks (include/kwatt/core/clock.h).
#include "kwatt/core/clock.h"

#include <time.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace kwatt {
namespace {

int64_t ReadClock(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return int64_t(ts.tv_sec) * kNanosPerSecond + ts.tv_nsec;
}

class SystemClockImpl : public Clock {
 public:
  int64_t MonotonicNanos() override { return ReadClock(CLOCK_MONOTONIC); }
  UnixNanos WallNanos() override { return ReadClock(CLOCK_REALTIME); }
  bool SleepUntil(int64_t deadline, std::stop_token stop) override {
    // The last 20 ms to the deadline: clock_nanosleep to it, one system call (the meter at 1 kHz
    // sleeps only so), without the lock and futex of a condition variable. A longer sleep waits
    // on a condition variable that a stop request wakes, until 20 ms before the deadline: one
    // wake-up a period (at 1 Hz, slices of 20 ms cost 50 a second, 10 times the CPU of the reads).
    constexpr int64_t kPrecise = 20 * kNanosPerMilli;
    while (!stop.stop_requested()) {
      const int64_t now = MonotonicNanos();
      if (now >= deadline) return true;
      if (deadline - now <= kPrecise || !stop.stop_possible()) {
        timespec ts{time_t(deadline / kNanosPerSecond), long(deadline % kNanosPerSecond)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);  // EINTR: loop again
        continue;
      }
      // steady_clock is CLOCK_MONOTONIC (libstdc++ on Linux).
      const std::chrono::steady_clock::time_point until{
          std::chrono::nanoseconds(deadline - kPrecise)};
      std::mutex mutex;
      std::condition_variable_any woken;
      std::unique_lock lock(mutex);
      woken.wait_until(lock, stop, until, [] { return false; });
    }
    return false;
  }
};

}  // namespace

std::shared_ptr<Clock> SystemClock() {
  static const std::shared_ptr<Clock> clock = std::make_shared<SystemClockImpl>();
  return clock;
}

}  // namespace kwatt
