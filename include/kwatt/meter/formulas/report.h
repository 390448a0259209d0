// What the power meter reports, interval after interval, and what outputs implement
// (doc/meter/README.md).
//
// For every interval and domain the report holds the energy measured and how it was shared, in
// integer microjoules, with exact conservation:
//   measured = idle + unattributed + the sum of the targets' shares.
// Outputs (outputs.h: CSV, JSON Lines, PowerAPI's reports, Prometheus, InfluxDB, Kwollect, a kwatt
// archive) are ReportSinks fed by the meter, each from its own thread.
//
// Thread safety: reports are values. A ReportSink is called from one thread at a time.
#ifndef KWATT_METER_FORMULAS_REPORT_H_
#define KWATT_METER_FORMULAS_REPORT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/core/time.h"
#include "kwatt/meter/activity/activity.h"
#include "kwatt/meter/sources/source.h"

namespace kwatt::meter {

// Said once, before the first report.
struct MeterHeader {
  std::string sensor;           // the machine's name (PowerAPI's `sensor`)
  std::vector<Domain> domains;  // every domain of every source; DomainEnergy follows this order
  std::string formula;          // "cputime" (attribution.h) or "smartwatts" (smartwatts.h)
  std::string idle_policy;      // "none", "proportional", "equal"
  UnixNanos start = 0;          // when measuring started
  // The sequence of the first report: above 0 when the meter goes on from its state file after a
  // restart (outputs that write files then append to what the earlier run wrote).
  int64_t first_sequence = 0;
  std::vector<std::string> notes;  // the sources' notes, for the reader
};

// One domain over one interval.
struct DomainEnergy {
  int64_t measured_microjoules = 0;
  // Kept apart as the machine's idle energy (idle policy "none", or no target alive).
  int64_t idle_microjoules = 0;
  // Given to no target: activity of other software and the kernel, or a gap's energy.
  int64_t unattributed_microjoules = 0;
  // Per IntervalReport::targets.
  std::vector<int64_t> target_microjoules;
  uint32_t flags = 0;  // DomainFlag bits of the interval (kReset, kUnreadable: a gap)
  // The idle power the formula used (cputime: given, or learned so far; smartwatts: the model's
  // intercept), -1 when none; and how well it is known: one standard error of a learned one (0
  // when given; the power itself when it is only an upper bound: attribution.h, IdleEstimate;
  // smartwatts: the model's current error, ModelInfo::error_watts).
  double idle_watts = -1;
  double idle_uncertainty_watts = 0;
};

// A target as reported for one interval.
struct ReportTarget {
  Target target;
  int64_t cpu_microseconds = 0;  // its CPU time in the interval
};

// A SmartWatts model as used for one interval (the formula "smartwatts" only): what PowerAPI's
// formula reports carry.
struct ModelInfo {
  int domain = -1;  // index of the RAPL domain it models in MeterHeader::domains
  int socket = -1;
  int layer_frequency_mhz = 0;    // the frequency layer
  int package_frequency_mhz = 0;  // the package's frequency in the interval
  std::string id;                 // a name for this learned model ("socket0-2400MHz-#3")
  int64_t samples = 0;            // samples it was learned on
  double error_watts = 0;         // its current error (median over the error window)
  double intercept_watts = 0;
  std::vector<std::pair<std::string, double>> coefficients;  // per event: watts per event/s
};

// The meter's own health so far, carried by every report (Prometheus exports it).
struct MeterHealth {
  int64_t ticks = 0;         // reads of the sources
  int64_t late_ticks = 0;    // reads that started more than a tenth of a period late
  int64_t missed_ticks = 0;  // ticks skipped because a read outlived them
  // Samples the formula could not take in time (its queue full): not lost, their interval is
  // merged into the next one's (counters are cumulative), at the cost of a coarser report.
  int64_t merged_samples = 0;
  double max_lag_seconds = 0;
  int64_t reports = 0;  // intervals reported
  // Reports an output could not take (its queue full) or failed to write, per output, in the
  // meter's output order.
  std::vector<std::pair<std::string, int64_t>> dropped_reports;
  int64_t wraps = 0;   // counter wraps counted exactly, all domains
  int64_t resets = 0;  // counter resets (gaps)
};

// One interval [start, end).
struct IntervalReport {
  int64_t sequence = 0;  // 0, 1, 2...: one more per interval
  UnixNanos start = 0;
  UnixNanos end = 0;
  int64_t busy_microseconds = 0;      // the machine's busy CPU time in the interval
  int64_t capacity_microseconds = 0;  // its CPUs x the interval
  // The targets with CPU time in the interval (every target alive under the idle policy
  // "equal"), sorted by key. A target alive and idle through an interval is not listed in it.
  std::vector<ReportTarget> targets;
  // The keys of the targets that ended in the interval (alive at its start, gone at its end),
  // sorted: outputs forget their counters then, and only then.
  std::vector<std::string> ended_targets;
  std::vector<DomainEnergy> domains;  // per MeterHeader::domains
  std::vector<ModelInfo> models;      // formula "smartwatts" only
  MeterHealth health;
};

// An output of the meter.
class ReportSink {
 public:
  virtual ~ReportSink() = default;
  // Once, before any report.
  [[nodiscard]] virtual Status Begin(const MeterHeader& header) = 0;
  // Each report in sequence order. An error is counted by the meter (health.dropped_reports) and
  // the next report is given still: a sink that can retry keeps what it could not send.
  [[nodiscard]] virtual Status Write(const IntervalReport& report) = 0;
  // Once, at the end (after an error too): everything written is durable or sent.
  [[nodiscard]] virtual Status Finish() = 0;
  // From another thread, while Finish may run: stop waiting to send what is left (a second stop
  // signal); Finish then returns soon, counting it lost. Nothing to do by default.
  virtual void Abandon() {}
  // Thread-safe: rows written and not yet durable or sent (an HTTP output waiting for its peer).
  virtual int64_t PendingRows() const { return 0; }
};

// A ReportSink whose state survives a restart (Prometheus counters): the meter keeps it in the
// state file.
class StatefulSink {
 public:
  virtual ~StatefulSink() = default;
  virtual std::string SaveState() const = 0;
  [[nodiscard]] virtual Status RestoreState(std::string_view saved) = 0;
};

}  // namespace kwatt::meter

#endif  // KWATT_METER_FORMULAS_REPORT_H_
