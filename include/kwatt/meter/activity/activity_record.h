// The activity record: an ActivityReader's snapshots kept in a file during an experiment
// (`kwatt meter record -o activity.jsonl`), so that a node's energy measured elsewhere (its
// wattmeter's, archived by `kwatt backup`) can be shared among its processes after the fact
// (`kwatt energy ARCHIVE --activity activity.jsonl`).
//
// The format is JSON Lines, versioned, specified in doc/meter/running.md ("The activity record"): a
// header line (format name and version, the machine, the selection, the clock ticks), a line
// defining each target before its first use, one line per snapshot with the machine's counters and
// the cumulative counters of the targets that moved since the previous snapshot (and those that
// ended), and an end line when the writer finished. Every line is written through as soon as it
// is whole, so an interrupted record (the meter killed, the node rebooted) reads up to its last
// whole line, and the reader says it was interrupted.
//
// Thread safety: a writer or a reader belongs to one thread.
#ifndef KWATT_METER_ACTIVITY_ACTIVITY_RECORD_H_
#define KWATT_METER_ACTIVITY_ACTIVITY_RECORD_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/core/time.h"
#include "kwatt/meter/activity/activity.h"
#include "kwatt/meter/environment/environment.h"

namespace kwatt::meter {

// The header line's "format" and "version". A reader refuses a higher version.
inline constexpr char kActivityRecordFormat[] = "kwatt-activity";
inline constexpr int kActivityRecordVersion = 1;

// What the header line says.
struct ActivityRecordHeader {
  std::string writer;   // who wrote it: "kwatt 0.1.0"
  std::string host;     // the machine's name
  std::string boot_id;  // the boot its since-boot counters count from ("" when unknown)
  std::string kernel;   // the kernel's release ("" when unknown)
  // The kernel's clock ticks per second: stat's times are counted in ticks, so a process's
  // CPU time that comes from them is exact to 1/clock_ticks s (doc/meter/running.md).
  int64_t clock_ticks = 100;
  int cpus = 0;               // online CPUs when it began
  UnixNanos start = 0;        // when it began
  TargetSelection selection;  // what was asked for
};

// A header for `environment` and `selection`: its host name, boot id and kernel release from
// procfs, the clock ticks, the online CPUs, the wall clock's now, `writer` as given.
ActivityRecordHeader MakeActivityRecordHeader(const MeterEnvironment& environment,
                                              const TargetSelection& selection,
                                              const std::string& writer);

class ActivityRecordWriter {
 public:
  // Creates `path` (replacing a file there; "-" is standard output) and writes the header line.
  // InvalidArgument for a directory or an empty path; IOError naming the path otherwise.
  static Result<std::unique_ptr<ActivityRecordWriter>> Create(const std::string& path,
                                                              const ActivityRecordHeader& header);
  // Closes the file without the end line when Finish was not called: the record then reads as
  // interrupted, which it is.
  ~ActivityRecordWriter();

  // Appends a snapshot: the definitions of targets new to the record, then the snapshot's line,
  // written through at once. InvalidArgument when a target's key is given twice or its counters
  // went back (an ActivityReader never does either; a hardware count may become -1, unread);
  // IOError when the write fails (the record then stays readable up to its last whole line).
  [[nodiscard]] Status Write(const ActivitySnapshot& snapshot);

  // Writes the end line and makes the file durable (fsync). Nothing may be written after.
  [[nodiscard]] Status Finish();

  int64_t snapshots() const { return snapshots_; }

 private:
  struct Known;
  ActivityRecordWriter(int fd, bool owned, std::string path);
  Status Append(const std::string& text);

  int fd_;
  bool owned_;
  std::string path_;
  bool finished_ = false;
  bool counters_ = false;  // the selection asked for hardware counters: 4 numbers per target
  int64_t snapshots_ = 0;
  int64_t next_id_ = 0;
  std::unique_ptr<Known> known_;  // the targets alive at the last snapshot, by key
  std::string line_;
};

class ActivityRecordReader {
 public:
  // Opens `path` and reads its header line. NotFound / IOError naming the path; Corruption
  // naming the line when the first line is not an activity record's header; InvalidArgument
  // when its version is newer than this reader's.
  static Result<std::unique_ptr<ActivityRecordReader>> Open(const std::string& path);
  ~ActivityRecordReader();

  const ActivityRecordHeader& header() const;

  // The next snapshot, with every target alive then (sorted by key, as ActivityReader::Read
  // gives them), or nullopt at the end of the record. Corruption naming the file and the line for
  // a malformed line, a target used before it is defined, a counter that goes back, the monotonic
  // clock going back, or anything after the end line.
  [[nodiscard]] Result<std::optional<ActivitySnapshot>> Next();

  // Once Next gave nullopt: whether the writer finished (the end line was there).
  bool complete() const;
  // Once Next gave nullopt: whether the file ends inside a line (a writer interrupted while
  // writing it). That partial line is not read.
  bool truncated() const;

 private:
  struct State;
  explicit ActivityRecordReader(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// A whole record in memory: for tests and small records (Next() streams large ones).
struct ActivityRecord {
  ActivityRecordHeader header;
  std::vector<ActivitySnapshot> snapshots;
  bool complete = false;
  bool truncated = false;
};
Result<ActivityRecord> ReadActivityRecord(const std::string& path);

}  // namespace kwatt::meter

#endif  // KWATT_METER_ACTIVITY_ACTIVITY_RECORD_H_
