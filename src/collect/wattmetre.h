// The Omegawatt wattmeter's line stream (`wattmetre://`; doc/kwollect_collector.md "The
// wattmeter"): the lines `wattmetre-read` prints, each port's power 50 times a second, turned into
// one row a second per port (the mean of that second's values, at the second's start), or every
// value for the ports whose node a job promotes for the metric.
//
// Internal to kwatt::collect (the scheduler reaches it through MakeStreamSource).
//
// Line formats (fields separated by ',', surrounding blanks and a final \r ignored):
//   version 2: `DBG,DBG,EPOCH[.FRACTION],OK,P0,P1,...`: port i is field 4+i; a line whose 4th
//              field is not `OK` is a line the wattmeter marks as bad (skipped).
//   version 3: `EPOCH[.FRACTION],true,F2,F3,F4,F5,P0,X0,P1,X1,...,T1,T2,T3,T4,T5`: port i is
//              field 6+2i, port_count = (fields - 11) / 2; a line whose 2nd field is not `true`
//              is skipped.
// An empty port field is a port without a value in that line.
//
// Thread safety: ParseWattmetreLine and ReadWattmetreMapping are pure; a WattmetreAverager or a
// WattmetreSource is used by one thread at a time.
#ifndef KWATT_SRC_COLLECT_WATTMETRE_H_
#define KWATT_SRC_COLLECT_WATTMETRE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "kwatt/collect/config.h"
#include "kwatt/collect/device.h"
#include "kwatt/core/status.h"
#include "kwatt/core/time.h"

namespace kwatt::collect {

inline constexpr std::string_view kWattmetreMetric = "wattmetre_power_watt";

// One line's values.
struct WattmetreEntry {
  UnixNanos time = 0;              // exactly the decimal text's instant (digits past 9 truncated)
  std::vector<double> values;      // port i's value; meaningful only where has_value[i]
  std::vector<uint8_t> has_value;  // 0 for an empty field
  size_t port_count() const { return values.size(); }
};

// What ParseWattmetreLine made of a line.
enum class WattmetreLine {
  kEntry,      // `out` holds the line's time and values
  kSkipped,    // a blank line, or one the wattmeter marks as bad (not `OK` / not `true`)
  kMalformed,  // not a line of the format: a bad time or value, too few fields, an unknown
               // version; non-finite values (nan, inf) are refused as garbage too
};

// Parses one line (without or with its '\n') of `version` (2 or 3) into `out`, whose vectors
// are reused (no allocation once they have grown to the port count). On kSkipped or kMalformed
// `out` is unspecified. Never reads outside `line`; about 20 ns per port.
WattmetreLine ParseWattmetreLine(std::string_view line, int version, WattmetreEntry* out);

// Reads Kwollect's wattmeter mapping file: YAML, each node and the list of its ports
//   nova-1: [wattmetre1-port0, wattmetre1-port1]
// Returns port -> node. NotFound / IOError naming the file when it cannot be read;
// InvalidArgument naming the file (and the node) when it is not YAML, not a mapping, holds no
// node, a node's ports are not a list of non-empty strings, or a port is given twice.
Result<std::map<std::string, std::string>> ReadWattmetreMapping(const std::string& path);

// How a wattmeter's values become readings.
struct WattmetreOptions {
  std::string wattmetre_id;                  // "wattmetre1": ports are "wattmetre1-portN"
  std::string metric{kWattmetreMetric};      // the metric id written
  Labels labels;                             // added to every row (a port's own alias wins)
  std::optional<double> scale_factor;        // applied once to each value written
  std::map<std::string, std::string> nodes;  // port device id -> node (ReadWattmetreMapping)
};

// What a wattmeter's stream has been so far.
struct WattmetreCounts {
  int64_t lines = 0;            // lines read (a source's) or entries added (an averager's)
  int64_t skipped_lines = 0;    // kSkipped lines other than blank ones (a source's)
  int64_t malformed_lines = 0;  // kMalformed lines (a source's)
  int64_t seconds = 0;          // seconds emitted
  int64_t gaps = 0;             // times a line's second came 2 s or more after the previous one
  int64_t missing_seconds = 0;  // the seconds those gaps skipped
  int64_t backwards = 0;        // times a line's second was before the one being averaged
  int64_t rows = 0;             // readings emitted
  int64_t stalls = 0;           // runs ended because no reading came for stall_ms (a source's)
};

// Turns entries into readings. For each completed second and each port with at least one value
// in it: when Promoted(port device id, its node or "", metric) is false (asked once per port and
// second, when the second completes), one reading at the second's start with the mean of the
// second's values; when true, one reading per value at the value's own time. Device id
// "ID-portN", labels the options' labels plus {_device_alias: node} for a mapped port, value
// times the scale factor. A second completes when an entry of another second is added, or on
// Flush. An entry of an earlier second than the one being averaged (the wattmeter's clock
// stepped back) completes the current second and starts that one again, counted as `backwards`
// (its rows may repeat rows already emitted for that second).
class WattmetreAverager {
 public:
  explicit WattmetreAverager(WattmetreOptions options);

  // Adds `entry`, appending to `out` the readings of the second it completes, if any. An empty
  // `promoted` promotes nothing.
  void Add(const WattmetreEntry& entry, const StreamSource::Promoted& promoted,
           std::vector<Reading>* out);
  // Completes the current second (end of stream, stop), appending its readings to `out`.
  void Flush(const StreamSource::Promoted& promoted, std::vector<Reading>* out);
  // The last second an earlier averager of the same stream emitted: the first entry of this one
  // counts a gap from it (a stream opened again after it ended or stalled).
  void ContinueAfter(int64_t second) { previous_ = second; }
  // The last second emitted (or given to ContinueAfter), if any.
  std::optional<int64_t> last_second() const { return previous_; }

