#include "kwatt/report/report.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <tuple>

#include "kwatt/core/text.h"
#include "kwatt/core/time.h"
#include "kwatt/core/version.h"
#include "kwatt/energy/carbon.h"
#include "kwatt/energy/integration.h"
#include "kwatt/energy/phase_text.h"
#include "kwatt/kwollect/client_options.h"
#include "src/report/page.h"

namespace kwatt::report {
namespace {

using nlohmann::ordered_json;
namespace fs = std::filesystem;

// At most this many points a node's power curve in the report (each a bucket's mean).
constexpr size_t kPlotPoints = 600;

// A node's power over the run as its chosen metric's series read it (their sum), in at most
// kPlotPoints buckets: seconds after the run's start, and the mean watts of each bucket.
ordered_json PowerCurves(const Run& run) {
  ordered_json out = ordered_json::object();
  const energy::PowerCollector* power = run.sink->power();
  const energy::EnergyReport& r = run.energy;
  if (!power || r.end <= r.start) return out;
  const double seconds = double(r.end - r.start) / 1e9;
  const size_t buckets = kPlotPoints;
  for (const energy::NodeEnergy& node : r.nodes) {
    if (node.metric.empty()) continue;
    auto by_node = power->store().find(node.node);
    if (by_node == power->store().end()) continue;
    auto by_metric = by_node->second.find(node.metric);
    if (by_metric == by_node->second.end()) continue;
    std::vector<double> sum(buckets, 0);
    std::vector<int> series_seen(buckets, 0);
    for (const auto& [labels, series] : by_metric->second) {
      std::vector<double> total(buckets, 0);
      std::vector<int> count(buckets, 0);
      for (size_t i = 0; i < series.time.size(); ++i) {
        const double x = double(series.time[i] - r.start) / 1e9;
        if (x < 0 || x > seconds || std::isnan(series.value[i])) continue;
        const size_t k = std::min(buckets - 1, size_t(x / seconds * double(buckets)));
        total[k] += series.value[i];
        ++count[k];
      }
      for (size_t k = 0; k < buckets; ++k) {
        if (count[k] == 0) continue;
        sum[k] += total[k] / count[k];
        ++series_seen[k];
      }
    }
    ordered_json t = ordered_json::array(), w = ordered_json::array();
    for (size_t k = 0; k < buckets; ++k) {
      if (series_seen[k] == 0) continue;
      t.push_back((double(k) + 0.5) * seconds / double(buckets));
      w.push_back(sum[k]);
    }
    out[node.node] = {{"metric", node.metric}, {"seconds", t}, {"watts", w}};
  }
  return out;
}

Status WriteText(const fs::path& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary);
  file << text;
  file.close();
  if (!file) return Status::IOError("cannot write " + path.string());
  return Status::OK();
}

// The shell form of argv, each argument quoted where needed.
std::string CommandLine(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& arg : argv) {
    if (!out.empty()) out += ' ';
    out += ShellQuoted(arg);
  }
  return out;
}

