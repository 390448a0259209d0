// `kwatt report`: from archives or jobs (and sets of runs), a directory a paper can use
// (doc/report.md): a self-contained HTML page, the figures as PNG and PDF (drawn by the Python
// package's matplotlib: `python -m kwatt report-figures`), the tables as CSV, JSON and LaTeX
// (booktabs, siunitx), and a provenance record.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/kwatt/commands.h"
#include "apps/kwatt/energy_runs.h"
#include "kwatt/core/process.h"
#include "kwatt/core/version.h"
#include "kwatt/energy/carbon.h"
#include "kwatt/energy/integration.h"

namespace kwatt::cli {
namespace {

using nlohmann::ordered_json;
namespace fs = std::filesystem;

// At most this many points a node's power curve in the report (each a bucket's mean).
constexpr size_t kPlotPoints = 600;

struct ReportArgs {
  QueryArgs query;
  std::vector<std::string> a, b, phases, roles, accuracies, with_archives;
  std::string output, title = "Energy report", metric, carbon, carbon_source, pue_source;
  double pue = 1, confidence = 0.95, clock_offset = energy::kDefaultClockOffsetSeconds;
  double gap_factor = energy::EnergyOptions().gap_factor;
  bool quiet = false;
};

ordered_json Number(double v) { return std::isfinite(v) ? ordered_json(v) : ordered_json(nullptr); }

// A node's power over the run as its chosen metric's series read it (their sum), in at most
// kPlotPoints buckets: seconds after the run's start, and the mean watts of each bucket.
ordered_json PowerCurves(const ExperimentRun& run) {
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

std::string LatexEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '_':
      case '%':
      case '&':
      case '#':
      case '$':
      case '{':
      case '}':
        out += '\\';
        out += c;
        break;
      case '\\':
        out += "\\textbackslash{}";
        break;
      case '~':
        out += "\\textasciitilde{}";
        break;
      case '^':
        out += "\\textasciicircum{}";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string HtmlEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// 95, 97.5: a confidence in percent, as short as it reads.
std::string Number100(double confidence) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", 100 * confidence);
  return text;
}

std::string Fixed(double v, int digits) {
  if (!std::isfinite(v)) return "";
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, v);
  // A value that rounds to zero is 0, not "-0.00" (a difference of -0.0004 kJ).
  if (text[0] == '-' && std::strspn(text + 1, "0.") == std::strlen(text + 1)) return text + 1;
  return text;
}

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

std::vector<EnergyRow> EnergyRows(const std::vector<ExperimentRun>& runs, const char* set,
                                  const std::vector<RunEmissions>& emissions) {
  std::vector<EnergyRow> rows;
  for (size_t i = 0; i < runs.size(); ++i) {
    const energy::EnergyReport& r = runs[i].energy;
    auto add = [&](const std::string& phase, const energy::Figures& f, const energy::Emissions* e) {
      EnergyRow row{set, runs[i].given, phase};
      if (f.has_power) {
        row.joules = f.total_joules();
        row.half_width = f.uncertainty(r.clock_offset_seconds).half_width;
        row.mean_watts = f.mean_watts();
      }
      row.coverage = f.coverage();
      row.seconds = f.seconds;
      if (e != nullptr) {
        row.grams = e->grams;
        row.grams_half_width = e->half_width_grams;
      }
      rows.push_back(row);
    };
    const RunEmissions* of_run = i < emissions.size() ? &emissions[i] : nullptr;
    add("window", r.total, of_run ? &of_run->window : nullptr);
    for (size_t p = 0; p < r.phase_names.size(); ++p) {
      add(r.phase_names[p], r.phase_totals[p],
          of_run && p < of_run->phases.size() ? &of_run->phases[p] : nullptr);
    }
  }
  return rows;
}

std::string EnergyCsv(const std::vector<EnergyRow>& rows) {
  std::string out =
      "set,run,phase,joules,half_width_joules,low_joules,high_joules,mean_watts,seconds,coverage,"
      "co2e_grams,co2e_half_width_grams\n";
  for (const EnergyRow& r : rows) {
    AppendCsvField(&out, r.set);
    for (const std::string* text : {&r.run, &r.phase}) {
      out += ',';
      AppendCsvField(&out, *text);
    }
    for (double v : {r.joules, r.half_width, r.joules - r.half_width, r.joules + r.half_width,
                     r.mean_watts, r.seconds, r.coverage, r.grams, r.grams_half_width}) {
      out += ',';
      AppendCsvNumber(&out, v);
    }
    out += '\n';
  }
  return out;
}

ordered_json EnergyJson(const std::vector<EnergyRow>& rows) {
  ordered_json out = ordered_json::array();
  for (const EnergyRow& r : rows) {
    out.push_back({{"set", r.set},
                   {"run", r.run},
                   {"phase", r.phase},
                   {"joules", Number(r.joules)},
                   {"half_width_joules", Number(r.half_width)},
                   {"mean_watts", Number(r.mean_watts)},
                   {"seconds", Number(r.seconds)},
                   {"coverage", Number(r.coverage)},
                   {"co2e_grams", Number(r.grams)},
                   {"co2e_half_width_grams", Number(r.grams_half_width)}});
  }
  return out;
}

// A tabular fragment (booktabs, siunitx): \input it inside a table of the paper.
std::string EnergyLatex(const std::vector<EnergyRow>& rows, bool emissions) {
  std::string out =
      "% kwatt report: energy per run and phase, with 95 % intervals (doc/report.md).\n"
      "% Needs \\usepackage{booktabs} and \\usepackage{siunitx}.\n"
      "\\begin{tabular}{ll S[table-format=6.2] S[table-format=4.2] S[table-format=5.1] "
      "S[table-format=3.1]";
  if (emissions) out += " S[table-format=5.2]";
  out +=
      "}\n\\toprule\nRun & Phase & {Energy (\\si{\\kilo\\joule})} & {$\\pm$ 95\\,\\% "
      "(\\si{\\kilo\\joule})} & {Mean (\\si{\\watt})} & {Coverage (\\si{\\percent})}";
  if (emissions) out += " & {CO\\textsubscript{2}e (\\si{\\gram})}";
  out += " \\\\\n\\midrule\n";
  for (const EnergyRow& r : rows) {
    out += LatexEscape(r.run) + " & " + LatexEscape(r.phase) + " & " + Fixed(r.joules / 1e3, 2) +
           " & " + Fixed(r.half_width / 1e3, 2) + " & " + Fixed(r.mean_watts, 1) + " & " +
           Fixed(100 * r.coverage, 1);
    if (emissions) out += " & " + (std::isfinite(r.grams) ? Fixed(r.grams, 2) : "{--}");
    out += " \\\\\n";
  }
  out += "\\bottomrule\n\\end{tabular}\n";
  return out;
}

std::string ComparisonLatex(const std::vector<energy::RunsComparison>& comparisons,
                            double confidence) {
  std::string out =
      "% kwatt report: set B against set A (Welch's t test), per phase of the total "
      "(doc/report.md).\n% Needs \\usepackage{booktabs} and \\usepackage{siunitx}.\n"
      "\\begin{tabular}{l S[table-format=6.2] S[table-format=6.2] S[table-format=-5.2] "
      "S[table-format=-3.2] c S[table-format=1.4]}\n\\toprule\nPhase & {A (\\si{\\kilo\\joule})} "
      "& {B (\\si{\\kilo\\joule})} & {B $-$ A (\\si{\\kilo\\joule})} & {B $-$ A "
      "(\\si{\\percent})} & " +
      Number100(confidence) + "\\,\\% interval (\\si{\\kilo\\joule}) & {$p$} \\\\\n\\midrule\n";
  for (const energy::RunsComparison& c : comparisons) {
    if (c.scope != "total") continue;
    out += LatexEscape(c.phase) + " & " + Fixed(c.a.mean / 1e3, 2) + " & " +
           Fixed(c.b.mean / 1e3, 2) + " & " + Fixed(c.difference / 1e3, 2) + " & " +
           Fixed(100 * c.relative, 2) + " & " +
           (std::isfinite(c.low)
                ? "\\numrange{" + Fixed(c.low / 1e3, 2) + "}{" + Fixed(c.high / 1e3, 2) + "}"
                : std::string("--")) +
           " & " + (std::isfinite(c.p_value) ? Fixed(c.p_value, 4) : "{--}") + " \\\\\n";
  }
  out += "\\bottomrule\n\\end{tabular}\n";
  return out;
}

Status WriteText(const fs::path& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary);
  file << text;
  file.close();
  if (!file) return Status::IOError("cannot write " + path.string());
  return Status::OK();
}

