// `kwatt backup`: a Kwollect query fetched into an archive (doc/archive_format.md), crash-safe
// and resumable: the archive::ArchiveWriter is the kwollect::Fetch's sink.
//
// Thread safety: as Fetch (one sink, the calling thread).
#ifndef KWATT_BACKUP_BACKUP_H_
#define KWATT_BACKUP_BACKUP_H_

#include <cstdint>
#include <functional>
#include <string>

#include "kwatt/archive/writer.h"
#include "kwatt/core/status.h"
#include "kwatt/kwollect/client_options.h"
#include "kwatt/kwollect/fetch.h"

namespace kwatt::backup {

// The fetch to run into `writer`: `asked`, narrowed to what is not yet in the archive when the
// writer resumes (archive::ArchiveWriter::WindowToRun).
kwollect::FetchQuery FetchQueryToRun(const archive::ArchiveWriter& writer,
                                     const kwollect::FetchQuery& asked);

// What Backup() did.
struct BackupOutcome {
  bool already_complete = false;  // the archive was complete already: nothing fetched
  bool resuming = false;          // an interrupted backup was completed
  RowsReport report;              // the fetch (what failed, if anything)
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
                             const ProgressCallback& progress = {},
                             const std::function<void(bool resuming)>& on_start = {});

}  // namespace kwatt::backup

#endif  // KWATT_BACKUP_BACKUP_H_