ordered_json Provenance(const ReportRequest& args, const std::vector<const Run*>& all,
                        const std::vector<std::string>& argv) {
  ordered_json p;
  p["kwatt_version"] = KwattVersion();
  p["api"] =
      args.api.empty() ? std::string(kwollect::kDefaultApiUrl) : UrlWithoutCredentials(args.api);
  ordered_json runs = ordered_json::array();
  std::vector<std::string> backups;
  for (const Run* run_read : all) {
    const Run& r = *run_read;
    ordered_json run;
    run["run"] = r.given;
    run["window"] = {FormatParisTimestamp(r.rows.start), FormatParisTimestamp(r.rows.end)};
    run["job_user"] = r.rows.job_user;
    run["job_types"] = r.rows.job_types;
    run["with_archives"] = r.with_archives;  // kwatt meter recordings read with it
    ordered_json nodes = ordered_json::array();
    for (const NodeName& n : r.rows.nodes) {
      ordered_json node = {{"node", n.Fqdn()}, {"site", n.site}, {"cluster", n.Cluster()}};
      ordered_json periods = ordered_json::object();
      const Catalogue* c = FindCatalogue(r.rows.catalogues, n.site + "/" + n.Cluster());
      // The cluster's hardware as the reference names it (an archive's manifest keeps it too).
      node["model"] = c && !c->model().empty() ? ordered_json(c->model()) : ordered_json(nullptr);
      if (c) {
        for (const CatalogueEntry& e : c->entries()) {
          periods[e.name] = {{"period_ms", e.period_ms},
                             {"optional_period_ms", e.optional_period_ms}};
        }
      }
      node["catalogue_periods"] = periods;
      for (const energy::NodeEnergy& ne : r.energy.nodes) {
        if (ne.node == n.Fqdn()) {
          node["power_metric"] = ne.metric;
          node["period_s"] = ne.period_s;
          node["reason"] = ne.reason;
        }
      }
      nodes.push_back(node);
    }
    run["nodes"] = nodes;
    ordered_json phases = ordered_json::array();
    for (const energy::Interval& i : r.energy.phase_intervals) {
      phases.push_back({{"name", i.name},
                        {"start", FormatParisTimestamp(i.start)},
                        {"end", FormatParisTimestamp(i.end)}});
    }
    run["phases"] = phases;
    run["notes"] = r.energy.notes;
    runs.push_back(run);
    if (fs::is_directory(r.given)) continue;
    backups.push_back("kwatt backup --api " + ShellQuoted(p["api"].get<std::string>()) + " --job " +
                      r.given + " -o " + ShellQuoted("job-" + r.given));
  }
  p["runs"] = runs;
  p["methods"] = {{"energy",
                   "each node's best power source (wattmeter, PDU outlet, BMC) integrated on the "
                   "real timestamps (trapezoids), gaps estimated on the line across them "
                   "(doc/energy.md)"},
                  {"interval",
                   "95 %: the stated accuracy, the resolution, the sampling, gaps and edges, "
                   "the marks' clock, combined as the GUM does (doc/energy.md, \"The interval "
                   "on every figure\")"},
                  {"runs",
                   "the mean over runs with Student's t interval; B against A by Welch's t test "
                   "(doc/energy.md, \"Runs compared\")"},
                  {"gap_factor", args.reading.gap_factor},
                  {"clock_offset_s", args.reading.clock_offset_s},
                  {"confidence", args.confidence}};
  ordered_json accuracies = ordered_json::object();
  for (const energy::PowerSourceKind& kind : energy::PowerSourceKinds()) {
    if (kind.scope != energy::SourceScope::kWholeNode) continue;
    accuracies[kind.metric] = {{"relative", kind.accuracy.relative},
                               {"watts", kind.accuracy.watts},
                               {"basis", kind.accuracy.basis}};
  }
  for (const std::string& text : args.reading.accuracies) {
    Result<std::pair<std::string, energy::StatedAccuracy>> given =
        energy::ParseStatedAccuracy(text);
    if (given.ok()) {
      accuracies[given->first] = {{"relative", given->second.relative},
                                  {"watts", given->second.watts},
                                  {"basis", "given: --accuracy " + text}};
    }
  }
  p["stated_accuracies"] = accuracies;
  std::vector<std::string> reproduce = backups;
  reproduce.push_back(CommandLine(argv));
  p["reproduce"] = reproduce;
  return p;
}

std::string NowText() {
  return FormatParisTimestamp(WallClockNow() / kNanosPerSecond * kNanosPerSecond);
}

