// An archive's rows to a sink, as a source of rows (rows::FeedSource: what `kwatt energy` and
// `kwatt stats` analyse, the Python package's energy() and stats(); `kwatt meter`'s Kwollect
// power replayed from an archive).
// Thread safety: as ArchiveReader (one sink, the calling thread).
#ifndef KWATT_ARCHIVE_SOURCE_H_
#define KWATT_ARCHIVE_SOURCE_H_

#include <optional>
#include <string>
#include <vector>

#include "kwatt/core/row_sink.h"
#include "kwatt/core/status.h"
#include "kwatt/core/time.h"

namespace kwatt::archive {

// Streams a complete archive's rows of `metrics` (those it holds; empty: all) in [start, end]
// (default: its window) of `nodes` (empty: all of its nodes) to `sink`, after Begin() with those
// nodes, the window, job types and catalogues. `resolved` receives them, and the rows fed.
// InvalidArgument for a node the archive does not hold (naming those it holds); Incomplete for an
// incomplete archive (naming the command that completes it), and ReadManifest's and
// ArchiveReader's errors.
Status FeedArchive(const std::string& dir, const std::vector<std::string>& metrics,
                   std::optional<UnixNanos> start, std::optional<UnixNanos> end, RowSink* sink,
                   RowsReport* resolved, const std::vector<NodeName>& nodes = {});

}  // namespace kwatt::archive

#endif  // KWATT_ARCHIVE_SOURCE_H_
