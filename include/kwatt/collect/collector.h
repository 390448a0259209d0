// The collector: polls every device of a configuration at its period and writes what it reads into
// a store (doc/collect.md), as Kwollect's collector does, without its faults.
//
// - One schedule per device (MetricUrl::DeviceKey()) at the smallest period of its metrics, each
//   metric read when its own period is due; the first poll at a random delay within one period;
//   a reading's time is taken just before its request is sent. Each device has its own thread:
//   a slow or dead device delays only itself. A poll's timeout is its period (at least 100 ms,
//   at most CollectorOptions::max_timeout); ticks a poll outlived are skipped and counted as
//   overruns; a poll that starts more than a tenth of its period (at most 100 ms) after its tick
//   is counted late.
// - Streams (the wattmeter) each run on their own thread, restarted after a pause when they fail.
// - Optional metrics are read only while a running job of the store (CollectorOptions::site) of
//   type `monitor` or `monitor=REGEX` has their device or their `_device_alias` among its nodes
//   and its regex matches their name from the start (Kwollect's re.match), re-read every second.
// - Readings go to one writer thread, written into the store every flush interval (Append then
//   Flush: durable when written). When the store fails, rows go to spool files (at most
//   spool_bytes) at once, else wait in memory (at most memory_rows), and are retried; beyond
//   that they are dropped and counted. Stop() writes everything read before returning. The
//   embedded store's file is checked after each write (CollectorOptions::store_file).
// - What a device answered without (a sensor, an OID) or a sample's unreadable timestamp is
//   counted per device and said (PollProblem).
// - The collector's own metrics (polls, late polls, overruns, timeouts, errors per device; rows
//   written, kept, spooled, dropped) are in PrometheusText() and written into the store under
//   CollectorOptions::collector_id every self_metrics_every.
//
// Thread safety: Start(), Stop() and Wait() from one thread; Stats() and PrometheusText() from any.
#ifndef KWATT_COLLECT_COLLECTOR_H_
#define KWATT_COLLECT_COLLECTOR_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kwatt/collect/config.h"
#include "kwatt/collect/device.h"
#include "kwatt/core/clock.h"
#include "kwatt/core/status.h"
#include "kwatt/core/time.h"
#include "kwatt/store/store.h"

