// Energy of an experiment from its measurements: the best power source per node, exact
// integration on the real timestamps, gaps and coverage reported rather than hidden, per node,
// role and phase (doc/energy.md).
//
// Usage: feed rows to a PowerCollector (a RowSink, so it takes Fetch's output or an archive's
// rows), then ComputeEnergy(). Not thread-safe; values.
#ifndef KWATT_ENERGY_ENERGY_H_
#define KWATT_ENERGY_ENERGY_H_

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kwatt/core/document_writer.h"
#include "kwatt/core/row_batch.h"
#include "kwatt/core/row_sink.h"
#include "kwatt/core/status.h"
#include "kwatt/core/time.h"
#include "kwatt/energy/uncertainty.h"

namespace kwatt::energy {

// The most power a node's meter can read: a value beyond it (a megawatt: a whole Grid'5000 cluster
// draws less), or one that is not finite (a pushed 1e308, "Infinity"), is no measurement and
// ComputeEnergy refuses it rather than report an absurd or infinite energy.
inline constexpr double kMaxPlausibleWatts = 1e6;

// Power metrics in order of preference, and the energy counters used to cross-check them.
inline const std::vector<std::string>& PowerMetrics() {
  static const std::vector<std::string> metrics = {"wattmetre_power_watt", "pdu_outlet_power_watt",
                                                   "bmc_node_power_watt", "bmc_psu_power_watt"};
  return metrics;
}
// Power metrics of a part of a node (never chosen as its power: checked against the wall, see
// source_check.h): the domains `kwatt meter` records (RAPL's packages and DRAM, GPUs).
inline const std::vector<std::string>& PartOfNodeMetrics() {
  static const std::vector<std::string> metrics = {"kwatt_meter_domain_power_watt"};
  return metrics;
}
inline const std::vector<std::string>& EnergyCounters() {
  static const std::vector<std::string> counters = {"pdu_outlet_energy_watthours_total",
                                                    "bmc_node_power_watthour_total"};
  return counters;
}

namespace detail {

// Which of a list of node FQDNs a row's (site, device id) is, cached per interned id so that the
// per-row cost is an array read (the cache follows the interner and site of the batches).
class RowNodeIndex {
 public:
  // Index in `nodes`, or -1 when the device is none of them.
  int Find(const std::vector<std::string>& nodes, std::string_view site, uint32_t device,
           const StringInterner& interner);

