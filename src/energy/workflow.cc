// The whole energy workflow as one call (workflow.h).
#include "kwatt/energy/workflow.h"

#include <utility>

namespace kwatt::energy {

Result<EnergyOutcome> EnergyOf(const EnergyRowFeed& feed, const EnergyOptions& options,
                               const PlaceIntervals& place) {
  KWATT_RETURN_IF_ERROR(CheckGapFactor(options.gap_factor));
  KWATT_RETURN_IF_ERROR(CheckClockOffset(options.clock_offset_seconds));
  auto sink = std::make_shared<EnergySink>(options.metric);
  EnergyOutcome outcome;
  KWATT_ASSIGN_OR_RETURN(outcome.rows, feed(EnergyInputMetrics(options.metric), sink.get()));
  if (sink->power() == nullptr) KWATT_RETURN_IF_ERROR(sink->Begin(outcome.rows));
  outcome.options = options;
  if (place) KWATT_RETURN_IF_ERROR(place(outcome.rows, &outcome.options));
  KWATT_ASSIGN_OR_RETURN(outcome.report, sink->Compute(outcome.rows, outcome.options));
  outcome.checks = CheckSources(*sink->power(), outcome.report, outcome.options);
  outcome.read = std::move(sink);
  return outcome;
}

}  // namespace kwatt::energy