std::string NumberText(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

// The directory to write: "paper/" is "paper".
fs::path TargetOf(const std::string& output) {
  fs::path target = fs::path(output).lexically_normal();
  if (!target.has_filename()) target = target.parent_path();
  return target;
}

// The carbon intensity and PUE given, if any: a constant, or a file's series.
Result<std::optional<energy::EmissionFactors>> EmissionFactorsOf(const ReportRequest& args) {
  if (args.carbon_intensity.empty()) {
    if (args.pue != 1 || !args.pue_source.empty()) {
      return Status::InvalidArgument("--pue applies to emissions: give --carbon-intensity too");
    }
    return std::optional<energy::EmissionFactors>();
  }
  energy::EmissionFactors f;
  f.pue = args.pue;
  f.pue_source =
      args.pue_source.empty() ? (args.pue == 1 ? "not counted" : "given") : args.pue_source;
  char* end = nullptr;
  const double constant = std::strtod(args.carbon_intensity.c_str(), &end);
  if (end != args.carbon_intensity.c_str() && *end == '\0') {
    f.intensity.constant = constant;
  } else {
    std::ifstream file(args.carbon_intensity, std::ios::binary);
    if (!file) {
      return Status::InvalidArgument("--carbon-intensity " + args.carbon_intensity +
                                     ": neither grams per kWh nor a readable file");
    }
    std::stringstream text;
    text << file.rdbuf();
    Result<energy::CarbonIntensity> series =
        energy::ParseCarbonIntensity(text.str(), args.carbon_intensity);
    if (!series.ok()) return series.status().WithContext("--carbon-intensity");
    f.intensity = std::move(*series);
  }
  f.intensity.source = args.carbon_source.empty()
                           ? (f.intensity.series() ? "the file " + args.carbon_intensity : "given")
                           : args.carbon_source;
  KWATT_RETURN_IF_ERROR(energy::CheckEmissionFactors(f));
  return std::optional<energy::EmissionFactors>(std::move(f));
}

// The runs of both sets, computed, with their emissions and the sets' summaries and comparison.
struct ReportData {
  std::vector<Run> a, b;
  std::vector<RunEmissions> emissions_a, emissions_b;
  std::vector<energy::RunsSummary> summary_a, summary_b;
  std::vector<energy::RunsComparison> comparisons;
  std::optional<energy::EmissionFactors> factors;
  bool complete = true;  // every run read whole, every node with power data
};

Result<ReportData> ComputeReport(const ReportRequest& args) {
  ReportData d;
  KWATT_ASSIGN_OR_RETURN(d.factors, EmissionFactorsOf(args));
  KWATT_ASSIGN_OR_RETURN(const energy::EnergyOptions options, CheckRunReading(args.reading));
  for (auto [given, runs] : {std::pair{&args.runs, &d.a}, std::pair{&args.versus, &d.b}}) {
    for (const std::string& text : *given) {
      Result<Run> run = ReadRun(text, args.reading);
      if (!run.ok()) return run.status().WithContext(text);
      d.complete = d.complete && run->complete();
      runs->push_back(std::move(*run));
    }
  }
  std::vector<const Run*> read;
  for (const std::vector<Run>* runs : {&d.a, &d.b}) {
    for (const Run& r : *runs) read.push_back(&r);
  }
  KWATT_RETURN_IF_ERROR(CheckEveryArchiveRead(args.reading.with_archives, read));
  for (auto [runs, emissions] :
       {std::pair{&d.a, &d.emissions_a}, std::pair{&d.b, &d.emissions_b}}) {
    if (!d.factors) break;  // no emissions asked for
    for (const Run& r : *runs) {
      RunEmissions e;
      KWATT_ASSIGN_OR_RETURN(e.window,
                             energy::EmissionsOf(*r.sink->power(), r.energy, options, *d.factors));
      for (size_t p = 0; p < r.energy.phase_names.size(); ++p) {
        KWATT_ASSIGN_OR_RETURN(
            energy::Emissions phase,
            energy::EmissionsOfPhase(*r.sink->power(), r.energy, options, *d.factors, p));
        e.phases.push_back(phase);
      }
      emissions->push_back(std::move(e));
    }
  }
  d.summary_a = energy::SummarizeRuns(FiguresOf(d.a), args.confidence);
  d.summary_b = energy::SummarizeRuns(FiguresOf(d.b), args.confidence);
  if (!d.b.empty()) {
    d.comparisons = energy::CompareRuns(FiguresOf(d.a), FiguresOf(d.b), args.confidence);
  }
  return d;
}

// report.json: everything the page, the tables and the figures show.
ordered_json ReportJson(const ReportRequest& args, const ReportData& d,
                        const std::vector<std::string>& argv) {
  ordered_json report;
  report["format"] = "kwatt-report";
  report["format_version"] = 1;
  report["title"] = args.title;
  report["kwatt_version"] = KwattVersion();
  report["generated_at"] = NowText();
  report["confidence"] = args.confidence;
  report["clock_offset_s"] = args.reading.clock_offset_s;
  for (auto [set, runs, emissions] :
       {std::tuple{"a", &d.a, &d.emissions_a}, std::tuple{"b", &d.b, &d.emissions_b}}) {
    ordered_json list = ordered_json::array();
    for (size_t i = 0; i < runs->size(); ++i) {
      const Run& r = (*runs)[i];
      ordered_json run;
      run["run"] = r.given;
      run["complete"] = r.rows.complete();
      run["energy"] = ordered_json::parse(energy::EnergyReportJson(r.energy, &r.checks));
      run["power"] = PowerCurves(r);
      // Its phases' intervals in the curves' time: seconds after the window's start.
      ordered_json phases = ordered_json::array();
      for (const energy::Interval& i : r.energy.phase_intervals) {
        phases.push_back({{"name", i.name},
                          {"start_s", double(i.start - r.energy.start) / 1e9},
                          {"end_s", double(i.end - r.energy.start) / 1e9}});
      }
      run["phase_seconds"] = phases;
      if (i < emissions->size()) {
        auto json_of = [](const energy::Emissions& e) {
          return ordered_json{{"co2e_grams", JsonNumber(e.grams)},
                              {"co2e_half_width_grams", JsonNumber(e.half_width_grams)},
                              {"kwh_at_wall", e.kwh_at_wall},
                              {"kwh_with_pue", e.kwh_with_pue},
                              {"mean_grams_per_kwh", JsonNumber(e.mean_grams_per_kwh)},
                              {"why", e.why}};
        };
        const RunEmissions& e = (*emissions)[i];
        run["emissions"] = json_of(e.window);
        ordered_json phases = ordered_json::object();
        for (size_t p = 0; p < e.phases.size() && p < r.energy.phase_names.size(); ++p) {
          phases[r.energy.phase_names[p]] = json_of(e.phases[p]);
        }
        run["emissions"]["phases"] = phases;
      }
      list.push_back(run);
    }
    report["sets"][set] = list;
  }
  report["summary"] = {{"a", ordered_json::parse(energy::RunsSummaryJson(d.summary_a))},
                       {"b", ordered_json::parse(energy::RunsSummaryJson(d.summary_b))}};
  report["comparison"] = ordered_json::parse(energy::RunsComparisonJson(d.comparisons));
  const std::optional<energy::EmissionFactors>& f = d.factors;
  report["emissions_factors"] =
      f ? ordered_json{{"pue", f->pue},
                       {"pue_source", f->pue_source},
                       {"intensity", f->intensity.series() ? ordered_json("series")
                                                           : ordered_json(f->intensity.constant)},
                       {"intensity_source", f->intensity.source}}
        : ordered_json(nullptr);
  std::vector<const Run*> all;
  for (const std::vector<Run>* runs : {&d.a, &d.b}) {
    for (const Run& r : *runs) all.push_back(&r);
  }
  report["provenance"] = Provenance(args, all, argv);
  return report;
}

// Writes the report's files into `work`, the figures drawn there too. IOError when a file cannot
// be written.
Status WriteFiles(const fs::path& work, const ReportRequest& args, const ReportData& d,
                  const ordered_json& report, const DrawFigures& draw, ReportWritten* written) {
  std::vector<EnergyRow> rows = EnergyRows(d.a, "a", d.emissions_a);
  std::vector<EnergyRow> rows_b = EnergyRows(d.b, "b", d.emissions_b);
  rows.insert(rows.end(), rows_b.begin(), rows_b.end());
  Status status = WriteText(work / "report.json", report.dump(1) + "\n");
  auto write = [&](const fs::path& path, const std::string& text) {
    if (status.ok()) status = WriteText(work / path, text);
  };
  write("provenance.json", report["provenance"].dump(2) + "\n");
  write("tables/energy.csv", EnergyCsv(rows));
  write("tables/energy.json", EnergyJson(rows));
  write("tables/energy.tex", EnergyLatex(rows, d.factors.has_value()));
  for (auto [set, runs, summary] :
       {std::tuple{"a", &d.a, &d.summary_a}, std::tuple{"b", &d.b, &d.summary_b}}) {
    if (runs->size() < 2) continue;
    write("tables/runs_" + std::string(set) + ".json", energy::RunsSummaryJson(*summary) + "\n");
    write("tables/runs_" + std::string(set) + ".csv", energy::RunsSummaryCsv(set, *summary));
  }
  if (!d.comparisons.empty()) {
    write("tables/comparison.csv", energy::RunsComparisonCsv(d.comparisons));
    write("tables/comparison.json", energy::RunsComparisonJson(d.comparisons) + "\n");
    write("tables/comparison.tex", ComparisonLatex(d.comparisons, args.confidence));
  }
  KWATT_RETURN_IF_ERROR(status);
  std::string no_figures =
      "No figures: this report was made without them. They are drawn by the Python package's "
      "matplotlib, in its own process: kwatt.report(), python -m kwatt report, or the kwatt "
      "command installed with the package (the same arguments).";
  if (draw) {
    written->figures_status = draw(work.string());
    // Interrupted while drawing: no report, not one that looks finished without its figures.
    if (written->figures_status.code() == Status::Code::kIncomplete) {
      return written->figures_status;
    }
    written->figures = written->figures_status.ok();
    no_figures = written->figures ? ""
                                  : "No figures: the Python package did not draw them: " +
                                        written->figures_status.message();
  }
  write("report.html", Html(report, work.string(), rows, d.comparisons, no_figures));
  return status;
}

}  // namespace

