// Rows from a Kwollect query or from an archive, to a sink: what `kwatt energy` and `kwatt stats`
// analyse, and the Python package's energy() and stats().
// Thread safety: as Fetch and ArchiveReader (one sink, the calling thread).
#ifndef KWATT_ARCHIVE_SOURCE_H_
#define KWATT_ARCHIVE_SOURCE_H_

#include <optional>
#include <string>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/core/time.h"
#include "kwatt/kwollect/fetch.h"

namespace kwatt::archive {

// Streams a complete archive's rows of `metrics` (those it holds; empty: all) in [start, end]
// (default: its window) of `nodes` (empty: all of its nodes) to `sink`, after Begin() with those
// nodes, the window, job types and catalogues. `resolved` receives them, and the rows fed.
// InvalidArgument for a node the archive does not hold (naming those it holds); Incomplete for an
// incomplete archive (naming the command that completes it), and ReadManifest's and
// ArchiveReader's errors.
Status FeedArchive(const std::string& dir, const std::vector<std::string>& metrics,
                   std::optional<UnixNanos> start, std::optional<UnixNanos> end,
                   kwollect::RowSink* sink, kwollect::FetchReport* resolved,
                   const std::vector<kwollect::NodeName>& nodes = {});

// Where rows come from: an archive directory when `archive_dir` is set (then query.start,
// query.end and query.nodes, if set, narrow its window and nodes, and a job is refused), else the
// query.
struct RowSource {
  std::string archive_dir;
  kwollect::ClientOptions options;
  kwollect::FetchQuery query;
};

// Feeds `sink` with the source's rows of `metrics` (empty: the query's, else every metric).
Result<kwollect::FetchReport> FeedSource(const RowSource& source,
                                         const std::vector<std::string>& metrics,
                                         kwollect::RowSink* sink,
                                         const kwollect::ProgressCallback& progress = {});

}  // namespace kwatt::archive

#endif  // KWATT_ARCHIVE_SOURCE_H_
