#include "kwatt/meter/pipeline/fan_out.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

namespace kwatt::meter::fan_out_test {
namespace {

// Keeps the sequences it was given; holds its writes back until released (a slow output); fails
// its writes of `failing` sequences and, with `fail_end`, its end.
class Recorder : public ReportSink {
 public:
  Status Begin(const MeterHeader& header) override {
    sensor = header.sensor;
    return begin_error;
  }
  Status Write(const IntervalReport& report) override {
    std::unique_lock lock(mutex_);
    open_.wait(lock, [&] { return released_; });
    if (failing.count(report.sequence)) return Status::IOError("disk full");
    sequences.push_back(report.sequence);
    ++written;
    return Status::OK();
  }
  Status Finish() override {
    ++finishes;
    return fail_end ? Status::IOError("cannot close") : Status::OK();
  }
  void Hold() {
    std::lock_guard lock(mutex_);
    released_ = false;
  }
  void Release() {
    {
      std::lock_guard lock(mutex_);
      released_ = true;
    }
    open_.notify_all();
  }

  std::string sensor;
  Status begin_error;
  std::set<int64_t> failing;
  bool fail_end = false;
  std::vector<int64_t> sequences;
  std::atomic<int64_t> written{0};
  int finishes = 0;

 private:
  std::mutex mutex_;
  std::condition_variable open_;
  bool released_ = true;
};

IntervalReport Report(int64_t sequence) {
  IntervalReport r;
  r.sequence = sequence;
  return r;
}

struct Outputs {
  Recorder *a, *b;
  std::vector<MeterOutput> list;
  Outputs() {
    auto first = std::make_unique<Recorder>(), second = std::make_unique<Recorder>();
    a = first.get();
    b = second.get();
    list.push_back({"csv:a", std::move(first)});
    list.push_back({"jsonl:b", std::move(second)});
  }
};

TEST(ReportFanOut, EveryOutputGetsEveryReportInOrder) {
  Outputs o;
  ReportFanOut fan_out(std::move(o.list), FanOutOptions{});
  MeterHeader header;
  header.sensor = "node-1";
  ASSERT_TRUE(fan_out.Begin(header).ok());
  for (int64_t i = 0; i < 100; ++i) ASSERT_TRUE(fan_out.Write(Report(i)).ok());
  ASSERT_TRUE(fan_out.Finish().ok());
  EXPECT_EQ(o.a->sensor, "node-1");
  ASSERT_EQ(o.a->sequences.size(), 100u);
  EXPECT_EQ(o.a->sequences, o.b->sequences);
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(o.a->sequences[size_t(i)], i);
  EXPECT_EQ(o.a->finishes, 1);
  ASSERT_TRUE(fan_out.Finish().ok());  // idempotent
  EXPECT_EQ(o.a->finishes, 1);
}

TEST(ReportFanOut, ASlowOutputLosesItsReportsAloneOrHoldsTheProducerWhenAskedTo) {
  {
    // A live meter: the slow output's full queue loses reports for it alone, counted.
    Outputs o;
    o.a->Hold();
    FanOutOptions options;
    options.queue = 4;
    std::vector<std::string> said;
    options.log = [&](const std::string& cause, const std::string&) { said.push_back(cause); };
    ReportFanOut fan_out(std::move(o.list), options);
    ASSERT_TRUE(fan_out.Begin(MeterHeader{}).ok());
    for (int64_t i = 0; i < 20; ++i) {
      ASSERT_TRUE(fan_out.Write(Report(i)).ok());
      while (o.b->written.load() < i + 1) std::this_thread::yield();  // the fast one keeps up
    }
    o.a->Release();
    ASSERT_TRUE(fan_out.Finish().ok());
    EXPECT_EQ(o.b->sequences.size(), 20u);
    const auto dropped = fan_out.Dropped();
    ASSERT_EQ(dropped.size(), 2u);
    EXPECT_EQ(dropped[0].first, "csv:a");
    // One report was being written when it held, four waited: the rest were lost.
    EXPECT_GE(dropped[0].second, 15);
    EXPECT_EQ(int64_t(o.a->sequences.size()) + dropped[0].second, 20);
    EXPECT_EQ(dropped[1].second, 0);
    ASSERT_FALSE(said.empty());
    EXPECT_EQ(said.front(), "queue csv:a");
  }
  {
    // Input read from a file: the producer waits for room, nothing is lost.
    Outputs o;
    o.a->Hold();
    FanOutOptions options;
    options.queue = 4;
    options.wait_when_full = true;
    ReportFanOut fan_out(std::move(o.list), options);
    ASSERT_TRUE(fan_out.Begin(MeterHeader{}).ok());
    std::atomic<int64_t> given{0};
    std::thread producer([&] {
      for (int64_t i = 0; i < 20; ++i) {
        ASSERT_TRUE(fan_out.Write(Report(i)).ok());
        given = i + 1;
      }
    });
    // The producer is held by the full queue (5 taken: one being written, four queued) until
    // the output moves on.
    while (given.load() < 5) std::this_thread::yield();
    EXPECT_LT(given.load(), 20);
    o.a->Release();
    producer.join();
    ASSERT_TRUE(fan_out.Finish().ok());
    EXPECT_EQ(o.a->sequences.size(), 20u);
    EXPECT_EQ(fan_out.Dropped()[0].second, 0);
  }
}

TEST(ReportFanOut, EveryFailingOutputIsNamedAndTheOthersStillWrite) {
  Outputs o;
  o.a->failing = {3, 4};
  o.b->fail_end = true;
  ReportFanOut fan_out(std::move(o.list), FanOutOptions{});
  ASSERT_TRUE(fan_out.Begin(MeterHeader{}).ok());
  for (int64_t i = 0; i < 10; ++i) ASSERT_TRUE(fan_out.Write(Report(i)).ok());
  Status finished = fan_out.Finish();
  ASSERT_FALSE(finished.ok());
  EXPECT_NE(finished.message().find("output csv:a: disk full"), std::string::npos)
      << finished.message();
  EXPECT_NE(finished.message().find("output jsonl:b: cannot close"), std::string::npos)
      << finished.message();
  EXPECT_EQ(o.a->sequences.size(), 8u);  // the writes after a failure go on
  EXPECT_EQ(fan_out.Dropped()[0].second, 2);
  EXPECT_EQ(o.b->sequences.size(), 10u);
}

TEST(ReportFanOut, AnOutputThatCannotBeginIsNamedAndNothingStarts) {
  Outputs o;
  o.b->begin_error = Status::PermissionDenied("/results is read-only");
  ReportFanOut fan_out(std::move(o.list), FanOutOptions{});
  Status begun = fan_out.Begin(MeterHeader{});
  ASSERT_FALSE(begun.ok());
  EXPECT_NE(begun.message().find("output jsonl:b"), std::string::npos) << begun.message();
  EXPECT_TRUE(fan_out.Finish().ok());  // nothing was started: nothing to finish
  EXPECT_EQ(o.a->finishes, 0);
}

}  // namespace
}  // namespace kwatt::meter::fan_out_test
