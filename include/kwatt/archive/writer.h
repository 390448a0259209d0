// Writing an archive (doc/archive_format.md) in one streaming pass, crash-safe and resumable.
//
// The writer is a RowSink (of kwollect::Fetch in backup::Backup, of `kwatt meter`'s archive
// output). Open() creates a new archive, or reopens an incomplete one of the same query to
// complete it; the source then delivers rows (rows already in the archive are skipped); Finish()
// closes the last frames and marks the archive complete when nothing failed. Memory: one frame of
// text (about 1 MiB) per node, whatever the volume.
//
// Thread safety: none; one thread drives a writer.
#ifndef KWATT_ARCHIVE_WRITER_H_
#define KWATT_ARCHIVE_WRITER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kwatt/core/clock.h"
#include "kwatt/core/row_sink.h"
#include "kwatt/core/status.h"
#include "kwatt/core/time.h"

namespace kwatt::archive {

// The job a backup's query named: its site and id.
struct BackupJob {
  std::string site;
  int64_t id = 0;
};

// The query an archive holds, as recorded in its manifest; two runs are the same backup when their
// descriptions are equal.
struct BackupQuery {
  std::string api;
  std::vector<std::string> nodes;  // FQDNs as given (empty with a job)
  std::optional<BackupJob> job;
  std::optional<UnixNanos> start, end;  // as given (the resolved window is kept apart)
  std::vector<std::string> metrics;
  bool summary = false;
};

// A window to fetch, each bound optional (a job's window is resolved by the fetch).
struct FetchWindow {
  std::optional<UnixNanos> start, end;
};

struct WriterOptions {
  // The clock that tells whether the window has passed (see Finish; its wall time); null: the
  // system's. Tests inject theirs.
  std::shared_ptr<Clock> clock;
  // A recording whose window ends when it stops (`kwatt meter`'s archive output), rather than a
  // fetch of a window known beforehand: the end Begin gives is provisional (a resumed recording
  // keeps its stored one), and Finish ends the window at report.end (or the last row, when later)
  // without waiting for it to pass.
  bool recording = false;
};

class ArchiveWriter : public RowSink {
 public:
  // Creates `dir` (or uses it if empty, or if it holds only what a run stopped before writing its
  // first manifest leaves: an empty data/, an empty journal.jsonl, kwatt's manifest.json.tmp), or
  // reopens it when it holds an incomplete archive of `query`. The manifest and the journal are
  // read by ParseManifest and ParseJournal (manifest.h): a damaged manifest is Corruption, a
  // journal line that is not a valid record is skipped, as the readers do. On reopening, each data
  // file must hold what the journal records as committed (its bytes, frames with right checksums,
  // rows): otherwise Corruption naming the file, and nothing is changed (back up again into a new
  // directory). Bytes after the committed part (a frame the crash cut) are cut off.
  // Errors: InvalidArgument when `dir` holds something else (another query, not an archive);
  // Corruption as said; IOError when it cannot be written.
  static Result<std::unique_ptr<ArchiveWriter>> Open(const std::string& dir,
                                                     const BackupQuery& query,
                                                     const std::string& kwatt_version,
                                                     const WriterOptions& options = {});
  ~ArchiveWriter() override;

  // True when `dir` already holds the complete archive of the query: nothing to do.
  bool already_complete() const { return already_complete_; }
  // True when an earlier, interrupted run is being completed.
  bool resuming() const { return resuming_; }
  // The window to fetch: `asked`, narrowed to what is not yet in the archive when resuming (its
  // end kept open for a job asked without an end: the job is resolved again).
  FetchWindow WindowToRun(const FetchWindow& asked) const;

  Status Begin(const RowsReport& resolved) override;
  Status Write(std::string_view site, const RowBatch& batch,
               const StringInterner& interner) override;
  Status Failed(const MissingPiece& failure) override;

  // Ends the backup: on a complete fetch of a window that has passed, closes every file, writes
  // the manifest as complete and removes the journal. Otherwise keeps what was committed and
  // returns Incomplete, naming what to do: pieces failed (run the same command again), the
  // window ends at or after now (rows of its end do not exist yet: run the same command again
  // after its end; the archive stays incomplete and resumable until then), or the window is that
  // of a job that had not ended (asked without an end, resolved to an end at or after Open():
  // run the same command again after the job's end; each rerun extends the window to the job's
  // new end).
  Status Finish(const RowsReport& report);

  int64_t rows_written() const { return rows_written_; }
  int64_t bytes_written() const;

  struct Impl;

 private:
  ArchiveWriter() = default;
  std::unique_ptr<Impl> impl_;
  bool already_complete_ = false;
  bool resuming_ = false;
  int64_t rows_written_ = 0;
};

}  // namespace kwatt::archive

#endif  // KWATT_ARCHIVE_WRITER_H_
