// `kwatt energy --run RUN ... [--versus RUN ...]`: runs of one experiment summarized, and two
// sets of runs compared (doc/energy.md, "Runs compared").
#ifndef KWATT_APPS_KWATT_ENERGY_RUNS_H_
#define KWATT_APPS_KWATT_ENERGY_RUNS_H_

#include <string>
#include <vector>

#include "apps/kwatt/commands.h"
#include "kwatt/energy/energy.h"
#include "kwatt/energy/runs.h"
#include "kwatt/energy/source_check.h"
#include "kwatt/report/run.h"

namespace kwatt::cli {

struct RunsArgs {
  std::vector<std::string> a, b;  // each an archive directory or a job SITE:ID
  double confidence = 0.95;
  bool json = false, csv = false, quiet = false;
};

// How `kwatt energy --run` and `kwatt report` read each run, from their query and analysis
// options (report::RunReading's client, nodes, window, phases, roles, recordings, progress and
// failures printed as `verb` GIVEN); the energy options are the command's. InvalidArgument naming
// the option that is wrong. The client's options (and the credentials file) are read only when
// some run of `runs` is a job.
Status FillRunReading(const AnalysisArgs& analysis, const std::vector<std::string>& runs,
                      const std::string& verb, bool quiet, report::RunReading* how);

// Each run's energy as `kwatt energy` computes it (the query's other options, --phase, with
// offsets after each run's start, and --role applying to every run), then the summary of set A,
// of set B and B against A. Exit status: 0; 1 when a run could not be read whole or a node has
// no power data; 2 for bad arguments.
int RunEnergyOfRuns(const RunsArgs& runs, const AnalysisArgs& analysis,
                    const report::RunReading& how);

}  // namespace kwatt::cli

#endif  // KWATT_APPS_KWATT_ENERGY_RUNS_H_