  const WattmetreCounts& counts() const { return counts_; }

 private:
  struct Port {
    std::string device_id;
    std::string node;  // "" when not mapped
    Labels labels;
    double sum = 0;
    int64_t count = 0;
    // The second's values, each with its entry's index in `times_`.
    std::vector<std::pair<uint32_t, double>> values;
  };
  void Emit(const StreamSource::Promoted& promoted, std::vector<Reading>* out);
  Port& PortAt(size_t index);

  WattmetreOptions options_;
  double scale_ = 1.0;
  std::vector<Port> ports_;
  std::vector<UnixNanos> times_;     // the current second's entry times
  std::optional<int64_t> second_;    // the second being averaged
  std::optional<int64_t> previous_;  // the last second emitted
  WattmetreCounts counts_;
};

// An open stream: its file descriptor, which the source owns (closes at the end of Run), and
// what to do once it is closed, may be empty: for a child process's standard output, stop and
// reap the child, returning how it ended (an error then becomes Run's status when the stream
// ended, "wattmetre-read exited with status 1").
struct WattmetreStream {
  int fd = -1;
  std::function<Status()> finish;
  // A regular file: read once, its end is the end (Run returns OK there, and is not started
  // again); a FIFO, a serial line or a command's output that ends is a failure to retry.
  bool regular_file = false;
  // Called after each read and at least every poll timeout, may be empty: a command's stream
  // drains the child's standard error there (a chatty wattmetre-read never blocks on it).
  std::function<void()> tend;
};
// Opens the stream (each Run calls it once).
using WattmetreOpener = std::function<Result<WattmetreStream>()>;

// An opener of `path`: "-" is standard input (duplicated, so that closing leaves fd 0 open);
// else a regular file, a FIFO (opened without waiting for its writer) or a character device
// (a serial line, read as its termios settings stand). NotFound / IOError naming the path.
WattmetreOpener OpenWattmetrePath(std::string path);

struct WattmetreSourceOptions {
  WattmetreOptions averager;
  int version = 2;
  WattmetreOpener open;
  std::string name;  // how messages name the stream: "wattmetre://wattmetre1/-"
  // How long Run waits on a silent stream before checking `stop` again.
  int poll_timeout_ms = 100;
  // A stream open this long without a reading (nothing read, or only lines that do not read)
  // has stalled: Run returns Unavailable saying so, and is started again (a hung wattmetre-read
  // restarted). A wattmeter writes 50 lines a second.
  int stall_ms = 10'000;
};

// A wattmeter's line stream. Run opens it, reads it with poll() (a stop is honoured within
// poll_timeout_ms, even on a silent FIFO that has no writer yet), and emits each completed
// second's readings; on stop or at the end of the stream it parses a last unterminated line,
// flushes the current second and emits it, so nothing read is lost. Returns OK on stop, the
// opener's error, IOError when a read fails, Unavailable "... ended" at the end of the stream
// (the writer closed), or the stream's `finish` error then, Unavailable "... no reading for
// N s" when it stalled (stall_ms); OK at the end of a regular file (read once). Lines that do
// not read are said through `say` (the first at once, then at most once a minute with how
// many), with an excerpt. A later Run counts the seconds between the last one emitted and its
// first as a gap (missing_seconds).
class WattmetreSource : public StreamSource {
 public:
  explicit WattmetreSource(WattmetreSourceOptions options);
  [[nodiscard]] Status Run(std::stop_token stop, const Promoted& promoted, const Emit& emit,
                           const Say& say) override;

  // The counts so far (of every Run). REQUIRES: not during Run on another thread.
  WattmetreCounts counts() const;
  // The same as of the last second delivered; thread-safe (the collector's own metrics).
  std::vector<std::pair<std::string, int64_t>> Counters() const override;

 private:
  void Publish(const WattmetreCounts& running_averager);
  mutable std::mutex published_mutex_;
  WattmetreCounts published_;

  WattmetreSourceOptions options_;
  WattmetreCounts line_counts_;
  WattmetreCounts averager_counts_;     // of past Runs' averagers
  std::optional<int64_t> last_second_;  // the last second a past Run emitted
  // Lines that do not read, said at most once a minute: since when, how many not said yet.
  std::optional<std::chrono::steady_clock::time_point> malformed_said_;
  int64_t malformed_unsaid_ = 0;
};

// The options a `wattmetre://ID/PATH?version=N` description gives: the wattmeter ID (url host),
// version 2 (default) or 3, the mapping file read, name (empty: wattmetre_power_watt), labels and
// scale factor. `open` is OpenWattmetrePath("-" or "/PATH") when the description has no
// `command`, else left empty for the caller to set (a child process's standard output).
// InvalidArgument naming the description's origin: another scheme, no host, a version other
// than 2 or 3 or another query parameter, a path together with a command, neither; the
// mapping file's errors.
Result<WattmetreSourceOptions> WattmetreSourceOptionsOf(const MetricDescription& metric);

// The source of `metrics` (one description: one wattmeter). InvalidArgument naming the
// origins when there are several; WattmetreSourceOptionsOf's errors. A `command` is started by
// each Run (no shell; its standard output is the stream, and it is stopped, SIGTERM then SIGKILL,
// when the run ends; how it ended is the run's status).
Result<std::unique_ptr<StreamSource>> MakeWattmetreSource(
    const std::vector<MetricDescription>& metrics, const DriverEnvironment& environment);

}  // namespace kwatt::collect

#endif  // KWATT_SRC_COLLECT_WATTMETRE_H_
