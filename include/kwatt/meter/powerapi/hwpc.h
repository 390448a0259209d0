// hwpc-sensor's reports (PowerAPI's HWPC reports): the model, readers of the forms hwpc-sensor
// writes (a directory of CSV files, JSON documents in a file or on a TCP socket it connects to),
// and writers of both (kwatt simulate hwpc). The formats are specified in doc/meter/attribution.md,
// "hwpc-sensor reports".
//
// A report is what hwpc-sensor counted for one target over one tick: per event group ("rapl",
// "msr", "core"), socket and CPU, each event's count since the previous tick (a per-tick delta;
// RAPL energies in units of 2^-32 J), with the counter's time_enabled and time_running
// (nanoseconds in the tick) where perf gave them.
//
// Readers stream: they hold one document (JSON) or one tick's lines (CSV) at a time, never the
// whole input. Every error names the file (or connection) and line.
//
// Thread safety: a reader or writer is used by one thread at a time, except
// HwpcSocketReader::RequestStop, which may be called from any thread or a signal handler.
#ifndef KWATT_METER_POWERAPI_HWPC_H_
#define KWATT_METER_POWERAPI_HWPC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kwatt/core/status.h"

namespace kwatt::meter {

// The counters of one CPU in one event group.
struct HwpcCpuCounters {
  std::string group;  // "rapl", "msr", "core"...
  int socket = 0;     // hwpc-sensor's socket (package) id
  int cpu = 0;        // the CPU id
  // Event name -> count in the tick, sorted by name; "time_enabled" and "time_running" among them
  // when the sensor wrote them.
  std::vector<std::pair<std::string, int64_t>> events;

  // The count of `event`, or -1 when absent.
  int64_t Get(std::string_view event) const;
};

// One HWPC report: one target over one tick.
struct HwpcReport {
  int64_t timestamp_ms = 0;  // the tick's end, milliseconds since the epoch
  std::string sensor;        // the machine's name
  std::string target;        // "all" for the whole machine, else a cgroup's name or path
  // Sorted by (group, socket, cpu); one entry per (group, socket, cpu).
  std::vector<HwpcCpuCounters> counters;

  // Sorts `counters` and each one's events; InvalidArgument naming the first (group, socket, cpu)
  // or event given twice.
  Status Normalize();
};

// hwpc-sensor's event names for time counts, kept apart from the events themselves.
inline constexpr std::string_view kHwpcTimeEnabled = "time_enabled";
inline constexpr std::string_view kHwpcTimeRunning = "time_running";

// A source of HWPC reports.
class HwpcReader {
 public:
  virtual ~HwpcReader() = default;
  // The next report: true, or false at the end of the input (a socket reader's end is a stop
  // request). Errors name the file and line: Corruption for malformed input, IOError when a read
  // fails.
  [[nodiscard]] virtual Result<bool> Next(HwpcReport* report) = 0;
};

// A directory as hwpc-sensor's CSV output writes it: one file per event group, named after it
// (`rapl.csv`, or `rapl` as hwpc-sensor itself names them), each with the header
// `timestamp,sensor,target,socket,cpu,EVENT,...` and one line per (tick, target, socket, cpu), in
// time order. Lines of every file that share (timestamp, target) make one report, as PowerAPI
// groups them. Reports come out in time order; within a tick, in the order their targets first
// appear in the files (sorted by file name). Errors (Corruption, naming file and line): an empty
// field (PowerAPI refuses incomplete lines too), a line with more or fewer fields than its
// header, a value that is not a count (a non-negative integer), a timestamp that goes back, lines
// of one report that disagree on the sensor. Files of other names (`README`, `x.txt`, hidden
// ones) are ignored; a directory with no group file is NotFound.
Result<std::unique_ptr<HwpcReader>> OpenHwpcCsvDirectory(const std::string& directory);

// JSON documents, one per line (hwpc-sensor's socket output; documents run together on one line
// are read too, as PowerAPI's socket input does), from a file; "-" reads standard input.
// A document: {"timestamp": MS or "YYYY-MM-DDTHH:MM:SS.fff" (read as UTC), "sensor": TEXT,
// "target": TEXT, "groups": {GROUP: {SOCKET: {CPU: {EVENT: COUNT, ...}}}}}; other members are
// ignored. Counts may be written as numbers with a fraction of zero (hwpc-sensor's BSON doubles:
// 5709496320.0). Errors: Corruption naming the file, line and what is wrong.
Result<std::unique_ptr<HwpcReader>> OpenHwpcJsonFile(const std::string& path);

// Parses one JSON document into `report` (the form above). `where` prefixes error messages
// ("reports.json:12").
Status ParseHwpcJson(std::string_view document, std::string_view where, HwpcReport* report);

// Listens on a TCP address for hwpc-sensor's socket output (`-o socket -U HOST -P PORT`), as
// PowerAPI's socket input does: any number of connections, each a stream of JSON documents. A
// malformed document is skipped and counted (a sensor's stream is not stopped by one bad line);
// the last such error is kept for messages.
class HwpcSocketReader : public HwpcReader {
 public:
  // Binds HOST:PORT (PORT 0: any free port; see port()). IOError naming the address when the bind
  // fails; InvalidArgument when HOST is not an IPv4 address or name that resolves.
  static Result<std::unique_ptr<HwpcSocketReader>> Listen(const std::string& host, int port);
  ~HwpcSocketReader() override;

