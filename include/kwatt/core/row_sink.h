// The row contract: how rows travel from where they come from (a Kwollect API, an archive, the
// server's store, the meter) to what consumes them (the archive writer, energy and statistics, text
// outputs, the Python package). Every part that produces or consumes rows depends on this header
// only, not on the HTTP client.
//
// Thread safety: a RowSink is called from one thread at a time (the producer's).
#ifndef KWATT_CORE_ROW_SINK_H_
#define KWATT_CORE_ROW_SINK_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kwatt/core/catalogue.h"
#include "kwatt/core/node_name.h"
#include "kwatt/core/row_batch.h"
#include "kwatt/core/status.h"
#include "kwatt/core/time.h"

namespace kwatt {

// A piece of the rows asked for that could not be had (a request that failed for good, a part
// of an archive that is missing): whose rows, over which window, and why.
struct MissingPiece {
  std::string site;
  std::vector<std::string> nodes;
  UnixNanos start = 0, end = 0;
  std::vector<std::string> metrics;  // empty: all
  Status error;
};

// What some rows cover, and then how they were had. A source (the Kwollect client, an archive, the
// server's store, the meter's own records) fills the first part before any row (RowSink::Begin),
// the rest as it goes.
struct RowsReport {
  std::vector<NodeName> nodes;  // resolved (from the job when needed), in the order asked
  UnixNanos start = 0, end = 0;
  std::vector<std::string> job_types;
  // The job the rows were taken for, when they were: its user, its start, its end once it ended
  // (the window above may be narrower), as the scheduler that ran it tells them.
  std::string job_user;
  UnixNanos job_started = 0;
  std::optional<UnixNanos> job_stopped;
  // The metric catalogue of each cluster involved ("site/cluster"), parsed where it entered.
  ClusterCatalogues catalogues;
  // The rows are 5-minute summaries (each the mean of its bucket), not samples: a query with
  // `summary`, or an archive of one.
  bool summary = false;
  // A remote source's work: requests sent (retries included), retried, and split because the
  // peer found them too large. Zero for a local source.
  int64_t requests = 0;
  int64_t retries = 0;
  int64_t splits = 0;
  int64_t rows = 0;
  int64_t bytes = 0;
  double seconds = 0;
  std::vector<MissingPiece> failures;

  bool complete() const { return failures.empty(); }
};

// Receives rows. Batches come site after site in the order sites first appear in the query;
// within a site, each node's rows are in chronological order; the same query on the same data
// always gives the same sequence. Ids in a batch refer to `interner`. Failures are told in the
// same order, where the rows they lack would have been.
class RowSink {
 public:
  virtual ~RowSink() = default;
  // Once the query is resolved (nodes, window, job types, catalogues), before any row.
  virtual Status Begin(const RowsReport& resolved) { return Status::OK(); }
  virtual Status Write(std::string_view site, const RowBatch& batch,
                       const StringInterner& interner) = 0;
  // A piece that could not be fetched, where its rows would have been (the final report lists it
  // too).
  virtual Status Failed(const MissingPiece& failure) { return Status::OK(); }
};

// How far a source is, for a progress line.
struct RowsProgress {
  int64_t requests_done = 0;
  int64_t requests_total = 0;  // grows when a request is split
  int64_t rows = 0;
  int64_t bytes = 0;
  double seconds = 0;
};

// Called on the producing thread about 5 times a second (and once at the end). A non-OK status
// stops the operation, which returns it (rows already delivered stay delivered): how a caller
// cancels (Ctrl-C in Python).
using ProgressCallback = std::function<Status(const RowsProgress&)>;

}  // namespace kwatt

#endif  // KWATT_CORE_ROW_SINK_H_
