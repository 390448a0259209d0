// The report's page and tables as text (doc/report.md): the energy table as CSV, JSON and LaTeX,
// the comparison as LaTeX, and the self-contained HTML page. Internal to the report part.
#ifndef KWATT_SRC_REPORT_PAGE_H_
#define KWATT_SRC_REPORT_PAGE_H_

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kwatt/energy/carbon.h"
#include "kwatt/energy/runs.h"
#include "kwatt/report/run.h"

namespace kwatt::report {

// One row of the energy table: a run's total over its window or a phase.
struct EnergyRow {
  std::string set, run, phase;
  double joules = NAN, half_width = NAN, mean_watts = NAN, coverage = NAN, seconds = NAN;
  double grams = NAN, grams_half_width = NAN;  // the window's or the phase's emissions, if asked
};

// A run's emissions: over its window, and over each of its phases (in phase_names' order).
struct RunEmissions {
  energy::Emissions window;
  std::vector<energy::Emissions> phases;
};

// A number in report.json and the tables' JSON: null when not finite.
inline nlohmann::ordered_json JsonNumber(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

// Each run's rows: its window's total, then each phase's.
std::vector<EnergyRow> EnergyRows(const std::vector<Run>& runs, const char* set,
                                  const std::vector<RunEmissions>& emissions);
std::string EnergyCsv(const std::vector<EnergyRow>& rows);
std::string EnergyJson(const std::vector<EnergyRow>& rows);
// A tabular fragment (booktabs, siunitx): \input it inside a table of the paper.
std::string EnergyLatex(const std::vector<EnergyRow>& rows, bool emissions);
std::string ComparisonLatex(const std::vector<energy::RunsComparison>& comparisons,
                            double confidence);
// The HTML page, everything inline (style, the figures of `dir`/figures as SVG), so that it is one
// file to keep. `no_figures`: why there are none (empty: they were drawn).
std::string Html(const nlohmann::ordered_json& report, const std::string& dir,
                 const std::vector<EnergyRow>& rows,
                 const std::vector<energy::RunsComparison>& comparisons,
                 const std::string& no_figures);

}  // namespace kwatt::report

#endif  // KWATT_SRC_REPORT_PAGE_H_