std::vector<std::string> ReportCommand(const ReportRequest& args, const std::string& output) {
  std::vector<std::string> argv = {"kwatt", "report"};
  argv.insert(argv.end(), args.runs.begin(), args.runs.end());
  for (const std::string& run : args.versus) argv.insert(argv.end(), {"--versus", run});
  argv.insert(argv.end(), {"-o", output});
  const RunReading& how = args.reading;
  if (!args.api.empty()) argv.insert(argv.end(), {"--api", UrlWithoutCredentials(args.api)});
  if (!how.nodes.empty()) {
    std::string nodes;
    for (const NodeName& node : how.nodes) nodes += (nodes.empty() ? "" : ",") + node.Fqdn();
    argv.insert(argv.end(), {"--nodes", nodes});
  }
  if (how.start) argv.insert(argv.end(), {"--start", FormatParisTimestamp(*how.start)});
  if (how.end) argv.insert(argv.end(), {"--end", FormatParisTimestamp(*how.end)});
  if (!args.config.empty()) argv.insert(argv.end(), {"--config", args.config});
  if (how.summary) argv.push_back("--summary");
  for (const std::string& phase : how.phases) argv.insert(argv.end(), {"--phase", phase});
  for (const std::string& role : how.roles) argv.insert(argv.end(), {"--role", role});
  if (!how.metric.empty()) argv.insert(argv.end(), {"--metric", how.metric});
  for (const std::string& a : how.accuracies) argv.insert(argv.end(), {"--accuracy", a});
  for (const std::string& dir : how.with_archives) {
    argv.insert(argv.end(), {"--with-archive", dir});
  }
  if (how.clock_offset_s != energy::kDefaultClockOffsetSeconds) {
    argv.insert(argv.end(), {"--clock-offset", NumberText(how.clock_offset_s)});
  }
  if (how.gap_factor != energy::EnergyOptions().gap_factor) {
    argv.insert(argv.end(), {"--gap-factor", NumberText(how.gap_factor)});
  }
  if (args.confidence != 0.95) {
    argv.insert(argv.end(), {"--confidence", NumberText(args.confidence)});
  }
  if (!args.carbon_intensity.empty()) {
    argv.insert(argv.end(), {"--carbon-intensity", args.carbon_intensity});
  }
  if (!args.carbon_source.empty()) {
    argv.insert(argv.end(), {"--carbon-source", args.carbon_source});
  }
  if (args.pue != 1) argv.insert(argv.end(), {"--pue", NumberText(args.pue)});
  if (!args.pue_source.empty()) argv.insert(argv.end(), {"--pue-source", args.pue_source});
  argv.insert(argv.end(), {"--title", args.title});
  return argv;
}

