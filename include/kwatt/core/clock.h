// The clocks kwatt reads and sleeps on, injected wherever a part keeps time (the meter, the
// collector, the archive writer, the SQLite store): the system's, or a test's
// (src/testing/manual_clock.h), whose time moves only as the test says, so that a test counts ticks
// exactly and never synchronises by sleeping.
//
// Thread safety: a Clock is used by any number of threads at once.
#ifndef KWATT_CORE_CLOCK_H_
#define KWATT_CORE_CLOCK_H_

#include <cstdint>
#include <memory>
#include <stop_token>

#include "kwatt/core/time.h"

namespace kwatt {

class Clock {
 public:
  virtual ~Clock() = default;
  // Nanoseconds of a monotonic clock (CLOCK_MONOTONIC): periods, deadlines, lags.
  virtual int64_t MonotonicNanos() = 0;
  // The wall clock (CLOCK_REALTIME): the timestamps of readings and reports.
  virtual UnixNanos WallNanos() = 0;
  // Sleeps until MonotonicNanos() >= `deadline` or `stop` is requested. Returns false when stopped
  // first.
  virtual bool SleepUntil(int64_t deadline, std::stop_token stop) = 0;
};

// CLOCK_MONOTONIC and CLOCK_REALTIME; SleepUntil with clock_nanosleep(TIMER_ABSTIME) for the last
// 20 ms to its deadline, before them on a condition variable that a stop request wakes at once.
std::shared_ptr<Clock> SystemClock();

}  // namespace kwatt

#endif  // KWATT_CORE_CLOCK_H_
