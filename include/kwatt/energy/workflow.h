// The whole energy workflow, as one call: rows read (with the margin an energy reads beyond its
// window), the power source chosen per node, the figures and their intervals, the sources checked
// against each other (doc/energy.md). `kwatt energy`, runs compared (and `kwatt report`, which
// reads its runs so), Python's energy() and the dashboard's job energy all make this call, so
// that they give the same figures for the same rows.
//
// Thread safety: as the feed given (one call, the calling thread).
#ifndef KWATT_ENERGY_WORKFLOW_H_
#define KWATT_ENERGY_WORKFLOW_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kwatt/core/row_sink.h"
#include "kwatt/core/status.h"
#include "kwatt/energy/energy.h"
#include "kwatt/energy/source_check.h"

namespace kwatt::energy {

// Where the rows come from: feeds `sink` with the rows of `metrics` over the window, read
// EnergyFetchMargin(summary) beyond it (kwollect::FetchQuery::margin), and returns the resolved
// query (its nodes, window, catalogues and failures): rows::FeedSource for a Kwollect query or
// an archive, the dashboard's own rows. An error stops the workflow and is returned.
using EnergyRowFeed =
    std::function<Result<RowsReport>(const std::vector<std::string>& metrics, RowSink* sink)>;

// Places the phases and roles once the window is known (`kwatt energy --phase busy=+300..+600`,
// relative to the window's start): sets them in `options`. May be empty (they are already in the
// options).
using PlaceIntervals = std::function<Status(const RowsReport& resolved, EnergyOptions* options)>;

struct EnergyOutcome {
  RowsReport rows;                         // the resolved query: nodes, window, failures
  EnergyReport report;                     // ComputeEnergy's
  std::vector<SourceCheck> checks;         // CheckSources' over the same rows and options
  EnergyOptions options;                   // the options the figures were computed with (placed)
  std::shared_ptr<const EnergySink> read;  // the rows read, kept (PowerCollector via power())
};

// Reads the rows through `feed` into an EnergySink, places the phases (`place`), computes the
// energy and checks the sources. Errors: the options' (CheckGapFactor, CheckClockOffset) before
// anything is read, then the feed's, the placement's, and ComputeEnergy's.
Result<EnergyOutcome> EnergyOf(const EnergyRowFeed& feed, const EnergyOptions& options,
                               const PlaceIntervals& place = {});

}  // namespace kwatt::energy

#endif  // KWATT_ENERGY_WORKFLOW_H_
