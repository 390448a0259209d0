#include "apps/kwatt/energy_runs.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "kwatt/energy/runs.h"
#include "kwatt/energy/workflow.h"

namespace kwatt::cli {
namespace {

using nlohmann::ordered_json;

// A job "SITE:ID" (lyon:1234), when `text` is no directory.
bool IsJob(const std::string& text) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    const uint8_t c = uint8_t(text[i]);
    if (i < colon ? !(std::islower(c) || std::isdigit(c) || c == '-')
                  : i > colon && !std::isdigit(c))
      return false;
  }
  return true;
}

std::string Number(const char* format, double v) {
  if (!std::isfinite(v)) return "-";
  char text[48];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

std::string Label(const std::string& scope, const std::string& name) {
  return scope == "role" ? "role " + name : name;
}

void PrintRuns(const char* set, const std::vector<ExperimentRun>& runs) {
  std::printf("%s: %zu run%s\n", set, runs.size(), runs.size() == 1 ? "" : "s");
  for (const ExperimentRun& r : runs) {
    const energy::Figures& total = r.energy.total;
    std::printf(
        "  %-30s %s .. %s (%.0f s)  %s J ± %s\n", r.given.c_str(),
        FormatParisTimestamp(r.energy.start).c_str(), FormatParisTimestamp(r.energy.end).c_str(),
        double(r.energy.end - r.energy.start) / 1e9,
        Number("%.1f", total.has_power ? total.total_joules() : NAN).c_str(),
        Number("%.1f", total.uncertainty(r.energy.clock_offset_seconds).half_width).c_str());
  }
}

void PrintSummaries(const std::vector<energy::RunsSummary>& summaries, double confidence) {
  // (%13s: "±" is two bytes, one column.)
  std::printf("\n%-30s %-14s %4s %14s %12s %29s %13s\n", "", "phase", "runs", "mean (J)", "sd (J)",
              (Number("%g", 100 * confidence) + " % CI of the mean (J)").c_str(), "± meas. (J)");
  for (const energy::RunsSummary& s : summaries) {
    std::printf("%-30s %-14s %4d %14.1f %12s %29s %12.1f\n", Label(s.scope, s.name).c_str(),
                s.phase.c_str(), s.runs, s.mean, Number("%.1f", s.sd).c_str(),
                (Number("%.1f", s.low) + " .. " + Number("%.1f", s.high)).c_str(),
                s.mean_half_width);
  }
}

void PrintComparisons(const std::vector<energy::RunsComparison>& comparisons, double confidence) {
  std::printf("\nB against A (%s %%, Welch's t test):\n", Number("%g", 100 * confidence).c_str());
  std::printf("%-30s %-14s %14s %14s %12s %8s %25s %8s\n", "", "phase", "A mean (J)", "B mean (J)",
              "B - A (J)", "B - A", "interval (J)", "p");
  for (const energy::RunsComparison& c : comparisons) {
    std::printf("%-30s %-14s %14.1f %14.1f %12.1f %7s%% %25s %8s%s\n",
                Label(c.scope, c.name).c_str(), c.phase.c_str(), c.a.mean, c.b.mean, c.difference,
                Number("%+.2f", 100 * c.relative).c_str(),
                (Number("%.1f", c.low) + " .. " + Number("%.1f", c.high)).c_str(),
                Number("%.2g", c.p_value).c_str(), c.significant ? "  DIFFERENT" : "");
  }
  for (const energy::RunsComparison& c : comparisons) {
    if (c.scope == "total" && c.phase == "window") {
      std::printf("\ntotal: %s\n", c.why.c_str());
    }
  }
}

ordered_json RunsJson(const std::vector<ExperimentRun>& runs) {
  ordered_json out = ordered_json::array();
  for (const ExperimentRun& r : runs) {
    const energy::Figures& total = r.energy.total;
    ordered_json j;
    j["run"] = r.given;
    j["start"] = FormatParisTimestamp(r.energy.start);
    j["end"] = FormatParisTimestamp(r.energy.end);
    j["complete"] = r.rows.complete();
    j["total_joules"] = total.has_power ? ordered_json(total.total_joules()) : nullptr;
    j["total_half_width_joules"] =
        total.has_power ? ordered_json(total.uncertainty(r.energy.clock_offset_seconds).half_width)
                        : nullptr;
    j["nodes_without_power"] = r.energy.nodes_without_power;
    out.push_back(j);
  }
  return out;
}

}  // namespace

Result<ExperimentRun> ReadRun(const std::string& given, const AnalysisArgs& analysis,
                              energy::EnergyOptions options, bool quiet) {
  QueryArgs query = analysis.query;
  std::string archive;
  std::error_code error;
  if (std::filesystem::is_directory(given, error)) {
    archive = given;
  } else if (IsJob(given)) {
    query.job = given;
  } else {
    return Status::InvalidArgument("--run " + given +
                                   ": neither an archive directory nor a job SITE:ID (lyon:1234)");
  }
  // The run's energy as `kwatt energy` computes it: the one workflow, its rows read the margin
  // beyond the window, its phases placed after the run's start.
  auto feed = [&](const std::vector<std::string>& metrics, RowSink* sink) -> Result<RowsReport> {
    Result<RowsReport> report =
        RunSource(archive, query, metrics, sink, MakeProgress("kwatt energy " + given, quiet),
                  /*metrics_are_candidates=*/true, analysis.with_archives,
                  /*with_archives_shared=*/true, energy::EnergyFetchMargin(analysis.query.summary));
    if (report.ok()) PrintFailures("kwatt energy", *report);
    return report;
  };
  auto place = [&](const RowsReport& resolved, energy::EnergyOptions* placed) {
    placed->phases.clear();
    placed->roles.clear();
    return ResolvePhasesAndRoles(analysis, &placed->phases, &placed->roles, resolved.start);
  };
  KWATT_ASSIGN_OR_RETURN(energy::EnergyOutcome outcome, energy::EnergyOf(feed, options, place));
  return ExperimentRun{given, std::move(outcome.rows), std::move(outcome.report),
                       std::move(outcome.checks), std::move(outcome.read)};
}