 private:
  uint64_t interner_ = 0;  // the serial of the interner cache_ is for
  std::string site_;
  std::vector<int> cache_;  // by device id; -2: not looked up yet
};

}  // namespace detail

struct Interval {
  std::string name;
  UnixNanos start = 0;  // inclusive
  UnixNanos end = 0;
};

// OK when every phase has a name, other than "window" (the whole window's figures go by that name:
// in JSON, CSV and Python's frames a phase "window" would be taken for them), and lasts (ends
// after it starts); else InvalidArgument naming the phase.
Status CheckPhases(const std::vector<Interval>& phases);

struct Role {
  std::string name;
  std::vector<std::string> nodes;  // FQDNs
};

struct EnergyOptions {
  // Named intervals, reported separately (they may overlap); intervals with the same name are
  // one phase: their union (an instant in two of them counts once), its mean power over all of
  // it. Each is clipped to the data's window (see ComputeEnergy).
  std::vector<Interval> phases;
  // Named sets of nodes, reported as sums; roles given twice under one name are one role (the
  // union of their nodes, each node once).
  std::vector<Role> roles;
  std::string metric;  // use this power metric for every node; empty: choose
  // A gap: no sample for more than this many sampling periods. A finite number of at least 1
  // (below 1, every regular interval between two samples would be a gap): CheckGapFactor.
  double gap_factor = 3;
  std::string baseline_phase;  // a phase whose mean power is the idle baseline; empty: none
  // The stated accuracies given by the user, by metric (ParseStatedAccuracy, source_check.h): for
  // the interval of each figure (and the source checks); the others keep their kind's default.
  std::map<std::string, StatedAccuracy> accuracies;
  // The bound on the offset of the clock that took the window's and phases' marks from the
  // meters' clocks, seconds (uncertainty.h): CheckClockOffset.
  double clock_offset_seconds = kDefaultClockOffsetSeconds;
};

// OK when `seconds` is a finite number in [0, 3600]; else InvalidArgument naming it as `name`.
Status CheckClockOffset(double seconds, std::string_view name = "clock_offset");

// OK when `gap_factor` is a finite number of at least 1; else InvalidArgument naming it as `name`
// (the option as the caller's user knows it: "gap_factor", "--gap-factor").
Status CheckGapFactor(double gap_factor, std::string_view name = "gap_factor");

// One energy figure over an interval, for one node or summed over nodes.
struct Figures {
  double seconds = 0;          // length of the interval
  double joules = 0;           // integrated where samples are close enough (outside gaps)
  double gap_joules = 0;       // estimated in gaps (linear between the samples around them)
  double covered_seconds = 0;  // node-time outside gaps (summed over the nodes of a sum)
  double node_seconds = 0;     // node-time: seconds x the nodes summed (nodes without power too)
  int gaps = 0;
  // The highest power over the interval, its edges included; of a sum (a node's PSUs, a role, a
  // total) the peak of the summed power (integration.h's PeakOfSum), not the sum of the peaks.
  double peak_watts = 0;
  // Some of the interval has power data, measured or estimated in a gap. False: its energy, mean
  // and peak are unknown (null in JSON, empty in CSV, NO POWER DATA in the table), not 0.
  bool has_power = false;
  double counter_joules = NAN;   // increase of an energy counter over the interval, if any
  double baseline_joules = NAN;  // baseline power x seconds, when a baseline is set
  // What its 95 % interval is made of (uncertainty.h): Add and Extend add them.
  ErrorTerms terms;

