// `kwatt fetch`: every row Kwollect holds for some nodes over a window, fetched in parallel,
// in bounded requests, parsed as it arrives, delivered in a deterministic order.
//
// The query is planned into requests under a row budget (split by time, then nodes, then
// metrics), sent with bounded concurrency per site and overall, retried on transient failures,
// and split again when Kwollect answers its timeout error. Whatever cannot be fetched is reported
// piece by piece; everything fetched is delivered.
//
// Thread safety: Fetch() may be called from several threads at once with distinct sinks; the
// sink is called only on the calling thread.
#ifndef KWATT_KWOLLECT_FETCH_H_
#define KWATT_KWOLLECT_FETCH_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kwatt/core/node_name.h"
#include "kwatt/core/row_batch.h"
#include "kwatt/core/row_sink.h"
#include "kwatt/core/status.h"
#include "kwatt/core/time.h"
#include "kwatt/kwollect/client_options.h"

namespace kwatt::kwollect {

struct JobRef {
  std::string site;
  int64_t id = 0;
};

struct FetchQuery {
  std::vector<NodeName> nodes;     // with `job`: restricts the job's nodes (empty: all of them)
  std::optional<UnixNanos> start;  // inclusive; with `job`: default the job's start
  std::optional<UnixNanos> end;    // inclusive; with `job`: default its end (or now)
  std::optional<JobRef> job;
  std::vector<std::string> metrics;  // exact metric ids; empty: every metric
  // Every id of `metrics` must be one that some node of the query reports according to its
  // cluster's catalogue: Fetch and Resolve fail with NotFound naming the others (a typo would
  // otherwise give no rows, silently). False: `metrics` are candidates, those no node reports
  // just give no rows (kwatt energy's list of power sources).
  bool check_metrics = true;
  bool summary = false;  // 5-minute aggregates
  // Each value as Kwollect's `as_rate=true` gives it (kwatt/core/row_rates.h), computed here over
  // the rows fetched, in whatever pieces: what one answer of the whole window would hold (Kwollect
  // computes it within each answer, so a piece's first row would be null).
  bool as_rate = false;
  // Rows are fetched this far (nanoseconds, >= 0) beyond both ends of the window, which the report
  // keeps as asked: samples around its edges, for an energy that interpolates there
  // (energy::kEnergyFetchMargin) rather than holding the nearest value inside.
  int64_t margin = 0;
};

// The row contract is core's (kwatt/core/row_sink.h): sources and sinks need nothing of the HTTP
// client. Fetch fills a RowsReport's `failures` merged: adjacent pieces (in time, nodes or
// metrics) that failed with the same error are one, in the order of their first piece, while the
// sink's Failed() hears of each piece where its rows would have been.

// Fetches `query` into `sink`. A non-OK result means nothing was fetched (bad query, unknown site
// or node, credentials refused, API unreachable); otherwise the report lists what failed, if
// anything. A sink error stops the fetch and is returned.
Result<RowsReport> Fetch(const ClientOptions& options, const FetchQuery& query, RowSink* sink,
                         const ProgressCallback& progress = {});

// Fetch without asking the reference API again: `query` (nodes and a window; no job) is planned
// with the catalogues of `resolved`, a RowsReport that Resolve or Fetch gave for the same nodes,
// and only the metrics requests are sent. For a caller that polls the same nodes over and over
// (the power meter's Kwollect source: one request a poll instead of four). Fetch's errors, and
// InvalidArgument for a node `resolved` does not cover.
Result<RowsReport> FetchResolved(const ClientOptions& options, const FetchQuery& query,
                                 const RowsReport& resolved, RowSink* sink,
                                 const ProgressCallback& progress = {});

// Resolves `query` as Fetch does before fetching (the job's nodes, window and types; every node
// checked against the reference API; the catalogues), without fetching any row. Fetch's errors.
Result<RowsReport> Resolve(const ClientOptions& options, const FetchQuery& query);

// What the reference API says of some nodes (no metrics are fetched).
struct NodeInfo {
  NodeName node;
  std::string cluster;  // "nova"
  std::string problem;  // "" for a known node; else why not: "unknown site \"x\" (sites: ...)",
                        // "site lyon has no cluster \"x\"", "cluster nova has 22 nodes (...)"
  bool unknown_site = false;  // the problem is the site's, not the node's
  // The site's reference API could not be read (a 5xx, a proxy's error page, unreachable): the
  // node is not known to be wrong, only unchecked. A fetch goes on with the other sites' nodes
  // and reports these as not fetched.
  bool unavailable = false;
};

struct NodeLookup {
  std::vector<NodeInfo> nodes;  // in the order given
  // The metric catalogue of each known cluster ("site/cluster").
  ClusterCatalogues catalogues;

  // The catalogue of `node`'s cluster, or null when the cluster is unknown.
  const Catalogue* CatalogueOf(const NodeName& node) const;
};

// Looks every node up in the reference API (its site, cluster and the cluster's node list), the
// same checks Fetch makes before fetching, but telling every unknown node instead of the first.
// A non-OK result means the API could not be asked (unreachable, credentials refused...).
Result<NodeLookup> LookUpNodes(const ClientOptions& options, const std::vector<NodeName>& nodes);

}  // namespace kwatt::kwollect

#endif  // KWATT_KWOLLECT_FETCH_H_
