// Rows from a Kwollect query or from an archive, to a sink: what `kwatt energy` and `kwatt stats`
// analyse, and the Python package's energy() and stats().
// Thread safety: as Fetch and ArchiveReader (one sink, the calling thread).
#ifndef KWATT_BACKUP_ROW_SOURCE_H_
#define KWATT_BACKUP_ROW_SOURCE_H_

#include <string>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/kwollect/client_options.h"
#include "kwatt/kwollect/fetch.h"

namespace kwatt::backup {

// Where rows come from: an archive directory when `archive_dir` is set (then query.start,
// query.end and query.nodes, if set, narrow its window and nodes, and a job is refused), else the
// query.
struct RowSource {
  std::string archive_dir;
  kwollect::ClientOptions options;
  kwollect::FetchQuery query;
};

// Feeds `sink` with the source's rows of `metrics` (empty: the query's, else every metric):
// archive::FeedArchive's or kwollect::Fetch's.
Result<RowsReport> FeedSource(const RowSource& source, const std::vector<std::string>& metrics,
                              RowSink* sink, const ProgressCallback& progress = {});

}  // namespace kwatt::backup

#endif  // KWATT_BACKUP_ROW_SOURCE_H_
