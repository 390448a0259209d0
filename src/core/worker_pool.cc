#include "kwatt/core/worker_pool.h"

#include <algorithm>
#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <mutex>

namespace kwatt {

class WorkerPool::Impl {
 public:
  explicit Impl(size_t threads) : pool(threads) {}
  boost::asio::thread_pool pool;
  std::once_flag joined;
};

WorkerPool::WorkerPool(size_t threads)
    : impl_(std::make_unique<Impl>(std::max<size_t>(threads, 1))),
      threads_(std::max<size_t>(threads, 1)) {}

WorkerPool::~WorkerPool() { Join(); }

void WorkerPool::Post(std::function<void()> task) {
  boost::asio::post(impl_->pool, std::move(task));
}

void WorkerPool::Stop() { impl_->pool.stop(); }

void WorkerPool::Join() {
  std::call_once(impl_->joined, [this] { impl_->pool.join(); });
}

void ParallelFor(size_t n, int threads, const std::function<bool(size_t, int)>& task) {
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  auto work = [&](int worker) {
    while (!stop.load(std::memory_order_relaxed)) {
      size_t i = next.fetch_add(1);
      if (i >= n) break;
      if (!task(i, worker)) stop = true;
    }
  };
  const int count = std::max(1, int(std::min<size_t>(size_t(std::max(threads, 1)), n)));
  if (count == 1) {
    work(0);
    return;
  }
  WorkerPool pool(size_t(count - 1));
  for (int w = 1; w < count; ++w) pool.Post([&work, w] { work(w); });
  work(0);
  pool.Join();
}

}  // namespace kwatt