// Draws the figures (PNG, PDF and SVG) from report.json with the Python package's matplotlib.
Status DrawFigures(const fs::path& dir, bool quiet) {
  std::string python = PackagePython();
  if (python.empty()) {
    return Status::NotFound(
        "the figures are drawn by the Python package (matplotlib): install it (pip install "
        "'kwatt[plot]') and run its kwatt, or set KWATT_PYTHON");
  }
  SpawnOptions options;
  options.display = "python -m kwatt report-figures";
  KWATT_ASSIGN_OR_RETURN(
      Process child,
      Process::Spawn({python, "-m", "kwatt", "report-figures", dir.string()}, options));
  KWATT_ASSIGN_OR_RETURN(ProcessExit exit, child.Wait());
  if (!exit.ok()) {
    return Status::IOError("the figures could not be drawn: python -m kwatt report-figures " +
                           exit.Describe());
  }
  return Status::OK();
}

std::string ReadFile(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// The HTML page: everything inline (style, figures as SVG), so that it is one file to keep.
std::string Html(const ordered_json& report, const fs::path& dir,
                 const std::vector<EnergyRow>& rows,
                 const std::vector<energy::RunsComparison>& comparisons, bool figures) {
  std::string h;
  auto add = [&](const std::string& text) { h += text; };
  const std::string title = report["title"];
  add("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" +
      HtmlEscape(title) +
      "</title>\n<style>body{font:15px/1.45 system-ui,sans-serif;max-width:1100px;margin:2em "
      "auto;padding:0 1em;color:#222}table{border-collapse:collapse;margin:1em 0}th,td{padding:"
      ".25em .7em;border-bottom:1px solid #ddd;text-align:left}td.num{text-align:right;"
      "font-variant-numeric:tabular-nums}th{border-bottom:2px solid #444}.muted{color:#666}"
      ".figure svg{max-width:100%;height:auto}.bad{color:#b00;font-weight:600}pre{background:"
      "#f5f5f5;padding:1em;overflow:auto}</style></head><body>\n");
  add("<h1 id=\"title\">" + HtmlEscape(title) + "</h1>\n<p class=\"muted\">kwatt " +
      HtmlEscape(report["kwatt_version"]) + ", " + HtmlEscape(report["generated_at"]) +
      ". Each energy is given with its 95&nbsp;% interval (doc/energy.md, \"How far to trust "
      "it\").</p>\n");
  // The energy table.
  add("<h2>Energy</h2>\n<table id=\"energy\"><tr><th>set</th><th>run</th><th>phase</th><th>energy "
      "(kJ)</th><th>± 95&nbsp;% (kJ)</th><th>mean (W)</th><th>coverage</th><th>CO<sub>2</sub>e "
      "(g)</th></tr>\n");
  for (const EnergyRow& r : rows) {
    add("<tr><td>" + HtmlEscape(r.set) + "</td><td>" + HtmlEscape(r.run) + "</td><td>" +
        HtmlEscape(r.phase) + "</td><td class=\"num\">" + Fixed(r.joules / 1e3, 2) +
        "</td><td class=\"num\">" + Fixed(r.half_width / 1e3, 2) + "</td><td class=\"num\">" +
        Fixed(r.mean_watts, 1) + "</td><td class=\"num\">" + Fixed(100 * r.coverage, 1) +
        " %</td><td class=\"num\">" +
        (std::isfinite(r.grams) ? Fixed(r.grams, 2) + " ± " + Fixed(r.grams_half_width, 2) : "") +
        "</td></tr>\n");
  }
  add("</table>\n");
  if (report.contains("emissions_factors") && !report["emissions_factors"].is_null()) {
    const ordered_json& f = report["emissions_factors"];
    add("<p id=\"emission-factors\">CO<sub>2</sub>e: the energy at the wall × a PUE of " +
        HtmlEscape(f["pue"].dump()) + " (" + HtmlEscape(f["pue_source"].get<std::string>()) +
        ") × the carbon intensity (" + HtmlEscape(f["intensity_source"].get<std::string>()) +
        "); the ± carries the energy's interval only.</p>\n");
  }
  if (!comparisons.empty()) {
    add("<h2>B against A</h2>\n<table id=\"comparison\"><tr><th>phase</th><th>A mean (kJ)</th>"
        "<th>B mean (kJ)</th><th>B − A (kJ)</th><th>B − A</th><th>interval (kJ)</th><th>p</th>"
        "<th></th></tr>\n");
    for (const energy::RunsComparison& c : comparisons) {
      if (c.scope != "total") continue;
      add("<tr><td>" + HtmlEscape(c.phase) + "</td><td class=\"num\">" + Fixed(c.a.mean / 1e3, 2) +
          "</td><td class=\"num\">" + Fixed(c.b.mean / 1e3, 2) + "</td><td class=\"num\">" +
          Fixed(c.difference / 1e3, 2) + "</td><td class=\"num\">" + Fixed(100 * c.relative, 2) +
          " %</td><td class=\"num\">" + Fixed(c.low / 1e3, 2) + " .. " + Fixed(c.high / 1e3, 2) +
          "</td><td class=\"num\">" + (std::isfinite(c.p_value) ? Fixed(c.p_value, 4) : "") +
          "</td><td" + (c.significant ? " class=\"bad\">different" : ">") + "</td></tr>\n");
    }
    add("</table>\n");
    for (const energy::RunsComparison& c : comparisons) {
      if (c.scope == "total" && c.phase == "window") {
        add("<p id=\"verdict\">" + HtmlEscape(c.why) + ".</p>\n");
      }
    }
  }
  add("<h2>Figures</h2>\n");
  if (!figures) {
    add("<p class=\"bad\" id=\"no-figures\">No figures: the Python package (matplotlib) did not "
        "draw them (see the command's messages).</p>\n");
  } else {
    for (const char* name : {"power", "energy", "runs"}) {
      const fs::path svg = dir / "figures" / (std::string(name) + ".svg");
      if (!fs::exists(svg)) continue;
      std::string text = ReadFile(svg);
      // The SVG's own XML prologue and doctype do not belong inside HTML.
      size_t start = text.find("<svg");
      if (start != std::string::npos) text = text.substr(start);
      add("<div class=\"figure\" id=\"figure-" + std::string(name) + "\">" + text + "</div>\n");
    }
  }
  // The interval's terms, each run's total.
  add("<h2>How far to trust it</h2>\n<table id=\"terms\"><tr><th>run</th><th>accuracy</th><th>"
      "resolution</th><th>sampling</th><th>gaps and edges</th><th>clock</th><th>half-width "
      "(J)</th></tr>\n");
  for (const char* set : {"a", "b"}) {
    for (const ordered_json& run : report["sets"][set]) {
      const ordered_json& i = run["energy"]["total"]["interval"];
      if (i.is_null()) continue;
      add("<tr><td>" + HtmlEscape(run["run"].get<std::string>()) + "</td>");
      for (const char* term : {"accuracy", "resolution", "sampling", "gaps_and_edges", "clock"}) {
        const ordered_json& v = i["terms_joules"][term];
        add("<td class=\"num\">" + (v.is_null() ? std::string("unknown") : Fixed(v, 1)) + "</td>");
      }
      add("<td class=\"num\">" + Fixed(i["half_width_joules"], 1) + "</td></tr>\n");
    }
  }
  add("</table>\n<h3>Sources checked against each other</h3>\n");
  std::string checks;  // the table's rows
  for (const char* set : {"a", "b"}) {
    for (const ordered_json& run : report["sets"][set]) {
      for (const ordered_json& check : run["energy"]["source_checks"]) {
        for (const ordered_json& c : check["comparisons"]) {
          const std::string verdict = c["verdict"];
          const bool bad = verdict == "disagrees" || verdict == "part_above_wall";
          checks += "<tr><td>" + HtmlEscape(run["run"].get<std::string>()) + "</td><td>" +
                    HtmlEscape(check["node"].get<std::string>()) + "</td><td>" +
                    HtmlEscape(check["interval"].get<std::string>()) + "</td><td>" +
                    HtmlEscape(c["metric"].get<std::string>()) + "</td><td" +
                    (bad ? " class=\"bad\"" : "") + ">" + HtmlEscape(verdict) + "</td><td>" +
                    HtmlEscape(c["why"].get<std::string>()) + "</td></tr>\n";
        }
      }
    }
  }
  if (checks.empty()) {  // a paragraph, not a table of a header only
    add("<p class=\"muted\" id=\"no-checks\">No node had two power sources to check against "
        "each other.</p>\n");
  } else {
    add("<table id=\"checks\"><tr><th>run</th><th>node</th><th>interval</th><th>source</th><th>"
        "verdict</th><th>why</th></tr>\n" +
        checks + "</table>\n");
  }
  add("<h2>Provenance</h2>\n<p>To reproduce it:</p>\n<pre id=\"reproduce\">");
  for (const ordered_json& line : report["provenance"]["reproduce"]) {
    add(HtmlEscape(line.get<std::string>()) + "\n");
  }
  add("</pre>\n<details><summary>The whole record (provenance.json)</summary><pre>" +
      HtmlEscape(report["provenance"].dump(2)) + "</pre></details>\n</body></html>\n");
  return h;
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

ordered_json Provenance(const ReportArgs& args, const std::vector<ExperimentRun>& all,
                        const std::vector<std::string>& argv) {
  ordered_json p;
  p["kwatt_version"] = KwattVersion();
  p["api"] = args.query.api.empty() ? std::string(kwollect::kDefaultApiUrl)
                                    : UrlWithoutCredentials(args.query.api);
  ordered_json runs = ordered_json::array();
  std::vector<std::string> backups;
  for (const ExperimentRun& r : all) {
    ordered_json run;
    run["run"] = r.given;
    run["window"] = {FormatParisTimestamp(r.rows.start), FormatParisTimestamp(r.rows.end)};
    run["job_user"] = r.rows.job_user;
    run["job_types"] = r.rows.job_types;
    run["with_archives"] = r.rows.with_archives;  // kwatt meter recordings read with it
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
                  {"gap_factor", args.gap_factor},
                  {"clock_offset_s", args.clock_offset},
                  {"confidence", args.confidence}};
  ordered_json accuracies = ordered_json::object();
  for (const energy::PowerSourceKind& kind : energy::PowerSourceKinds()) {
    if (kind.scope != energy::SourceScope::kWholeNode) continue;
    accuracies[kind.metric] = {{"relative", kind.accuracy.relative},
                               {"watts", kind.accuracy.watts},
                               {"basis", kind.accuracy.basis}};
  }
  for (const std::string& text : args.accuracies) {
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

// The command that makes this report again, without credentials (from the options as parsed).
std::vector<std::string> ReportArgv(const ReportArgs& args) {
  std::vector<std::string> argv = {"kwatt", "report"};
  argv.insert(argv.end(), args.a.begin(), args.a.end());
  for (const std::string& run : args.b) argv.insert(argv.end(), {"--versus", run});
  argv.insert(argv.end(), {"-o", args.output});
  if (!args.query.api.empty())
    argv.insert(argv.end(), {"--api", UrlWithoutCredentials(args.query.api)});
  if (!args.query.nodes.empty()) argv.insert(argv.end(), {"--nodes", args.query.nodes});
  if (!args.query.start.empty()) argv.insert(argv.end(), {"--start", args.query.start});
  if (!args.query.end.empty()) argv.insert(argv.end(), {"--end", args.query.end});
  if (!args.query.config.empty()) argv.insert(argv.end(), {"--config", args.query.config});
  if (args.query.summary) argv.push_back("--summary");
  for (const std::string& phase : args.phases) argv.insert(argv.end(), {"--phase", phase});
  for (const std::string& role : args.roles) argv.insert(argv.end(), {"--role", role});
  if (!args.metric.empty()) argv.insert(argv.end(), {"--metric", args.metric});
  for (const std::string& a : args.accuracies) argv.insert(argv.end(), {"--accuracy", a});
  for (const std::string& dir : args.with_archives)
    argv.insert(argv.end(), {"--with-archive", dir});
  auto number = [](double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", v);
    return std::string(text);
  };
  if (args.clock_offset != energy::kDefaultClockOffsetSeconds) {
    argv.insert(argv.end(), {"--clock-offset", number(args.clock_offset)});
  }
  if (args.gap_factor != energy::EnergyOptions().gap_factor) {
    argv.insert(argv.end(), {"--gap-factor", number(args.gap_factor)});
  }
  if (args.confidence != 0.95) argv.insert(argv.end(), {"--confidence", number(args.confidence)});
  if (!args.carbon.empty()) argv.insert(argv.end(), {"--carbon-intensity", args.carbon});
  if (!args.carbon_source.empty()) {
    argv.insert(argv.end(), {"--carbon-source", args.carbon_source});
  }
  if (args.pue != 1) argv.insert(argv.end(), {"--pue", number(args.pue)});
  if (!args.pue_source.empty()) argv.insert(argv.end(), {"--pue-source", args.pue_source});
  argv.insert(argv.end(), {"--title", args.title});
  return argv;
}

std::string NowText() {
  return FormatParisTimestamp(WallClockNow() / kNanosPerSecond * kNanosPerSecond);
}

// What the report is made with, its arguments checked.
struct ReportSetup {
  fs::path target;  // the directory to write ("paper/" is "paper")
  energy::EnergyOptions options;
  std::optional<energy::EmissionFactors> factors;
  AnalysisArgs analysis;
};

// The carbon intensity and PUE given, if any: a constant, or a file's series.
Result<std::optional<energy::EmissionFactors>> EmissionFactorsOf(const ReportArgs& args) {
  if (args.carbon.empty()) {
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
  const double constant = std::strtod(args.carbon.c_str(), &end);
  if (end != args.carbon.c_str() && *end == '\0') {
    f.intensity.constant = constant;
  } else {
    std::ifstream file(args.carbon, std::ios::binary);
    if (!file) {
      return Status::InvalidArgument("--carbon-intensity " + args.carbon +
                                     ": neither grams per kWh nor a readable file");
    }
    std::stringstream text;
    text << file.rdbuf();
    Result<energy::CarbonIntensity> series = energy::ParseCarbonIntensity(text.str(), args.carbon);
    if (!series.ok()) return series.status().WithContext("--carbon-intensity");
    f.intensity = std::move(*series);
  }
  f.intensity.source = args.carbon_source.empty()
                           ? (f.intensity.series() ? "the file " + args.carbon : "given")
                           : args.carbon_source;
  KWATT_RETURN_IF_ERROR(energy::CheckEmissionFactors(f));
  return std::optional<energy::EmissionFactors>(std::move(f));
}

// Checks every argument before anything is read: InvalidArgument naming the one that is wrong.
Result<ReportSetup> SetUpReport(const ReportArgs& args) {
  if (args.a.empty())
    return Status::InvalidArgument("give at least one run (an archive or SITE:ID)");
  if (!args.query.job.empty()) {
    return Status::InvalidArgument(
        "give each job as a run (kwatt report lyon:1234 ...), not --job");
  }
  ReportSetup setup;
  setup.target = fs::path(args.output).lexically_normal();
  if (!setup.target.has_filename()) setup.target = setup.target.parent_path();
  if (setup.target.empty() || setup.target == "." || setup.target == "..") {
    return Status::InvalidArgument("-o " + args.output + ": give the name of a new directory");
  }
  std::error_code error;
  if (fs::exists(setup.target, error) &&
      !(fs::is_directory(setup.target, error) && fs::is_empty(setup.target, error))) {
    return Status::InvalidArgument(
        args.output +
        " exists: kwatt report writes a new directory (remove it, or choose "
        "another -o)");
  }
  setup.options.metric = args.metric;
  setup.options.gap_factor = args.gap_factor;
  setup.options.clock_offset_seconds = args.clock_offset;
  KWATT_RETURN_IF_ERROR(energy::CheckGapFactor(args.gap_factor, "--gap-factor"));
  KWATT_RETURN_IF_ERROR(energy::CheckClockOffset(args.clock_offset, "--clock-offset"));
  KWATT_RETURN_IF_ERROR(energy::CheckConfidence(args.confidence, "--confidence"));
  KWATT_RETURN_IF_ERROR(ParseAccuracyOptions(args.accuracies, &setup.options.accuracies));
  KWATT_ASSIGN_OR_RETURN(setup.factors, EmissionFactorsOf(args));
  setup.analysis.query = args.query;
  setup.analysis.phases = args.phases;
  setup.analysis.roles = args.roles;
  setup.analysis.with_archives = args.with_archives;
  std::vector<energy::Interval> phases;
  std::vector<energy::Role> roles;
  KWATT_RETURN_IF_ERROR(ResolvePhasesAndRoles(setup.analysis, &phases, &roles, UnixNanos(0)));
  return setup;
}

// The runs of both sets, computed, with their emissions and the sets' summaries and comparison.
struct ReportData {
  std::vector<ExperimentRun> a, b;
  std::vector<RunEmissions> emissions_a, emissions_b;
  std::vector<energy::RunsSummary> summary_a, summary_b;
  std::vector<energy::RunsComparison> comparisons;
  bool complete = true;  // every run read whole, every node with power data
};

Result<ReportData> ComputeReport(const ReportArgs& args, const ReportSetup& setup) {
  ReportData d;
  for (auto [given, runs] : {std::pair{&args.a, &d.a}, std::pair{&args.b, &d.b}}) {
    for (const std::string& text : *given) {
      Result<ExperimentRun> run = ReadRun(text, setup.analysis, setup.options, args.quiet);
      if (!run.ok()) return run.status().WithContext(text);
      d.complete = d.complete && run->rows.complete() && run->energy.nodes_without_power.empty();
      runs->push_back(std::move(*run));
    }
  }
  std::vector<const RowsReport*> read;
  for (const std::vector<ExperimentRun>* runs : {&d.a, &d.b}) {
    for (const ExperimentRun& r : *runs) read.push_back(&r.rows);
  }
  KWATT_RETURN_IF_ERROR(CheckEveryArchiveRead(args.with_archives, read));
  for (auto [runs, emissions] :
       {std::pair{&d.a, &d.emissions_a}, std::pair{&d.b, &d.emissions_b}}) {
    if (!setup.factors) break;  // no emissions asked for
    for (const ExperimentRun& r : *runs) {
      RunEmissions e;
      KWATT_ASSIGN_OR_RETURN(
          e.window, energy::EmissionsOf(*r.sink->power(), r.energy, setup.options, *setup.factors));
      for (size_t p = 0; p < r.energy.phase_names.size(); ++p) {
        KWATT_ASSIGN_OR_RETURN(
            energy::Emissions phase,
            energy::EmissionsOfPhase(*r.sink->power(), r.energy, setup.options, *setup.factors, p));
        e.phases.push_back(phase);
      }
      emissions->push_back(std::move(e));
    }
  }
  d.summary_a = energy::SummarizeRuns(FiguresOfRuns(d.a), args.confidence);
  d.summary_b = energy::SummarizeRuns(FiguresOfRuns(d.b), args.confidence);
  if (!d.b.empty()) {
    d.comparisons = energy::CompareRuns(FiguresOfRuns(d.a), FiguresOfRuns(d.b), args.confidence);
  }
  return d;
}

// report.json: everything the page, the tables and the figures show.
ordered_json ReportJson(const ReportArgs& args, const ReportSetup& setup, const ReportData& d,
                        const std::vector<std::string>& argv) {
  ordered_json report;
  report["format"] = "kwatt-report";
  report["format_version"] = 1;
  report["title"] = args.title;
  report["kwatt_version"] = KwattVersion();
  report["generated_at"] = NowText();
  report["confidence"] = args.confidence;
  report["clock_offset_s"] = args.clock_offset;
  for (auto [set, runs, emissions] :
       {std::tuple{"a", &d.a, &d.emissions_a}, std::tuple{"b", &d.b, &d.emissions_b}}) {
    ordered_json list = ordered_json::array();
    for (size_t i = 0; i < runs->size(); ++i) {
      const ExperimentRun& r = (*runs)[i];
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
          return ordered_json{{"co2e_grams", Number(e.grams)},
                              {"co2e_half_width_grams", Number(e.half_width_grams)},
                              {"kwh_at_wall", e.kwh_at_wall},
                              {"kwh_with_pue", e.kwh_with_pue},
                              {"mean_grams_per_kwh", Number(e.mean_grams_per_kwh)},
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
  const std::optional<energy::EmissionFactors>& f = setup.factors;
  report["emissions_factors"] =
      f ? ordered_json{{"pue", f->pue},
                       {"pue_source", f->pue_source},
                       {"intensity", f->intensity.series() ? ordered_json("series")
                                                           : ordered_json(f->intensity.constant)},
                       {"intensity_source", f->intensity.source}}
        : ordered_json(nullptr);
  std::vector<ExperimentRun> all = d.a;
  all.insert(all.end(), d.b.begin(), d.b.end());
  report["provenance"] = Provenance(args, all, argv);
  return report;
}

// Writes the report's files into `work`, the figures drawn there too (`drawn` says whether they
// were). IOError when a file cannot be written.
Status WriteReport(const fs::path& work, const ReportArgs& args, const ReportSetup& setup,
                   const ReportData& d, const ordered_json& report, Status* drawn) {
  std::vector<EnergyRow> rows = EnergyRows(d.a, "a", d.emissions_a);
  std::vector<EnergyRow> rows_b = EnergyRows(d.b, "b", d.emissions_b);
  rows.insert(rows.end(), rows_b.begin(), rows_b.end());
  Status written = WriteText(work / "report.json", report.dump(1) + "\n");
  auto write = [&](const fs::path& path, const std::string& text) {
    if (written.ok()) written = WriteText(work / path, text);
  };
  write("provenance.json", report["provenance"].dump(2) + "\n");
  write("tables/energy.csv", EnergyCsv(rows));
  write("tables/energy.json", EnergyJson(rows).dump(2) + "\n");
  write("tables/energy.tex", EnergyLatex(rows, setup.factors.has_value()));
  for (auto [set, runs, summary] :
       {std::tuple{"a", &d.a, &d.summary_a}, std::tuple{"b", &d.b, &d.summary_b}}) {
    if (runs->size() < 2) continue;
    write("tables/runs_" + std::string(set) + ".json", energy::RunsSummaryJson(*summary) + "\n");
    write("tables/runs_" + std::string(set) + ".csv", SummariesCsv(set, *summary));
  }
  if (!d.comparisons.empty()) {
    write("tables/comparison.csv", ComparisonsCsv(d.comparisons));
    write("tables/comparison.json", energy::RunsComparisonJson(d.comparisons) + "\n");
    write("tables/comparison.tex", ComparisonLatex(d.comparisons, args.confidence));
  }
  KWATT_RETURN_IF_ERROR(written);
  *drawn = DrawFigures(work, args.quiet);
  write("report.html", Html(report, work, rows, d.comparisons, drawn->ok()));
  return written;
}

int RunReport(const ReportArgs& args, const std::vector<std::string>& argv) {
  auto fail = [](int code, const std::string& message) {
    std::fprintf(stderr, "kwatt report: %s\n", message.c_str());
    return code;
  };
  Result<ReportSetup> setup = SetUpReport(args);
  if (!setup.ok()) return fail(kExitUsage, setup.status().message());
  Result<ReportData> data = ComputeReport(args, *setup);
  if (!data.ok()) return fail(ExitCodeOf(data.status()), data.status().message());
  const ordered_json report = ReportJson(args, *setup, *data, argv);
  // Written into a directory beside the target, renamed once whole: an interrupted report never
  // looks finished.
  const fs::path& target = setup->target;
  const fs::path work = target.parent_path() / (target.filename().string() + ".kwatt-report-" +
                                                std::to_string(::getpid()));
  std::error_code error;
  fs::remove_all(work, error);
  fs::create_directories(work / "tables", error);
  fs::create_directories(work / "figures", error);
  if (error) return fail(kExitFailure, "cannot create " + work.string() + ": " + error.message());
  Status drawn = Status::OK();
  Status written = WriteReport(work, args, *setup, *data, report, &drawn);
  if (!drawn.ok()) std::fprintf(stderr, "kwatt report: %s\n", drawn.message().c_str());
  if (written.ok() && fs::exists(target, error)) fs::remove(target, error);
  if (written.ok()) fs::rename(work, target, error);
  if (!written.ok() || error) {
    fs::remove_all(work, error);
    return fail(kExitFailure,
                !written.ok() ? written.message() : "cannot rename the report into " + args.output);
  }
  const size_t runs = data->a.size() + data->b.size();
  if (!args.quiet) {
    std::fprintf(stderr, "kwatt report: %s/report.html (%zu run%s)\n", target.c_str(), runs,
                 runs == 1 ? "" : "s");
  }
  return data->complete && drawn.ok() ? kExitOk : kExitFailure;
}

}  // namespace

Runner RegisterReport(CLI::App* app) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* command = app->add_subcommand(
      "report",
      "A directory a paper can use: an HTML page, figures (PNG, PDF, SVG), tables (CSV, JSON, "
      "LaTeX) and a provenance record, from archives or jobs (doc/report.md)");
  command->add_option("runs", args->a, "Runs: archive directories or jobs SITE:ID (set A)")
      ->required();
  command->add_option("--versus", args->b, "Runs of a second set B, compared with A");
  command->add_option("-o,--output", args->output, "The directory to write (new)")->required();
  AddQueryOptions(command, &args->query);
  command->add_option("--phase", args->phases,
                      "A named interval NAME=+SECONDS..+SECONDS after each run's start, or "
                      "NAME=START..END (repeatable)");
  command->add_option("--role", args->roles, "A named set of nodes NAME=NODE,NODE (repeatable)");
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
  AddWithArchiveOption(command, &args->with_archives, /*several_runs=*/true);
  command->add_option("--title", args->title, "The report's title")->capture_default_str();
  command->add_flag("-q,--quiet", args->quiet, "No progress line");
  return [command, args]() -> int {
    if (!command->parsed()) return -1;
    return RunReport(*args, ReportArgv(*args));
  };
}

}  // namespace kwatt::cli
