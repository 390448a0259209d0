#include "kwatt/core/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace kwatt::worker_pool_test {
namespace {

TEST(WorkerPool, RunsEveryTaskPostedOnItsThreads) {
  WorkerPool pool(3);
  EXPECT_EQ(pool.size(), 3u);
  std::mutex mutex;
  std::set<std::thread::id> threads;
  std::atomic<int> ran{0};
  for (int i = 0; i < 200; ++i) {
    pool.Post([&] {
      {
        std::lock_guard lock(mutex);
        threads.insert(std::this_thread::get_id());
      }
      ++ran;
    });
  }
  pool.Join();
  EXPECT_EQ(ran.load(), 200);
  EXPECT_LE(threads.size(), 3u);
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);
  pool.Join();  // idempotent
}

TEST(WorkerPool, StopDropsWhatHasNotStarted) {
  WorkerPool pool(1);
  std::mutex mutex;
  std::condition_variable cv;
  bool started = false, release = false;
  std::atomic<int> ran{0};
  pool.Post([&] {
    std::unique_lock lock(mutex);
    started = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
    ++ran;
  });
  for (int i = 0; i < 10; ++i) pool.Post([&] { ++ran; });
  {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return started; });
  }
  pool.Stop();
  {
    std::lock_guard lock(mutex);
    release = true;
  }
  cv.notify_all();
  pool.Join();
  EXPECT_EQ(ran.load(), 1);  // the one running finished; the ten queued were dropped
}

TEST(ParallelFor, EveryIndexOnceWorkerZeroOnTheCallersThread) {
  std::vector<std::atomic<int>> seen(1000);
  const std::thread::id caller = std::this_thread::get_id();
  ParallelFor(seen.size(), 4, [&](size_t i, int worker) {
    EXPECT_GE(worker, 0);
    EXPECT_LT(worker, 4);
    // (The caller may find nothing left to claim: the others can take it all first.)
    if (worker == 0) {
      EXPECT_EQ(std::this_thread::get_id(), caller);
    }
    ++seen[i];
    return true;
  });
  for (const auto& s : seen) EXPECT_EQ(s.load(), 1);
  // More threads than work, and no work at all.
  int ran = 0;
  ParallelFor(1, 8, [&](size_t, int worker) {
    EXPECT_EQ(worker, 0);
    ++ran;
    return true;
  });
  EXPECT_EQ(ran, 1);
  ParallelFor(0, 8, [&](size_t, int) {
    ADD_FAILURE() << "no index";
    return true;
  });
}

TEST(ParallelFor, NothingIsClaimedAfterATaskSaysStop) {
  std::atomic<size_t> highest{0};
  ParallelFor(100000, 1, [&](size_t i, int) {
    highest = std::max(highest.load(), i);
    return i < 10;  // the 11th task stops it
  });
  EXPECT_EQ(highest.load(), 10u);
  // On several threads: the index that says stop was run, and ParallelFor returns (how many
  // others were claimed meanwhile depends on the scheduler).
  std::atomic<bool> stopped{false};
  ParallelFor(100000, 3, [&](size_t i, int) {
    if (i == 10) stopped = true;
    return i != 10;
  });
  EXPECT_TRUE(stopped.load());
}

}  // namespace
}  // namespace kwatt::worker_pool_test