namespace kwatt::collect {

struct CollectorOptions {
  // The site whose jobs promote optional metrics ("lyon"); empty: optional metrics are never read.
  std::string site;
  // Device id of the collector's own metrics in the store; empty: they are not written there.
  std::string collector_id = "kwatt-collect";
  // How often rows are written into the store (rows are visible through the API after it).
  std::chrono::milliseconds flush_interval{500};
  // How often the collector's own metrics are written into the store.
  std::chrono::milliseconds self_metrics_every{60'000};
  // How often the store's jobs are read again for promotions.
  std::chrono::milliseconds jobs_every{1000};
  // How often devices refresh (SNMP templates resolved again).
  std::chrono::milliseconds refresh_every{300'000};
  // Longest timeout of one poll.
  std::chrono::milliseconds max_timeout{30'000};
  // Rows kept in memory while the store fails.
  size_t memory_rows = 1'000'000;
  // Readings waiting for the writer between two flushes at most (memory_rows when larger): a
  // poll that would pass it is dropped, counted against its device and said (one poll larger
  // than it, or a writer stuck in a write).
  size_t queue_rows = 1'000'000;
  // Where rows go when the store fails (JSON Lines spool files): rows that could not be written
  // at a flush are in a spool file before the next flush, so that a kill -9 loses at most one
  // flush interval of rows. Empty: rows wait in memory (memory_rows), then are dropped.
  std::string spool_dir;
  int64_t spool_bytes = int64_t(1) << 30;
  // The embedded store's file, when the store is one: checked after every write, so that a file
  // deleted or replaced under the collector is seen (the rows written into it since are written
  // again, into the file the opener makes anew) instead of filling an unlinked inode. Empty: not
  // checked (PostgreSQL).
  std::string store_file;
  // Whether Create() goes on when the store cannot be opened (a PostgreSQL server that is down:
  // rows wait, as when it fails later); false: Create() returns the error.
  bool start_without_store = false;
  // Seeds the random start delays.
  uint64_t seed = 0;
  // The clock: every schedule (ticks, flushes, the jobs' and own metrics' readings, back-offs,
  // once-a-minute messages) on its monotonic time, the readings' timestamps on its wall time.
  // Poll timeouts are real time (a device answers in real time). Tests inject a ManualClock.
  std::shared_ptr<Clock> clock = SystemClock();
  // One line per event worth a person's attention (a device failing, recovering, the store down):
  // stderr by default. Never holds a password.
  std::function<void(const std::string&)> log;
  DriverEnvironment environment;
};

// Opens (again, after a failure) the store rows are written to.
using StoreOpener = std::function<Result<std::unique_ptr<store::Store>>()>;

// Counters of one device or stream.
struct DeviceStats {
  std::string name;  // its URL, redacted
  int64_t polls = 0;
  int64_t late = 0;
  int64_t overruns = 0;  // ticks skipped because a poll outlived them
  int64_t timeouts = 0;
  int64_t errors = 0;  // failed polls, timeouts included; for a stream: restarts
  int64_t readings = 0;
  int64_t dropped = 0;         // readings dropped before the writer took them (the queue full)
  int64_t missing_values = 0;  // values the device answered without (PollProblem::kMissingValue)
  int64_t bad_timestamps = 0;  // samples skipped for their timestamp (PollProblem::kBadTimestamp)
  double max_lag_seconds = 0;  // the latest a poll started after its tick
  // A stream's own counters (StreamSource::Counters: lines, gaps...); empty for a polled device.
  std::vector<std::pair<std::string, int64_t>> stream_counters;
};

struct CollectorStats {
  std::vector<DeviceStats> devices;  // in configuration order
  int64_t rows_written = 0;
  int64_t rows_pending = 0;  // read, not yet written (memory)
  int64_t rows_spooled = 0;  // in spool files
  int64_t rows_dropped = 0;
  int64_t store_errors = 0;
  UnixNanos last_write = 0;
};

class Collector {
 public:
  // Makes every device and stream of `config` (nothing runs yet): the first error of a driver
  // (a malformed OID...) is returned and nothing starts. Opens the store once (its error too,
  // unless start_without_store). One collector per store is the caller's to ensure
  // (kwatt/store/writer_lock.h).
  static Result<std::unique_ptr<Collector>> Create(const CollectConfig& config, StoreOpener store,
                                                   CollectorOptions options);
  ~Collector();  // Stop()

  // Starts the threads.
  void Start();
  // Stops polling, waits for polls in flight (at most their timeout), writes every row read and
  // returns the status of that last write (rows it could not write are in the spool, or counted
  // as dropped).
  Status Stop();

  // Polls every polled device once (streams are not), every metric active, optional ones too,
  // all devices at once, each within its timeout (at most 5 s): what `kwatt collect --check`
  // does after making them. Before Start() only.
  struct ProbeReport {
    // Devices that could not be read (down, unreachable): each its message.
    std::vector<std::string> failed;
    // What devices that answered did not have (a sensor, an OID): the configuration is wrong.
    std::vector<std::string> missing;
  };
  ProbeReport Probe();

  CollectorStats Stats() const;
  // The collector's own metrics in Prometheus text (what `--listen` serves on /metrics).
  std::string PrometheusText() const;

  class Impl;

 private:
  explicit Collector(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Whether an OAR job type is one the collector can use: InvalidArgument naming it when it is a
// `monitor=REGEX` whose regular expression does not compile (ECMAScript, as the collector reads
// it). `kwatt jobs add` refuses such a type; the collector says once that it ignores one.
Status CheckJobType(const std::string& type);

}  // namespace kwatt::collect

#endif  // KWATT_COLLECT_COLLECTOR_H_
