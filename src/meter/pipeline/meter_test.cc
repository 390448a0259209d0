#include "kwatt/meter/pipeline/meter.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <numeric>
#include <thread>
#include <utility>

#include "src/testing/manual_clock.h"
#include "src/testing/meter_sources.h"
#include "src/testing/temp_dir.h"

namespace kwatt::meter::meter_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using testing::LateSource;
using testing::RateActivity;
using testing::TraceSource;

constexpr int64_t kMs = kNanosPerMilli;

// A sink that holds its reports back until released (a slow output).
class GateSink : public ReportSink {
 public:
  Status Begin(const MeterHeader&) override { return Status::OK(); }
  Status Write(const IntervalReport&) override {
    std::unique_lock lock(mutex_);
    entered = true;
    open_.wait(lock, [&] { return released_; });
    ++written;
    return Status::OK();
  }
  Status Finish() override { return Status::OK(); }
  void Release() {
    {
      std::lock_guard lock(mutex_);
      released_ = true;
    }
    open_.notify_all();
  }
  std::atomic<int64_t> written{0};
  std::atomic<bool> entered{false};  // a Write is (or was) waiting for Release

 private:
  std::mutex mutex_;
  std::condition_variable open_;
  bool released_ = false;
};

// A sink whose state is a counter of the reports it saw.
class CountingSink : public ReportSink, public StatefulSink {
 public:
  Status Begin(const MeterHeader&) override { return Status::OK(); }
  Status Write(const IntervalReport&) override {
    ++count;
    return Status::OK();
  }
  Status Finish() override { return Status::OK(); }
  std::string SaveState() const override { return std::to_string(count.load()); }
  Status RestoreState(std::string_view saved) override {
    count = std::stoll(std::string(saved));
    return Status::OK();
  }
  std::atomic<int64_t> count{0};
};

// A sink whose writes and end fail.
class FailingSink : public ReportSink {
 public:
  explicit FailingSink(std::string why) : why_(std::move(why)) {}
  Status Begin(const MeterHeader&) override { return Status::OK(); }
  Status Write(const IntervalReport&) override { return Status::IOError(why_); }
  Status Finish() override { return Status::IOError(why_ + " at the end"); }

 private:
  std::string why_;
};

// The meter's log lines, kept as its threads write them.
struct LogLines {
  std::function<void(const std::string&)> Sink() {
    return [this](const std::string& line) {
      std::lock_guard lock(mutex);
      lines.push_back(line);
    };
  }
  std::vector<std::string> Lines() {
    std::lock_guard lock(mutex);
    return lines;
  }
  std::mutex mutex;
  std::vector<std::string> lines;
};

// A meter under test on a manual clock: its parts gathered, then made.
struct Rig {
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(1000 * kMs);
  MeterEnvironment environment;
  std::vector<std::unique_ptr<EnergySource>> sources;
  std::vector<std::unique_ptr<DelayedEnergySource>> delayed;
  std::unique_ptr<ActivityReader> activity;
  std::vector<MeterOutput> outputs;
  MeterOptions options;
  const int64_t start = clock->MonotonicNanos();

  Rig() {
    environment.clock = clock;
    environment.hostname = "node-1";
    environment.procfs_root = "/nonexistent-procfs";
  }
  // A source of constant powers (microwatts), read at least every `max_read`.
  TraceSource* Trace(std::vector<int64_t> microwatts, nanoseconds max_read = nanoseconds::max(),
                     const std::string& source = "trace") {
    sources.push_back(
        std::make_unique<TraceSource>(clock, std::move(microwatts), max_read, source));
    return static_cast<TraceSource*>(sources.back().get());
  }
  template <typename T>
  T* Delayed(std::unique_ptr<T> source) {
    T* raw = source.get();
    delayed.push_back(std::move(source));
    return raw;
  }
  template <typename T>
  T* Output(std::string name, std::unique_ptr<T> sink) {
    T* raw = sink.get();
    outputs.push_back({std::move(name), std::move(sink)});
    return raw;
  }
  ReportBuffer* Buffer() { return Output("memory", std::make_unique<ReportBuffer>()); }
  // Targets using these CPUs each, the machine `other` more, on `cpus` CPUs (with their cycles
  // and instructions: `counters`).
  void Activity(std::vector<double> rates, double other, int cpus, bool counters = false) {
    activity = std::make_unique<RateActivity>(clock, std::move(rates), other, cpus, counters);
  }
  // The meter of the parts gathered so far (the rig is then ready to gather another's).
  Result<std::unique_ptr<Meter>> Make() {
    Result<std::unique_ptr<Meter>> meter =
        Meter::Create(environment, std::exchange(sources, {}), std::exchange(delayed, {}),
                      std::move(activity), std::exchange(outputs, {}), options);
    options = MeterOptions{};
    return meter;
  }
  // Runs the clock to `until` after the rig's start (RunUntil: to `until` itself), and waits
  // until the meter's sampler is there.
  void RunTo(int64_t until) { RunUntil(start + until); }
  void RunUntil(int64_t until) {
    clock->AdvanceTo(until);
    clock->WaitUntilIdle();
  }
};