  // Covered node-time / node-time: a sum over nodes one of which has no power data is partial.
  double coverage() const { return node_seconds > 0 ? covered_seconds / node_seconds : 0; }
  double total_joules() const { return joules + gap_joules; }
  double mean_watts() const { return seconds > 0 ? total_joules() / seconds : 0; }
  // Its 95 % interval, the user's marks up to `clock_offset_seconds` off the meters' clocks.
  Uncertainty uncertainty(double clock_offset_seconds) const {
    return Combine(terms, clock_offset_seconds);
  }
  // Sums figures of the same interval over nodes (nodes of a role, a total). The peak of the sum
  // cannot be had from the parts: peak_watts becomes the highest of the two, a lower bound, which
  // ComputeEnergy replaces with the peak of the summed power.
  void Add(const Figures& other);
  // Appends the figures of a later, disjoint interval (a phase marked several times).
  void Extend(const Figures& later);
};

struct NodeEnergy {
  std::string node;             // FQDN
  std::string metric;           // the power metric used; empty: none
  std::string reason;           // why this one (or why none)
  double period_s = 0;          // median sampling interval of the data used
  int series = 0;               // series summed (2 PDU outlets: 2)
  bool coarse = false;          // BMC values: averaged, inaccurate
  std::string counter_metric;   // energy counter used for the cross-check, if any
  Figures window;               // over the whole window
  std::vector<Figures> phases;  // per EnergyReport::phase_names
  double baseline_watts = NAN;
};

struct EnergyReport {
  UnixNanos start = 0, end = 0;  // the window reported: the one asked, clipped to the data's
  UnixNanos requested_start = 0, requested_end = 0;  // the window asked (fetched)
  std::vector<std::string> phase_names;
  // The phases' intervals as the figures are over them: clipped to the window, a phase's
  // overlapping intervals merged; each named by its phase.
  std::vector<Interval> phase_intervals;
  std::vector<NodeEnergy> nodes;                  // in the order given
  std::vector<std::pair<Role, Figures>> roles;    // window figures summed over the role's nodes
  std::vector<std::vector<Figures>> role_phases;  // [role][phase]
  // Summed over every node: those without power data add their time, uncovered (coverage).
  Figures total;
  std::vector<Figures> phase_totals;
  std::vector<std::string> nodes_without_power;  // FQDNs
  // What was changed from what was asked, for the reader: the window or a phase clipped to the
  // data's window, overlapping intervals of a phase merged, roles given twice merged.
  std::vector<std::string> notes;
  // The bound on the marks' clock offset the intervals are computed with (EnergyOptions).
  double clock_offset_seconds = kDefaultClockOffsetSeconds;
};

// Roles with the same name merged into one (the union of their nodes, in order of first
// appearance); a node listed twice in a role counts once.
std::vector<Role> MergeRoles(const std::vector<Role>& roles);

// Kwollect's summary rows (`summary=true`): one per series and 5-minute bucket, timestamped at the
// bucket's start (doc/kwollect_api.md, "Summary mode").
inline constexpr int64_t kSummaryBucketNanos = 300 * kNanosPerSecond;

// How far beyond a window an energy reads a source's rows (kwollect::FetchQuery::margin, and the
// dashboard's reads): samples on both sides of the window's and the phases' edges, so that the
// power at an edge is interpolated between them rather than held from the nearest sample inside,
// and no series of a node (a PSU, an outlet) is missing from a window shorter than its period.
// Raw rows: three periods of the slowest power source Kwollect has (a BMC's 5 s). Summaries: one
// bucket, so that the one holding the window's start, timestamped before it, is read.
inline int64_t EnergyFetchMargin(bool summary) {
  return summary ? kSummaryBucketNanos : 15 * kNanosPerSecond;
}

// What the rows of a power series stand for.
enum class RowKind {
  // Raw rows: instantaneous readings; the power is the line between two of them.
  kSamples,
  // Kwollect's 5-minute summaries (`kwatt energy --summary`, an archive of `kwatt backup
  // --summary`): a row's value is the MEAN power over its bucket [timestamp, timestamp +
  // kSummaryBucketNanos); a counter's is its maximum, about its value at the bucket's end.
  kBucketMeans,
};

// Keeps the samples of power metrics and energy counters of the given nodes (rows of any other
// metric or device are dropped), one series per (node, metric, labels).
class PowerCollector : public RowSink {
 public:
  // `nodes`: FQDNs of the nodes to keep. `metric`: a power metric kept besides PowerMetrics()
  // (EnergyOptions::metric, which may be any metric: `kwatt energy --metric`).
  // `kind`: what the rows fed stand for (raw samples, or summaries).
  explicit PowerCollector(std::vector<std::string> nodes, std::string metric = "",
                          RowKind kind = RowKind::kSamples);
  Status Write(std::string_view site, const RowBatch& batch,
               const StringInterner& interner) override;
  // One sample given directly (a row of a DataFrame, in Python's power_sources; tests): the
  // node's FQDN, the metric, the labels' JSON text, the time and the value (NaN is skipped).
  void Add(const std::string& node, const std::string& metric, const std::string& labels,
           UnixNanos t, double value);

  struct Series {
    std::vector<UnixNanos> time;
    std::vector<double> value;
  };
  // node -> metric -> labels -> series
  using Store = std::map<std::string, std::map<std::string, std::map<std::string, Series>>>;
  const Store& store() const { return store_; }
  const std::vector<std::string>& nodes() const { return nodes_; }
  RowKind kind() const { return kind_; }
  // Rows skipped because their value was NaN ("NaN" or null), by node and metric: a metric that
  // gave only such rows is named as such, not as one that returned no row.
  int64_t NanRows(const std::string& node, const std::string& metric) const;
  // Why rows of a node may be missing, as the fetch that fed it said (its failed pieces), by node
  // FQDN: named where a node then has no power data.
  void SetUnfetched(std::map<std::string, std::string> why) { unfetched_ = std::move(why); }
  const std::map<std::string, std::string>& unfetched() const { return unfetched_; }
  // The stretches of time the fetch could not get rows of (its failed pieces, any node): the
  // window is not clipped into them, so that they count as uncovered rather than as time
  // without data.
  void SetUnfetchedSpans(std::vector<std::pair<UnixNanos, UnixNanos>> spans) {
    unfetched_spans_ = std::move(spans);
  }
  const std::vector<std::pair<UnixNanos, UnixNanos>>& unfetched_spans() const {
    return unfetched_spans_;
  }

