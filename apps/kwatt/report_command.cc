// `kwatt report`: the report a paper can use (doc/report.md), made by the report part
// (kwatt/report/report.h) from the command's options. The CLI draws no figures: the Python
// package draws them in its own process (`python -m kwatt report`, kwatt.report()); nothing here
// starts a process.
#include <cstdio>

#include "apps/kwatt/commands.h"
#include "apps/kwatt/energy_runs.h"
#include "kwatt/report/report.h"

namespace kwatt::cli {
namespace {

struct ReportArgs {
  AnalysisArgs analysis;  // the query's options, --phase, --role, --with-archive
  std::vector<std::string> a, b, accuracies;
  std::string output, title = "Energy report", metric, carbon, carbon_source, pue_source;
  double pue = 1, confidence = 0.95, clock_offset = energy::kDefaultClockOffsetSeconds;
  double gap_factor = energy::EnergyOptions().gap_factor;
  bool quiet = false;
};

int RunReport(const ReportArgs& args) {
  auto fail = [](int code, const std::string& message) {
    std::fprintf(stderr, "kwatt report: %s\n", message.c_str());
    return code;
  };
  report::ReportRequest request;
  request.runs = args.a;
  request.versus = args.b;
  request.api = args.analysis.query.api;
  request.config = args.analysis.query.config;
  request.confidence = args.confidence;
  request.carbon_intensity = args.carbon;
  request.carbon_source = args.carbon_source;
  request.pue = args.pue;
  request.pue_source = args.pue_source;
  request.title = args.title;
  report::RunReading& how = request.reading;
  how.metric = args.metric;
  how.accuracies = args.accuracies;
  how.clock_offset_s = args.clock_offset;
  how.gap_factor = args.gap_factor;
  std::vector<std::string> runs = args.a;
  runs.insert(runs.end(), args.b.begin(), args.b.end());
  Status filled = FillRunReading(args.analysis, runs, "kwatt report", args.quiet, &how);
  if (!filled.ok()) return fail(kExitUsage, filled.message());
  Result<report::ReportWritten> written =
      report::WriteReport(request, args.output, /*draw=*/report::DrawFigures());
  if (!written.ok()) return fail(ExitCodeOf(written.status()), written.status().message());
  if (!args.quiet) {
    std::fprintf(stderr,
                 "kwatt report: %s/report.html (%zu run%s); no figures from the CLI: python -m "
                 "kwatt report (the same arguments) or kwatt.report() draws them\n",
                 written->dir.c_str(), written->runs, written->runs == 1 ? "" : "s");
  }
  return written->complete ? kExitOk : kExitFailure;
}

}  // namespace

Runner RegisterReport(CLI::App* app) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* command = app->add_subcommand(
      "report",
      "A directory a paper can use: an HTML page, tables (CSV, JSON, LaTeX) and a provenance "
      "record, from archives or jobs; its figures (PNG, PDF, SVG) are drawn by the Python "
      "package: python -m kwatt report, or the kwatt command installed with it (doc/report.md)");
  command->add_option("runs", args->a, "Runs: archive directories or jobs SITE:ID (set A)")
      ->required();
  command->add_option("--versus", args->b, "Runs of a second set B, compared with A");
  command->add_option("-o,--output", args->output, "The directory to write (new)")->required();
  AddQueryOptions(command, &args->analysis.query);
  command->add_option("--phase", args->analysis.phases,
                      "A named interval NAME=+SECONDS..+SECONDS after each run's start, or "
                      "NAME=START..END (repeatable)");
  command->add_option("--role", args->analysis.roles,
                      "A named set of nodes NAME=NODE,NODE (repeatable)");
  command->add_option("--metric", args->metric, "Use this power metric for every node");
  command->add_option("--accuracy", args->accuracies,
                      "A power source's stated accuracy METRIC=P%+WW (repeatable)");
  command
      ->add_option("--clock-offset", args->clock_offset,
                   "The most the marks' clock may be off the meters', in seconds")
      ->capture_default_str();
  command->add_option("--gap-factor", args->gap_factor, "A gap: no sample for this many periods")
      ->capture_default_str();
  command->add_option("--confidence", args->confidence, "The runs' intervals' confidence")
      ->capture_default_str();
  command->add_option("--carbon-intensity", args->carbon,
                      "Grams of CO2e per kWh, or a file of them over time (RTE's eCO2mix "
                      "export, or CSV time,grams_per_kwh)");
  command->add_option("--carbon-source", args->carbon_source,
                      "Where the carbon intensity comes from (shown with every emission)");
  command->add_option("--pue", args->pue, "The data centre's PUE (with --carbon-intensity)")
      ->capture_default_str();
  command->add_option("--pue-source", args->pue_source, "Where the PUE comes from");
  AddWithArchiveOption(command, &args->analysis.with_archives, /*several_runs=*/true);
  command->add_option("--title", args->title, "The report's title")->capture_default_str();
  command->add_flag("-q,--quiet", args->quiet, "No progress line");
  return [command, args]() -> int {
    if (!command->parsed()) return -1;
    return RunReport(*args);
  };
}

}  // namespace kwatt::cli
