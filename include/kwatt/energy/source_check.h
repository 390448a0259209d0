// A node's power sources checked against each other (doc/energy.md, "How far to trust it"): the
// energy each source gives over the same interval, their differences, and a flag where two whole-
// node sources differ by more than their stated accuracies allow. A source that sees only a part
// of the node (RAPL's domains, GPUs, as `kwatt meter` records them) is never flagged for reading
// less than the wall: what it does not see is the rest of the platform, named as such; reading
// more than the wall is flagged.
//
// Pure functions; thread-safe.
#ifndef KWATT_ENERGY_SOURCE_CHECK_H_
#define KWATT_ENERGY_SOURCE_CHECK_H_

#include <cmath>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/energy/energy.h"
#include "kwatt/energy/uncertainty.h"

namespace kwatt::energy {

// What a power metric measures.
enum class SourceScope {
  kWholeNode,  // the node's wall power: wattmeter, PDU outlet, BMC
  kPartOfNode  // a part of it: RAPL domains, GPUs
};

struct PowerSourceKind {
  std::string metric;  // "wattmetre_power_watt"
  std::string name;    // "external wattmeter"
  SourceScope scope = SourceScope::kWholeNode;
  StatedAccuracy accuracy;  // the default (whole-node sources only)
  // A source whose readings are each the mean power over this many seconds before it (a BMC's):
  // it lags the power by about half of it (AddAveragingTerm).
  double averaging_seconds = 0;
};

// The power metrics kwatt knows, whole-node ones in PowerMetrics()'s order of preference.
const std::vector<PowerSourceKind>& PowerSourceKinds();
// The kind of `metric`; null for a metric kwatt knows nothing of (`kwatt energy --metric X`).
const PowerSourceKind* FindPowerSourceKind(std::string_view metric);

// Stated accuracies given by the user, by metric: "pdu_outlet_power_watt=2%+0.5W" (either term
// may be left out: "=2%", "=0.5W"). InvalidArgument naming the text and the form for anything
// else, an unknown metric (with the known ones), or a negative or absurd figure (above 100 %, or
// a megawatt).
Result<std::pair<std::string, StatedAccuracy>> ParseStatedAccuracy(std::string_view text);

// The stated accuracy of `metric`: the user's (`accuracies`, by metric) where given, else its
// kind's default (whole-node sources only); null for a metric with neither.
const StatedAccuracy* AccuracyOf(const std::string& metric,
                                 const std::map<std::string, StatedAccuracy>& accuracies);

// What a source that averages its readings (PowerSourceKind::averaging_seconds T: a BMC) hides
// over [a, b], added to `f`'s sampling term: its readings lag the power by about T / 2, which moves
// energy across the interval's edges, up to T / 2 x (the change of power from start to end, and
// how far it moves within T of each edge), a rectangular bound. Small on long intervals; on a
// 15 s phase over a rise of load, a quarter of its energy. Nothing for other sources.
void AddAveragingTerm(const std::string& metric,
                      const std::map<std::string, PowerCollector::Series>& series, UnixNanos a,
                      UnixNanos b, Figures* f);

// One source's energy over an interval: the figures IntegrateNodeMetric gives for its metric.
struct SourceEnergy {
  std::string metric;
  Figures figures;
};

// How one source compares with the reference (the node's chosen source) over an interval.
struct SourceComparison {
  std::string metric;
  std::string reference;
  enum class Verdict {
    kAgrees,         // within what the two stated accuracies allow
    kDisagrees,      // beyond it: one of the two is wrong (or its accuracy is not what is stated)
    kPartOfNode,     // a part of the node, below the wall: the rest is the platform's
    kAbovePart,      // a part of the node reading more than the wall: one of the two is wrong
    kNotComparable,  // one of the two does not cover the interval (or has no power data)
  };
  Verdict verdict = Verdict::kNotComparable;
  double joules = NAN;    // this source's energy minus the reference's
  double relative = NAN;  // that, over the reference's energy
  // Whole-node sources: the two stated accuracies' bounds, added, plus the 95 % half-width of
  // what their data leave uncertain (each figure's interval without its accuracy and clock terms:
  // sampling, averaging, resolution, gaps and edges), so that honest sources on a short interval
  // are not called disagreeing for what their sampling misses.
  double allowed_joules = NAN;
  double rest_watts = NAN;  // kPartOfNode: the mean power the part does not see
  std::string why;          // one sentence for the reader
};

// The least coverage of the interval two sources must both have to be compared: below it the
// difference would be one of what each missed.
inline constexpr double kComparableCoverage = 0.95;

// Compares each of `sources` with `sources[reference]` over the same interval. Whole-node sources
// use `accuracies`' figure for their metric where given, else their kind's default; a metric with
// neither (an unknown one) is compared but never flagged (its `why` says so). A part-of-node
// source is compared with the wall as it is (`kwatt_meter_domain_power_watt` sums the domains a
// meter recorded: packages and DRAM, which do not overlap). The reference must be a whole-node
// source; the result has one entry per other source, in the order given.
std::vector<SourceComparison> CompareSources(
    const std::vector<SourceEnergy>& sources, size_t reference,
    const std::map<std::string, StatedAccuracy>& accuracies = {});

// The verdict as JSON, CSV and Python give it: "agrees", "disagrees", "part_of_node",
// "part_above_wall", "not_comparable".
std::string_view VerdictName(SourceComparison::Verdict verdict);

// A node's sources over one interval of a report, compared.
struct SourceCheck {
  std::string node;                   // FQDN
  std::string interval;               // "window", or a phase's name
  std::vector<SourceEnergy> sources;  // the node's chosen source first, then the others it has
  std::vector<SourceComparison> comparisons;  // of sources[1..] with sources[0]
};

// The check of every node of `report` (ComputeEnergy's over `data` with `options`) that has a
// whole-node source chosen and at least one other power source (PowerSourceKinds(), or
// `options.metric`), over the window and each phase as the report has them: each source's series
// taken as ChoosePowerMetric takes a node's (stray series set aside), integrated as the chosen
// one is; whole-node sources judged with options.accuracies (the user's, by metric) where given.
std::vector<SourceCheck> CheckSources(const PowerCollector& data, const EnergyReport& report,
                                      const EnergyOptions& options);

// The checks as a JSON array (`kwatt energy --json`'s "source_checks"; doc/energy.md): each
// {node, interval, sources: [{metric, joules, coverage, mean_watts}], comparisons: [{metric,
// reference, verdict, joules, relative, allowed_joules, rest_watts, why}]}; NaN figures null.
std::string SourceChecksJson(const std::vector<SourceCheck>& checks);

}  // namespace kwatt::energy

#endif  // KWATT_ENERGY_SOURCE_CHECK_H_
