#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "apps/kwatt/commands.h"
#include "apps/kwatt/energy_runs.h"
#include "kwatt/energy/energy.h"
#include "kwatt/energy/phase_text.h"
#include "kwatt/energy/source_check.h"
#include "kwatt/energy/workflow.h"
#include "kwatt/meter/activity/activity_record.h"
#include "kwatt/meter/kwollect/kwollect_power.h"
#include "kwatt/meter/pipeline/replay.h"

namespace kwatt::cli {

using nlohmann::ordered_json;

void AddAnalysisOptions(CLI::App* command, AnalysisArgs* args) {
  command->add_option("archive", args->archive,
                      "An archive directory written by kwatt backup, instead of a query "
                      "(--start and --end then narrow its window)");
  AddQueryOptions(command, &args->query);
  command->add_option("--phase", args->phases,
                      "A named interval NAME=START..END (repeatable; kwatt energy: also "
                      "NAME=+SECONDS..+SECONDS after the window's start)");
  command->add_option("--role", args->roles, "A named set of nodes NAME=NODE,NODE (repeatable)");
}

Status ParseAccuracyOptions(const std::vector<std::string>& texts,
                            std::map<std::string, energy::StatedAccuracy>* accuracies) {
  Result<std::map<std::string, energy::StatedAccuracy>> parsed =
      energy::ParseStatedAccuracies(texts);
  if (!parsed.ok()) return parsed.status().WithContext("--accuracy");
  *accuracies = std::move(*parsed);
  return Status::OK();
}

Status ResolvePhasesAndRoles(const AnalysisArgs& args, std::vector<energy::Interval>* phases,
                             std::vector<energy::Role>* roles, std::optional<UnixNanos> origin) {
  return energy::ParsePhasesAndRoles(args.phases, args.roles, WallClockNow(), origin, phases,
                                     roles);
}

namespace {

// What the total's interval is made of, under the table (doc/energy.md, "How far to trust it").
void PrintIntervalTerms(const energy::EnergyReport& r) {
  if (!r.total.has_power) return;
  const energy::Uncertainty u = r.total.uncertainty(r.clock_offset_seconds);
  char accuracy[48] = "unknown (give --accuracy)";
  if (!std::isnan(u.accuracy)) std::snprintf(accuracy, sizeof accuracy, "%.1f J", u.accuracy);
  std::printf(
      "\n± 95 %%: the meters' stated accuracy, their resolution, what the sampling may miss, "
      "gaps and edges, and the marks' clock (within %g s: --clock-offset), combined; the "
      "total's: accuracy %s, resolution %.1f J, sampling %.1f J, gaps and edges %.1f J, clock "
      "%.1f J\n",
      r.clock_offset_seconds, accuracy, u.resolution, u.sampling, u.gaps_and_edges, u.clock);
}

void PrintTable(const energy::EnergyReport& r) {
  std::printf("window %s .. %s (%.0f s)\n", FormatParisTimestamp(r.start).c_str(),
              FormatParisTimestamp(r.end).c_str(), double(r.end - r.start) / 1e9);
  // (%12s: "±" is two bytes, one column.)
  std::printf("%-28s %-22s %8s %14s %12s %10s %8s %8s %9s\n", "node", "power metric", "period",
              "energy (J)", "± 95 % (J)", "Wh", "mean W", "peak W", "coverage");
  auto row = [&r](const std::string& name, const std::string& metric, double period,
                  const energy::Figures& f) {
    if (!f.has_power) {
      std::printf("%-28s %-22s NO POWER DATA\n", name.c_str(), metric.c_str());
      return;
    }
    char period_text[16] = "";
    if (period > 0) std::snprintf(period_text, sizeof period_text, "%.3g s", period);
    const energy::Uncertainty u = f.uncertainty(r.clock_offset_seconds);
    std::printf("%-28s %-22s %8s %14.1f %11.1f %10.3f %8.1f %8.1f %8.1f%%\n", name.c_str(),
                metric.c_str(), period_text, f.total_joules(), u.half_width,
                f.total_joules() / 3600, f.mean_watts(), f.peak_watts, 100 * f.coverage());
  };
  for (const auto& n : r.nodes) {
    if (n.metric.empty()) {
      std::printf("%-28s NO POWER DATA: %s\n", n.node.c_str(), n.reason.c_str());
      continue;
    }
    row(n.node, n.metric, n.period_s, n.window);
    for (size_t p = 0; p < r.phase_names.size(); ++p) {
      row("  phase " + r.phase_names[p], "", 0, n.phases[p]);
    }
  }
  for (size_t i = 0; i < r.roles.size(); ++i) {
    row("role " + r.roles[i].first.name, std::to_string(r.roles[i].first.nodes.size()) + " nodes",
        0, r.roles[i].second);
  }
  for (size_t p = 0; p < r.phase_names.size(); ++p) {
    row("phase " + r.phase_names[p], "all nodes", 0, r.phase_totals[p]);
  }
  row("TOTAL", "", 0, r.total);
  PrintIntervalTerms(r);
  bool notes = !r.notes.empty();
  if (notes) std::printf("\nnotes:\n");
  for (const std::string& note : r.notes) std::printf("  %s\n", note.c_str());
  for (const auto& n : r.nodes) {
    std::string extra;
    if (n.coarse) extra += " coarse BMC values (5 s, averaged): trust within ~10%;";
    if (n.window.gaps > 0) {
      char text[160];
      std::snprintf(text, sizeof text, " %d gap(s), %.0f s uncovered, %.1f J estimated in them;",
                    n.window.gaps, n.window.seconds - n.window.covered_seconds,
                    n.window.gap_joules);
      extra += text;
    }
    if (!std::isnan(n.window.counter_joules)) {
      char text[160];
      std::snprintf(text, sizeof text, " %s says %.1f J (%+.1f%%);", n.counter_metric.c_str(),
                    n.window.counter_joules,
                    100 * (n.window.counter_joules / n.window.total_joules() - 1));
      extra += text;
    }
    if (!std::isnan(n.baseline_watts)) {
      char text[120];
      std::snprintf(text, sizeof text, " baseline %.1f W, %.1f J above it;", n.baseline_watts,
                    n.window.total_joules() - n.window.baseline_joules);
      extra += text;
    }
    if (n.metric.empty() && extra.empty()) continue;
    if (!notes) std::printf("\nnotes:\n");
    notes = true;
    std::printf("  %s: %s.%s\n", n.node.c_str(), n.reason.c_str(), extra.c_str());
  }
}

// The sources checked against each other, after the table (doc/energy.md, "How far to trust
// it").
void PrintSourceChecks(const std::vector<energy::SourceCheck>& checks) {
  if (checks.empty()) return;
  std::printf("\nsources checked against each other (stated accuracies: doc/energy.md):\n");
  for (const energy::SourceCheck& check : checks) {
    for (const energy::SourceComparison& c : check.comparisons) {
      std::string verdict(energy::VerdictName(c.verdict));
      if (c.verdict == energy::SourceComparison::Verdict::kDisagrees ||
          c.verdict == energy::SourceComparison::Verdict::kAbovePart) {
        for (char& ch : verdict) ch = char(std::toupper(uint8_t(ch)));
      }
      std::replace(verdict.begin(), verdict.end(), '_', ' ');
      std::printf("  %s, %s: %s %s: %s\n", check.node.c_str(), check.interval.c_str(),
                  c.metric.c_str(), verdict.c_str(), c.why.c_str());
    }
  }
}

// `kwatt energy --csv`: the rows and columns of Python's energy frame (frames.py's
// ENERGY_COLUMNS): per node, then role, then the total, the window (phase "window") and each
// phase; fields quoted as RFC 4180 asks, numbers as the shortest text that reads back the same,
// unknown figures empty.
std::string CsvReport(const energy::EnergyReport& r) {
  std::string out =
      "scope,name,phase,metric,joules,wh,mean_watts,peak_watts,seconds,coverage,gaps,gap_joules,"
      "counter_joules,baseline_joules,half_width_joules,low_joules,high_joules,accuracy_joules,"
      "resolution_joules,sampling_joules,gaps_and_edges_joules,clock_joules,reason\n";
  auto row = [&](const char* scope, const std::string& name, const std::string& phase,
                 const std::string& metric, const energy::Figures& f, const std::string& reason) {
    out += scope;
    for (const std::string* text : {&name, &phase, &metric}) {
      out += ',';
      AppendCsvField(&out, *text);
    }
    const double unknown = NAN;  // without power data: the energy is unknown, not 0
    const energy::Uncertainty u = f.uncertainty(r.clock_offset_seconds);
    auto known = [&](double v) { return f.has_power ? v : unknown; };
    for (double v : {known(f.total_joules()), known(f.total_joules() / 3600), known(f.mean_watts()),
                     known(f.peak_watts), f.seconds, f.coverage(), double(f.gaps),
                     known(f.gap_joules), f.counter_joules, f.baseline_joules, known(u.half_width),
                     known(f.total_joules() - u.half_width), known(f.total_joules() + u.half_width),
                     known(u.accuracy), known(u.resolution), known(u.sampling),
                     known(u.gaps_and_edges), known(u.clock)}) {
      out += ',';
      AppendCsvNumber(&out, v);
    }
    out += ',';
    AppendCsvField(&out, reason);
    out += '\n';
  };
  auto rows = [&](const char* scope, const std::string& name, const std::string& metric,
                  const energy::Figures& window, const std::vector<energy::Figures>& phases,
                  const std::string& reason) {
    row(scope, name, "window", metric, window, reason);
    for (size_t p = 0; p < r.phase_names.size() && p < phases.size(); ++p) {
      row(scope, name, r.phase_names[p], metric, phases[p], reason);
    }
  };
  for (const auto& n : r.nodes) {
    // A node without power data: its window only, as in JSON (its phases are {}).
    rows("node", n.node, n.metric, n.window,
         n.metric.empty() ? std::vector<energy::Figures>{} : n.phases, n.reason);
  }
  for (size_t i = 0; i < r.roles.size(); ++i) {
    rows("role", r.roles[i].first.name, "", r.roles[i].second, r.role_phases[i], "");
  }
  rows("total", "total", "", r.total, r.phase_totals, "");
  return out;
}

// `kwatt energy --activity FILE`: the node's energy over a recorded activity shared among its
// processes, cgroups or trees (doc/meter/running.md, "After the fact").
int ShareByActivity(const energy::EnergySink& rows, const RowsReport& report,
                    const std::string& origin, const std::string& activity,
                    const std::string& node_given, const std::string& metric,
                    const std::string& idle_policy, const std::vector<std::string>& idle_power,
                    double gap_factor, bool json) {
  auto fail = [](const Status& status) {
    std::fprintf(stderr, "kwatt energy: %s\n", status.message().c_str());
    return ExitCodeOf(status);
  };
  Result<std::unique_ptr<meter::ActivityRecordReader>> record =
      meter::ActivityRecordReader::Open(activity);
  if (!record.ok()) return fail(record.status());
  // The node the activity was recorded on: --node, else the record's host.
  std::string name = node_given.empty() ? (*record)->header().host : node_given;
  Result<NodeName> node = ParseNodeName(name);
  if (!node.ok()) {
    return fail(Status::InvalidArgument(
        "the activity was recorded on '" + name +
        "', which is no Grid'5000 node name: give --node (nova-1.lyon) for the node it ran on"));
  }
  bool known = false;
  for (const auto& n : report.nodes) known = known || n.Fqdn() == node->Fqdn();
  if (!known || !rows.power()) {
    std::string nodes;
    for (const auto& n : report.nodes) nodes += (nodes.empty() ? "" : ", ") + n.Fqdn();
    return fail(Status::NotFound("the activity's node " + node->Fqdn() +
                                 " is not among the nodes read (" + nodes + "): give --node"));
  }
  meter::ReplayOptions options;
  Result<meter::IdlePolicy> policy = meter::ParseIdlePolicy(idle_policy);
  if (!policy.ok()) return fail(policy.status());
  options.idle_policy = *policy;
  Result<std::map<std::string, double>> watts = ParseIdlePower(idle_power);
  if (!watts.ok()) return fail(watts.status());
  options.idle_watts = std::move(*watts);
  Result<std::unique_ptr<meter::DelayedEnergySource>> source = meter::CollectedPower(
      *rows.power(), node->Fqdn(), report.start, report.end, metric, gap_factor, origin);
  if (!source.ok()) return fail(source.status());
  Result<meter::ReplayResult> replay = meter::ReplayActivity(**record, **source, options);
  if (!replay.ok()) return fail(replay.status());
  const meter::MeterTotals& t = replay->totals;
  const double seconds = double(t.end - t.start) / 1e9;
  std::vector<size_t> order(t.targets.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return t.targets[a].microjoules[0] > t.targets[b].microjoules[0];
  });
  if (json) {
    nlohmann::ordered_json out;
    out["node"] = node->Fqdn();
    out["domain"] = t.domains[0].origin;
    out["start"] = FormatParisTimestamp(t.start);
    out["end"] = FormatParisTimestamp(t.end);
    out["seconds"] = seconds;
    out["idle_policy"] = idle_policy;
    out["measured_joules"] = double(t.measured_microjoules[0]) / 1e6;
    out["idle_joules"] = double(t.idle_microjoules[0]) / 1e6;
    out["unattributed_joules"] = double(t.unattributed_microjoules[0]) / 1e6;
    out["intervals"] = replay->intervals;
    out["gap_intervals"] = replay->gap_intervals;
    out["record_complete"] = replay->record_complete;
    nlohmann::ordered_json targets = nlohmann::ordered_json::array();
    for (size_t i : order) {
      const auto& target = t.targets[i];
      targets.push_back({{"key", target.target.key},
                         {"kind", meter::TargetKindName(target.target.kind)},
                         {"name", target.target.name},
                         {"pid", target.target.pid},
                         {"cpu_seconds", double(target.cpu_microseconds) / 1e6},
                         {"joules", double(target.microjoules[0]) / 1e6}});
    }
    out["targets"] = targets;
    std::printf("%s\n", out.dump().c_str());
    return kExitOk;
  }
  const int64_t measured = t.measured_microjoules[0];
  auto share = [&](int64_t uj) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f %%",
                  measured > 0 ? 100.0 * double(uj) / double(measured) : 0.0);
    return std::string(text);
  };
  std::printf("%s, %s, %.1f s (%" PRId64 " intervals%s): %.1f J measured by %s\n\n",
              node->Fqdn().c_str(), FormatParisTimestamp(t.start).c_str(), seconds,
              replay->intervals,
              replay->gap_intervals
                  ? (", " + std::to_string(replay->gap_intervals) + " without power data").c_str()
                  : "",
              double(measured) / 1e6, t.domains[0].origin.c_str());
  std::printf("  %-8s %-28s %8s %10s %12s %8s %9s\n", "kind", "target", "pid", "CPU (s)",
              "energy (J)", "share", "mean W");
  for (size_t i : order) {
    const auto& target = t.targets[i];
    std::printf("  %-8s %-28s %8" PRId64 " %10.2f %12.1f %8s %9.2f\n",
                meter::TargetKindName(target.target.kind), target.target.name.substr(0, 28).c_str(),
                target.target.pid, double(target.cpu_microseconds) / 1e6,
                double(target.microjoules[0]) / 1e6, share(target.microjoules[0]).c_str(),
                seconds > 0 ? double(target.microjoules[0]) / 1e6 / seconds : 0.0);
  }
  std::printf("  %-8s %-28s %8s %10s %12.1f %8s\n", "", "(idle)", "", "",
              double(t.idle_microjoules[0]) / 1e6, share(t.idle_microjoules[0]).c_str());
  std::printf("  %-8s %-28s %8s %10s %12.1f %8s\n", "", "(unattributed: other software)", "", "",
              double(t.unattributed_microjoules[0]) / 1e6,
              share(t.unattributed_microjoules[0]).c_str());
  std::printf(
      "\n  idle policy %s; targets of different kinds may overlap (a tree holds its "
      "processes)\n",
      idle_policy.c_str());
  if (!replay->record_complete) {
    std::printf("  the activity record was interrupted%s: shared up to its last snapshot\n",
                replay->record_truncated ? " inside a line" : "");
  }
  return replay->gap_intervals ? kExitFailure : kExitOk;
}

