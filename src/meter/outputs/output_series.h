// The series the meter's outputs write (Kwollect, the textfile, the archive, Prometheus,
// InfluxDB), and their names: decided here once (doc/meter/outputs.md, "Metric names"). Internal to
// the meter part.
//
// Each interval, each domain has the series
//   measured                   what the domain measured;
//   idle, unattributed         the report's parts of it;
//   one per exposed target     the targets with the most energy lately (max_targets of them);
//   other                      the targets not exposed in this interval, summed;
// and measured = idle + unattributed + the exposed targets + other, exactly, in every interval
// and in the counters. A target's counter grows only while it is exposed; while it is not, its
// energy goes to "other"'s: no counter ever goes down as targets move in and out of the top N.
// A target's counter is kept while the target lives, through intervals in which it was idle (and
// so absent from the report), and forgotten once a report says it ended (ended_targets); a
// cgroup's is kept for the run, so that a cgroup made again under the same path goes on counting.
//
// Thread safety: OutputSeries is used by one thread at a time.
#ifndef KWATT_SRC_METER_OUTPUTS_OUTPUT_SERIES_H_
#define KWATT_SRC_METER_OUTPUTS_OUTPUT_SERIES_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/meter/formulas/report.h"
#include "kwatt/meter/outputs/outputs.h"

namespace kwatt::meter::internal {

// Kwollect's metric ids (the textfile's _metric_id, the archive's rows), Kwollect's way:
// `_watt` gauges, `_total` counters.
inline constexpr const char* kKwollectDomainPower = "kwatt_meter_domain_power_watt";
inline constexpr const char* kKwollectPower = "kwatt_meter_power_watt";
// Prometheus's, its way (base units, plural): only the gauges differ.
inline constexpr const char* kPrometheusDomainPower = "kwatt_meter_domain_power_watts";
inline constexpr const char* kPrometheusPower = "kwatt_meter_power_watts";
// Counters, alike in both.
inline constexpr const char* kDomainEnergy = "kwatt_meter_domain_energy_joules_total";
inline constexpr const char* kEnergy = "kwatt_meter_energy_joules_total";
// The meter's health (MeterHealth), alike in both.
inline constexpr const char* kTicks = "kwatt_meter_ticks_total";
inline constexpr const char* kLateTicks = "kwatt_meter_late_ticks_total";
inline constexpr const char* kMissedTicks = "kwatt_meter_missed_ticks_total";
inline constexpr const char* kMergedSamples = "kwatt_meter_merged_samples_total";
inline constexpr const char* kMaxLag = "kwatt_meter_max_lag_seconds";
inline constexpr const char* kReports = "kwatt_meter_reports_total";
inline constexpr const char* kDroppedReports = "kwatt_meter_dropped_reports_total";  // {output}
inline constexpr const char* kWraps = "kwatt_meter_source_wraps_total";
inline constexpr const char* kResets = "kwatt_meter_source_resets_total";

enum class SeriesKind { kMeasured, kIdle, kUnattributed, kTarget, kOther };

// One series in one interval.
struct SeriesPoint {
  int domain = 0;  // index in MeterHeader::domains
  SeriesKind kind = SeriesKind::kMeasured;
  int target = -1;                // kTarget: index in IntervalReport::targets
  int64_t microjoules = 0;        // in the interval
  int64_t total_microjoules = 0;  // its counter, after the interval
};

using SeriesLabels = std::vector<std::pair<std::string, std::string>>;  // (key, value), in order

// The labels of a series: source, domain, kind (the domain's kind for measured; "idle",
// "unattributed", "other", or the target's kind: "process", "tree", "cgroup"), and for a target
// target (its key) and name.
SeriesLabels LabelsOf(const SeriesPoint& point, const MeterHeader& header,
                      const IntervalReport& report);

// A domain's interval is a gap (reset, unreadable): its power is unknown, and not written.
bool IsGap(const DomainEnergy& domain);

// Seconds of the interval (> 0 for a valid report).
double IntervalSeconds(const IntervalReport& report);

// One figure of the meter's health, as Prometheus and Kwollect both name it.
struct HealthFigure {
  const char* metric;
  const char* type;  // "counter" or "gauge"
  const char* help;
  std::string output;  // kDroppedReports: the output's name (its label), else ""
  double value = 0;
};
std::vector<HealthFigure> HealthFigures(const MeterHealth& health);

// A row of Kwollect's (the push, the textfile, the archive): its metric id, labels and value; its
// device is the node and its time the interval's end.
struct MeterRow {
  const char* metric;
  SeriesLabels labels;
  double value = 0;
};
// The rows of one interval: per series its power (kKwollectDomainPower, kKwollectPower; none in a
// gap) and its counter (kDomainEnergy, kEnergy, in joules), then the health figures.
void KwollectRows(const MeterHeader& header, const IntervalReport& report,
                  const std::vector<SeriesPoint>& points, std::vector<MeterRow>* rows);

// Labels as a Kwollect row's labels object (JsonbObjectText):
// {"kind":"idle","domain":"dram-0",...}.
std::string LabelsJson(const SeriesLabels& labels);

class OutputSeries {
 public:
  // `max_targets` 0: every target is exposed.
  OutputSeries(int max_targets, double half_life_seconds);

  // Before Begin ("": nothing). Corruption naming what is wrong; nothing restored then.
  Status Restore(std::string_view state);
  void Begin(const MeterHeader& header);
  // The series of `report` into *points (cleared first): per domain, in the header's order:
  // measured, idle, unattributed, the exposed targets (in the report's order), other (once a
  // target was not exposed). Counters are updated. REQUIRES: Begin, and report.domains has one
  // entry per domain.
  void Add(const IntervalReport& report, std::vector<SeriesPoint>* points);
  // The counters as text (doc/meter/outputs.md, "State").
  std::string Save() const;

  const MeterHeader& header() const { return header_; }

 private:
  struct Counters {
    int64_t measured = 0, idle = 0, unattributed = 0, other = 0;
    std::map<std::string, int64_t, std::less<>> targets;  // by key
  };
  const int max_targets_;
  const double half_life_seconds_;
  MeterHeader header_;
  std::vector<Counters> counters_;                         // per domain
  std::map<std::string, Counters, std::less<>> restored_;  // by "source\ndomain", until Begin
  std::map<std::string, double, std::less<>> scores_;      // by target key: decayed microjoules
  int64_t last_sequence_ = -1;
};

}  // namespace kwatt::meter::internal

#endif  // KWATT_SRC_METER_OUTPUTS_OUTPUT_SERIES_H_
