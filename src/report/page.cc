#include "src/report/page.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kwatt/core/text.h"

namespace kwatt::report {
namespace {

using nlohmann::ordered_json;
namespace fs = std::filesystem;

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

std::string ReadFile(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace

std::vector<EnergyRow> EnergyRows(const std::vector<Run>& runs, const char* set,
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

std::string EnergyJson(const std::vector<EnergyRow>& rows) {
  ordered_json out = ordered_json::array();
  for (const EnergyRow& r : rows) {
    out.push_back({{"set", r.set},
                   {"run", r.run},
                   {"phase", r.phase},
                   {"joules", JsonNumber(r.joules)},
                   {"half_width_joules", JsonNumber(r.half_width)},
                   {"mean_watts", JsonNumber(r.mean_watts)},
                   {"seconds", JsonNumber(r.seconds)},
                   {"coverage", JsonNumber(r.coverage)},
                   {"co2e_grams", JsonNumber(r.grams)},
                   {"co2e_half_width_grams", JsonNumber(r.grams_half_width)}});
  }
  return out.dump(2) + "\n";
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

// The HTML page: everything inline (style, figures as SVG), so that it is one file to keep.
std::string Html(const nlohmann::ordered_json& report, const std::string& dir,
                 const std::vector<EnergyRow>& rows,
                 const std::vector<energy::RunsComparison>& comparisons,
                 const std::string& no_figures) {
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
  if (!no_figures.empty()) {
    add("<p class=\"bad\" id=\"no-figures\">" + HtmlEscape(no_figures) + "</p>\n");
  } else {
    for (const char* name : {"power", "energy", "runs"}) {
      const fs::path svg = fs::path(dir) / "figures" / (std::string(name) + ".svg");
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

}  // namespace kwatt::report
