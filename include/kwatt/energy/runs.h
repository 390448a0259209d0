// Runs of one experiment compared (doc/energy.md, "Runs compared"): the energy of each run's
// nodes, roles, phases and total, summarized over the runs (mean, spread, a confidence interval of
// the mean), and two sets of runs compared (B against A: the difference of the means, its interval
// and a Welch test). The runs are each a report of ComputeEnergy's; a figure is matched across runs
// by (scope, name, phase): a node by its name (a run on other nodes has none of it), a role by its
// name, a phase by its name, the total as "total".
//
// Pure functions; thread-safe.
#ifndef KWATT_ENERGY_RUNS_H_
#define KWATT_ENERGY_RUNS_H_

#include <string>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/energy/energy.h"

namespace kwatt::energy {

// One energy figure of a run.
struct RunFigure {
  std::string scope;  // "node", "role", "total"
  std::string name;   // the node's FQDN, the role's name, "total"
  std::string phase;  // "window", or a phase's name
  double joules = 0;
  double half_width = 0;  // its own 95 % interval's (uncertainty.h)
  double seconds = 0;
};

// The figures of a report that have power data: each node's, role's and the total's, over the
// window and each phase (the order kwatt energy --csv gives).
std::vector<RunFigure> RunFiguresOf(const EnergyReport& report);

// OK when `confidence` is in [0.5, 0.999]; else InvalidArgument naming it as `name`.
Status CheckConfidence(double confidence, std::string_view name = "confidence");

// One figure over a set of runs.
struct RunsSummary {
  std::string scope, name, phase;
  int runs = 0;       // the runs that have it
  double mean = 0;    // joules
  double sd = NAN;    // sample standard deviation (n - 1); NaN for one run
  double low = NAN;   // the mean's confidence interval (Student's t, n - 1 degrees of
  double high = NAN;  // freedom); NaN for one run
  double mean_seconds = 0;
  double mean_half_width = 0;  // the mean of the runs' own 95 % half-widths (the measurement's)
};

// Each figure (scope, name, phase) over `runs`, in the order of first appearance.
std::vector<RunsSummary> SummarizeRuns(const std::vector<std::vector<RunFigure>>& runs,
                                       double confidence = 0.95);

// One figure, set B against set A.
struct RunsComparison {
  std::string scope, name, phase;
  RunsSummary a, b;
  double difference = NAN;       // b.mean - a.mean, joules
  double relative = NAN;         // that over a.mean
  double low = NAN, high = NAN;  // its confidence interval (Welch: Student's t with the
  double t = NAN;                // Welch-Satterthwaite degrees of freedom)
  double dof = NAN;
  double p_value = NAN;  // two-sided, of "no difference"
  // The interval excludes 0 (p < 1 - confidence): B's energy differs from A's at the confidence
  // stated. False where it does not, or where either set has fewer than two runs (no spread).
  bool significant = false;
  std::string why;  // one sentence for the reader
};

// Each figure that both sets have, B against A (Welch's unequal-variances t test).
std::vector<RunsComparison> CompareRuns(const std::vector<std::vector<RunFigure>>& a,
                                        const std::vector<std::vector<RunFigure>>& b,
                                        double confidence = 0.95);

// JSON arrays of the summaries and comparisons (kwatt energy --run ... --json; doc/energy.md):
// each field as its struct names it, NaN null.
std::string RunsSummaryJson(const std::vector<RunsSummary>& summaries);
std::string RunsComparisonJson(const std::vector<RunsComparison>& comparisons);
// The same as CSV, with their header (`kwatt energy --run ... --csv`, the report's tables):
// a set's summaries, `set` naming it in the first column; the comparison.
std::string RunsSummaryCsv(const char* set, const std::vector<RunsSummary>& summaries);
std::string RunsComparisonCsv(const std::vector<RunsComparison>& comparisons);

}  // namespace kwatt::energy

#endif  // KWATT_ENERGY_RUNS_H_
