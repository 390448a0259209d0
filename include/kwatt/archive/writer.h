// `kwatt backup`: writing an archive (doc/archive_format.md) in one streaming pass, crash-safe
// and resumable.
//
// The writer is a RowSink for kwollect::Fetch. Open() creates a new archive, or reopens an
// incomplete one of the same query to complete it; Fetch then delivers rows (rows already in the
// archive are skipped); Finish() closes the last frames and marks the archive complete when
// nothing failed. Memory: one frame of text (about 1 MiB) per node, whatever the volume.
//
// Thread safety: none; one thread drives a writer.
#ifndef KWATT_ARCHIVE_WRITER_H_
#define KWATT_ARCHIVE_WRITER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "kwatt/core/status.h"
#include "kwatt/core/time.h"
#include "kwatt/kwollect/fetch.h"

namespace kwatt::archive {

// The query an archive holds, as recorded in its manifest; two runs are the same backup when their
// descriptions are equal.
struct BackupQuery {
  std::string api;
  std::vector<std::string> nodes;  // FQDNs as given (empty with a job)
  std::optional<kwollect::JobRef> job;
  std::optional<UnixNanos> start, end;  // as given (the resolved window is kept apart)
  std::vector<std::string> metrics;
  bool summary = false;
};

struct WriterOptions {
  // The clock that tells whether the window has passed (see Finish); empty: WallClockNow. Tests
  // inject one.
  std::function<UnixNanos()> now;
  // A recording whose window ends when it stops (`kwatt meter`'s archive output), rather than a
  // fetch of a window known beforehand: the end Begin gives is provisional (a resumed recording
  // keeps its stored one), and Finish ends the window at report.end (or the last row, when later)
  // without waiting for it to pass.
  bool recording = false;
};

class ArchiveWriter : public kwollect::RowSink {
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
  // The fetch to run: the query, narrowed to what is not yet in the archive when resuming (its
  // end kept open for a job asked without an end: the job is resolved again).
  kwollect::FetchQuery FetchQueryToRun(const kwollect::FetchQuery& asked) const;

  Status Begin(const kwollect::FetchReport& resolved) override;
  Status Write(std::string_view site, const RowBatch& batch,
               const StringInterner& interner) override;
  Status Failed(const kwollect::FetchFailure& failure) override;

  // Ends the backup: on a complete fetch of a window that has passed, closes every file, writes
  // the manifest as complete and removes the journal. Otherwise keeps what was committed and
  // returns Incomplete, naming what to do: pieces failed (run the same command again), the
  // window ends at or after now (rows of its end do not exist yet: run the same command again
  // after its end; the archive stays incomplete and resumable until then), or the window is that
  // of a job that had not ended (asked without an end, resolved to an end at or after Open():
  // run the same command again after the job's end; each rerun extends the window to the job's
  // new end).
  Status Finish(const kwollect::FetchReport& report);

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

// What Backup() did.
struct BackupOutcome {
  bool already_complete = false;  // the archive was complete already: nothing fetched
  bool resuming = false;          // an interrupted backup was completed
  kwollect::FetchReport report;   // the fetch (what failed, if anything)
  int64_t rows_written = 0;       // by this run
  int64_t bytes_written = 0;      // the archive's data files
  // OK when the archive is complete; Incomplete (naming what to do) when pieces failed: what was
  // fetched is committed and running the same backup again completes it.
  Status finished;
};

// A whole backup, as `kwatt backup` runs it: opens (or resumes) the archive of `query` in `dir`,
// fetches what it lacks, finishes it. `on_start(resuming)` is called before the fetch. A non-OK
// result means nothing was fetched (bad query, `dir` holds something else, API unreachable).
Result<BackupOutcome> Backup(const kwollect::ClientOptions& options,
                             const kwollect::FetchQuery& query, const std::string& dir,
                             const std::string& kwatt_version,
                             const kwollect::ProgressCallback& progress = {},
                             const std::function<void(bool resuming)>& on_start = {});

}  // namespace kwatt::archive

#endif  // KWATT_ARCHIVE_WRITER_H_
