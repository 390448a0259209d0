// kwatt's one pool of worker threads: Boost.Asio's thread_pool behind a small interface (the
// header names no Boost type). The HTTP server runs its handlers on one, the archive reads,
// checks and decompresses on one (ParallelFor, the loader's frames).
//
// Thread safety: Post from any thread; Stop and Join from one (the owner's), not from a task.
#ifndef KWATT_CORE_WORKER_POOL_H_
#define KWATT_CORE_WORKER_POOL_H_

#include <cstddef>
#include <functional>
#include <memory>

namespace kwatt {

class WorkerPool {
 public:
  // `threads` workers (at least 1). Throws std::system_error when the system cannot start them.
  explicit WorkerPool(size_t threads);
  ~WorkerPool();  // Join()
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  size_t size() const { return threads_; }

  // Runs `task` on a worker, tasks starting in the order they were posted. A task must not
  // throw.
  void Post(std::function<void()> task);

  // The tasks not started yet are dropped; those running finish. Join then returns once they
  // did.
  void Stop();
  // Waits until every task posted ran (or, after Stop, until those running finished), and the
  // workers ended. Nothing may be posted after. Idempotent.
  void Join();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  size_t threads_;
};

// Runs task(i, worker) for i in [0, n) on up to `threads` threads, the caller's among them
// (worker 0; the others on a WorkerPool of their own), claiming i in order; once a task returns
// false, no further i is claimed (those claimed before it still complete).
void ParallelFor(size_t n, int threads, const std::function<bool(size_t i, int worker)>& task);

}  // namespace kwatt

#endif  // KWATT_CORE_WORKER_POOL_H_
