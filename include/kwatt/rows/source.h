// Where rows come from, a Kwollect query or an archive, and their rows to a sink: what `kwatt
// energy`, `kwatt stats` and `kwatt report` analyse, and the Python package's energy() and
// stats().
// Thread safety: as Fetch and ArchiveReader (one sink, the calling thread).
#ifndef KWATT_ROWS_SOURCE_H_
#define KWATT_ROWS_SOURCE_H_

#include <string>
#include <variant>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/kwollect/client_options.h"
#include "kwatt/kwollect/fetch.h"

namespace kwatt::rows {

// The rows of a Kwollect query: `query` asked of the API `options` name.
struct FromQuery {
  kwollect::ClientOptions options;
};
// The rows of an archive directory (a `kwatt backup`, a `kwatt meter` recording): `query`'s
// start, end and nodes, if set, narrow its window and nodes; a job is refused.
struct FromArchive {
  std::string dir;
};

struct RowSource {
  std::variant<FromQuery, FromArchive> from;
  kwollect::FetchQuery query;
  // Other archives of the same experiment read with it (`kwatt energy --with-archive`): a `kwatt
  // meter` recording (-o archive:) on one of its nodes, whose RAPL and GPU domains are then
  // checked against the node's wall power. Each must be complete, hold only nodes of the source,
  // and hold samples if the source does (summaries if it does), be given once and not be the
  // source's own. Their rows of the resolved window follow the source's, in the order of their
  // windows; a node's metric that the source gave is taken from the source only (never twice),
  // and two of them may give a series only one after the other (a meter started again into a new
  // directory), else InvalidArgument.
  std::vector<std::string> with_archives;
  // `with_archives` is shared by several runs (`kwatt report`): an archive whose window does not
  // meet the source's, or a node of it the source lacks, is skipped rather than refused
  // (FeedSource's `archives_read` names those read).
  bool with_archives_shared = false;
};

// Feeds `sink` with the source's rows of `metrics` (empty: the query's, else every metric):
// archive::FeedArchive's or kwollect::Fetch's, then those of `with_archives`. The sink sees one
// Begin (the source's resolved query); each series' rows are chronological, but a node's rows from
// another archive come after the source's (RowSink's order holds within each source). The report
// is the source's, its rows and catalogues with the other archives'; `archives_read` (may be
// null) gets those of `with_archives` read, as given: those holding a node of it during its
// window, whose series the source lacked were added (none, when the source had them all: the
// domains a meter pushed). `progress` is the source's (the other archives are local, and read
// after it without one). Errors: FeedArchive's and Fetch's; for another archive, those RowSource
// names (InvalidArgument naming the archive and what is wrong), checked before the source is read
// where its manifest tells.
Result<RowsReport> FeedSource(const RowSource& source, const std::vector<std::string>& metrics,
                              RowSink* sink, const ProgressCallback& progress = {},
                              std::vector<std::string>* archives_read = nullptr);

}  // namespace kwatt::rows

#endif  // KWATT_ROWS_SOURCE_H_