 private:
  std::vector<std::string> nodes_;
  std::string metric_;
  RowKind kind_;
  Store store_;
  std::map<std::string, std::map<std::string, int64_t>> nan_rows_;
  std::map<std::string, std::string> unfetched_;
  std::vector<std::pair<UnixNanos, UnixNanos>> unfetched_spans_;
  detail::RowNodeIndex lookup_;
  uint64_t metric_interner_ = 0;       // the serial of the interner wanted_metric_ is for
  std::vector<int8_t> wanted_metric_;  // by metric id: -1 unknown, 0 no, 1 yes
};

// The energy of each node over [start, end) (the window fetched) and each phase, its rows read as
// data.kind() says (samples, or summaries' bucket means).
//
// The data's window is where the power data is: from one sampling period before the first sample
// to one period after the last (summaries: from the first bucket's start to the last one's end),
// over every node and power metric, series that are no meter of their node (FindStraySeries)
// left out. The window and each phase are clipped to it (nothing is extrapolated past the data: a
// job still running, an archive asked for a wider window), and the report says so in `notes`; a
// phase with no data at all is refused (InvalidArgument). A node's own missing stretches at the
// edges are uncovered and not estimated. `catalogue_metrics`: per node FQDN, the metric ids its
// catalogue offers (used to explain a missing source); may be empty.
//
// Errors: InvalidArgument for a gap factor CheckGapFactor refuses, phases CheckPhases refuses, an
// empty window, a baseline that is no phase, a role naming a node not measured. Corruption, naming
// the node, the metric, the instant and the value, when a value of the power a node's energy is
// computed from is not finite or beyond kMaxPlausibleWatts, or an energy figure comes out infinite.
Result<EnergyReport> ComputeEnergy(
    const PowerCollector& data, UnixNanos start, UnixNanos end, const EnergyOptions& options,
    const std::map<std::string, std::vector<std::string>>& catalogue_metrics = {});

struct SourceCheck;  // source_check.h

// The report as JSON, as `kwatt energy --json` prints it and the Python package reads it
// (doc/energy.md): start, end (Paris time), phases, nodes (each with window and {phase: figures}),
// roles and role_phases, phase_totals, total; NaN figures are null. With `checks`, their
// SourceChecksJson too, as "source_checks".
std::string EnergyReportJson(const EnergyReport& report,
                             const std::vector<SourceCheck>* checks = nullptr);

// The same document given to `writer` (kwatt/core/document_writer.h) rather than as text: how the
// Python bindings build energy()'s dict with no JSON text in between. Its members, their order and
// their values are EnergyReportJson's.
void WriteEnergyReport(const EnergyReport& report, const std::vector<SourceCheck>* checks,
                       DocumentWriter* writer);

// The metrics an energy computation reads: the power metrics and those of a part of the node (or
// only `metric` when given), and the energy counters.
std::vector<std::string> EnergyInputMetrics(const std::string& metric = "");

// A PowerCollector for the nodes of a query known only once it is resolved (a job's, an
// archive's): give it to Fetch or FeedSource, then Compute().
class EnergySink : public RowSink {
 public:
  // `metric`: EnergyOptions::metric when one is given (its rows are kept too). What the rows are
  // (samples, or summaries' bucket means) is the resolved query's (RowsReport::summary).
  explicit EnergySink(std::string metric = "") : metric_(std::move(metric)) {}
  Status Begin(const RowsReport& resolved) override;
  Status Write(std::string_view site, const RowBatch& batch,
               const StringInterner& interner) override;
  // The energy over the resolved window; the resolved catalogues explain missing sources.
  Result<EnergyReport> Compute(const RowsReport& resolved, const EnergyOptions& options) const;
  // The rows kept (null before Begin).
  const PowerCollector* power() const { return power_.get(); }

 private:
  std::string metric_;
  std::unique_ptr<PowerCollector> power_;
};

}  // namespace kwatt::energy

#endif  // KWATT_ENERGY_ENERGY_H_
