// A device the collector reads: what a driver (Prometheus, SNMP, IPMI, JSON over HTTP) implements,
// and the readings it gives (doc/collect.md).
//
// The scheduler (kwatt/collect/collector.h) owns one Device per distinct MetricUrl::DeviceKey()
// and calls Poll() from one thread at a time, at the device's period; a slow device only delays
// itself. Streams that are not polled (the wattmeter's line stream) are a StreamSource.
//
// Thread safety: a Device is used by one thread at a time; distinct devices run concurrently.
#ifndef KWATT_COLLECT_DEVICE_H_
#define KWATT_COLLECT_DEVICE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kwatt/collect/config.h"
#include "kwatt/core/status.h"
#include "kwatt/core/time.h"

namespace kwatt::collect {

// One value read, as it will be written (before the scheduler adds the node's aliased row: see
// AliasReadings).
struct Reading {
  UnixNanos time = 0;  // the poll's send time, or the device's own timestamp when it gives one
  std::string device_id;
  std::string metric_id;
  double value = 0;  // NaN for a value that is not a number (its text in the label value_str)
  Labels labels;
};

// The reading of `metric` at `time`: its device id, name and labels; `text` read as a number
// (decimal, sign, exponent, "NaN", "inf") times its scale factor, or else NaN with the text as the
// label `value_str`, as Kwollect does.
Reading ReadingOf(const MetricDescription& metric, UnixNanos time, std::string_view text);
// The same for a value already a number (scaled).
Reading ReadingOf(const MetricDescription& metric, UnixNanos time, double value);

// Adds, for each group of readings carrying the label `_device_alias` with the same (alias,
// metric, time, other labels), one row for the node: device_id the alias, the sum of the group's
// values, labels without `_device_alias` and with `_device_orig` listing the group's device ids
// in byte order; and removes `_device_alias` from the originals' labels. What Kwollect's
// metrics_by_device view returns (../shared/KWOLLECT.md: a 2-PSU node on two PDU outlets).
void AliasReadings(std::vector<Reading>* readings);

// One poll.
struct PollRequest {
  UnixNanos sent_at = 0;  // the wall-clock time taken just before the request is sent
  // The poll must return by then (the driver's timeouts derive from it).
  std::chrono::steady_clock::time_point deadline;
  // Which of the device's metrics to read (same length as the metrics it was made with): an
  // optional metric is active only while promoted.
  std::vector<bool> active;
};

// Something a poll could not read though the device answered: the poll's other readings are
// written, and the scheduler counts it (per device: kwatt_collect_missing_values_total,
// kwatt_collect_bad_timestamps_total) and says it on standard error.
struct PollProblem {
  enum class Kind {
    kMissingValue,  // the device has no such sensor or OID (noSuchObject...), or no value for it
    kBadTimestamp,  // a sample's own timestamp does not read: the sample is skipped
  };
  Kind kind = Kind::kMissingValue;
  std::string message;  // names the device (URL redacted) and the sensor, OID or sample
};

class Device {
 public:
  virtual ~Device() = default;
  // The problems of the polls since the last call (see PollProblem).
  std::vector<PollProblem> TakeProblems() { return std::exchange(problems_, {}); }
  // Reads the active metrics, appending readings to `out`. A device that cannot be reached, or
  // answers badly, is an error status naming it (its URL redacted) and what happened; readings
  // appended before an error are dropped by the caller. DeadlineExceeded is reported as
  // Unavailable with "timed out" in the message (counted as a timeout).
  [[nodiscard]] virtual Status Poll(const PollRequest& request, std::vector<Reading>* out) = 0;
  // Work done at most every few minutes (SNMP OID templates resolved again), called by the
  // scheduler between polls; OK by default.
  [[nodiscard]] virtual Status Refresh() { return Status::OK(); }

 protected:
  // What a driver's Poll calls for each problem.
  void NoteProblem(PollProblem::Kind kind, std::string message) {
    problems_.push_back(PollProblem{kind, std::move(message)});
  }

 private:
  std::vector<PollProblem> problems_;
};

// A source that is not polled: it runs until `stop`, giving readings as they come.
class StreamSource {
 public:
  using Emit = std::function<void(std::vector<Reading>&&)>;
  // Whether an optional metric is promoted now: (device_id, device_alias, metric name).
  using Promoted =
      std::function<bool(std::string_view device, std::string_view alias, std::string_view name)>;
  // Says a problem that does not end the run (lines that do not read), may be empty; the
  // scheduler writes it on standard error.
  using Say = std::function<void(const std::string&)>;
  virtual ~StreamSource() = default;
  // Returns when `stop` is requested (OK) or when the stream fails, ends or stays silent (its
  // status: the scheduler starts it again after a pause).
  [[nodiscard]] virtual Status Run(std::stop_token stop, const Promoted& promoted, const Emit& emit,
                                   const Say& say) = 0;
  // The source's own counters so far ({"lines", 1200}, {"gaps", 0}...: each exported as
  // kwatt_collect_stream_<name>_total); thread-safe (read while Run goes on). None by default.
  virtual std::vector<std::pair<std::string, int64_t>> Counters() const { return {}; }
};

// What drivers may need from the outside, injected (tests give their own).
struct DriverEnvironment {
  // FreeIPMI's ipmi-sensors (the IPMI driver runs it, as Kwollect does).
  std::string ipmi_sensors = "ipmi-sensors";
  // Directory of the IPMI SDR caches (empty: a temporary directory of the collector's).
  std::string ipmi_cache_dir;
};

// Makes the device for `metrics` (all of the same DeviceKey(), a polled scheme). InvalidArgument
// naming the first description whose path the driver cannot read (an OID that is not numeric, a
// template that does not parse, an empty sensor name).
Result<std::unique_ptr<Device>> MakeDevice(const std::vector<MetricDescription>& metrics,
                                           const DriverEnvironment& environment);

// Whether `scheme` is read by a StreamSource rather than polled.
bool IsStreamScheme(std::string_view scheme);

// Makes the stream source for `metrics` (all of the same DeviceKey(), a stream scheme).
Result<std::unique_ptr<StreamSource>> MakeStreamSource(
    const std::vector<MetricDescription>& metrics, const DriverEnvironment& environment);

}  // namespace kwatt::collect

#endif  // KWATT_COLLECT_DEVICE_H_