  // Waits for the next report from any connection; false once RequestStop was called (reports
  // already received are still given first).
  [[nodiscard]] Result<bool> Next(HwpcReport* report) override;

  // Makes Next return false once what was already received is given. Async-signal-safe.
  void RequestStop();

  int port() const { return port_; }
  int64_t malformed_documents() const { return malformed_; }
  const std::string& last_error() const { return last_error_; }
  int64_t connections() const { return connections_; }

 private:
  HwpcSocketReader() = default;
  struct Connection;
  // Reads what is available, waiting at most until data, a connection or a stop request.
  Status Poll();

  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  int port_ = 0;
  bool stopping_ = false;
  int64_t malformed_ = 0;
  int64_t connections_ = 0;
  std::string last_error_;
  std::vector<std::unique_ptr<Connection>> open_;
  std::vector<HwpcReport> ready_;  // parsed, not yet given (a FIFO, read from ready_next_)
  size_t ready_next_ = 0;
};

// Splits a stream of JSON documents (objects) as they arrive: complete documents are appended to
// `documents` (with the 1-based line each starts on), the rest kept for the next Feed. Text
// between documents is skipped: white space silently, anything else (a stray "[1]", debris of a
// cut document) counted in stray_runs() (one per run of such characters). A document longer than
// `max_document_bytes` is dropped and counted in oversized().
class JsonDocumentSplitter {
 public:
  explicit JsonDocumentSplitter(size_t max_document_bytes = 16 << 20)
      : max_document_bytes_(max_document_bytes) {}
  void Feed(std::string_view bytes, std::vector<std::pair<std::string, int64_t>>* documents);
  // What is left at the end of the stream (a truncated document), or "".
  std::string_view Pending() const { return pending_; }
  int64_t pending_line() const { return start_line_; }
  int64_t oversized() const { return oversized_; }
  int64_t stray_runs() const { return stray_runs_; }
  int64_t stray_line() const { return stray_line_; }  // where the last stray run started

 private:
  size_t max_document_bytes_;
  std::string pending_;
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false, skipping_ = false, in_stray_ = false;
  int64_t line_ = 1, start_line_ = 1, oversized_ = 0, stray_runs_ = 0, stray_line_ = 0;
};

// hwpc-sensor's JSON document for `report`, on one line (no newline): integers for every count,
// the timestamp in milliseconds.
std::string FormatHwpcJson(const HwpcReport& report);

// Writes reports as hwpc-sensor's CSV output does, into `directory` (created if missing): one file
// GROUP.csv per event group (the directory and its parents created if missing), its header from the
// first report that has the group (events sorted by name, as hwpc-sensor sorts them). Every later
// line of a group must have the same events: InvalidArgument naming the group otherwise.
class HwpcCsvWriter {
 public:
  static Result<std::unique_ptr<HwpcCsvWriter>> Open(const std::string& directory);
  ~HwpcCsvWriter();
  Status Write(const HwpcReport& report);
  // Flushes and closes every file; IOError naming a file that could not be written.
  Status Close();

 private:
  HwpcCsvWriter() = default;
  struct GroupFile;
  std::string directory_;
  std::vector<std::unique_ptr<GroupFile>> files_;
};

}  // namespace kwatt::meter

#endif  // KWATT_METER_POWERAPI_HWPC_H_
