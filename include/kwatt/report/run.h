// A run of an experiment read and computed: an archive directory (kwatt backup, a meter's
// recording) or a job "SITE:ID", its energy as `kwatt energy` computes it (the one workflow,
// kwatt/energy/workflow.h), its phases placed after its own start. `kwatt energy --run`, `kwatt
// report` and kwatt.report() read their runs here, so that they give the same figures.
//
// Thread safety: as the reading given (one call, the calling thread).
#ifndef KWATT_REPORT_RUN_H_
#define KWATT_REPORT_RUN_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kwatt/core/node_name.h"
#include "kwatt/core/row_sink.h"
#include "kwatt/core/status.h"
#include "kwatt/energy/energy.h"
#include "kwatt/energy/runs.h"
#include "kwatt/energy/source_check.h"
#include "kwatt/kwollect/client_options.h"

namespace kwatt::report {

// How every run is read: the same options for each.
struct RunReading {
  kwollect::ClientOptions client;       // how a job is read (an archive needs none)
  std::vector<NodeName> nodes;          // some of each run's nodes (empty: all of them)
  std::optional<UnixNanos> start, end;  // narrow each run's window
  bool summary = false;                 // a job's 5-minute aggregates
  // As users write them (kwatt/energy/phase_text.h): a phase NAME=+A..+B is placed after each
  // run's own start; NAME=START..END is the same instants for every run.
  std::vector<std::string> phases, roles;
  std::string metric;                   // every node's power metric (empty: each its best)
  std::string baseline_phase;           // energy::EnergyOptions::baseline_phase
  std::vector<std::string> accuracies;  // METRIC=P%+WW, a source's stated accuracy
  double clock_offset_s = energy::kDefaultClockOffsetSeconds;
  double gap_factor = energy::EnergyOptions().gap_factor;
  // `kwatt meter -o archive:` recordings on the runs' nodes, each read with the runs it meets
  // (rows::RowSource::with_archives, shared).
  std::vector<std::string> with_archives;
  // The progress of reading the run `given`, and what was read (its failures: PrintFailures);
  // either may be empty.
  std::function<ProgressCallback(const std::string& given)> progress;
  std::function<void(const std::string& given, const RowsReport& read)> read;
};

// The energy options of `how` (its metric, accuracies, clock offset and gap factor), its phases
// and roles parsed with a placeholder start: InvalidArgument naming what is wrong, before
// anything is read.
Result<energy::EnergyOptions> CheckRunReading(const RunReading& how);

// One run read and computed.
struct Run {
  std::string given;  // as the user wrote it: an archive directory or a job SITE:ID
  RowsReport rows;    // what was read: nodes, window, failures
  std::vector<std::string> with_archives;  // the recordings read with it (RunReading's)
  energy::EnergyReport energy;
  std::vector<energy::SourceCheck> checks;
  std::shared_ptr<const energy::EnergySink> sink;  // its rows (power() for curves, emissions)

  // Read whole, every node with power data.
  bool complete() const { return rows.complete() && energy.nodes_without_power.empty(); }
};

// "lyon:1234": a job as a run names it (a site's lower-case name, a colon, digits).
bool IsJob(std::string_view text);

// Reads `given` (an archive directory, else a job SITE:ID) as `how` says. InvalidArgument for
// anything else, and the workflow's errors (energy::EnergyOf); the caller names `given`.
Result<Run> ReadRun(const std::string& given, const RunReading& how);

// Each run's figures (energy::RunFiguresOf), for SummarizeRuns and CompareRuns.
std::vector<std::vector<energy::RunFigure>> FiguresOf(const std::vector<Run>& runs);

// After runs were read with `with_archives` shared among them: InvalidArgument naming a recording
// that no run read (none of its nodes is a run's during the run).
Status CheckEveryArchiveRead(const std::vector<std::string>& with_archives,
                             const std::vector<const Run*>& runs);

}  // namespace kwatt::report

#endif  // KWATT_REPORT_RUN_H_