Status CheckReportRequest(const ReportRequest& args, const std::string& output) {
  if (args.runs.empty()) {
    return Status::InvalidArgument("give at least one run (an archive or SITE:ID)");
  }
  const fs::path target = TargetOf(output);
  if (target.empty() || target == "." || target == "..") {
    return Status::InvalidArgument("-o " + output + ": give the name of a new directory");
  }
  std::error_code error;
  if (fs::exists(target, error) &&
      !(fs::is_directory(target, error) && fs::is_empty(target, error))) {
    return Status::InvalidArgument(output +
                                   " exists: kwatt report writes a new directory (remove it, or "
                                   "choose another -o)");
  }
  KWATT_RETURN_IF_ERROR(energy::CheckConfidence(args.confidence, "--confidence"));
  KWATT_RETURN_IF_ERROR(CheckRunReading(args.reading).status());
  return EmissionFactorsOf(args).status();
}

Result<ReportWritten> WriteReport(const ReportRequest& args, const std::string& output,
                                  const DrawFigures& draw) {
  KWATT_RETURN_IF_ERROR(CheckReportRequest(args, output));
  KWATT_ASSIGN_OR_RETURN(ReportData data, ComputeReport(args));
  const ordered_json report = ReportJson(args, data, ReportCommand(args, output));
  // Written into a directory beside the target, renamed once whole: an interrupted report never
  // looks finished.
  const fs::path target = TargetOf(output);
  const fs::path work = target.parent_path() / (target.filename().string() + ".kwatt-report-" +
                                                std::to_string(::getpid()));
  std::error_code error;
  fs::remove_all(work, error);
  fs::create_directories(work / "tables", error);
  if (!error) fs::create_directories(work / "figures", error);
  if (error) return Status::IOError("cannot create " + work.string() + ": " + error.message());
  ReportWritten written;
  written.dir = target.string();
  written.runs = data.a.size() + data.b.size();
  written.complete = data.complete;
  for (const std::vector<Run>* runs : {&data.a, &data.b}) {
    for (const Run& r : *runs) {
      if (!r.rows.failures.empty()) written.failures.emplace_back(r.given, r.rows.failures);
    }
  }
  Status status = WriteFiles(work, args, data, report, draw, &written);
  if (status.ok() && fs::exists(target, error)) fs::remove(target, error);
  if (status.ok()) fs::rename(work, target, error);
  if (!status.ok() || error) {
    fs::remove_all(work, error);
    return !status.ok() ? status : Status::IOError("cannot rename the report into " + output);
  }
  return written;
}

}  // namespace kwatt::report