std::string SummariesCsv(const char* set, const std::vector<energy::RunsSummary>& summaries) {
  std::string out =
      "set,scope,name,phase,runs,mean_joules,sd_joules,low_joules,high_joules,mean_seconds,"
      "mean_half_width_joules\n";
  for (const energy::RunsSummary& s : summaries) {
    out += set;
    for (const std::string* text : {&s.scope, &s.name, &s.phase}) {
      out += ',';
      AppendCsvField(&out, *text);
    }
    for (double v :
         {double(s.runs), s.mean, s.sd, s.low, s.high, s.mean_seconds, s.mean_half_width}) {
      out += ',';
      AppendCsvNumber(&out, v);
    }
    out += '\n';
  }
  return out;
}

std::string ComparisonsCsv(const std::vector<energy::RunsComparison>& comparisons) {
  std::string out =
      "scope,name,phase,runs_a,runs_b,mean_a_joules,mean_b_joules,difference_joules,relative,"
      "low_joules,high_joules,t,dof,p_value,significant,why\n";
  for (const energy::RunsComparison& c : comparisons) {
    AppendCsvField(&out, c.scope);
    for (const std::string* text : {&c.name, &c.phase}) {
      out += ',';
      AppendCsvField(&out, *text);
    }
    for (double v : {double(c.a.runs), double(c.b.runs), c.a.mean, c.b.mean, c.difference,
                     c.relative, c.low, c.high, c.t, c.dof, c.p_value}) {
      out += ',';
      AppendCsvNumber(&out, v);
    }
    out += c.significant ? ",true," : ",false,";
    AppendCsvField(&out, c.why);
    out += '\n';
  }
  return out;
}

std::vector<std::vector<energy::RunFigure>> FiguresOfRuns(const std::vector<ExperimentRun>& runs) {
  std::vector<std::vector<energy::RunFigure>> out;
  for (const ExperimentRun& r : runs) out.push_back(energy::RunFiguresOf(r.energy));
  return out;
}

int RunEnergyOfRuns(const RunsArgs& args, const AnalysisArgs& analysis,
                    const energy::EnergyOptions& options) {
  auto usage = [](const std::string& message) {
    std::fprintf(stderr, "kwatt energy: %s\n", message.c_str());
    return kExitUsage;
  };
  if (!analysis.archive.empty() || !analysis.query.job.empty()) {
    return usage(
        "with --run, give every run as --run (an archive directory or a job SITE:ID), "
        "not as an archive argument or --job");
  }
  Status confidence = energy::CheckConfidence(args.confidence, "--confidence");
  if (!confidence.ok()) return usage(confidence.message());
  // The phases' and roles' text, checked once before anything is read.
  std::vector<energy::Interval> phases;
  std::vector<energy::Role> roles;
  Status parsed = ResolvePhasesAndRoles(analysis, &phases, &roles, UnixNanos(0));
  if (!parsed.ok()) return usage(parsed.message());
  bool complete = true;
  std::vector<ExperimentRun> a, b;
  for (auto [given, runs] : {std::pair{&args.a, &a}, std::pair{&args.b, &b}}) {
    for (const std::string& text : *given) {
      Result<ExperimentRun> run = ReadRun(text, analysis, options, args.quiet || args.json);
      if (!run.ok()) {
        std::fprintf(stderr, "kwatt energy: %s: %s\n", text.c_str(),
                     run.status().message().c_str());
        return ExitCodeOf(run.status());
      }
      complete = complete && run->rows.complete() && run->energy.nodes_without_power.empty();
      runs->push_back(std::move(*run));
    }
  }
  auto figures = FiguresOfRuns;
  const std::vector<energy::RunsSummary> summary_a =
      energy::SummarizeRuns(figures(a), args.confidence);
  const std::vector<energy::RunsSummary> summary_b =
      energy::SummarizeRuns(figures(b), args.confidence);
  const std::vector<energy::RunsComparison> comparisons =
      b.empty() ? std::vector<energy::RunsComparison>{}
                : energy::CompareRuns(figures(a), figures(b), args.confidence);
  if (args.json) {
    ordered_json out;
    out["confidence"] = args.confidence;
    out["runs"] = {{"a", RunsJson(a)}, {"b", RunsJson(b)}};
    out["a"] = ordered_json::parse(energy::RunsSummaryJson(summary_a));
    out["b"] = ordered_json::parse(energy::RunsSummaryJson(summary_b));
    out["comparison"] = ordered_json::parse(energy::RunsComparisonJson(comparisons));
    std::printf("%s\n", out.dump(2).c_str());
  } else if (args.csv) {
    std::string csv = b.empty() ? SummariesCsv("a", summary_a) : ComparisonsCsv(comparisons);
    std::fwrite(csv.data(), 1, csv.size(), stdout);
  } else {
    PrintRuns("A", a);
    PrintSummaries(summary_a, args.confidence);
    if (!b.empty()) {
      std::printf("\n");
      PrintRuns("B", b);
      PrintSummaries(summary_b, args.confidence);
      PrintComparisons(comparisons, args.confidence);
    }
  }
  return complete ? kExitOk : kExitFailure;
}

}  // namespace kwatt::cli
