// What the meter's outputs share (include/kwatt/meter/outputs/outputs.h): the node they write as,
// checks of files and directories, and the base of the outputs that write the series of
// OutputSeries. Private to the meter's outputs: each output includes it, and none includes another
// output.
#ifndef KWATT_SRC_METER_OUTPUTS_OUTPUT_BASE_H_
#define KWATT_SRC_METER_OUTPUTS_OUTPUT_BASE_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kwatt/core/backoff.h"
#include "kwatt/meter/outputs/outputs.h"
#include "src/meter/outputs/output_series.h"
#include "src/meter/outputs/output_spec.h"

namespace kwatt::meter::internal {

// The node the rows are written as: OutputOptions::node and ::site, else from the host name.
struct NodeIdentity {
  std::string node;  // "nova-1"
  std::string site;  // "lyon"; "" when unknown and not needed
};
// InvalidArgument naming `shown` when the node would be refused by Kwollect (empty, '.', ',', over
// 255 bytes), or when `need_site` and no site is known (what to give then).
Result<NodeIdentity> ResolveNode(const OutputOptions& options, bool need_site,
                                 const std::string& shown);

// `path` can be created or replaced as a file: its directory exists and can be written, and it is
// not a directory (nor, when it exists, a file that cannot be written). InvalidArgument or
// PermissionDenied naming `shown`.
Status CheckWritableFile(const std::string& path, const std::string& shown);
// `dir` is an existing directory that can be written.
Status CheckWritableDirectory(const std::string& dir, const std::string& shown);

// Writes all of `data` to `fd` (EINTR retried). IOError naming `name`.
Status WriteAll(int fd, std::string_view data, const std::string& name);

// "2025-04-18T16:55:33.754307123Z": UTC, always 9 fraction digits (a column pandas parses at
// once, and whose order is its text's).
std::string UtcNanosText(UnixNanos t);

// A number as kwatt's JSON writes it (FormatJsonNumber): finite values only.
void AppendNumber(std::string* out, double value);

// The base of the outputs that write OutputSeries' series: the series and their counters (saved
// and restored), the stats, and the lock that lets SaveState and Stats run on other threads.
class SeriesOutput : public OutputSink {
 public:
  SeriesOutput(std::string name, const OutputOptions& options);

  Status Begin(const MeterHeader& header) final;
  Status Write(const IntervalReport& report) final;
  std::string Name() const final { return name_; }
  std::string SaveState() const override;
  Status RestoreState(std::string_view state) override;
  OutputStats Stats() const final;
  std::vector<std::string> Notes() const final;

 protected:
  virtual Status BeginSeries(const MeterHeader& header) = 0;
  // The report's series (OutputSeries::Add), on the writing thread, without the lock held.
  virtual Status WriteSeries(const IntervalReport& report,
                             const std::vector<SeriesPoint>& points) = 0;

  const MeterHeader& header() const { return series_.header(); }
  // Changes the stats under the lock.
  template <typename F>
  void UpdateStats(F change) {
    std::lock_guard<std::mutex> lock(mutex_);
    change(stats_);
  }
  void AddNote(std::string note);

  const std::string name_;
  const OutputOptions options_;

 private:
  mutable std::mutex mutex_;  // guards series_, stats_, notes_
  OutputSeries series_;
  OutputStats stats_;
  std::vector<std::string> notes_;
  std::vector<SeriesPoint> points_;  // the writing thread's
};

// The base of the outputs that send rows over HTTP (InfluxDB, Kwollect): a bounded buffer of
// encoded rows, sent in batches, retried after a failure with a doubling wait, drained by Finish.
class HttpRowOutput : public SeriesOutput {
 public:
  using SeriesOutput::SeriesOutput;
  Status Finish() final;
  void Abandon() final { abandoned_ = true; }
  int64_t PendingRows() const final { return Stats().rows_pending; }

 protected:
  // The interval's rows, one item each (a line of line protocol, a JSON object).
  virtual void Encode(const IntervalReport& report, const std::vector<SeriesPoint>& points,
                      std::vector<std::string>* items) = 0;
  // A request's body from the first `count` items of `items`.
  virtual std::string Body(const std::deque<std::string>& items, size_t count) const = 0;
  // Sends a body: OK; Unavailable when it may pass (the rows stay and are sent again); any other
  // code when the peer refuses these rows (they are dropped).
  virtual Status Send(const std::string& body) = 0;

 private:
  using Clock = std::chrono::steady_clock;
  Status WriteSeries(const IntervalReport& report, const std::vector<SeriesPoint>& points) final;
  // Sends what is due (everything when `force`, waits aside). Returns the error of rows dropped
  // (refused), OK otherwise (a failure that may pass is kept for later).
  Status SendDue(bool force, Status* transient);

  std::deque<std::string> pending_;
  std::deque<Clock::time_point> pending_since_;  // when each pending item was encoded
  Clock::time_point next_attempt_{};
  // After a failure that may pass: retry_seconds, doubled up to a minute (or retry_seconds, when
  // longer), until one succeeds.
  Backoff retry_{
      BackoffPolicy{std::max(0.0, options_.retry_seconds), std::max(60.0, options_.retry_seconds)}};
  std::vector<std::string> items_;
  std::atomic<bool> abandoned_{false};
};

}  // namespace kwatt::meter::internal

#endif  // KWATT_SRC_METER_OUTPUTS_OUTPUT_BASE_H_
