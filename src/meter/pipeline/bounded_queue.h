// A bounded multi-producer queue between the meter's threads. Internal to the meter part.
//
// Producers never block on a full queue (TryPush says no and the caller counts the loss) unless
// they ask to (Push, for the last sample of a stop; PushWhenRoom, for what is read from a file,
// which waits rather than loses); the consumer waits with a deadline so that it
// can do timed work (delayed sources) between items. Close() lets the consumer drain what is left,
// then Pop returns nullopt.
//
// Thread safety: every member may be called from any thread.
#ifndef KWATT_SRC_METER_PIPELINE_BOUNDED_QUEUE_H_
#define KWATT_SRC_METER_PIPELINE_BOUNDED_QUEUE_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>

namespace kwatt::meter {

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  // Adds `item` unless the queue is full or closed; false then, and `item` is left as it was.
  bool TryPush(T&& item) {
    {
      std::lock_guard lock(mutex_);
      if (closed_ || items_.size() >= capacity_) return false;
      items_.push_back(std::move(item));
    }
    ready_.notify_one();
    return true;
  }

  // Adds `item` even beyond the capacity (what must not be lost: the last sample of a stop);
  // false only when closed.
  bool Push(T item) {
    {
      std::lock_guard lock(mutex_);
      if (closed_) return false;
      items_.push_back(std::move(item));
    }
    ready_.notify_one();
    return true;
  }

  // Adds `item` once the queue has room (waiting for the consumer); false only when closed.
  bool PushWhenRoom(T item) {
    {
      std::unique_lock lock(mutex_);
      room_.wait(lock, [&] { return closed_ || items_.size() < capacity_; });
      if (closed_) return false;
      items_.push_back(std::move(item));
    }
    ready_.notify_one();
    return true;
  }

  // The oldest item; waits at most `timeout` for one. nullopt on timeout, or when closed and
  // empty (Drained() tells which).
  std::optional<T> Pop(std::chrono::nanoseconds timeout) {
    std::unique_lock lock(mutex_);
    ready_.wait_for(lock, timeout, [&] { return !items_.empty() || closed_; });
    if (items_.empty()) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    lock.unlock();
    room_.notify_one();
    return item;
  }

  // No more pushes; the consumer drains what is there.
  void Close() {
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
    }
    ready_.notify_all();
    room_.notify_all();
  }

  bool Drained() const {
    std::lock_guard lock(mutex_);
    return closed_ && items_.empty();
  }

 private:
  const size_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable ready_, room_;
  std::deque<T> items_;
  bool closed_ = false;
};

}  // namespace kwatt::meter

#endif  // KWATT_SRC_METER_PIPELINE_BOUNDED_QUEUE_H_
