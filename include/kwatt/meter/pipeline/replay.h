// After the fact: an experiment's activity, recorded on the node (`kwatt meter record`), and its
// energy, measured elsewhere and known later (the node's wattmeter in a kwatt archive), put
// together by the same cputime formula the live meter uses (doc/meter/running.md, "After the
// fact").
//
// Also the loop that writes such a record.
//
// Thread safety: each call on its own objects; RecordActivity runs until stopped.
#ifndef KWATT_METER_PIPELINE_REPLAY_H_
#define KWATT_METER_PIPELINE_REPLAY_H_

#include <chrono>
#include <map>
#include <stop_token>
#include <string>

#include "kwatt/core/status.h"
#include "kwatt/meter/activity/activity.h"
#include "kwatt/meter/activity/activity_record.h"
#include "kwatt/meter/formulas/attribution.h"
#include "kwatt/meter/formulas/report.h"
#include "kwatt/meter/pipeline/meter.h"
#include "kwatt/meter/sources/source.h"

namespace kwatt::meter {

// Reads `reader` every `period` on `clock` (absolute deadlines; a read that outlived a period
// skips the ticks it covered) and writes each snapshot to `writer`, until `stop`; then takes a
// last snapshot and finishes the record. Returns the first read or write error (the record is
// then finished as far as it got: readable up to its last snapshot); writer.snapshots() counts
// what was written.
Status RecordActivity(ActivityReader& reader, ActivityRecordWriter& writer, Clock& clock,
                      std::chrono::nanoseconds period, std::stop_token stop);

struct ReplayOptions {
  IdlePolicy idle_policy = IdlePolicy::kProportional;
  // Idle power by domain name or kind, as MeterOptions::idle_watts; absent: learned.
  std::map<std::string, double> idle_watts;
};

// What a replay gives: the totals, and how the record ended.
struct ReplayResult {
  MeterTotals totals;
  MeterHeader header;
  int64_t intervals = 0;
  int64_t gap_intervals = 0;  // intervals the source had no data for (kUnreadable)
  bool record_complete = false;
  bool record_truncated = false;
};

// Shares what `source` measured over each interval between two consecutive snapshots of
// `record` among the record's targets. Every report goes to `sink` when given (Begin, Write in
// order, Finish). An interval the source has no data for (its EnergyBetween gives nullopt: the
// archive does not cover it) is a gap (kUnreadable, nothing attributed). Errors: the record's
// (Corruption naming its line), the source's, the sink's; InvalidArgument when the record has
// fewer than two snapshots.
Result<ReplayResult> ReplayActivity(ActivityRecordReader& record, DelayedEnergySource& source,
                                    const ReplayOptions& options, ReportSink* sink = nullptr);

}  // namespace kwatt::meter

#endif  // KWATT_METER_PIPELINE_REPLAY_H_