struct EnergyArgs {
  AnalysisArgs analysis;
  std::string metric, baseline, activity, node, idle_policy = "proportional";
  std::vector<std::string> idle_power, accuracies;
  double gap_factor = energy::EnergyOptions().gap_factor;
  double clock_offset = energy::kDefaultClockOffsetSeconds;
  RunsArgs runs;
  bool json = false, csv = false, quiet = false;
};

// The options of `kwatt energy` into `args`.
CLI::App* AddEnergyOptions(CLI::App* app, EnergyArgs* args) {
  CLI::App* command = app->add_subcommand(
      "energy",
      "Energy of nodes over a window or a job: best power source, exact integration, "
      "gaps, per node, role and phase");
  AddAnalysisOptions(command, &args->analysis);
  command->add_option("--metric", args->metric, "Use this power metric for every node");
  command->add_option("--baseline", args->baseline,
                      "A phase whose mean power is the idle baseline (energy above it reported)");
  command
      ->add_option("--gap-factor", args->gap_factor,
                   "A gap: no sample for more than this many sampling periods (a number >= 1)")
      ->capture_default_str();
  command->add_option("--accuracy", args->accuracies,
                      "A power source's stated accuracy METRIC=P%+WW, for each figure's interval "
                      "and the check of the sources against each other (repeatable; default: "
                      "doc/energy.md's)");
  command
      ->add_option("--clock-offset", args->clock_offset,
                   "The most the clock that took the window's and phases' marks may be off the "
                   "meters', in seconds (for each figure's interval)")
      ->capture_default_str();
  CLI::Option_group* compared = command->add_option_group("Runs compared (doc/energy.md)");
  CLI::Option* run =
      compared->add_option("--run", args->runs.a,
                           "A run of the experiment: an archive directory or a job SITE:ID "
                           "(repeatable): the runs' mean, spread and confidence interval");
  compared
      ->add_option("--versus", args->runs.b,
                   "A run of a second set B, compared with the --run set A (repeatable)")
      ->needs(run);
  compared
      ->add_option("--confidence", args->runs.confidence,
                   "The confidence level of the runs' intervals and of the comparison")
      ->capture_default_str()
      ->needs(run);
  AddWithArchiveOption(command, &args->analysis.with_archives, /*several_runs=*/false)
      ->excludes(run);
  CLI::Option* json = command->add_flag("--json", args->json, "JSON output");
  command
      ->add_flag("--csv", args->csv,
                 "CSV output (one row per node, role and total, for the window and each phase)")
      ->excludes(json);
  command->add_flag("-q,--quiet", args->quiet, "No progress line");
  CLI::Option_group* after =
      command->add_option_group("Sharing it after the fact (doc/meter/running.md)");
  CLI::Option* activity =
      after
          ->add_option("--activity", args->activity,
                       "An activity record (kwatt meter record): the node's energy shared among "
                       "its processes, trees and cgroups")
          ->excludes(run);
  after->add_option("--node", args->node, "The node it was recorded on (default: the record's)")
      ->needs(activity);
  after->add_option("--idle-policy", args->idle_policy, "none, proportional or equal")
      ->capture_default_str()
      ->needs(activity);
  after->add_option("--idle-power", args->idle_power, "Idle power: node=95 (default: learned)")
      ->needs(activity);
  return command;
}