int64_t Conserved(const DomainEnergy& e) {
  return e.idle_microjoules + e.unattributed_microjoules +
         std::accumulate(e.target_microjoules.begin(), e.target_microjoules.end(), int64_t{0});
}

TEST(Meter, ReportsConserveEnergyAndTotalsAreExact) {
  Rig rig;
  TraceSource* trace = rig.Trace({50'000'000, 7'000'000});
  ReportBuffer* reports = rig.Buffer();
  rig.Activity({0.5, 0.25}, 0.25, 2);
  rig.options.period = milliseconds(100);
  rig.options.formula.idle_policy = IdlePolicy::kNone;
  rig.options.formula.idle_watts = {{"package", 10.0}};
  auto meter = rig.Make();
  ASSERT_TRUE(meter.ok()) << meter.status().ToString();
  ASSERT_TRUE((*meter)->Start().ok());
  rig.RunTo(10'000 * kMs);
  ASSERT_TRUE((*meter)->Stop().ok());
  const int64_t start = rig.start, end = rig.clock->MonotonicNanos();

  std::vector<IntervalReport> all = reports->Take();
  ASSERT_EQ(all.size(), 100u);
  EXPECT_EQ(reports->header().sensor, "node-1");
  EXPECT_EQ(reports->header().domains.size(), 2u);
  for (size_t i = 0; i < all.size(); ++i) {
    const IntervalReport& r = all[i];
    EXPECT_EQ(r.sequence, int64_t(i));
    EXPECT_EQ(r.end - r.start, 100 * kMs);
    ASSERT_EQ(r.targets.size(), 2u);
    EXPECT_EQ(r.targets[0].cpu_microseconds, 50'000);
    EXPECT_EQ(r.busy_microseconds, 100'000);
    EXPECT_EQ(r.capacity_microseconds, 200'000);
    for (const DomainEnergy& e : r.domains) EXPECT_EQ(Conserved(e), e.measured_microjoules);
    // package-0: 5 J a period, 1 J of it idle (10 W), 4 J dynamic: 2 J and 1 J to the workers.
    EXPECT_EQ(r.domains[0].measured_microjoules, 5'000'000);
    EXPECT_EQ(r.domains[0].idle_microjoules, 1'000'000);
    EXPECT_EQ(r.domains[0].target_microjoules, (std::vector<int64_t>{2'000'000, 1'000'000}));
    EXPECT_EQ(r.domains[0].unattributed_microjoules, 1'000'000);
    if (i > 0) {
      EXPECT_EQ(r.start, all[i - 1].end);
    }
  }
  MeterTotals totals = (*meter)->Totals();
  EXPECT_EQ(totals.measured_microjoules[0], trace->EnergyAt(0, end) - trace->EnergyAt(0, start));
  EXPECT_EQ(totals.measured_microjoules[1], trace->EnergyAt(1, end) - trace->EnergyAt(1, start));
  ASSERT_EQ(totals.targets.size(), 2u);
  EXPECT_EQ(totals.targets[0].microjoules[0], 200'000'000);
  EXPECT_EQ(totals.targets[1].cpu_microseconds, 2'500'000);
  EXPECT_EQ(totals.reports, 100);
  EXPECT_EQ((*meter)->Health().ticks, 100);
  EXPECT_EQ((*meter)->Health().late_ticks, 0);
}

TEST(Meter, ReadsOftenEnoughForTheSourcesWrapPeriodWhateverTheOutputPeriod) {
  Rig rig;
  // Counters that could wrap in 60 ms: read at least every 30 ms, reports every 100 ms.
  TraceSource* trace = rig.Trace({1'000'000}, milliseconds(30));
  rig.options.period = milliseconds(100);
  auto meter = rig.Make();
  ASSERT_TRUE(meter.ok());
  ASSERT_TRUE((*meter)->Start().ok());
  rig.RunTo(1000 * kMs);
  ASSERT_TRUE((*meter)->Stop().ok());
  // 4 reads a period of 100 ms (every 25 ms), the first read, and the stop's.
  EXPECT_EQ(trace->reads.load(), 40 + 1 + 1);
  EXPECT_EQ((*meter)->Totals().reports, 10);  // a stop right at a tick adds no empty report
}

TEST(Meter, StopReportsTheEnergyUpToTheStop) {
  Rig rig;
  rig.Trace({3'000'000});
  ReportBuffer* reports = rig.Buffer();
  auto meter = rig.Make();
  ASSERT_TRUE(meter.ok());
  ASSERT_TRUE((*meter)->Start().ok());
  rig.RunTo(2500 * kMs);  // two whole periods, then half of one
  rig.clock->Jump(rig.start + 2500 * kMs);
  ASSERT_TRUE((*meter)->Stop().ok());
  std::vector<IntervalReport> all = reports->Take();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[2].end - all[2].start, 500 * kMs);
  EXPECT_EQ(all[2].domains[0].measured_microjoules, 1'500'000);
  EXPECT_EQ((*meter)->Totals().measured_microjoules[0], 7'500'000);
  // Idempotent.
  EXPECT_TRUE((*meter)->Stop().ok());
}

TEST(Meter, LateAndMissedTicksAreCounted) {
  Rig rig;
  TraceSource* trace = rig.Trace({1'000'000});
  // The fifth read takes 250 ms: ticks at 500 and 600 ms are missed, the one at 700 is late.
  trace->on_read = [&, n = 0]() mutable {
    if (++n == 5) rig.clock->Jump(rig.start + 400 * kMs + 250 * kMs);
  };
  rig.options.period = milliseconds(100);
  auto meter = rig.Make();
  ASSERT_TRUE(meter.ok());
  ASSERT_TRUE((*meter)->Start().ok());
  rig.RunTo(1000 * kMs);
  MeterHealth health = (*meter)->Health();
  ASSERT_TRUE((*meter)->Stop().ok());
  // Woken at 650 ms for the 500 ms tick: the 500 ms tick is late, the 600 ms one skipped.
  EXPECT_EQ(health.missed_ticks, 1);
  EXPECT_EQ(health.late_ticks, 1);
  EXPECT_NEAR(health.max_lag_seconds, 0.15, 1e-9);
  // Energy is whole all the same.
  EXPECT_EQ((*meter)->Totals().measured_microjoules[0], 1'000'000);
}

TEST(Meter, ASlowOutputLosesReportsCountedWhileTheOthersGetThemAll) {
  Rig rig;
  rig.Trace({1'000'000});
  GateSink* slow = rig.Output("slow", std::make_unique<GateSink>());
  CountingSink* fast = rig.Output("fast", std::make_unique<CountingSink>());
  rig.options.period = milliseconds(10);
  rig.options.report_queue = 4;
  LogLines log;
  rig.options.log = log.Sink();
  auto meter = rig.Make();
  ASSERT_TRUE(meter.ok());
  ASSERT_TRUE((*meter)->Start().ok());
  // A period at a time, each report taken by the fast output before the next; the slow output
  // holds the first in Write before the second comes (else, on a loaded machine, its thread could
  // start only once every report was queued or dropped, and hold one fewer).
  for (int i = 1; i <= 100; ++i) {
    rig.RunTo(i * 10 * kMs);
    while (fast->count.load() < i) std::this_thread::sleep_for(std::chrono::microseconds(50));
    while (i == 1 && !slow->entered.load())
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  slow->Release();
  ASSERT_TRUE((*meter)->Stop().ok());
  MeterHealth health = (*meter)->Health();
  ASSERT_EQ(health.dropped_reports.size(), 2u);
  EXPECT_EQ(health.dropped_reports[0].first, "slow");
  // The slow output held one report in Write and 4 in its queue: the rest were dropped for it.
  EXPECT_EQ(health.dropped_reports[0].second, 100 - 5);
  EXPECT_EQ(slow->written.load(), 5);
  EXPECT_EQ(health.dropped_reports[1].second, 0);
  EXPECT_EQ(fast->count.load(), 100);
  std::vector<std::string> logged = log.Lines();
  ASSERT_FALSE(logged.empty());
  EXPECT_NE(logged[0].find("slow is not keeping up"), std::string::npos);
}

// Stop() while time goes on (the meter waits for its delayed sources on the clock).
Status StopWhileTimePasses(Meter* meter, ManualClock* clock) {
  std::atomic<bool> done{false};
  std::thread time([&] {
    while (!done) {
      clock->Jump(clock->MonotonicNanos() + 100 * kMs);
      std::this_thread::sleep_for(milliseconds(1));
    }
  });
  Status status = meter->Stop();
  done = true;
  time.join();
  return status;
}

// Two outputs fail: the stop names both (not the first alone), and the others get every report.
TEST(Meter, EveryFailingOutputIsNamedAndTheOthersGetEveryReport) {
  Rig rig;
  rig.Trace({1'000'000});
  rig.Output("csv:/full/m.csv", std::make_unique<FailingSink>("the disk is full"));
  ReportBuffer* kept = rig.Buffer();
  rig.Output("archive:/full/a", std::make_unique<FailingSink>("no room for the archive"));
  rig.options.log = [](const std::string&) {};
  auto meter = rig.Make();
  ASSERT_TRUE(meter.ok()) << meter.status().ToString();
  ASSERT_TRUE((*meter)->Start().ok());
  rig.RunTo(3000 * kMs);
  Status stopped = (*meter)->Stop();
  EXPECT_EQ(stopped.message(),
            "output csv:/full/m.csv: the disk is full at the end; output archive:/full/a: no room "
            "for the archive at the end");
  EXPECT_EQ(kept->Take().size(), 3u);
  MeterHealth health = (*meter)->Health();
  ASSERT_EQ(health.dropped_reports.size(), 3u);
  EXPECT_EQ(health.dropped_reports[0].second, 3);
  EXPECT_EQ(health.dropped_reports[1].second, 0);
  EXPECT_EQ(health.dropped_reports[2].second, 3);
}

TEST(Meter, DelayedSourcesHoldReportsUntilTheirDataCameInOrder) {
  Rig rig;
  rig.Trace({1'000'000});
  LateSource* late = rig.Delayed(std::make_unique<LateSource>(200'000'000, 60'000 * kMs));
  ReportBuffer* reports = rig.Buffer();
  rig.Activity({1.0}, 0, 2);
  const UnixNanos wall_start = rig.clock->WallNanos();
  auto meter = rig.Make();
  ASSERT_TRUE(meter.ok());
  ASSERT_EQ((*meter)->header().domains.size(), 2u);
  EXPECT_EQ((*meter)->header().domains[1].source, "kwollect");
  ASSERT_TRUE((*meter)->Start().ok());
  late->known_until = wall_start + 1500 * kMs;
  rig.RunTo(3000 * kMs);
  // The wattmeter's data covers the first second only: one report out, two held.
  for (int i = 0; i < 400 && (*meter)->Health().reports < 1; ++i) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ((*meter)->Health().reports, 1);
  late->known_until = wall_start + 4000 * kMs;
  rig.RunTo(6000 * kMs);
  late->known_until = wall_start + 6000 * kMs;
  ASSERT_TRUE((*meter)->Stop().ok());
  std::vector<IntervalReport> all = reports->Take();
  ASSERT_EQ(all.size(), 6u);
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].sequence, int64_t(i));
    const DomainEnergy& node = all[i].domains[1];
    EXPECT_EQ(node.measured_microjoules, 200'000'000);
    EXPECT_EQ(node.flags, 0u);
    EXPECT_EQ(Conserved(node), node.measured_microjoules);
    // The one target used all the busy time: the dynamic part is all its.
    EXPECT_EQ(node.unattributed_microjoules, 0);
  }
}

TEST(Meter, ADelayedSourceThatNeverAnswersIsAGapAfterItsMaxDelay) {
  Rig rig;
  rig.Delayed(std::make_unique<LateSource>(1'000'000, 2000 * kMs));
  ReportBuffer* reports = rig.Buffer();
  auto meter = rig.Make();
  ASSERT_TRUE(meter.ok()) << meter.status().ToString();
  ASSERT_TRUE((*meter)->Start().ok());
  rig.RunTo(5000 * kMs);
  ASSERT_TRUE(StopWhileTimePasses(meter->get(), rig.clock.get()).ok());
  std::vector<IntervalReport> all = reports->Take();
  // Five seconds, and what the clock ran on while Stop() waited.
  ASSERT_GE(all.size(), 5u);
  for (const auto& r : all) {
    EXPECT_EQ(r.domains[0].flags, uint32_t(kUnreadable));
    EXPECT_EQ(r.domains[0].measured_microjoules, 0);
  }
}

// A wattmeter whose first answer takes until the test releases it: the formula thread waits on it.
class StuckSource : public DelayedEnergySource {
 public:
  StuckSource() { domains_.push_back(Domain{"kwollect", "node-1", "node", -1, "test"}); }
  const std::vector<Domain>& domains() const override { return domains_; }
  Result<std::optional<std::vector<IntervalEnergy>>> EnergyBetween(UnixNanos start,
                                                                   UnixNanos end) override {
    std::unique_lock lock(mutex_);
    asked_ = true;
    asked_cv_.notify_all();
    open_.wait(lock, [&] { return released_; });
    return std::optional(std::vector<IntervalEnergy>{IntervalEnergy{(end - start) / 1000, 0}});
  }
  nanoseconds MaxDelay() const override { return std::chrono::seconds(60); }
  void WaitUntilAsked() {
    std::unique_lock lock(mutex_);
    asked_cv_.wait(lock, [&] { return asked_; });
  }
  void Release() {
    {
      std::lock_guard lock(mutex_);
      released_ = true;
    }
    open_.notify_all();
  }

 private:
  std::vector<Domain> domains_;
  std::mutex mutex_;
  std::condition_variable open_, asked_cv_;
  bool asked_ = false, released_ = false;
};

TEST(Meter, SamplesTheFormulaCannotTakeAreMergedIntoTheNextIntervalNotLost) {
  Rig rig;
  TraceSource* energy = rig.Trace({2'000'000});
  StuckSource* node = rig.Delayed(std::make_unique<StuckSource>());
  ReportBuffer* reports = rig.Buffer();
  rig.options.period = milliseconds(10);
  rig.options.sample_queue = 2;
  auto meter = rig.Make();
  ASSERT_TRUE(meter.ok()) << meter.status().ToString();
  ASSERT_TRUE((*meter)->Start().ok());
  rig.RunTo(10 * kMs);
  node->WaitUntilAsked();  // the formula thread is stuck on the first interval
  rig.RunTo(1000 * kMs);
  node->Release();
  ASSERT_TRUE((*meter)->Stop().ok());
  const int64_t end = rig.clock->MonotonicNanos();
  std::vector<IntervalReport> all = reports->Take();
  MeterHealth health = (*meter)->Health();
  // 100 periods: the first, two in the queue, the 97 others merged into the stop's interval.
  EXPECT_EQ(health.merged_samples, 97);
  EXPECT_EQ(all.size(), 4u);
  int64_t measured = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].sequence, int64_t(i));
    if (i > 0) {
      EXPECT_EQ(all[i].start, all[i - 1].end);
    }
    measured += all[i].domains[0].measured_microjoules;
    EXPECT_EQ(all[i].domains[1].measured_microjoules, (all[i].end - all[i].start) / 1000);
  }
  EXPECT_EQ(measured, energy->EnergyAt(0, end) - energy->EnergyAt(0, rig.start));
  EXPECT_EQ(all.back().health.merged_samples, health.merged_samples);
}

