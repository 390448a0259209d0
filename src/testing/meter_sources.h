// Sources and activity whose figures are known exactly, for the meter's tests. Internal.
#ifndef KWATT_SRC_TESTING_METER_SOURCES_H_
#define KWATT_SRC_TESTING_METER_SOURCES_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "kwatt/meter/activity/activity.h"
#include "kwatt/meter/activity/activity_record.h"
#include "kwatt/meter/environment/environment.h"
#include "kwatt/meter/pipeline/replay.h"
#include "kwatt/meter/sources/source.h"
#include "src/testing/manual_clock.h"

namespace kwatt::meter::testing {

using std::chrono::nanoseconds;

// A source whose domains draw constant powers (microwatts): the energy at monotonic time t is
// exactly power x t, so every total is known. Its domains are packages of source `source`.
class TraceSource : public EnergySource {
 public:
  TraceSource(std::shared_ptr<Clock> clock, std::vector<int64_t> microwatts,
              nanoseconds max_read = nanoseconds::max(), const std::string& source = "trace")
      : clock_(std::move(clock)), microwatts_(std::move(microwatts)), max_read_(max_read) {
    for (size_t i = 0; i < microwatts_.size(); ++i) {
      domains_.push_back(Domain{source, "package-" + std::to_string(i), "package", int(i), "test"});
    }
    origin_ = clock_->MonotonicNanos();
  }
  const std::vector<Domain>& domains() const override { return domains_; }
  Status Read(std::vector<DomainReading>* out) override {
    ++reads;
    if (on_read) on_read();
    int64_t now = clock_->MonotonicNanos();
    last_ = now;
    out->assign(domains_.size(), DomainReading{});
    for (size_t i = 0; i < domains_.size(); ++i) {
      (*out)[i].microjoules = EnergyAt(i, now) - EnergyAt(i, origin_);
      (*out)[i].flags = next_flags;
    }
    next_flags = 0;
    return Status::OK();
  }
  nanoseconds MaxReadPeriod() const override { return max_read_; }
  std::string SaveCounters() const override { return std::to_string(last_); }
  Status ResumeCounters(std::string_view saved, nanoseconds) override {
    origin_ = std::stoll(std::string(saved));
    return Status::OK();
  }
  int64_t EnergyAt(size_t domain, int64_t t) const {
    return int64_t(__int128(microwatts_[domain]) * t / kNanosPerSecond);
  }

  std::atomic<int64_t> reads{0};
  uint32_t next_flags = 0;
  std::function<void()> on_read;

 private:
  std::shared_ptr<Clock> clock_;
  std::vector<int64_t> microwatts_;
  nanoseconds max_read_;
  std::vector<Domain> domains_;
  int64_t origin_ = 0, last_ = 0;
};

// Targets whose CPU time grows at constant rates (CPUs busy), on a machine of `cpus`; with
// `counters`, their cycles and instructions too (2 GHz, one instruction a cycle).
class RateActivity : public ActivityReader {
 public:
  RateActivity(std::shared_ptr<Clock> clock, std::vector<double> rates, double other, int cpus,
               bool counters = false)
      : clock_(std::move(clock)),
        rates_(std::move(rates)),
        other_(other),
        cpus_(cpus),
        counters_(counters) {}
  Result<ActivitySnapshot> Read() override {
    const int64_t monotonic = clock_->MonotonicNanos();
    return ReadAt(monotonic, clock_->WallNanos());
  }
  Result<ActivitySnapshot> ReadAt(int64_t monotonic_nanos, UnixNanos wall) override {
    ActivitySnapshot s;
    s.monotonic_nanos = monotonic_nanos;
    s.wall = wall;
    s.cpus = cpus_;
    double t_us = double(s.monotonic_nanos) / 1e3;
    double busy = other_;
    for (size_t i = 0; i < rates_.size(); ++i) {
      TargetSample sample;
      sample.target = Target{TargetKind::kProcess, "pid:" + std::to_string(100 + i) + ":1",
                             "worker-" + std::to_string(i), int64_t(100 + i)};
      sample.cpu_microseconds = int64_t(rates_[i] * t_us);
      if (counters_) sample.cycles = sample.instructions = sample.cpu_microseconds * 2000;
      s.targets.push_back(sample);
      busy += rates_[i];
    }
    s.busy_microseconds = int64_t(busy * t_us);
    s.total_microseconds = int64_t(cpus_ * t_us);
    return s;
  }

 private:
  std::shared_ptr<Clock> clock_;
  std::vector<double> rates_;
  double other_;
  int cpus_;
  bool counters_;
};

// A wattmeter known late: its data is known up to `known_until` (wall time), which the test moves.
class LateSource : public DelayedEnergySource {
 public:
  LateSource(int64_t microwatts, int64_t max_delay)
      : microwatts_(microwatts), max_delay_(max_delay) {
    domains_.push_back(Domain{"kwollect", "node-1", "node", -1, "test"});
  }
  const std::vector<Domain>& domains() const override { return domains_; }
  Result<std::optional<std::vector<IntervalEnergy>>> EnergyBetween(UnixNanos start,
                                                                   UnixNanos end) override {
    if (end > known_until.load()) return std::optional<std::vector<IntervalEnergy>>();
    int64_t uj = int64_t(__int128(microwatts_) * (end - start) / kNanosPerSecond);
    return std::optional(std::vector<IntervalEnergy>{IntervalEnergy{uj, 0}});
  }
  nanoseconds MaxDelay() const override { return nanoseconds(max_delay_); }
  std::atomic<UnixNanos> known_until{0};

 private:
  int64_t microwatts_, max_delay_;
  std::vector<Domain> domains_;
};

// Records `seconds` of RateActivity(clock, {1.0, 0.5}, 0.5, 4) (two workers on 1 and 0.5 CPU of
// 4, the machine 2 CPUs busy) every `period` into a new activity record at `path`, advancing
// `clock` from its current time; the record's sensor is `hostname`, its procfs `scratch_dir`/
// no-procfs (none: the header's boot id is empty). RecordActivity's status.
inline Status RecordRateActivity(const std::string& path, const std::shared_ptr<ManualClock>& clock,
                                 const std::string& scratch_dir, int64_t seconds,
                                 nanoseconds period,
                                 const std::string& hostname = "nova-1.lyon.grid5000.fr") {
  MeterEnvironment environment;
  environment.clock = clock;
  environment.procfs_root = scratch_dir + "/no-procfs";
  environment.hostname = hostname;
  auto writer = ActivityRecordWriter::Create(
      path, MakeActivityRecordHeader(environment, TargetSelection{}, "kwatt test"));
  if (!writer.ok()) return writer.status();
  RateActivity activity(clock, {1.0, 0.5}, 0.5, 4);
  std::stop_source stop;
  const int64_t start = clock->MonotonicNanos();
  Status recorded;
  std::thread recorder(
      [&] { recorded = RecordActivity(activity, **writer, *clock, period, stop.get_token()); });
  clock->AdvanceTo(start + seconds * kNanosPerSecond);
  clock->WaitUntilIdle();
  stop.request_stop();
  recorder.join();
  return recorded;
}

}  // namespace kwatt::meter::testing

#endif  // KWATT_SRC_TESTING_METER_SOURCES_H_
