// The series a simulated device reports: which (device, metric, labels) exist, when each is
// sampled, and its value at each sample: what the server answers for the simulated testbed.
#ifndef KWATT_SIMULATE_SERIES_H_
#define KWATT_SIMULATE_SERIES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kwatt/core/time.h"
#include "kwatt/simulate/testbed.h"

namespace kwatt::simulate {

// A simulated BMC's gain: it reads a few percent below the wall meter (its class error, which its
// stated accuracy covers; src/testing/energy_truth.cc divides it out to check the other terms).
inline constexpr double kBmcGain = 0.96;

enum class Quantity : uint8_t {
  kFeedPower,    // wattmeter port / PDU outlet: share of the node's AC power
  kBmcPower,     // BMC node power: averaged, coarse
  kBmcEnergyWh,  // BMC energy counter, watt-hours
  kPsuPower,     // BMC per-PSU power
  kPsuCurrent,
  kPsuVoltage,
  kOtherPower,
  kOtherVoltage,
  kOtherCurrent,
  kTempAmbient,
  kTempCpu,
  kTempExhaust,
  kTempOther,
  kFanRpm,
  kFanPercent,
  kCpuUsagePercent,
  kSwitchBytesIn,
  kSwitchBytesOut,
  kSwitchPacketsIn,
  kSwitchPacketsOut,
  kSwitchDiscards,
  kSwitchErrors,
  kCpuSeconds,  // node_cpu_seconds_total{cpu, mode}; index = mode
  kCpuFrequency,
  kLoadAverage,  // param = window seconds
  kMemory,       // index selects the figure
  kBootTime,
  kFilesystem,    // index 0 size, 1 free
  kNodeNetBytes,  // index 0 receive, 1 transmit
  kNodeNetPackets,
  kProcsRunning,
  kProcsBlocked,
  kGpuPower,
  kGpuTemp,
  kGpuClock,
  kGpuUtil,
  kGpuMemCopy,
  kGpuMemUsed,
  kGpuTensor,
  kConstant,  // param is the value
};

// One physical reading of a device: a function of time.
struct Source {
  const NodeModel* node = nullptr;
  Quantity quantity = Quantity::kConstant;
  double share = 1.0;
  double param = 0;
  int index = 0;
  double step = 0;      // values are rounded to multiples of `step` (0: not rounded)
  bool scaled = false;  // true: value = integer * step, as SNMP readings with a scale_factor
  double noise = 0;     // amplitude of the uniform measurement noise
  uint64_t key = 0;     // seeds the noise

  double ValueAt(UnixNanos t) const;
};

// Samples are taken on a grid: t_k = k * period + offset(period) + jitter(k), jitter < period.
struct SamplingGrid {
  uint64_t key = 0;
  bool exact = false;  // true: no offset, no jitter (wattmeters time-stamp on the period)

  int64_t MaxJitter(int64_t period) const;
  UnixNanos TimeOf(int64_t k, int64_t period) const;
  // The smallest k with TimeOf(k) >= t.
  int64_t FirstIndexAtOrAfter(UnixNanos t, int64_t period) const;
};

struct Segment {
  UnixNanos begin;  // inclusive
  UnixNanos end;    // exclusive
  int64_t period;   // nanoseconds, > 0
};

// A value recorded at an instant (a pushed custom metric).
struct RecordedSample {
  UnixNanos t;
  double value;
};

// Whether a metric is a counter: its id ends in "_total" (Kwollect's convention).
bool IsCounterMetric(std::string_view metric_id);

// What one (device_id, metric_id, labels) returns: the sum of its sources at each sample time,
// or, when `recorded` is set, those samples (then sources, grid and segments are unused).
struct OutputSeries {
  std::string device_id;
  std::string metric_id;
  std::string labels_json;
  bool counter = false;  // metric id ends in _total
  std::vector<Source> sources;
  SamplingGrid grid;
  std::vector<Segment> segments;  // sorted, disjoint
  // [begin, end) spans whose samples are "NaN" (outages with "report": "NaN").
  std::vector<std::pair<UnixNanos, UnixNanos>> nan_spans;
  // The jobs file's faults that make it lie, in the file's order: where several hold at an
  // instant, the first applies.
  std::vector<jobs::Fault> faults;
  // Sorted by time (equal times in the order they came); shared, never modified once made.
  std::shared_ptr<const std::vector<RecordedSample>> recorded;
  std::string row_middle;  // `","device_id":"…","metric_id":"…","value":`
  std::string row_end;     // `,"labels":{…}}`

  // Sets what follows from device_id, metric_id and labels_json: counter, row_middle, row_end.
  void Derive();
  int64_t CountIn(UnixNanos lo, UnixNanos hi) const;  // samples with lo <= t < hi
  // Its value at a sample time: NaN in a NaN span, else its sources' sum, as its faults make it
  // lie. Not for a recorded series.
  double ValueAt(UnixNanos t) const;
  // The indices [first, last) of the recorded samples with lo <= t < hi.
  std::pair<size_t, size_t> RecordedIn(UnixNanos lo, UnixNanos hi) const;
};

// Every series of `device_id` (a node, wattmeter port, PDU outlet or switch port of `site`) whose
// metric id is in `metrics` (all when empty).
std::vector<OutputSeries> SeriesOfDevice(const Testbed& testbed, const Site& site,
                                         const DeviceRef& device,
                                         const std::vector<std::string>& metrics);

// The labels object as Kwollect (PostgreSQL jsonb) writes it: keys by length, then bytes.
std::string RenderLabels(LabelList labels, const std::vector<std::string>& device_orig);

}  // namespace kwatt::simulate

#endif  // KWATT_SIMULATE_SERIES_H_
