// The power meter's pipeline (doc/meter/README.md): a sampler thread reads the energy sources at
// the read period and the activity at every output period; a formula thread turns each interval
// into an IntervalReport (a formula of formula.h: cputime, smartwatts) and keeps the totals; each
// output has its own thread and a bounded queue (fan_out.h).
//
// - The read period is the output period divided into as many equal ticks as the sources'
//   MaxReadPeriod needs: a wrap is never missed, whatever the output period.
// - A tick that starts more than a tenth of the read period (at most 100 ms) after its deadline is
//   late; ticks a read outlived are skipped and counted as missed. Nothing waits for an output: a
//   report that an output's queue cannot take is dropped for that output and counted (health).
//   A sample the formula thread cannot take is not lost: counters are cumulative, so the next
//   sample's interval spans it (counted as a merged sample).
// - Sources known late (DelayedEnergySource) hold an interval's report until their data came, or
//   their MaxDelay passed (their part of it is then a gap, flagged kUnreadable).
// - Stop() takes a last sample, so that the energy up to the stop is reported, and returns once
//   every output has written (or failed to write) every report: SIGINT/SIGTERM lose nothing
//   already measured.
// - The state file (MeterOptions::state_file) keeps the totals and the sources' raw counters,
//   rewritten atomically with every report, before any output has it (so that it records the
//   last report an output may have written, and a restart after kill -9 goes on after it), and
//   at the end. A state file is refused (naming it and the field) when it is not a regular file,
//   is over 64 MiB, or holds values no meter writes. A meter started
//   again with the same file in the same boot resumes: the energy measured while it was down is
//   counted (from the raw counters) in a first report covering the downtime, unattributed; in
//   another boot the totals go on and the downtime is reported as a gap.
//
// Thread safety: Start(), Wait() and Stop() from one thread; Totals() and Health() from any.
#ifndef KWATT_METER_PIPELINE_METER_H_
#define KWATT_METER_PIPELINE_METER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/meter/activity/activity.h"
#include "kwatt/meter/environment/environment.h"
#include "kwatt/meter/formulas/formula.h"
#include "kwatt/meter/formulas/report.h"
#include "kwatt/meter/pipeline/fan_out.h"
#include "kwatt/meter/sources/source.h"

namespace kwatt::meter {

struct MeterOptions {
  // How long each reported interval is (the activity is read, and a report made, this often).
  std::chrono::nanoseconds period = std::chrono::seconds(1);
  // The longest time between two reads of the energy sources; they are read more often when
  // their counters could wrap sooner (EnergySource::MaxReadPeriod). 0: the period.
  std::chrono::nanoseconds read_period{0};
  // Stop by itself after this long (Wait() returns); 0: only Stop().
  std::chrono::nanoseconds duration{0};
  // The formula, its idle policy and the idle power given (formula.h).
  FormulaOptions formula;
  // Samples waiting for the formula thread, and reports waiting for each output.
  size_t sample_queue = 4096;
  size_t report_queue = 4096;
  // The state file (empty: none): restart-safe totals.
  std::string state_file;
  // One line per event worth a person's attention (a source failing, an output failing, a state
  // file that cannot be resumed): stderr by default. At most one line a minute per cause.
  std::function<void(const std::string&)> log;
};

// What was measured since the meter started (or since the state file's first start).
struct MeterTotals {
  struct TargetTotal {
    Target target;
    int64_t cpu_microseconds = 0;
    std::vector<int64_t> microjoules;  // per domain
  };
  std::vector<Domain> domains;
  std::vector<int64_t> measured_microjoules;      // per domain
  std::vector<int64_t> idle_microjoules;          // per domain
  std::vector<int64_t> unattributed_microjoules;  // per domain
  std::vector<uint32_t> flags;                    // per domain: every flag seen
  // Per domain: the idle power the last report used (-1: none) and its uncertainty
  // (DomainEnergy::idle_watts, ::idle_uncertainty_watts).
  std::vector<double> idle_watts, idle_uncertainty_watts;
  std::vector<TargetTotal> targets;  // every target that had a share, by key
  UnixNanos start = 0, end = 0;      // the span reported
  int64_t reports = 0;
  int64_t busy_microseconds = 0, capacity_microseconds = 0;
};

// A ReportSink that keeps the header and every report in memory (Python's kwatt.measure, tests).
// Thread-safe.
class ReportBuffer : public ReportSink {
 public:
  Status Begin(const MeterHeader& header) override;
  Status Write(const IntervalReport& report) override;
  Status Finish() override { return Status::OK(); }
  MeterHeader header() const;
  // The reports written since the last Take(), in order.
  std::vector<IntervalReport> Take();

 private:
  mutable std::mutex mutex_;
  MeterHeader header_;
  std::vector<IntervalReport> reports_;
};

class Meter {
 public:
  // Checks everything that can be checked before a thread starts: at least one source, the
  // options (a period from 1 ms to 1 day, read period, the formula's: Formula::Create; smartwatts
  // needs `activity`), the state file
  // (readable, and writable where it will be written: a malformed one is Corruption naming it).
  // `activity` may be null: every interval's energy is then unattributed (or idle).
  static Result<std::unique_ptr<Meter>> Create(
      MeterEnvironment environment, std::vector<std::unique_ptr<EnergySource>> sources,
      std::vector<std::unique_ptr<DelayedEnergySource>> delayed_sources,
      std::unique_ptr<ActivityReader> activity, std::vector<MeterOutput> outputs,
      MeterOptions options);
  ~Meter();  // Stop()

  const MeterHeader& header() const;

  // Reads every source once (the origin of the first interval), gives the header to every output
  // (Begin: an error there is returned and nothing runs), and starts the threads.
  [[nodiscard]] Status Start();
  // Until Stop(), or until the duration passed (then stops as Stop() does). Returns Stop()'s
  // status.
  [[nodiscard]] Status Wait();
  // Takes a last sample, reports it and every pending interval (waiting at most the delayed
  // sources' MaxDelay), lets each output write everything and Finish, saves the state file.
  // Returns the error of every output that failed, and the state file's (everything else was
  // still done). Idempotent.
  [[nodiscard]] Status Stop();
  // From another thread while Stop runs: the outputs stop waiting to send what is left
  // (ReportSink::Abandon), so that Stop returns soon, counting it lost.
  void Abandon();
  // The rows the outputs still hold to send (HTTP outputs that wait for their peer), by output.
  std::vector<std::pair<std::string, int64_t>> PendingRows() const;

  MeterTotals Totals() const;
  MeterHealth Health() const;

  class Impl;

 private:
  explicit Meter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kwatt::meter

#endif  // KWATT_METER_PIPELINE_METER_H_
