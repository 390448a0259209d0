// A report a paper can use (doc/report.md), as one library call: from runs (archives or jobs) and
// sets of runs, a new directory holding a self-contained HTML page, the tables as CSV, JSON and
// LaTeX (booktabs, siunitx), report.json (everything the page, tables and figures show) and a
// provenance record. `kwatt report` and kwatt.report() both make this call.
//
// The figures (PNG, PDF and SVG, inlined in the page) are drawn by a DrawFigures given by the
// caller: the Python package's matplotlib, in the same process (kwatt.report(), `python -m kwatt
// report`). The CLI gives none: its page says where the figures come from. Nothing here starts a
// process.
//
// Thread safety: one call, the calling thread (and the callbacks it was given).
#ifndef KWATT_REPORT_REPORT_H_
#define KWATT_REPORT_REPORT_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/report/run.h"

namespace kwatt::report {

// What `kwatt report` is asked, each field as its option (doc/report.md).
struct ReportRequest {
  std::vector<std::string> runs;    // set A: archive directories or jobs SITE:ID (at least one)
  std::vector<std::string> versus;  // set B, compared with A
  RunReading reading;               // how every run is read
  std::string api;                  // the API as given (the provenance names it, no credentials)
  std::string config;               // the credentials file given, if any (provenance)
  double confidence = 0.95;         // of the sets' intervals
  // Emissions: grams of CO2e per kWh, or a file of them (RTE's eCO2mix export, CSV
  // time,grams_per_kwh), named by carbon_source; the data centre's PUE with pue_source.
  std::string carbon_intensity, carbon_source;
  double pue = 1;
  std::string pue_source;
  std::string title = "Energy report";
};

// Draws the figures of the report in `dir` (its report.json) into `dir`/figures: power, energy
// and runs, each .png, .pdf and .svg (the page inlines the SVG). An error leaves the report
// without figures, and says why; Incomplete (interrupted) stops the report: nothing is written.
using DrawFigures = std::function<Status(const std::string& dir)>;

struct ReportWritten {
  std::string dir;        // the directory written ("paper/" is "paper")
  size_t runs = 0;        // of both sets
  bool complete = true;   // every run read whole, every node with power data
  bool figures = false;   // drawn
  Status figures_status;  // why not, when `draw` was given and failed
  // Each run read in part (as given): the pieces that could not be read.
  std::vector<std::pair<std::string, std::vector<MissingPiece>>> failures;
};

// Checks every argument before anything is read: InvalidArgument naming the one that is wrong
// (an `output` that exists and is not an empty directory among them).
Status CheckReportRequest(const ReportRequest& request, const std::string& output);

// Reads the runs, computes every figure, and writes the report into `output`, a new directory:
// written beside it and renamed once whole, so that an interrupted report never looks finished.
// `draw` may be empty (no figures). CheckReportRequest's errors, then a run's (its given text
// the context), then IOError for a file that cannot be written (nothing is left then).
Result<ReportWritten> WriteReport(const ReportRequest& request, const std::string& output,
                                  const DrawFigures& draw);

// The command that makes this report again, without credentials: `kwatt report RUN ... -o
// OUTPUT ...` (the provenance's last line to reproduce it).
std::vector<std::string> ReportCommand(const ReportRequest& request, const std::string& output);

}  // namespace kwatt::report

#endif  // KWATT_REPORT_REPORT_H_
