// kwatt._core's energy and stats: energy() and stats() over an archive or a query, the power
// source energy() chooses (power_sources, power_metrics).
#include "kwatt/energy/energy.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kwatt/energy/phase_text.h"
#include "kwatt/energy/runs.h"
#include "kwatt/energy/source_check.h"
#include "kwatt/energy/stats.h"
#include "kwatt/energy/workflow.h"
#include "kwatt/kwollect/fetch.h"
#include "kwatt/rows/source.h"
#include "python/bindings/common.h"

namespace py = pybind11;

namespace kwatt::python {
namespace {

py::object Number(double v) { return std::isnan(v) ? py::object(py::none()) : py::float_(v); }

// What energy() and stats() read (kwatt._core.Selection): an archive, else a query of the client.
struct Selection {
  std::optional<std::string> archive;  // an archive directory; none: the query
  std::vector<std::string> nodes;      // some of the archive's, or the query's
  std::optional<int64_t> start, end;   // ns; an archive's window narrowed, or the query's
  std::optional<std::pair<std::string, int64_t>> job;
  std::vector<std::string> with_archives;  // other archives of the same nodes read with it
};

// How energy() computes (kwatt._core.EnergyOptions): energy::EnergyOptions as Python gives them.
struct PyEnergyOptions {
  std::vector<std::tuple<std::string, int64_t, int64_t>> phases;  // (name, start ns, end ns)
  std::vector<std::pair<std::string, std::vector<std::string>>> roles;
  std::string metric, baseline;
  double gap_factor = energy::EnergyOptions().gap_factor;
  std::vector<std::string> accuracies;  // METRIC=P%+WW
  double clock_offset = energy::kDefaultClockOffsetSeconds;
};

rows::RowSource MakeSource(Client& client, const Selection& selection) {
  rows::RowSource source;
  if (selection.archive) {
    source.from = rows::FromArchive{*selection.archive};  // the client's options are not read
  } else {
    source.from = rows::FromQuery{client.Options()};
  }
  source.query =
      MakeQuery(selection.nodes, selection.start, selection.end, selection.job, {}, false);
  source.with_archives = selection.with_archives;
  return source;
}

std::vector<energy::Interval> MakePhases(
    const std::vector<std::tuple<std::string, int64_t, int64_t>>& phases) {
  std::vector<energy::Interval> out;
  for (const auto& [name, a, b] : phases) out.push_back({name, a, b});
  Status checked = energy::CheckPhases(out);
  if (!checked.ok()) Throw(checked);
  return out;
}

std::vector<energy::Role> MakeRoles(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& roles) {
  std::vector<energy::Role> out;
  for (const auto& [name, members] : roles) {
    energy::Role role{name, {}};
    for (const auto& node : ParseNodes(members)) role.nodes.push_back(node.Fqdn());
    out.push_back(role);
  }
  return out;
}

py::dict Energy(Client& client, const Selection& selection, const PyEnergyOptions& given,
                py::object progress) {
  std::map<std::string, energy::StatedAccuracy> stated =
      Unwrap(energy::ParseStatedAccuracies(given.accuracies));
  rows::RowSource source = MakeSource(client, selection);
  source.query.check_metrics = false;  // power sources to try, not metrics the user named
  source.query.margin = energy::EnergyFetchMargin(source.query.summary);
  Watch watch{std::move(progress)};
  // The one energy workflow (energy::EnergyOf), its rows the source's.
  std::vector<std::string> archives_read;
  auto feed = [&](const std::vector<std::string>& metrics, RowSink* sink) {
    archives_read.clear();
    return rows::FeedSource(source, metrics, sink, watch.Callback(), &archives_read);
  };
  energy::EnergyOptions options;
  options.phases = MakePhases(given.phases);
  options.roles = MakeRoles(given.roles);
  options.metric = given.metric;
  options.baseline_phase = given.baseline;
  options.gap_factor = given.gap_factor;
  options.accuracies = std::move(stated);
  options.clock_offset_seconds = given.clock_offset;
  Result<energy::EnergyOutcome> outcome = Status::OK();
  {
    py::gil_scoped_release release;
    outcome = energy::EnergyOf(feed, options);
  }
  watch.RaiseIfInterrupted();
  energy::EnergyOutcome done = Unwrap(std::move(outcome));
  py::dict fetch = RowsReportDict(std::move(done.rows));
  fetch["with_archives"] = archives_read;  // those read with the rows
  // The document `kwatt energy --json` prints (one rendering for both), built as dicts and lists.
  PythonDocument document;
  energy::WriteEnergyReport(done.report, &done.checks, &document);
  py::dict d = document.Take();
  d["fetch"] = fetch;
  return d;
}

// The power source energy() would choose for each node, from rows given as columns (a
// DataFrame's): {node: metric or None}. plot_power() draws these, so that the plot and the
// energy figures use one choice (ComputeEnergy's).
py::dict PowerSources(const std::vector<std::string>& nodes,
                      const std::vector<std::string>& metrics,
                      const std::vector<std::string>& labels,
                      py::array_t<int64_t, py::array::c_style | py::array::forcecast> times,
                      py::array_t<double, py::array::c_style | py::array::forcecast> values,
                      int64_t start, int64_t end, const std::string& metric) {
  size_t n = nodes.size();
  if (metrics.size() != n || labels.size() != n || size_t(times.size()) != n ||
      size_t(values.size()) != n) {
    Throw(Status::InvalidArgument("power_sources: the columns differ in length"));
  }
  std::vector<std::string> unique;
  for (const std::string& node : nodes) {
    if (std::find(unique.begin(), unique.end(), node) == unique.end()) unique.push_back(node);
  }
  energy::PowerCollector collector(unique);
  const int64_t* t = times.data();
  const double* v = values.data();
  for (size_t i = 0; i < n; ++i) collector.Add(nodes[i], metrics[i], labels[i], t[i], v[i]);
  energy::EnergyOptions options;
  options.metric = metric;
  energy::EnergyReport report = Unwrap(energy::ComputeEnergy(collector, start, end, options));
  py::dict out;
  for (const energy::NodeEnergy& node : report.nodes) {
    out[py::str(node.node)] =
        node.metric.empty() ? py::object(py::none()) : py::object(py::str(node.metric));
  }
  return out;
}

// A run's figures as (scope, name, phase, joules, half-width, seconds) rows: an energy frame's.
using FigureRow = std::tuple<std::string, std::string, std::string, double, double, double>;

std::vector<std::vector<energy::RunFigure>> MakeRuns(
    const std::vector<std::vector<FigureRow>>& runs) {
  std::vector<std::vector<energy::RunFigure>> out;
  for (const auto& run : runs) {
    out.emplace_back();
    for (const auto& [scope, name, phase, joules, half_width, seconds] : run) {
      // A figure without power data (NaN) is no figure of the run.
      if (std::isnan(joules)) continue;
      out.back().push_back(
          {scope, name, phase, joules, std::isnan(half_width) ? 0 : half_width, seconds});
    }
  }
  return out;
}

void CheckConfidenceOrThrow(double confidence) {
  Status checked = energy::CheckConfidence(confidence);
  if (!checked.ok()) Throw(checked);
}

// Columns of `items`: a list of one text field, or a float64 array of a number (NaN kept).
template <typename T, typename Field>
py::list TextColumn(const std::vector<T>& items, Field field) {
  py::list out;
  for (const T& item : items) out.append(field(item));
  return out;
}
template <typename T, typename Field>
py::array_t<double> NumberColumn(const std::vector<T>& items, Field field) {
  py::array_t<double> out(py::ssize_t(items.size()));
  double* data = out.mutable_data();
  for (size_t i = 0; i < items.size(); ++i) data[i] = double(field(items[i]));
  return out;
}

// The summaries as columns, named as kwatt.runs_summary()'s frame names them.
py::dict RunsSummary(const std::vector<std::vector<FigureRow>>& runs, double confidence) {
  CheckConfidenceOrThrow(confidence);
  const std::vector<energy::RunsSummary> s = energy::SummarizeRuns(MakeRuns(runs), confidence);
  using S = energy::RunsSummary;
  py::dict out;
  out["scope"] = TextColumn(s, [](const S& x) { return x.scope; });
  out["name"] = TextColumn(s, [](const S& x) { return x.name; });
  out["phase"] = TextColumn(s, [](const S& x) { return x.phase; });
  out["runs"] = NumberColumn(s, [](const S& x) { return x.runs; });
  out["mean_joules"] = NumberColumn(s, [](const S& x) { return x.mean; });
  out["sd_joules"] = NumberColumn(s, [](const S& x) { return x.sd; });
  out["low_joules"] = NumberColumn(s, [](const S& x) { return x.low; });
  out["high_joules"] = NumberColumn(s, [](const S& x) { return x.high; });
  out["mean_seconds"] = NumberColumn(s, [](const S& x) { return x.mean_seconds; });
  out["mean_half_width_joules"] = NumberColumn(s, [](const S& x) { return x.mean_half_width; });
  return out;
}

// The comparison as columns, named as kwatt.compare_runs()'s frame names them.
py::dict CompareRuns(const std::vector<std::vector<FigureRow>>& a,
                     const std::vector<std::vector<FigureRow>>& b, double confidence) {
  CheckConfidenceOrThrow(confidence);
  const std::vector<energy::RunsComparison> c =
      energy::CompareRuns(MakeRuns(a), MakeRuns(b), confidence);
  using C = energy::RunsComparison;
  py::dict out;
  out["scope"] = TextColumn(c, [](const C& x) { return x.scope; });
  out["name"] = TextColumn(c, [](const C& x) { return x.name; });
  out["phase"] = TextColumn(c, [](const C& x) { return x.phase; });
  out["runs_a"] = NumberColumn(c, [](const C& x) { return x.a.runs; });
  out["runs_b"] = NumberColumn(c, [](const C& x) { return x.b.runs; });
  out["mean_a_joules"] = NumberColumn(c, [](const C& x) { return x.a.mean; });
  out["mean_b_joules"] = NumberColumn(c, [](const C& x) { return x.b.mean; });
  out["difference_joules"] = NumberColumn(c, [](const C& x) { return x.difference; });
  out["relative"] = NumberColumn(c, [](const C& x) { return x.relative; });
  out["low_joules"] = NumberColumn(c, [](const C& x) { return x.low; });
  out["high_joules"] = NumberColumn(c, [](const C& x) { return x.high; });
  out["t"] = NumberColumn(c, [](const C& x) { return x.t; });
  out["dof"] = NumberColumn(c, [](const C& x) { return x.dof; });
  out["p_value"] = NumberColumn(c, [](const C& x) { return x.p_value; });
  py::list significant;
  for (const C& x : c) significant.append(x.significant);
  out["significant"] = significant;
  out["why"] = TextColumn(c, [](const C& x) { return x.why; });
  return out;
}

py::dict StatsDict(const energy::MetricStats& s) {
  py::dict d;
  d["count"] = s.count;
  d["mean"] = Number(s.mean());
  d["min"] = Number(s.count ? s.min : NAN);
  d["max"] = Number(s.count ? s.max : NAN);
  d["last"] = Number(s.last);
  d["counter"] = s.counter;
  d["increase"] = s.counter ? Number(s.increase) : py::object(py::none());
  d["rate_per_s"] = s.counter ? Number(s.rate()) : py::object(py::none());
  d["resets"] = s.resets;
  return d;
}

py::dict Stats(Client& client, const Selection& selection, const std::vector<std::string>& metrics,
               const std::vector<std::tuple<std::string, int64_t, int64_t>>& phases,
               const std::vector<std::pair<std::string, std::vector<std::string>>>& roles,
               py::object progress) {
  rows::RowSource source = MakeSource(client, selection);
  energy::StatsSink sink(MakePhases(phases));
  std::vector<energy::Role> role_list = MakeRoles(roles);
  Watch watch{std::move(progress)};
  Result<RowsReport> report = Status::OK();
  Result<std::vector<std::vector<energy::NodeStats>>> results = Status::OK();
  {
    py::gil_scoped_release release;
    report = rows::FeedSource(source, metrics, &sink, watch.Callback());
    if (report.ok()) results = sink.Results(role_list);
  }
  watch.RaiseIfInterrupted();
  py::dict d;
  d["fetch"] = RowsReportDict(Unwrap(std::move(report)));
  std::vector<std::vector<energy::NodeStats>> all = Unwrap(std::move(results));
  py::list intervals;
  for (size_t k = 0; k < all.size(); ++k) {
    const energy::Interval& interval = sink.intervals()[k];
    py::dict id;
    id["name"] = interval.name;
    id["start"] = interval.start;
    id["end"] = interval.end;
    py::list node_list;
    for (const energy::NodeStats& n : all[k]) {
      py::dict nd;
      nd["node"] = n.node;
      nd["cpu_busy"] = Number(n.cpu_busy);
      nd["cpu_source"] = n.cpu_source;
      py::dict ms;
      for (const auto& [metric, s] : n.metrics) ms[py::str(metric)] = StatsDict(s);
      nd["metrics"] = ms;
      node_list.append(nd);
    }
    id["nodes"] = node_list;
    intervals.append(id);
  }
  d["intervals"] = intervals;
  return d;
}

}  // namespace

void RegisterEnergy(py::module_& m) {
  py::class_<Selection>(m, "Selection",
                        "What energy() and stats() read: an archive, else a query of the client")
      .def(py::init([](std::optional<std::string> archive, std::vector<std::string> nodes,
                       std::optional<int64_t> start, std::optional<int64_t> end,
                       std::optional<std::pair<std::string, int64_t>> job,
                       std::vector<std::string> with_archives) {
             return Selection{std::move(archive), std::move(nodes),        start, end,
                              std::move(job),     std::move(with_archives)};
           }),
           py::kw_only(), py::arg("archive") = py::none(),
           py::arg("nodes") = std::vector<std::string>{}, py::arg("start") = py::none(),
           py::arg("end") = py::none(), py::arg("job") = py::none(),
           py::arg("with_archives") = std::vector<std::string>{})
      .def_readwrite("archive", &Selection::archive)
      .def_readwrite("nodes", &Selection::nodes)
      .def_readwrite("start", &Selection::start)
      .def_readwrite("end", &Selection::end)
      .def_readwrite("job", &Selection::job)
      .def_readwrite("with_archives", &Selection::with_archives);
  py::class_<PyEnergyOptions>(m, "EnergyOptions",
                              "How energy() computes: phases, roles, the power metric, the "
                              "baseline phase, the gap factor, stated accuracies, the clock offset")
      .def(py::init([](std::vector<std::tuple<std::string, int64_t, int64_t>> phases,
                       std::vector<std::pair<std::string, std::vector<std::string>>> roles,
                       std::string metric, std::string baseline, double gap_factor,
                       std::vector<std::string> accuracies, double clock_offset) {
             return PyEnergyOptions{std::move(phases),   std::move(roles), std::move(metric),
                                    std::move(baseline), gap_factor,       std::move(accuracies),
                                    clock_offset};
           }),
           py::kw_only(),
           py::arg("phases") = std::vector<std::tuple<std::string, int64_t, int64_t>>{},
           py::arg("roles") = std::vector<std::pair<std::string, std::vector<std::string>>>{},
           py::arg("metric") = "", py::arg("baseline") = "",
           py::arg("gap_factor") = energy::EnergyOptions().gap_factor,
           py::arg("accuracies") = std::vector<std::string>{},
           py::arg("clock_offset") = energy::kDefaultClockOffsetSeconds)
      .def_readwrite("phases", &PyEnergyOptions::phases)
      .def_readwrite("roles", &PyEnergyOptions::roles)
      .def_readwrite("metric", &PyEnergyOptions::metric)
      .def_readwrite("baseline", &PyEnergyOptions::baseline)
      .def_readwrite("gap_factor", &PyEnergyOptions::gap_factor)
      .def_readwrite("accuracies", &PyEnergyOptions::accuracies)
      .def_readwrite("clock_offset", &PyEnergyOptions::clock_offset);
  m.def("energy", &Energy, py::arg("client"), py::arg("selection"), py::arg("options"),
        py::kw_only(), py::arg("progress") = py::none(),
        "The energy workflow (energy::EnergyOf) over the selection: the report in the form "
        "`kwatt energy --json` prints, with `fetch`");
  m.def("stats", &Stats, py::arg("client"), py::arg("selection"), py::kw_only(), py::arg("metrics"),
        py::arg("phases"), py::arg("roles"), py::arg("progress") = py::none());
  m.def("power_sources", &PowerSources, py::kw_only(), py::arg("nodes"), py::arg("metrics"),
        py::arg("labels"), py::arg("times"), py::arg("values"), py::arg("start"), py::arg("end"),
        py::arg("metric") = "",
        "{node: the power metric energy() chooses for it (None: none)} from rows given as "
        "columns, sorted by time");
  m.def(
      "power_metrics", []() { return energy::PowerMetrics(); },
      "Power metrics, in the order energy() prefers them");
  m.attr("DEFAULT_CLOCK_OFFSET") = energy::kDefaultClockOffsetSeconds;
  m.def("runs_summary", &RunsSummary, py::arg("runs"), py::kw_only(), py::arg("confidence"),
        "Each figure over runs given as rows (scope, name, phase, joules, half_width, seconds): "
        "[{scope, name, phase, runs, mean_joules, sd_joules, low_joules, high_joules, ...}]");
  m.def("compare_runs", &CompareRuns, py::arg("a"), py::arg("b"), py::kw_only(),
        py::arg("confidence"), "Each figure of set B against set A (Welch's t test)");
}

}  // namespace kwatt::python
