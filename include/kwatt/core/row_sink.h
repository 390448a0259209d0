// The row contract: how rows travel from where they come from (a Kwollect API, an archive; later
// a store or a collector) to what consumes them (the archive writer, energy and statistics, text
// outputs, the Python package). Every part that produces or consumes rows depends on this header
// only, not on the HTTP client.
//
// Thread safety: a RowSink is called from one thread at a time (the producer's).
#ifndef KWATT_CORE_ROW_SINK_H_
#define KWATT_CORE_ROW_SINK_H_

#include <cstdint>
#include <functional>
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

// A piece of a query that could not be had.
struct FetchFailure {
  std::string site;
  std::vector<std::string> nodes;
  UnixNanos start = 0, end = 0;
  std::vector<std::string> metrics;  // empty: all
  Status error;
};

// A query once resolved (its nodes, window, job types and catalogues), and then what fetching it
// did. A source fills the first part before any row (RowSink::Begin), the rest as it goes.
struct FetchReport {
  std::vector<NodeName> nodes;  // resolved (from the job when needed), in query order
  UnixNanos start = 0, end = 0;
  std::vector<std::string> job_types;
  // The job, when the query named one, as OAR tells it: its user, its start, its end once it
  // ended (the window above may be narrower).
  std::string job_user;
  UnixNanos job_started = 0;
  std::optional<UnixNanos> job_stopped;
  // The metric catalogue of each cluster involved ("site/cluster"), parsed where it entered.
  ClusterCatalogues catalogues;
  // The rows are 5-minute summaries (each the mean of its bucket), not samples: a query with
  // `summary`, or an archive of one.
  bool summary = false;
  int64_t requests = 0;  // requests that were sent, retries included
  int64_t retries = 0;
  int64_t splits = 0;
  int64_t rows = 0;
  int64_t bytes = 0;
  double seconds = 0;
  std::vector<FetchFailure> failures;

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
  virtual Status Begin(const FetchReport& resolved) { return Status::OK(); }
  virtual Status Write(std::string_view site, const RowBatch& batch,
                       const StringInterner& interner) = 0;
  // A piece that could not be fetched, where its rows would have been (the final report lists it
  // too).
  virtual Status Failed(const FetchFailure& failure) { return Status::OK(); }
};

struct FetchProgress {
  int64_t requests_done = 0;
  int64_t requests_total = 0;  // grows when a request is split
  int64_t rows = 0;
  int64_t bytes = 0;
  double seconds = 0;
};

// Called on the producing thread about 5 times a second (and once at the end). A non-OK status
// stops the operation, which returns it (rows already delivered stay delivered): how a caller
// cancels (Ctrl-C in Python).
using ProgressCallback = std::function<Status(const FetchProgress&)>;

}  // namespace kwatt

#endif  // KWATT_CORE_ROW_SINK_H_