int RunEnergy(const EnergyArgs& args) {
  energy::EnergyOptions energy_options;
  energy_options.metric = args.metric;
  energy_options.baseline_phase = args.baseline;
  energy_options.gap_factor = args.gap_factor;
  // Checked before anything is fetched; ComputeEnergy checks it again (for every caller).
  energy_options.clock_offset_seconds = args.clock_offset;
  Status parsed = energy::CheckGapFactor(args.gap_factor, "--gap-factor");
  if (parsed.ok()) parsed = energy::CheckClockOffset(args.clock_offset, "--clock-offset");
  if (parsed.ok()) {  // the text checked now; offsets (+SECONDS) placed once the window is known
    parsed = ResolvePhasesAndRoles(args.analysis, &energy_options.phases, &energy_options.roles,
                                   UnixNanos(0));
  }
  if (parsed.ok()) parsed = ParseAccuracyOptions(args.accuracies, &energy_options.accuracies);
  if (!parsed.ok()) {
    std::fprintf(stderr, "kwatt energy: %s\n", parsed.message().c_str());
    return kExitUsage;
  }
  if (!args.runs.a.empty()) {
    RunsArgs runs = args.runs;
    runs.json = args.json;
    runs.csv = args.csv;
    runs.quiet = args.quiet;
    report::RunReading how;
    how.metric = args.metric;
    how.baseline_phase = args.baseline;
    how.accuracies = args.accuracies;
    how.gap_factor = args.gap_factor;
    how.clock_offset_s = args.clock_offset;
    return RunEnergyOfRuns(runs, args.analysis, how);
  }
  // The rows of the query or archive, read the margin beyond the window (energy::EnergyOf's feed).
  auto feed = [&](const std::vector<std::string>& metrics, RowSink* sink) -> Result<RowsReport> {
    Result<RowsReport> report =
        RunSource(args.analysis.archive, args.analysis.query, metrics, sink,
                  MakeProgress("kwatt energy", args.quiet || args.json),
                  /*metrics_are_candidates=*/true, args.analysis.with_archives,
                  energy::EnergyFetchMargin(args.analysis.query.summary));
    if (report.ok()) PrintFailures("kwatt energy", *report);
    return report;
  };
  if (!args.activity.empty()) {
    energy::EnergySink collector(args.metric);
    Result<RowsReport> report = feed(energy::EnergyInputMetrics(args.metric), &collector);
    if (!report.ok()) {
      std::fprintf(stderr, "kwatt energy: %s\n", report.status().message().c_str());
      return ExitCodeOf(report.status());
    }
    if (report->summary) {
      std::fprintf(stderr,
                   "kwatt energy: --activity shares the power second by second: it needs raw "
                   "rows, not 5-minute summaries (--summary, or an archive of them)\n");
      return kExitUsage;
    }
    std::string origin = args.analysis.archive.empty() ? std::string("Kwollect's API")
                                                       : "archive " + args.analysis.archive;
    return ShareByActivity(collector, *report, origin, args.activity, args.node, args.metric,
                           args.idle_policy, args.idle_power, args.gap_factor, args.json);
  }
  // Phases given as offsets (+SECONDS) are placed once the window is known.
  auto place = [&](const RowsReport& resolved, energy::EnergyOptions* options) {
    options->phases.clear();
    options->roles.clear();
    return ResolvePhasesAndRoles(args.analysis, &options->phases, &options->roles, resolved.start);
  };
  Result<energy::EnergyOutcome> outcome = energy::EnergyOf(feed, energy_options, place);
  if (!outcome.ok()) {
    std::fprintf(stderr, "kwatt energy: %s\n", outcome.status().message().c_str());
    return ExitCodeOf(outcome.status());
  }
  const RowsReport* report = &outcome->rows;
  const energy::EnergyReport* result = &outcome->report;
  const std::vector<energy::SourceCheck>& checks = outcome->checks;
  if (args.json) {
    std::printf("%s\n", energy::EnergyReportJson(*result, &checks).c_str());
  } else if (args.csv) {
    for (const std::string& note : result->notes) {
      std::fprintf(stderr, "kwatt energy: note: %s\n", note.c_str());
    }
    std::string csv = CsvReport(*result);
    std::fwrite(csv.data(), 1, csv.size(), stdout);
  } else {
    PrintTable(*result);
    PrintSourceChecks(checks);
  }
  bool missing = std::any_of(result->nodes.begin(), result->nodes.end(),
                             [](const auto& n) { return n.metric.empty(); });
  return report->complete() && !missing ? kExitOk : kExitFailure;
}

}  // namespace

Runner RegisterEnergy(CLI::App* app) {
  auto args = std::make_shared<EnergyArgs>();
  CLI::App* command = AddEnergyOptions(app, args.get());
  return [command, args]() -> int {
    if (!command->parsed()) return -1;
    return RunEnergy(*args);
  };
}

}  // namespace kwatt::cli
