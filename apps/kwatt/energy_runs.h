// `kwatt energy --run RUN ... [--versus RUN ...]`: runs of one experiment summarized, and two
// sets of runs compared (doc/energy.md, "Runs compared").
#ifndef KWATT_APPS_KWATT_ENERGY_RUNS_H_
#define KWATT_APPS_KWATT_ENERGY_RUNS_H_

#include <memory>
#include <string>
#include <vector>

#include "apps/kwatt/commands.h"
#include "kwatt/energy/energy.h"
#include "kwatt/energy/runs.h"
#include "kwatt/energy/source_check.h"

namespace kwatt::cli {

struct RunsArgs {
  std::vector<std::string> a, b;  // each an archive directory or a job SITE:ID
  double confidence = 0.95;
  bool json = false, csv = false, quiet = false;
};

// One run read and computed.
struct ExperimentRun {
  std::string given;  // as the user wrote it: an archive directory or a job SITE:ID
  RowsReport rows;
  energy::EnergyReport energy;
  std::vector<energy::SourceCheck> checks;
  std::shared_ptr<const energy::EnergySink> sink;  // its power rows
};

// A run's energy as `kwatt energy` computes it: `given` an archive directory or a job SITE:ID,
// the query's other options, --phase (offsets after the run's start) and --role; its sources
// checked against each other.
Result<ExperimentRun> ReadRun(const std::string& given, const AnalysisArgs& analysis,
                              energy::EnergyOptions options, bool quiet);

// `kwatt energy --run ... --csv`: a set's summary (`set` names it), with its header; the
// comparison, with its header.
std::string SummariesCsv(const char* set, const std::vector<energy::RunsSummary>& summaries);
std::string ComparisonsCsv(const std::vector<energy::RunsComparison>& comparisons);

// Each run's figures (RunFiguresOf).
std::vector<std::vector<energy::RunFigure>> FiguresOfRuns(const std::vector<ExperimentRun>& runs);

// Each run's energy as `kwatt energy` computes it (the query's other options, --phase, with
// offsets after each run's start, and --role applying to every run), then the summary of set A,
// of set B and B against A. Exit status: 0; 1 when a run could not be read whole or a node has
// no power data; 2 for bad arguments.
int RunEnergyOfRuns(const RunsArgs& runs, const AnalysisArgs& analysis,
                    const energy::EnergyOptions& options);

}  // namespace kwatt::cli

#endif  // KWATT_APPS_KWATT_ENERGY_RUNS_H_
