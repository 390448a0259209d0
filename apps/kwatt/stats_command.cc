#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/kwatt/commands.h"
#include "kwatt/energy/stats.h"

namespace kwatt::cli {
namespace {

using nlohmann::ordered_json;

ordered_json Number(double v) {
  return std::isnan(v) || std::isinf(v) ? ordered_json(nullptr) : ordered_json(v);
}

// A figure of the text table, `width` wide: "-" where there is none (no finite value).
std::string Cell(double v, int width = 14) {
  char text[48];
  if (std::isfinite(v)) {
    std::snprintf(text, sizeof text, "%*.6g", width, v);
  } else {
    std::snprintf(text, sizeof text, "%*s", width, "-");
  }
  return text;
}

ordered_json StatsJson(const energy::MetricStats& s) {
  ordered_json out;
  out["count"] = s.count;
  out["mean"] = Number(s.mean());
  out["min"] = Number(s.min);
  out["max"] = Number(s.max);
  out["last"] = Number(s.last);
  if (s.counter) {
    out["increase"] = s.increase;
    out["rate_per_s"] = Number(s.rate());
    out["resets"] = s.resets;
  }
  return out;
}

}  // namespace

Runner RegisterStats(CLI::App* app) {
  struct Args {
    AnalysisArgs analysis;
    bool json = false, csv = false, quiet = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* command = app->add_subcommand(
      "stats",
      "Per node and metric: count, mean, min, max, last; counters' increase and rate; "
      "CPU usage");
  AddAnalysisOptions(command, &args->analysis);
  CLI::Option* json = command->add_flag("--json", args->json, "JSON output");
  command->add_flag("--csv", args->csv, "CSV output")->excludes(json);
  command->add_flag("-q,--quiet", args->quiet, "No progress line");
  return [command, args]() -> int {
    if (!command->parsed()) return -1;
    std::vector<energy::Interval> phases;
    std::vector<energy::Role> roles;
    Status parsed = ResolvePhasesAndRoles(args->analysis, &phases, &roles);
    if (!parsed.ok()) {
      std::fprintf(stderr, "kwatt stats: %s\n", parsed.message().c_str());
      return kExitUsage;
    }
    energy::StatsSink collector(phases);
    std::vector<std::string> metrics = SplitCommaList(args->analysis.query.metrics);
    Result<RowsReport> report =
        RunSource(args->analysis.archive, args->analysis.query, metrics, &collector,
                  MakeProgress("kwatt stats", args->quiet || args->json));
    if (!report.ok()) {
      std::fprintf(stderr, "kwatt stats: %s\n", report.status().message().c_str());
      return ExitCodeOf(report.status());
    }
    PrintFailures("kwatt stats", *report);
    Result<std::vector<std::vector<energy::NodeStats>>> computed = collector.Results(roles);
    if (!computed.ok()) {
      std::fprintf(stderr, "kwatt stats: %s\n", computed.status().message().c_str());
      return kExitUsage;
    }
    const auto& results = *computed;
    const auto& intervals = collector.intervals();
    if (args->json) {
      ordered_json out = ordered_json::object();
      for (size_t k = 0; k < results.size(); ++k) {
        ordered_json nodes = ordered_json::object();
        for (const auto& n : results[k]) {
          ordered_json node;
          node["cpu_busy"] = Number(n.cpu_busy);
          node["cpu_source"] = n.cpu_source;
          ordered_json metrics = ordered_json::object();
          for (const auto& [metric, s] : n.metrics) metrics[metric] = StatsJson(s);
          node["metrics"] = metrics;
          nodes[n.node] = node;
        }
        // A phase marked several times is reported interval by interval: the second "busy" is
        // "busy (2)", not written over the first.
        std::string key = intervals[k].name;
        for (int n = 2; out.contains(key); ++n)
          key = intervals[k].name + " (" + std::to_string(n) + ")";
        out[key] = nodes;
      }
      std::printf("%s\n", out.dump(2).c_str());
    } else {
      if (args->csv) {
        std::printf("interval,node,metric,count,mean,min,max,last,increase,rate_per_s\n");
      }
      for (size_t k = 0; k < results.size(); ++k) {
        if (!args->csv) {
          std::printf("%s%s %s .. %s\n", k ? "\n" : "", intervals[k].name.c_str(),
                      FormatParisTimestamp(intervals[k].start).c_str(),
                      FormatParisTimestamp(intervals[k].end).c_str());
        }
        for (const auto& n : results[k]) {
          if (!args->csv) {
            std::printf("  %s", n.node.c_str());
            if (!std::isnan(n.cpu_busy)) {
              std::printf("  CPU busy %.1f%% (%s)", 100 * n.cpu_busy, n.cpu_source.c_str());
            }
            std::printf("\n    %-44s %9s %14s %14s %14s %14s %16s %14s\n", "metric", "count",
                        "mean", "min", "max", "last", "increase", "rate/s");
          }
          for (const auto& [metric, s] : n.metrics) {
            if (args->csv) {
              std::string line;
              AppendCsvField(&line, intervals[k].name);
              for (const std::string* text : {&n.node, &metric}) {
                line += ',';
                AppendCsvField(&line, *text);
              }
              line += ',' + std::to_string(s.count);
              for (double v : {s.mean(), s.min, s.max, s.last}) {
                line += ',';
                AppendCsvNumber(&line, v);
              }
              for (double v : {s.increase, s.rate()}) {
                line += ',';
                if (s.counter) AppendCsvNumber(&line, v);
              }
              line += '\n';
              std::fwrite(line.data(), 1, line.size(), stdout);
              continue;
            }
            std::printf("    %-44s %9lld %s %s %s %s", metric.c_str(), (long long)s.count,
                        Cell(s.mean()).c_str(), Cell(s.min).c_str(), Cell(s.max).c_str(),
                        Cell(s.last).c_str());
            if (s.counter) {
              std::printf(" %s %s", Cell(s.increase, 16).c_str(), Cell(s.rate()).c_str());
            }
            std::printf("\n");
          }
        }
      }
    }
    return report->complete() ? kExitOk : kExitFailure;
  };
}

}  // namespace kwatt::cli
