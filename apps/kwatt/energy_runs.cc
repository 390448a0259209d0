#include "apps/kwatt/energy_runs.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <tuple>

#include "kwatt/energy/runs.h"
#include "kwatt/energy/workflow.h"

namespace kwatt::cli {
namespace {

using nlohmann::ordered_json;

std::string Number(const char* format, double v) {
  if (!std::isfinite(v)) return "-";
  char text[48];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

std::string Label(const std::string& scope, const std::string& name) {
  return scope == "role" ? "role " + name : name;
}

void PrintRuns(const char* set, const std::vector<report::Run>& runs) {
  std::printf("%s: %zu run%s\n", set, runs.size(), runs.size() == 1 ? "" : "s");
  for (const report::Run& r : runs) {
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

ordered_json RunsJson(const std::vector<report::Run>& runs) {
  ordered_json out = ordered_json::array();
  for (const report::Run& r : runs) {
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

Status FillRunReading(const AnalysisArgs& analysis, const std::vector<std::string>& runs,
                      const std::string& verb, bool quiet, report::RunReading* how) {
  const QueryArgs& query = analysis.query;
  if (!query.job.empty()) return Status::InvalidArgument("give each job as a run, not --job");
  if (!query.metrics.empty()) {
    return Status::InvalidArgument(
        "--metrics: a run's energy reads each node's power sources; give --metric to use one");
  }
  const bool any_job = std::any_of(runs.begin(), runs.end(), [](const std::string& run) {
    std::error_code error;
    return !std::filesystem::is_directory(run, error) && report::IsJob(run);
  });
  if (any_job) KWATT_RETURN_IF_ERROR(ResolveClientOptions(query, &how->client));
  if (!query.nodes.empty()) {  // some of each run's nodes
    Result<std::vector<NodeName>> nodes = ParseNodeList(query.nodes);
    if (!nodes.ok()) return nodes.status().WithContext("--nodes");
    how->nodes = *nodes;
  }
  const UnixNanos now = WallClockNow();
  for (auto [text, slot, name] : {std::tuple{&query.start, &how->start, "--start"},
                                  std::tuple{&query.end, &how->end, "--end"}}) {
    if (text->empty()) continue;
    Result<UnixNanos> t = ParseUserTime(*text, now);
    if (!t.ok()) return t.status().WithContext(name);
    *slot = *t;
  }
  how->summary = query.summary;
  how->phases = analysis.phases;
  how->roles = analysis.roles;
  how->with_archives = analysis.with_archives;
  how->progress = [verb, quiet](const std::string& given) {
    return MakeProgress(verb + " " + given, quiet);
  };
  how->read = [verb](const std::string&, const RowsReport& read) {
    PrintFailures(verb.c_str(), read);
  };
  return Status::OK();
}

int RunEnergyOfRuns(const RunsArgs& args, const AnalysisArgs& analysis,
                    const report::RunReading& given_how) {
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
  report::RunReading how = given_how;
  std::vector<std::string> runs = args.a;
  runs.insert(runs.end(), args.b.begin(), args.b.end());
  Status parsed = FillRunReading(analysis, runs, "kwatt energy", args.quiet || args.json, &how);
  if (parsed.ok()) parsed = report::CheckRunReading(how).status();
  if (!parsed.ok()) return usage(parsed.message());
  bool complete = true;
  std::vector<report::Run> a, b;
  for (auto [given, runs] : {std::pair{&args.a, &a}, std::pair{&args.b, &b}}) {
    for (const std::string& text : *given) {
      Result<report::Run> run = report::ReadRun(text, how);
      if (!run.ok()) {
        std::fprintf(stderr, "kwatt energy: --run %s: %s\n", text.c_str(),
                     run.status().message().c_str());
        return ExitCodeOf(run.status());
      }
      complete = complete && run->complete();
      runs->push_back(std::move(*run));
    }
  }
  auto figures = report::FiguresOf;
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
    std::string csv =
        b.empty() ? energy::RunsSummaryCsv("a", summary_a) : energy::RunsComparisonCsv(comparisons);
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