// The formula is the meter's choice: smartwatts runs in the same pipeline as cputime.
TEST(Meter, RunsTheSmartwattsFormula) {
  Rig rig;
  rig.Trace({50'000'000}, nanoseconds::max(), "rapl");
  ReportBuffer* reports = rig.Buffer();
  rig.Activity({0.5, 0.25}, 0.25, 2, /*counters=*/true);
  rig.options.period = milliseconds(100);
  rig.options.formula.name = "smartwatts";
  auto meter = rig.Make();
  ASSERT_TRUE(meter.ok()) << meter.status().ToString();
  ASSERT_TRUE((*meter)->Start().ok());
  rig.RunTo(3'000 * kMs);
  ASSERT_TRUE((*meter)->Stop().ok());
  std::vector<IntervalReport> all = reports->Take();
  ASSERT_EQ(all.size(), 30u);
  EXPECT_EQ(reports->header().formula, "smartwatts");
  for (size_t i = 0; i < all.size(); ++i) {
    const DomainEnergy& e = all[i].domains[0];
    EXPECT_EQ(e.measured_microjoules, 5'000'000);
    EXPECT_EQ(Conserved(e), e.measured_microjoules);
    // A model is learned on the first 10 intervals, and shares from the 11th on.
    EXPECT_EQ(all[i].models.size(), i >= 10 ? 1u : 0u) << i;
  }
  // (A steady load cannot tell idle from dynamic power apart: how the model splits 50 W is the
  // formula's tests' to check, on loads that vary.) The model's intercept is the idle energy.
  const IntervalReport& last = all.back();
  ASSERT_EQ(last.domains[0].target_microjoules.size(), 2u);
  EXPECT_EQ(last.models[0].domain, 0);
  EXPECT_EQ(last.models[0].coefficients.size(), 2u);
  EXPECT_NEAR(double(last.domains[0].idle_microjoules), last.models[0].intercept_watts * 0.1 * 1e6,
              1.0);
}

TEST(Meter, ConfigurationErrorsBeforeAnythingRuns) {
  auto make = [&](MeterOptions options, bool with_source = true) {
    Rig rig;
    if (with_source) rig.Trace({1});
    rig.options = options;
    return rig.Make();
  };
  EXPECT_NE(make(MeterOptions{}, false).status().message().find("no energy source"),
            std::string::npos);
  MeterOptions fast;
  fast.period = std::chrono::microseconds(10);
  EXPECT_EQ(make(fast).status().code(), Status::Code::kInvalidArgument);
  MeterOptions slow_read;
  slow_read.read_period = std::chrono::seconds(5);
  EXPECT_NE(make(slow_read).status().message().find("read period"), std::string::npos);
  MeterOptions unknown_idle;
  unknown_idle.formula.idle_watts = {{"gpu", 30}};
  Status unknown = make(unknown_idle).status();
  EXPECT_NE(unknown.message().find("gpu, which is no domain"), std::string::npos);
  EXPECT_NE(unknown.message().find("package-0"), std::string::npos);
  MeterOptions negative;
  negative.formula.idle_watts = {{"package-0", -1}};
  EXPECT_EQ(make(negative).status().code(), Status::Code::kInvalidArgument);
  MeterOptions nowhere;
  nowhere.state_file = "/nonexistent-dir/state.json";
  EXPECT_EQ(make(nowhere).status().code(), Status::Code::kIOError);
  // The smartwatts formula shares by the targets' counters, and models RAPL's domains.
  MeterOptions smartwatts;
  smartwatts.formula.name = "smartwatts";
  EXPECT_NE(make(smartwatts).status().message().find("it needs targets"), std::string::npos);
  {
    Rig rig;
    rig.Trace({1});
    rig.Activity({1.0}, 0, 4);
    rig.options = smartwatts;
    EXPECT_NE(rig.Make().status().message().find("--source rapl"), std::string::npos);
  }
  MeterOptions unknown_formula;
  unknown_formula.formula.name = "joulemeter";
  EXPECT_NE(make(unknown_formula).status().message().find("cputime"), std::string::npos);
}

class MeterStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.root() / "proc/sys/kernel/random");
    SetBoot("boot-a");
    state_ = (dir_.root() / "meter.state").string();
  }
  void SetBoot(const std::string& id) {
    std::ofstream(dir_.root() / "proc/sys/kernel/random/boot_id") << id << "\n";
  }

  // Runs a meter from `from` to `to` (ms on the rig's clock) over a 1 W source.
  MeterTotals Run(Rig& rig, int64_t from, int64_t to, std::vector<IntervalReport>* reports) {
    rig.environment.procfs_root = (dir_.root() / "proc").string();
    rig.clock->Jump(from * kMs);
    rig.Trace({1'000'000});
    ReportBuffer* kept = rig.Buffer();
    rig.options.state_file = state_;
    auto meter = rig.Make();
    EXPECT_TRUE(meter.ok()) << meter.status().ToString();
    if (!meter.ok()) return {};
    EXPECT_TRUE((*meter)->Start().ok());
    rig.RunUntil(to * kMs);
    EXPECT_TRUE((*meter)->Stop().ok());
    *reports = kept->Take();
    return (*meter)->Totals();
  }

  // A directory, not empty, where the state's temporary file goes: the state cannot be written.
  static void Block(const std::string& path) {
    std::filesystem::create_directory(path);
    std::ofstream(path + "/in-the-way") << "x";
  }
  // Until the formula thread (behind the sampler) wrote the state of the intervals before
  // `next_sequence`; it writes none more until the clock moves on. (Blocking the temporary
  // file's path while a state is being written would leave it a file, not the block.)
  void WaitForStateThrough(int64_t next_sequence) {
    const std::string wanted = "\"next_sequence\":" + std::to_string(next_sequence) + ",";
    auto written = [&] {
      std::ifstream in(state_);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      return text.find(wanted) != std::string::npos;
    };
    for (int i = 0; i < 1000 && !written(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(written()) << "no state through interval " << next_sequence - 1;
  }

  kwatt::testing::TempDir dir_{"kwatt_meter_state"};
  std::string state_;
};

TEST_F(MeterStateTest, ARestartInTheSameBootNeitherLosesNorDoubleCounts) {
  Rig rig;
  std::vector<IntervalReport> first, second;
  MeterTotals before = Run(rig, 1000, 11'000, &first);
  EXPECT_EQ(before.measured_microjoules[0], 10'000'000);
  ASSERT_TRUE(std::filesystem::exists(state_));
  // Down for 7 s, then started again.
  MeterTotals after = Run(rig, 18'000, 23'000, &second);
  EXPECT_EQ(after.measured_microjoules[0], 22'000'000);  // 1 W from 1 s to 23 s, nothing twice
  ASSERT_FALSE(second.empty());
  // The downtime is one report, unattributed, continuing the sequence.
  EXPECT_EQ(second[0].sequence, first.back().sequence + 1);
  EXPECT_EQ(second[0].start, first.back().end);
  EXPECT_EQ(second[0].domains[0].measured_microjoules, 7'000'000);
  EXPECT_EQ(second[0].domains[0].unattributed_microjoules, 7'000'000);
  EXPECT_EQ(second[0].domains[0].flags, 0u);
  EXPECT_EQ(after.reports, int64_t(first.size() + second.size()));
}

// The state file cannot be written for a while (here its temporary file is in the way): the
// reports wait, and go out once a later report's state is written; none is dropped or repeated.
TEST_F(MeterStateTest, ReportsWhoseStateCannotBeWrittenWaitForTheStateThenGoOut) {
  Rig rig;
  rig.environment.procfs_root = (dir_.root() / "proc").string();
  rig.Trace({1'000'000});
  ReportBuffer* kept = rig.Buffer();
  rig.options.state_file = state_;
  LogLines log;
  rig.options.log = log.Sink();
  auto meter = rig.Make();
  ASSERT_TRUE(meter.ok()) << meter.status().ToString();
  ASSERT_TRUE((*meter)->Start().ok());
  const std::string blocker = state_ + ".tmp-" + std::to_string(::getpid());
  rig.RunUntil(3000 * kMs);
  WaitForStateThrough(2);
  Block(blocker);
  ASSERT_TRUE(std::filesystem::is_directory(blocker));
  rig.RunUntil(6000 * kMs);
  // Until the formula thread met the blocked state (it runs behind the sampler).
  for (int i = 0; i < 500 && log.Lines().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::filesystem::remove_all(blocker);
  rig.RunUntil(8000 * kMs);
  ASSERT_TRUE((*meter)->Stop().ok());
  std::vector<IntervalReport> reports = kept->Take();
  ASSERT_EQ(reports.size(), 7u);
  for (size_t i = 0; i < reports.size(); ++i) {
    EXPECT_EQ(reports[i].start - reports[0].start, int64_t(i) * 1000 * kMs);
    EXPECT_EQ(reports[i].sequence, reports[0].sequence + int64_t(i));
    EXPECT_EQ(reports[i].domains[0].measured_microjoules, 1'000'000);
  }
  EXPECT_EQ((*meter)->Health().dropped_reports[0].second, 0);
  std::vector<std::string> said = log.Lines();
  ASSERT_FALSE(said.empty());
  EXPECT_NE(said[0].find("reports are held back from the outputs until it can be written"),
            std::string::npos)
      << said[0];
}

// The state cannot be written up to the stop: the reports it does not cover never reach an output,
// so that the restart, which goes on from the last state written, reports that energy once.
TEST_F(MeterStateTest, ARestartNeverRepeatsAnIntervalWhoseStateWasNotWritten) {
  Rig rig;
  rig.environment.procfs_root = (dir_.root() / "proc").string();
  rig.Trace({1'000'000});
  ReportBuffer* kept = rig.Buffer();
  rig.options.state_file = state_;
  rig.options.log = [](const std::string&) {};
  auto meter = rig.Make();
  ASSERT_TRUE(meter.ok()) << meter.status().ToString();
  ASSERT_TRUE((*meter)->Start().ok());
  const std::string blocker = state_ + ".tmp-" + std::to_string(::getpid());
  rig.RunUntil(3000 * kMs);
  WaitForStateThrough(2);
  Block(blocker);
  ASSERT_TRUE(std::filesystem::is_directory(blocker));
  rig.RunUntil(6000 * kMs);
  EXPECT_FALSE((*meter)->Stop().ok());  // the state could not be written
  std::vector<IntervalReport> first = kept->Take();
  EXPECT_GT((*meter)->Health().dropped_reports[0].second, 0);
  std::filesystem::remove_all(blocker);
  std::vector<IntervalReport> second;
  Run(rig, 8000, 10'000, &second);
  int64_t reported = 0;
  for (const auto* run : {&first, &second}) {
    for (const IntervalReport& r : *run) reported += r.domains[0].measured_microjoules;
  }
  EXPECT_EQ(reported, 9'000'000);  // 1 W from 1 s to 10 s, each second once
  ASSERT_FALSE(first.empty());
  ASSERT_FALSE(second.empty());
  EXPECT_EQ(second[0].start, first.back().end);
}

TEST_F(MeterStateTest, AnotherBootIsAGapAndTheTotalsGoOn) {
  Rig rig;
  std::vector<IntervalReport> first, second;
  Run(rig, 1000, 4000, &first);
  SetBoot("boot-b");
  MeterTotals after = Run(rig, 9000, 11'000, &second);
  EXPECT_EQ(after.measured_microjoules[0], 3'000'000 + 2'000'000);
  ASSERT_FALSE(second.empty());
  EXPECT_EQ(second[0].domains[0].measured_microjoules, 0);
  EXPECT_EQ(second[0].domains[0].flags, uint32_t(kReset));
}

TEST_F(MeterStateTest, ADamagedStateFileIsRefusedNamingIt) {
  std::ofstream(state_) << "{\"format\": \"kwatt-meter-state\", \"version\": 1, \"boot_id\": 3}";
  Rig rig;
  rig.Trace({1});
  rig.options.state_file = state_;
  auto meter = rig.Make();
  ASSERT_FALSE(meter.ok());
  EXPECT_EQ(meter.status().code(), Status::Code::kCorruption);
  EXPECT_NE(meter.status().message().find(state_), std::string::npos);
  EXPECT_NE(meter.status().message().find("move it away"), std::string::npos);
}

TEST_F(MeterStateTest, AStateFileOfOtherDomainsIsRefused) {
  Rig rig;
  std::vector<IntervalReport> first;
  Run(rig, 1000, 3000, &first);
  rig.Trace({1, 2});
  rig.options.state_file = state_;
  auto meter = rig.Make();
  ASSERT_FALSE(meter.ok());
  EXPECT_NE(meter.status().message().find("other sources or domains"), std::string::npos);
}

TEST_F(MeterStateTest, StatefulOutputsGetTheirStateBack) {
  Rig rig;
  rig.environment.procfs_root = (dir_.root() / "proc").string();
  int64_t seen = 0;
  for (int run = 0; run < 2; ++run) {
    rig.clock->Jump((1000 + run * 10'000) * kMs);
    rig.Trace({1});
    CountingSink* counting = rig.Output("counting", std::make_unique<CountingSink>());
    rig.options.state_file = state_;
    auto meter = rig.Make();
    ASSERT_TRUE(meter.ok());
    ASSERT_TRUE((*meter)->Start().ok());
    rig.RunUntil((1000 + run * 10'000 + 3000) * kMs);
    ASSERT_TRUE((*meter)->Stop().ok());
    seen = counting->count.load();
  }
  // 3 reports, then the downtime's and 3 more.
  EXPECT_EQ(seen, 3 + 1 + 3);
}

}  // namespace
}  // namespace kwatt::meter::meter_test
