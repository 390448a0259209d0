#include "kwatt/meter/pipeline/replay.h"

#include <memory>
#include <optional>

#include "kwatt/meter/formulas/formula.h"
#include "src/meter/pipeline/totals.h"

namespace kwatt::meter {

Status RecordActivity(ActivityReader& reader, ActivityRecordWriter& writer, Clock& clock,
                      std::chrono::nanoseconds period, std::stop_token stop) {
  const int64_t step = std::max<int64_t>(period.count(), 1);
  const int64_t origin = clock.MonotonicNanos();
  int64_t last = origin;
  auto take = [&]() -> Status {
    last = clock.MonotonicNanos();
    KWATT_ASSIGN_OR_RETURN(ActivitySnapshot snapshot, reader.Read());
    return writer.Write(snapshot);
  };
  Status status = take();
  int64_t tick = 1;
  while (status.ok()) {
    if (!clock.SleepUntil(origin + tick * step, stop)) break;
    // Ticks a slow read outlived are skipped: the next deadline is the first one still ahead.
    tick = (clock.MonotonicNanos() - origin) / step + 1;
    status = take();
  }
  // The end of the experiment is a snapshot too (unless the last tick was that instant).
  if (status.ok() && clock.MonotonicNanos() > last) status = take();
  Status finished = writer.Finish();
  return status.ok() ? finished : status;
}

Result<ReplayResult> ReplayActivity(ActivityRecordReader& record, DelayedEnergySource& source,
                                    const ReplayOptions& options, ReportSink* sink) {
  ReplayResult result;
  MeterHeader& header = result.header;
  header.sensor = record.header().host;
  header.domains = source.domains();
  header.start = record.header().start;
  header.notes = source.Notes();
  FormulaOptions formula_options;
  formula_options.idle_policy = options.idle_policy;
  formula_options.idle_watts = options.idle_watts;
  KWATT_ASSIGN_OR_RETURN(std::unique_ptr<Formula> formula,
                         Formula::Create(formula_options, header.domains, /*learn_idle=*/true));
  formula->Describe(&header);
  TotalsKeeper totals;
  totals.Reset(header.domains);

  KWATT_ASSIGN_OR_RETURN(std::optional<ActivitySnapshot> first, record.Next());
  if (!first) {
    return Status::InvalidArgument("the activity record has no snapshot: nothing to share");
  }
  if (sink) KWATT_RETURN_IF_ERROR(sink->Begin(header).WithContext("output"));
  auto previous = std::make_unique<ActivitySnapshot>(std::move(*first));
  IntervalActivity activity;
  const size_t n = header.domains.size();
  while (true) {
    KWATT_ASSIGN_OR_RETURN(std::optional<ActivitySnapshot> next, record.Next());
    if (!next) break;
    IntervalReport report;
    report.sequence = result.intervals;
    report.start = previous->wall;
    report.end = next->wall;
    formula->BeginInterval(previous.get(), &*next, &report, &activity);
    report.domains.resize(n);
    Result<std::optional<std::vector<IntervalEnergy>>> known =
        source.EnergyBetween(report.start, report.end);
    if (!known.ok()) return known.status();
    // Not covered (nullopt): a gap in every domain.
    std::vector<IntervalEnergy> energy(n, IntervalEnergy{0, kUnreadable});
    if (known->has_value() && (*known)->size() == n) energy = std::move(**known);
    bool gap = false;
    for (size_t d = 0; d < n; ++d) {
      gap = gap || (energy[d].flags & kUnreadable);
      formula->FillDomain(activity, d, energy[d].microjoules, energy[d].flags, &report);
    }
    if (gap) ++result.gap_intervals;
    totals.Add(report);
    if (sink) KWATT_RETURN_IF_ERROR(sink->Write(report).WithContext("output"));
    ++result.intervals;
    *previous = std::move(*next);
  }
  if (result.intervals == 0) {
    return Status::InvalidArgument(
        "the activity record has a single snapshot: no interval to share (record for longer "
        "than one period)");
  }
  if (sink) KWATT_RETURN_IF_ERROR(sink->Finish().WithContext("output"));
  result.totals = totals.totals();
  result.record_complete = record.complete();
  result.record_truncated = record.truncated();
  return result;
}

}  // namespace kwatt::meter
