// A Clock (kwatt/core/clock.h) that tests drive: time moves only as far as the test allows, so a
// meter's or a collector's threads run through exactly the ticks the test asks for (tests and
// benchmarks only).
//
// SleepUntil(deadline) returns as soon as the deadline is within the limit the test set with
// AdvanceTo (the clock then reads the deadline), and blocks otherwise until the limit moves or the
// sleep is stopped. WaitUntilIdle(n) returns once n sleepers wait beyond the limit: everything up
// to the limit has run in them. OnAdvance runs (outside the lock) each time a sleeper moves the
// time, before it returns: a simulated sysfs tree follows the clock there.
//
// Thread safety: every member may be called from any thread.
#ifndef KWATT_SRC_TESTING_MANUAL_CLOCK_H_
#define KWATT_SRC_TESTING_MANUAL_CLOCK_H_

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <stop_token>
#include <thread>

#include "kwatt/core/clock.h"

namespace kwatt {

class ManualClock : public Clock {
 public:
  // Monotonic time starts at `monotonic`; the wall clock reads `wall_origin` + monotonic.
  explicit ManualClock(int64_t monotonic = 0,
                       UnixNanos wall_origin = 1'760'000'000 * kNanosPerSecond)
      : now_(monotonic), limit_(monotonic), wall_origin_(wall_origin) {}

  int64_t MonotonicNanos() override {
    std::lock_guard lock(mutex_);
    return now_;
  }
  UnixNanos WallNanos() override {
    std::lock_guard lock(mutex_);
    return wall_origin_ + now_;
  }

  bool SleepUntil(int64_t deadline, std::stop_token stop) override {
    int64_t moved_to = 0;
    {
      std::unique_lock lock(mutex_);
      running_.erase(std::this_thread::get_id());
      if (ordered_) {
        // Events in the order of their times: a sleeper goes on when its deadline is within the
        // limit, is the earliest of those waiting, and no other sleeper is running.
        auto waiting = blocked_.insert(deadline);
        idle_.notify_all();
        changed_.notify_all();
        changed_.wait(lock, stop, [&] {
          return deadline <= limit_ && running_.empty() && *blocked_.begin() == deadline;
        });
        blocked_.erase(waiting);
        if (stop.stop_requested()) {
          changed_.notify_all();
          return false;
        }
        running_.insert(std::this_thread::get_id());
      } else if (deadline > limit_) {
        auto waiting = blocked_.insert(deadline);
        idle_.notify_all();
        changed_.wait(lock, stop, [&] { return deadline <= limit_; });
        blocked_.erase(waiting);
      }
      if (stop.stop_requested()) return false;
      if (deadline <= now_) return true;
      now_ = moved_to = deadline;
    }
    if (on_advance_) on_advance_(moved_to);
    return true;
  }

  // Runs the sleepers one at a time in the order of their deadlines (a discrete-event
  // simulation), so that several threads (a collector's devices and writer) see the time each
  // event is due: every thread that sleeps on the clock must sleep again or end by a stop. Set
  // before the clock is shared.
  void SetOrdered(bool ordered) { ordered_ = ordered; }

  // Lets time run up to `limit`.
  void AdvanceTo(int64_t limit) {
    {
      std::lock_guard lock(mutex_);
      limit_ = std::max(limit_, limit);
    }
    changed_.notify_all();
  }
  // Moves the time itself (a late tick, a long read).
  void Jump(int64_t to) {
    {
      std::lock_guard lock(mutex_);
      now_ = std::max(now_, to);
      limit_ = std::max(limit_, now_);
    }
    changed_.notify_all();
    if (on_advance_) on_advance_(to);
  }
  // Waits until `sleepers` sleepers wait beyond the limit (everything up to it has run in them).
  void WaitUntilIdle(size_t sleepers = 1) {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [&] {
      return running_.empty() && blocked_.size() >= sleepers &&
             size_t(std::count_if(blocked_.begin(), blocked_.end(),
                                  [&](int64_t deadline) { return deadline > limit_; })) >= sleepers;
    });
  }
  // Set before the clock is shared.
  void OnAdvance(std::function<void(int64_t)> callback) { on_advance_ = std::move(callback); }

 private:
  std::mutex mutex_;
  std::condition_variable_any changed_;
  std::condition_variable idle_;
  int64_t now_, limit_;
  const UnixNanos wall_origin_;
  std::multiset<int64_t> blocked_;     // deadlines of the sleepers waiting beyond the limit
  std::set<std::thread::id> running_;  // ordered: sleepers woken, not sleeping again yet
  bool ordered_ = false;
  std::function<void(int64_t)> on_advance_;
};

namespace meter {
using ::kwatt::ManualClock;
}  // namespace meter

}  // namespace kwatt

#endif  // KWATT_SRC_TESTING_MANUAL_CLOCK_H_
