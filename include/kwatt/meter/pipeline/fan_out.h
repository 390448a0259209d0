// Reports to several outputs, each from its own thread with a bounded queue (doc/meter/README.md,
// "Outputs"): nothing waits for an output by default. A report an output's queue cannot take is
// lost for that output alone and counted; a write that fails is counted, and the next report is
// given still (a sink that can retry keeps what it could not send). The meter's outputs
// (meter.h) and those of `kwatt meter smartwatts` (hwpc-sensor's reports) go through one.
//
// Thread safety: Begin, Write, Push, Drop and Finish from one thread (the producer); Abandon,
// PendingRows and Dropped from any.
#ifndef KWATT_METER_PIPELINE_FAN_OUT_H_
#define KWATT_METER_PIPELINE_FAN_OUT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/meter/formulas/report.h"

namespace kwatt::meter {

// An output and the name it is shown by (its spec, credentials redacted).
struct MeterOutput {
  std::string name;
  std::unique_ptr<ReportSink> sink;
};

struct FanOutOptions {
  size_t queue = 4096;  // reports waiting for each output
  // Wait for room in a full queue rather than lose the report (input read from a file, which
  // can wait; a live meter never waits).
  bool wait_when_full = false;
  // One line worth a person's attention (an output failing or not keeping up), and its cause:
  // the caller limits how often a cause is said. Called from the producer and from every
  // output's thread, at once: it must be thread-safe. None: nothing said.
  std::function<void(const std::string& cause, const std::string& line)> log;
};

class ReportFanOut : public ReportSink {
 public:
  ReportFanOut(std::vector<MeterOutput> outputs, FanOutOptions options);
  ~ReportFanOut() override;  // Finish, when begun and not finished

  // Every output's Begin (the first error names its output and returns: nothing started), then
  // each output's thread.
  [[nodiscard]] Status Begin(const MeterHeader& header) override;
  // The report to every output's queue (Push of a copy); always OK.
  [[nodiscard]] Status Write(const IntervalReport& report) override;
  void Push(std::shared_ptr<const IntervalReport> report);
  // `n` reports counted lost for every output (the producer could not give them).
  void Drop(int64_t n);
  // Closes the queues, lets every output write what it holds, and finishes each. Returns the
  // error of every output that failed (its first write error, or its end's), each named; OK when
  // none did. Idempotent.
  [[nodiscard]] Status Finish() override;
  // Every output stops waiting to send what is left (ReportSink::Abandon).
  void Abandon() override;
  int64_t PendingRows() const override;

  // Per output, in order: its name and the rows it still holds to send.
  std::vector<std::pair<std::string, int64_t>> PendingRowsByOutput() const;
  // Per output, in order: its name and the reports it lost (its queue full, or its write failed).
  std::vector<std::pair<std::string, int64_t>> Dropped() const;
  // The outputs that keep a state across restarts (StatefulSink), by name.
  std::map<std::string, StatefulSink*> StatefulOutputs() const;

 private:
  struct Slot;
  void Loop(Slot* slot);

  FanOutOptions options_;
  std::vector<std::unique_ptr<Slot>> slots_;
  bool begun_ = false, finished_ = false;
  Status finish_status_;
};

}  // namespace kwatt::meter

#endif  // KWATT_METER_PIPELINE_FAN_OUT_H_
