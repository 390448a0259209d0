#include <cmath>
#include <nlohmann/json.hpp>

#include "kwatt/core/document_writer.h"
#include "kwatt/core/text.h"
#include "kwatt/energy/energy.h"
#include "kwatt/energy/runs.h"
#include "kwatt/energy/source_check.h"

namespace kwatt::energy {
namespace {

using nlohmann::ordered_json;

ordered_json Number(double v) { return std::isnan(v) ? ordered_json(nullptr) : ordered_json(v); }

// The 95 % interval of a figure's energy and its terms (uncertainty.h), joules; null without power
// data.
ordered_json IntervalJson(const Figures& f, double clock_offset_seconds) {
  if (!f.has_power) return nullptr;
  const Uncertainty u = f.uncertainty(clock_offset_seconds);
  ordered_json out;
  out["confidence"] = 0.95;
  out["half_width_joules"] = u.half_width;
  out["low_joules"] = f.total_joules() - u.half_width;
  out["high_joules"] = f.total_joules() + u.half_width;
  out["half_width_without_accuracy_joules"] = u.half_width_without_accuracy;
  ordered_json terms;
  terms["accuracy"] = Number(u.accuracy);
  terms["resolution"] = u.resolution;
  terms["sampling"] = u.sampling;
  terms["gaps_and_edges"] = u.gaps_and_edges;
  terms["clock"] = u.clock;
  out["terms_joules"] = terms;
  return out;
}

// Without power data (has_power false) the energy, mean and peak are unknown: null, not 0.
ordered_json FiguresJson(const Figures& f, double clock_offset_seconds) {
  auto known = [&](double v) { return f.has_power ? Number(v) : ordered_json(nullptr); };
  ordered_json out;
  out["joules"] = known(f.total_joules());
  out["wh"] = known(f.total_joules() / 3600);
  out["measured_joules"] = known(f.joules);
  out["gap_joules"] = known(f.gap_joules);
  out["seconds"] = f.seconds;
  out["mean_watts"] = known(f.mean_watts());
  out["peak_watts"] = known(f.peak_watts);
  out["coverage"] = f.coverage();
  out["gaps"] = f.gaps;
  out["counter_joules"] = Number(f.counter_joules);
  out["baseline_joules"] = Number(f.baseline_joules);
  out["interval"] = IntervalJson(f, clock_offset_seconds);
  return out;
}

// {phase name: figures}, in the report's phase order.
ordered_json PhasesJson(const std::vector<std::string>& names, const std::vector<Figures>& phases,
                        double clock_offset_seconds) {
  ordered_json out = ordered_json::object();
  for (size_t p = 0; p < names.size() && p < phases.size(); ++p) {
    out[names[p]] = FiguresJson(phases[p], clock_offset_seconds);
  }
  return out;
}

// A summary over runs (runs.h): NaN figures null.
ordered_json SummaryJson(const RunsSummary& s) {
  ordered_json j;
  j["scope"] = s.scope;
  j["name"] = s.name;
  j["phase"] = s.phase;
  j["runs"] = s.runs;
  j["mean_joules"] = Number(s.mean);
  j["sd_joules"] = Number(s.sd);
  j["low_joules"] = Number(s.low);
  j["high_joules"] = Number(s.high);
  j["mean_seconds"] = Number(s.mean_seconds);
  j["mean_half_width_joules"] = Number(s.mean_half_width);
  return j;
}

// The report's one rendering, which EnergyReportJson prints and WriteEnergyReport gives.
ordered_json EnergyReportDocument(const EnergyReport& r, const std::vector<SourceCheck>* checks) {
  const double clock = r.clock_offset_seconds;
  ordered_json out;
  out["start"] = FormatParisTimestamp(r.start);
  out["end"] = FormatParisTimestamp(r.end);
  out["requested_start"] = FormatParisTimestamp(r.requested_start);
  out["requested_end"] = FormatParisTimestamp(r.requested_end);
  out["notes"] = r.notes;
  out["nodes_without_power"] = r.nodes_without_power;
  out["phases"] = r.phase_names;
  out["clock_offset_s"] = r.clock_offset_seconds;
  ordered_json nodes = ordered_json::array();
  for (const NodeEnergy& n : r.nodes) {
    ordered_json node;
    node["node"] = n.node;
    node["metric"] = n.metric.empty() ? ordered_json(nullptr) : ordered_json(n.metric);
    node["reason"] = n.reason;
    node["period_s"] = n.period_s;
    node["series"] = n.series;
    node["coarse"] = n.coarse;
    node["counter_metric"] = n.counter_metric;
    node["window"] = n.metric.empty() ? ordered_json(nullptr) : FiguresJson(n.window, clock);
    node["phases"] =
        n.metric.empty() ? ordered_json::object() : PhasesJson(r.phase_names, n.phases, clock);
    node["baseline_watts"] = Number(n.baseline_watts);
    nodes.push_back(node);
  }
  out["nodes"] = nodes;
  ordered_json roles = ordered_json::object(), role_phases = ordered_json::object();
  for (size_t i = 0; i < r.roles.size(); ++i) {
    roles[r.roles[i].first.name] = FiguresJson(r.roles[i].second, clock);
    role_phases[r.roles[i].first.name] = PhasesJson(r.phase_names, r.role_phases[i], clock);
  }
  out["roles"] = roles;
  out["role_phases"] = role_phases;
  out["phase_totals"] = PhasesJson(r.phase_names, r.phase_totals, clock);
  out["total"] = FiguresJson(r.total, clock);
  if (checks) out["source_checks"] = ordered_json::parse(SourceChecksJson(*checks));
  return out;
}

// `value`'s events, in order; a number that is not finite as Null (as dump() writes it).
void Write(const ordered_json& value, DocumentWriter* writer) {
  switch (value.type()) {
    case ordered_json::value_t::object:
      writer->BeginObject();
      for (const auto& [key, member] : value.items()) {
        writer->Key(key);
        Write(member, writer);
      }
      writer->EndObject();
      return;
    case ordered_json::value_t::array:
      writer->BeginArray();
      for (const ordered_json& element : value) Write(element, writer);
      writer->EndArray();
      return;
    case ordered_json::value_t::string:
      writer->String(value.get_ref<const std::string&>());
      return;
    case ordered_json::value_t::boolean:
      writer->Bool(value.get<bool>());
      return;
    case ordered_json::value_t::number_integer:
      writer->Integer(value.get<int64_t>());
      return;
    case ordered_json::value_t::number_unsigned:
      writer->Integer(int64_t(value.get<uint64_t>()));
      return;
    case ordered_json::value_t::number_float: {
      const double v = value.get<double>();
      if (std::isfinite(v)) {
        writer->Double(v);
      } else {
        writer->Null();
      }
      return;
    }
    default:  // null, and what a report never holds (binary, discarded)
      writer->Null();
      return;
  }
}

}  // namespace

std::string EnergyReportJson(const EnergyReport& r, const std::vector<SourceCheck>* checks) {
  return EnergyReportDocument(r, checks).dump(2);
}

void WriteEnergyReport(const EnergyReport& r, const std::vector<SourceCheck>* checks,
                       DocumentWriter* writer) {
  Write(EnergyReportDocument(r, checks), writer);
}

std::string RunsSummaryJson(const std::vector<RunsSummary>& summaries) {
  ordered_json out = ordered_json::array();
  for (const RunsSummary& s : summaries) out.push_back(SummaryJson(s));
  return out.dump(2);
}

std::string RunsComparisonJson(const std::vector<RunsComparison>& comparisons) {
  ordered_json out = ordered_json::array();
  for (const RunsComparison& c : comparisons) {
    ordered_json j;
    j["scope"] = c.scope;
    j["name"] = c.name;
    j["phase"] = c.phase;
    j["a"] = SummaryJson(c.a);
    j["b"] = SummaryJson(c.b);
    j["difference_joules"] = Number(c.difference);
    j["relative"] = Number(c.relative);
    j["low_joules"] = Number(c.low);
    j["high_joules"] = Number(c.high);
    j["t"] = Number(c.t);
    j["dof"] = Number(c.dof);
    j["p_value"] = Number(c.p_value);
    j["significant"] = c.significant;
    j["why"] = c.why;
    out.push_back(j);
  }
  return out.dump(2);
}

std::string RunsSummaryCsv(const char* set, const std::vector<RunsSummary>& summaries) {
  std::string out =
      "set,scope,name,phase,runs,mean_joules,sd_joules,low_joules,high_joules,mean_seconds,"
      "mean_half_width_joules\n";
  for (const RunsSummary& s : summaries) {
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

std::string RunsComparisonCsv(const std::vector<RunsComparison>& comparisons) {
  std::string out =
      "scope,name,phase,runs_a,runs_b,mean_a_joules,mean_b_joules,difference_joules,relative,"
      "low_joules,high_joules,t,dof,p_value,significant,why\n";
  for (const RunsComparison& c : comparisons) {
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

}  // namespace kwatt::energy
