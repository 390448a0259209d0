// How kwatt turns power samples into energy, and which power metric of a node it uses: the one
// integration and the one choice behind `kwatt energy` (doc/energy.md), exposed so that every
// other part that needs them (the power meter's Kwollect source, doc/meter/README.md) uses the same
// code.
//
// Pure functions over PowerCollector's series; thread-safe as long as the series are not changed
// meanwhile.
#ifndef KWATT_ENERGY_INTEGRATION_H_
#define KWATT_ENERGY_INTEGRATION_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kwatt/core/time.h"
#include "kwatt/energy/energy.h"

namespace kwatt::energy {

// A series' median time between consecutive samples, at least 1 ns; one second for a series of
// fewer than two samples.
int64_t MedianInterval(const PowerCollector::Series& series);

// The period a series is read with: its MedianInterval, or for summary rows their bucket
// (kSummaryBucketNanos).
int64_t ReadingPeriod(const PowerCollector::Series& series, RowKind kind);

// Integrates one series (time ascending) over [a, b]: trapezoids on the real timestamps, the line
// between the samples around `a` and `b` interpolated at them, so that integrals over [a, b] and
// [b, c] add up to the one over [a, c]. A stretch between two samples further apart than
// `gap_factor` x the series' local period is a gap: its (linearly interpolated) energy goes to
// gap_joules, not joules, and its time is not covered. The local period is the series' own where
// the stretch is (the larger of the median intervals of the few samples before and after it), so
// that a wattmeter read every second outside a monitoring job and every 10 ms inside one is
// complete on both sides; `period` stands for it in a series of fewer than two samples. Before
// the first sample and after the last, the first (last) value is held for one local period;
// beyond that the time is uncovered and counted as a gap with no energy (nothing is
// extrapolated).
// peak_watts: the line's highest value over [a, b], its values at a and b included (a short
// interval between two samples has no sample of its own), so never below the mean.
//
// Summary rows (`kind` kBucketMeans, `period` their bucket): each row is the mean power over
// [its timestamp, the next row's or its timestamp + period), its energy mean x the part of that
// inside [a, b], exactly over whole buckets; a missing bucket between two rows is a gap,
// estimated on the line from the mean before it to the mean after it; nothing before the first
// row or after the last bucket's end. peak_watts is then the highest bucket mean: the
// instantaneous peak is not known.
Figures IntegrateSeries(const PowerCollector::Series& series, UnixNanos a, UnixNanos b,
                        int64_t period, double gap_factor, RowKind kind = RowKind::kSamples);

// The terms of the 95 % interval of IntegrateSeries' energy over [a, b] that the series itself
// tells (uncertainty.h): the readings' resolution (the smallest step between two of them), what
// the sampling may miss (how far each sample lies off the line of its neighbours, weighted by how
// much of [a, b] the sample stands for), the gaps' and held edges' estimates, and the power at the
// edges (for the clock's term). Not the accuracy: that is the meter's, not the data's
// (accuracy_bound is 0). IntegrateNodeMetric's figures carry these.
ErrorTerms SeriesErrorTerms(const PowerCollector::Series& series, UnixNanos a, UnixNanos b,
                            int64_t period, double gap_factor, RowKind kind = RowKind::kSamples);

// A series and the period it is read with (ReadingPeriod).
struct SeriesPeriod {
  const PowerCollector::Series* series = nullptr;
  int64_t period = 0;
};

// The highest value of the summed power of `series` over [a, b]: each series' power as
// IntegrateSeries reads it (linear between samples, the line across a gap, its first and last
// values held for one period, nothing beyond: a series adds nothing where its power is unknown),
// summed at every instant. The peak of the sum, not the sum of the peaks (which were reached at
// different times). NaN when no series has power in [a, b].
double PeakOfSum(const std::vector<SeriesPeriod>& series, UnixNanos a, UnixNanos b,
                 double gap_factor, RowKind kind = RowKind::kSamples);

// The figures of one node's metric over [a, b]: each series (by labels text: a 2-PSU node's
// outlets) integrated with its own ReadingPeriod, and summed; the node is covered where
// every series is, and its peak is the peak of their sum (PeakOfSum); `terms` are the series'
// SeriesErrorTerms added (each series its own meter). `period_out`, when given, receives the
// longest of the series' periods.
Figures IntegrateNodeMetric(const std::map<std::string, PowerCollector::Series>& series,
                            UnixNanos a, UnixNanos b, double gap_factor,
                            int64_t* period_out = nullptr, RowKind kind = RowKind::kSamples);

// A series of a node's power metric that is no meter of the node: a row pushed beside the real
// series, a short extra series.
struct StraySeries {
  std::string labels;  // the series' labels text
  std::string why;     // "1 sample in the window, covering 0.06% of it"
};

// Which of the series of one node's power metric (by labels) are not its meter over [a, b], when
// there are several: series that are summed (a 2-PSU node's outlets) measure the node over the
// same time at the same rate, so beside the others
// - a series with a handful of samples (fewer than 10) in [a, b] widened by ten periods of the
//   slowest series on each side, while another has at least ten times as many there, is no meter
//   (pushed rows, however spread out; a PSU with no sample inside a window of one period is one);
// - of the rest, a series covering less than a quarter of what the best-covering one covers is no
//   meter (a short extra series).
// A PSU with an outage (covering, say, half of the window) is kept. Empty when all are kept.
std::vector<StraySeries> FindStraySeries(
    const std::map<std::string, PowerCollector::Series>& series, UnixNanos a, UnixNanos b,
    double gap_factor, RowKind kind = RowKind::kSamples);

// A node's power metric as `kwatt energy` chooses it.
struct PowerChoice {
  std::string metric;  // empty: none could be used
  // Why this one ("external wattmeter; ..."), or why none ("no power metric: ..."); names the
  // series set aside.
  std::string reason;
  // The chosen metric's series that are the node's meter, null when none: points into the
  // PowerCollector given, or into `kept` when some series were set aside.
  const std::map<std::string, PowerCollector::Series>* series = nullptr;
  // The chosen metric's series that are no meter of the node (FindStraySeries over the window):
  // left out of `series` and of every figure.
  std::vector<StraySeries> set_aside;
  // The series kept, when some were set aside (a copy; `series` points to it).
  std::shared_ptr<const std::map<std::string, PowerCollector::Series>> kept;
  Figures window;      // its figures over the window the choice was made on
  int64_t period = 0;  // its longest series period (nanoseconds)
};

// Chooses `node`'s power metric over [start, end]: the first of `order` (PowerMetrics(), or the
// one metric asked) whose data covers at least 95 % of the window, else the one covering most;
// each metric's stray series (FindStraySeries) set aside first. Rows are read as data.kind() says.
// `catalogue_metrics`, when given, are the metric ids the node's catalogue offers: a metric listed
// there that has no row is named in the reason.
PowerChoice ChoosePowerMetric(const PowerCollector& data, const std::string& node, UnixNanos start,
                              UnixNanos end, const std::vector<std::string>& order,
                              double gap_factor,
                              const std::vector<std::string>* catalogue_metrics = nullptr);

}  // namespace kwatt::energy

#endif  // KWATT_ENERGY_INTEGRATION_H_
