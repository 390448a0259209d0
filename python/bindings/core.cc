// kwatt._core: the C++ toolkit as seen from Python (doc/python.md).
//
// Everything that computes is C++: fetching (with the GIL released), archives, energy, stats, the
// catalogue rules, time parsing. This module only converts: Python arguments into queries, the
// columnar kwatt::RowTable into numpy arrays (views, no copies) and row dicts, reports into dicts.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kwatt/archive/reader.h"
#include "kwatt/backup/backup.h"
#include "kwatt/backup/row_source.h"
#include "kwatt/core/catalogue.h"
#include "kwatt/core/json_text.h"
#include "kwatt/core/output_file.h"
#include "kwatt/core/row_batch.h"
#include "kwatt/core/row_table.h"
#include "kwatt/core/status.h"
#include "kwatt/core/text.h"
#include "kwatt/core/time.h"
#include "kwatt/energy/energy.h"
#include "kwatt/energy/stats.h"
#include "kwatt/kwollect/client_options.h"
#include "kwatt/kwollect/fetch.h"
#include "kwatt/kwollect/node_name.h"
#include "python/bindings/common.h"

#ifndef KWATT_VERSION
#define KWATT_VERSION "0.0.0"
#endif

namespace py = pybind11;

namespace kwatt::python {

kwollect::ClientOptions MakeClientOptions(const py::dict& given) {
  kwollect::ClientOptions options;
  std::string config = given.contains("config") && !given["config"].is_none()
                           ? given["config"].cast<std::string>()
                           : kwollect::DefaultConfigPath();
  Check(kwollect::LoadClientOptions(config, &options));
  std::optional<std::string> api_url;
  for (auto [key_handle, value] : given) {
    std::string key = key_handle.cast<std::string>();
    if (value.is_none() || key == "config") continue;
    if (key == "api_url")
      api_url = value.cast<std::string>();
    else if (key == "username")
      options.username = value.cast<std::string>();
    else if (key == "password")
      options.password = value.cast<std::string>();
    else if (key == "verify_tls")
      options.verify_tls = value.cast<bool>();
    else if (key == "ca_file")
      options.ca_file = value.cast<std::string>();
    else if (key == "timeout")
      options.timeout_s = value.cast<double>();
    else if (key == "connect_timeout")
      options.connect_timeout_s = value.cast<double>();
    else if (key == "concurrency")
      options.max_concurrency = value.cast<int>();
    else if (key == "per_site")
      options.max_per_site = value.cast<int>();
    else if (key == "rows_per_request")
      options.max_rows_per_request = value.cast<int64_t>();
    else if (key == "retries")
      options.max_retries = value.cast<int>();
    else if (key == "backoff")
      options.backoff_s = value.cast<double>();
    else
      Throw(Status::InvalidArgument("unknown client option \"" + key + "\""));
  }
  // Last, so that a username given as an option wins over the URL's.
  if (api_url) kwollect::SetApiUrl(*api_url, &options);
  return options;
}

namespace {

// ---- arguments ---------------------------------------------------------------------------------

std::vector<kwollect::NodeName> ParseNodes(const std::vector<std::string>& names) {
  std::vector<kwollect::NodeName> nodes;
  for (const std::string& name : names) {
    kwollect::NodeName node = Unwrap(kwollect::ParseNodeName(name));
    if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) nodes.push_back(node);
  }
  return nodes;
}

// A query from keyword arguments: nodes (names), start, end (int ns), job ((site, id)),
// metrics, summary.
kwollect::FetchQuery MakeQuery(const std::vector<std::string>& nodes, std::optional<int64_t> start,
                               std::optional<int64_t> end,
                               std::optional<std::pair<std::string, int64_t>> job,
                               const std::vector<std::string>& metrics, bool summary) {
  kwollect::FetchQuery query;
  query.nodes = ParseNodes(nodes);
  query.start = start;
  query.end = end;
  if (job) query.job = kwollect::JobRef{job->first, job->second};
  query.metrics = metrics;
  query.summary = summary;
  return query;
}

// ---- progress and interruption
// -------------------------------------------------------------------

// Calls a Python progress function (under the GIL), and notices Ctrl-C while the GIL is released:
// the fetch then stops (within 0.2 s), and KeyboardInterrupt is raised once it has returned. An
// exception the progress function raises stops the operation too, and is raised as it was.
struct Watch {
  py::object progress;  // None or callable(dict)
  bool interrupted = false;
  std::optional<py::error_already_set> raised;  // by the progress function

  kwollect::ProgressCallback Callback() {
    return [this](const kwollect::FetchProgress& p) -> Status {
      py::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) {
        PyErr_Clear();
        interrupted = true;
      } else if (!progress.is_none() && !raised) {
        py::dict d;
        d["requests_done"] = p.requests_done;
        d["requests_total"] = p.requests_total;
        d["rows"] = p.rows;
        d["bytes"] = p.bytes;
        d["seconds"] = p.seconds;
        try {
          progress(d);
        } catch (py::error_already_set& e) {
          raised.emplace(std::move(e));
        }
      }
      if (raised) return Status::Incomplete("stopped by an exception of the progress function");
      return CheckNotInterrupted();
    };
  }
  Status CheckNotInterrupted() const {
    return interrupted ? Status::Incomplete("interrupted") : Status::OK();
  }
  // Once the operation has returned (GIL held): raises the progress function's exception, or
  // KeyboardInterrupt after Ctrl-C.
  void RaiseIfInterrupted() {
    if (raised) {
      py::error_already_set error = std::move(*raised);
      raised.reset();
      throw error;
    }
    if (!interrupted) return;
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  }
};

// ---- reports as dicts
// ----------------------------------------------------------------------------

py::dict FetchReportDict(const kwollect::FetchReport& r) {
  py::dict d;
  py::list nodes;
  for (const auto& node : r.nodes) nodes.append(node.Fqdn());
  d["nodes"] = nodes;
  d["start"] = r.start;
  d["end"] = r.end;
  d["job_types"] = r.job_types;
  py::dict catalogues;
  for (const ClusterCatalogue& c : r.catalogues) catalogues[py::str(c.cluster)] = c.catalogue;
  d["catalogues"] = catalogues;
  d["requests"] = r.requests;
  d["retries"] = r.retries;
  d["splits"] = r.splits;
  d["rows"] = r.rows;
  d["bytes"] = r.bytes;
  d["seconds"] = r.seconds;
  py::list failures;
  for (const auto& f : r.failures) {
    py::dict fd;
    fd["site"] = f.site;
    fd["nodes"] = f.nodes;
    fd["start"] = f.start;
    fd["end"] = f.end;
    fd["metrics"] = f.metrics;
    fd["error"] = f.error.message();
    failures.append(fd);
  }
  d["failures"] = failures;
  d["complete"] = r.complete();
  return d;
}

py::object Number(double v) { return std::isnan(v) ? py::object(py::none()) : py::float_(v); }

// A numpy view of a column; the table stays alive while the array does.
template <typename T>
py::array_t<T> View(const std::shared_ptr<RowTable>& table, const std::vector<T>& column) {
  py::object owner = py::cast(table);
  return py::array_t<T>({py::ssize_t(column.size())}, {py::ssize_t(sizeof(T))}, column.data(),
                        owner);
}

py::list Strings(const StringInterner& interner) {
  py::list out;
  for (size_t i = 0; i < interner.size(); ++i)
    out.append(py::str(std::string(interner.Get(uint32_t(i)))));
  return out;
}

// A copy of a JSON value made of dicts, lists and immutable scalars; its dicts and lists are not
// tracked by the cyclic garbage collector (see RowsByNode).
PyObject* DeepCopy(PyObject* value) {
  if (PyDict_CheckExact(value)) {
    PyObject* copy = PyDict_New();
    if (!copy) return nullptr;
    PyObject *key, *item;
    Py_ssize_t pos = 0;
    while (PyDict_Next(value, &pos, &key, &item)) {
      PyObject* item_copy = DeepCopy(item);
      if (!item_copy || PyDict_SetItem(copy, key, item_copy) < 0) {
        Py_XDECREF(item_copy);
        Py_DECREF(copy);
        return nullptr;
      }
      Py_DECREF(item_copy);
    }
    PyObject_GC_UnTrack(copy);
    return copy;
  }
  if (PyList_CheckExact(value)) {
    Py_ssize_t n = PyList_GET_SIZE(value);
    PyObject* copy = PyList_New(n);
    if (!copy) return nullptr;
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* item_copy = DeepCopy(PyList_GET_ITEM(value, i));
      if (!item_copy) {
        Py_DECREF(copy);
        return nullptr;
      }
      PyList_SET_ITEM(copy, i, item_copy);
    }
    PyObject_GC_UnTrack(copy);
    return copy;
  }
  Py_INCREF(value);
  return value;
}

// {node: [row dicts]} for `node_names` (each present, [] without rows), rows in table order, each
// row the dict json.loads gives for the API's row.
py::dict RowsByNode(const RowTable& t, const std::vector<std::string>& node_names) {
  py::dict out;
  std::vector<py::list> lists;
  std::vector<int> list_of_node(t.nodes.size(), -1);
  for (const std::string& name : node_names) {
    if (out.contains(name)) continue;
    py::list rows;
    out[py::str(name)] = rows;
    lists.push_back(rows);
    for (size_t code = 0; code < t.nodes.size(); ++code) {
      if (t.nodes.Get(uint32_t(code)) == name) list_of_node[code] = int(lists.size() - 1);
    }
  }
  py::module_ json = py::module_::import("json");
  py::object loads = json.attr("loads");
  std::vector<py::object> devices, metrics, labels;
  for (size_t i = 0; i < t.devices.size(); ++i)
    devices.push_back(py::str(std::string(t.devices.Get(uint32_t(i)))));
  for (size_t i = 0; i < t.metrics.size(); ++i)
    metrics.push_back(py::str(std::string(t.metrics.Get(uint32_t(i)))));
  for (size_t i = 0; i < t.label_texts.size(); ++i) {
    labels.push_back(loads(py::str(std::string(t.label_texts.Get(uint32_t(i))))));
  }
  py::str k_timestamp("timestamp"), k_device("device_id"), k_metric("metric_id"), k_value("value"),
      k_labels("labels");
  py::str nan_text("NaN"), inf_text("Infinity"), minus_inf_text("-Infinity");
  char text[kMaxTimestampLength];
  // The rows' dicts and lists are not tracked by the cyclic garbage collector: made of strings and
  // numbers, they cannot be part of a reference cycle (CPython untracks such dicts itself, but only
  // after its collector has scanned them, over and over while millions are being made, and again
  // once the call returns: seconds per million rows). Reference counting frees them; a dict
  // that later gets a container inserted is tracked again by CPython. The collector is also paused
  // while they are made.
  struct GcPause {
    int was_enabled = PyGC_Disable();
    ~GcPause() {
      if (was_enabled) PyGC_Enable();
    }
  } gc_pause;
  for (size_t i = 0; i < t.size(); ++i) {
    int which = list_of_node[size_t(t.node[i])];
    if (which < 0) continue;
    size_t length = FormatTimestamp(t.time[i], t.utc_offset[i], text);
    PyObject* row = _PyDict_NewPresized(5);
    if (!row) throw py::error_already_set();
    py::object owned = py::reinterpret_steal<py::object>(row);
    py::object timestamp =
        py::reinterpret_steal<py::object>(PyUnicode_FromStringAndSize(text, Py_ssize_t(length)));
    double v = t.value[i];
    py::object value;
    switch (t.kind[i]) {
      case JsonValueKind::kInt:
        value = py::reinterpret_steal<py::object>(PyLong_FromDouble(v));
        break;
      case JsonValueKind::kNull:
        value = py::none();
        break;
      case JsonValueKind::kText:
        value = std::isnan(v) ? nan_text : (v > 0 ? inf_text : minus_inf_text);
        break;
      default:
        value = py::float_(v);
    }
    py::object label_copy =
        py::reinterpret_steal<py::object>(DeepCopy(labels[size_t(t.labels[i])].ptr()));
    if (!timestamp || !value || !label_copy ||
        PyDict_SetItem(row, k_timestamp.ptr(), timestamp.ptr()) < 0 ||
        PyDict_SetItem(row, k_device.ptr(), devices[size_t(t.device[i])].ptr()) < 0 ||
        PyDict_SetItem(row, k_metric.ptr(), metrics[size_t(t.metric[i])].ptr()) < 0 ||
        PyDict_SetItem(row, k_value.ptr(), value.ptr()) < 0 ||
        PyDict_SetItem(row, k_labels.ptr(), label_copy.ptr()) < 0 ||
        PyList_Append(lists[size_t(which)].ptr(), row) < 0) {
      throw py::error_already_set();
    }
    PyObject_GC_UnTrack(row);
  }
  return out;
}

// ---- operations
// ----------------------------------------------------------------------------------

std::shared_ptr<RowTable> FetchTable(const py::dict& client, const std::vector<std::string>& nodes,
                                     std::optional<int64_t> start, std::optional<int64_t> end,
                                     std::optional<std::pair<std::string, int64_t>> job,
                                     const std::vector<std::string>& metrics, bool summary,
                                     py::object progress, bool check_metrics) {
  kwollect::ClientOptions options = MakeClientOptions(client);
  kwollect::FetchQuery query = MakeQuery(nodes, start, end, job, metrics, summary);
  query.check_metrics = check_metrics;
  auto table = std::make_shared<RowTable>();
  Watch watch{std::move(progress)};
  Result<kwollect::FetchReport> report = Status::OK();
  {
    py::gil_scoped_release release;
    report = kwollect::Fetch(options, query, table.get(), watch.Callback());
  }
  watch.RaiseIfInterrupted();
  table->report = Unwrap(std::move(report));
  table->complete = table->report.complete();
  return table;
}

std::shared_ptr<RowTable> LoadTable(const std::string& dir, const std::vector<std::string>& nodes,
                                    const std::vector<std::string>& metrics,
                                    std::optional<int64_t> start, std::optional<int64_t> end,
                                    bool allow_incomplete, int threads) {
  archive::LoadOptions options;
  options.nodes = nodes;
  options.metrics = metrics;
  options.start = start;
  options.end = end;
  options.allow_incomplete = allow_incomplete;
  options.threads = threads;
  options.keep_raw = false;
  // Ctrl-C stops the read between two frames (the GIL is released while it runs), and
  // KeyboardInterrupt is raised once it has returned.
  Watch watch;
  options.cancelled = [&watch] {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) {
      PyErr_Clear();
      watch.interrupted = true;
    }
    return watch.interrupted;
  };
  auto table = std::make_shared<RowTable>();
  {
    py::gil_scoped_release release;
    StringInterner interner;
    RowBatch batch;
    archive::LoadReport report;
    Status loaded = archive::LoadArchive(dir, options, &interner, &batch, &report);
    if (watch.interrupted) {
      py::gil_scoped_acquire gil;
      watch.RaiseIfInterrupted();
    }
    Check(loaded);
    for (const archive::LoadedFile& file : report.files) {
      table->Append(file.site, batch, interner, file.begin, file.end);
    }
    table->complete = report.complete;
    table->report = Unwrap(archive::ReadManifest(dir)).Resolved();
    table->report.rows = int64_t(table->size());
  }
  return table;
}

py::dict Backup(const py::dict& client, const std::string& dir,
                const std::vector<std::string>& nodes, std::optional<int64_t> start,
                std::optional<int64_t> end, std::optional<std::pair<std::string, int64_t>> job,
                const std::vector<std::string>& metrics, bool summary, py::object progress) {
  kwollect::ClientOptions options = MakeClientOptions(client);
  kwollect::FetchQuery query = MakeQuery(nodes, start, end, job, metrics, summary);
  Watch watch{std::move(progress)};
  Result<backup::BackupOutcome> outcome = Status::OK();
  {
    py::gil_scoped_release release;
    outcome = backup::Backup(options, query, dir, KWATT_VERSION, watch.Callback());
  }
  watch.RaiseIfInterrupted();
  backup::BackupOutcome done = Unwrap(std::move(outcome));
  py::dict d;
  d["dir"] = dir;
  d["already_complete"] = done.already_complete;
  d["resuming"] = done.resuming;
  d["rows_written"] = done.rows_written;
  d["bytes_written"] = done.bytes_written;
  d["fetch"] = FetchReportDict(done.report);
  d["complete"] = done.finished.ok();
  d["error"] = done.finished.ok() ? py::object(py::none()) : py::str(done.finished.message());
  return d;
}

// The source of energy() and stats(): an archive directory, or a query.
backup::RowSource MakeSource(const py::dict& client, const std::string& archive_dir,
                             const std::vector<std::string>& nodes, std::optional<int64_t> start,
                             std::optional<int64_t> end,
                             std::optional<std::pair<std::string, int64_t>> job) {
  backup::RowSource source;
  source.archive_dir = archive_dir;
  if (archive_dir.empty()) source.options = MakeClientOptions(client);
  source.query = MakeQuery(nodes, start, end, job, {}, false);
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

py::dict Energy(const py::dict& client, const std::string& archive_dir,
                const std::vector<std::string>& nodes, std::optional<int64_t> start,
                std::optional<int64_t> end, std::optional<std::pair<std::string, int64_t>> job,
                const std::vector<std::tuple<std::string, int64_t, int64_t>>& phases,
                const std::vector<std::pair<std::string, std::vector<std::string>>>& roles,
                const std::string& metric, const std::string& baseline, double gap_factor,
                py::object progress) {
  backup::RowSource source = MakeSource(client, archive_dir, nodes, start, end, job);
  source.query.check_metrics = false;  // power sources to try, not metrics the user named
  energy::EnergyOptions options;
  options.phases = MakePhases(phases);
  options.roles = MakeRoles(roles);
  options.metric = metric;
  options.baseline_phase = baseline;
  options.gap_factor = gap_factor;
  energy::EnergySink sink(metric);
  Watch watch{std::move(progress)};
  Result<kwollect::FetchReport> report = Status::OK();
  Result<energy::EnergyReport> result = Status::OK();
  {
    py::gil_scoped_release release;
    report =
        backup::FeedSource(source, energy::EnergyInputMetrics(metric), &sink, watch.Callback());
    if (report.ok()) result = sink.Compute(*report, options);
  }
  watch.RaiseIfInterrupted();
  py::dict fetch = FetchReportDict(Unwrap(std::move(report)));
  // The report in the form `kwatt energy --json` prints (one rendering for both).
  py::dict d = py::module_::import("json").attr("loads")(
      energy::EnergyReportJson(Unwrap(std::move(result))));
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

py::dict Stats(const py::dict& client, const std::string& archive_dir,
               const std::vector<std::string>& nodes, std::optional<int64_t> start,
               std::optional<int64_t> end, std::optional<std::pair<std::string, int64_t>> job,
               const std::vector<std::string>& metrics,
               const std::vector<std::tuple<std::string, int64_t, int64_t>>& phases,
               const std::vector<std::pair<std::string, std::vector<std::string>>>& roles,
               py::object progress) {
  backup::RowSource source = MakeSource(client, archive_dir, nodes, start, end, job);
  energy::StatsSink sink(MakePhases(phases));
  std::vector<energy::Role> role_list = MakeRoles(roles);
  Watch watch{std::move(progress)};
  Result<kwollect::FetchReport> report = Status::OK();
  Result<std::vector<std::vector<energy::NodeStats>>> results = Status::OK();
  {
    py::gil_scoped_release release;
    report = backup::FeedSource(source, metrics, &sink, watch.Callback());
    if (report.ok()) results = sink.Results(role_list);
  }
  watch.RaiseIfInterrupted();
  py::dict d;
  d["fetch"] = FetchReportDict(Unwrap(std::move(report)));
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

py::dict LookUp(const py::dict& client, const std::vector<std::string>& names) {
  kwollect::ClientOptions options = MakeClientOptions(client);
  std::vector<kwollect::NodeName> nodes;
  py::list problems;
  std::vector<std::string> parsed_names;
  for (const std::string& name : names) {
    Result<kwollect::NodeName> node = kwollect::ParseNodeName(name);
    if (!node.ok()) {
      problems.append(py::make_tuple(name, node.status().message()));
      continue;
    }
    nodes.push_back(*node);
    parsed_names.push_back(name);
  }
  Result<kwollect::NodeLookup> lookup = Status::OK();
  {
    py::gil_scoped_release release;
    lookup = kwollect::LookUpNodes(options, nodes);
  }
  kwollect::NodeLookup found = Unwrap(std::move(lookup));
  py::list known;
  for (size_t i = 0; i < found.nodes.size(); ++i) {
    const kwollect::NodeInfo& info = found.nodes[i];
    if (!info.problem.empty()) {
      problems.append(py::make_tuple(parsed_names[i], info.problem));
      continue;
    }
    py::dict d;
    d["name"] = parsed_names[i];
    d["node"] = info.node.Fqdn();
    d["uid"] = info.node.uid;
    d["site"] = info.node.site;
    d["cluster"] = info.cluster;
    const Catalogue* catalogue = found.CatalogueOf(info.node);
    d["catalogue"] = catalogue ? *catalogue : Catalogue();
    known.append(d);
  }
  py::dict out;
  out["nodes"] = known;
  out["problems"] = problems;
  return out;
}

py::dict ResolveQuery(const py::dict& client, const std::vector<std::string>& nodes,
                      std::optional<int64_t> start, std::optional<int64_t> end,
                      std::optional<std::pair<std::string, int64_t>> job) {
  kwollect::ClientOptions options = MakeClientOptions(client);
  kwollect::FetchQuery query = MakeQuery(nodes, start, end, job, {}, false);
  Result<kwollect::FetchReport> report = Status::OK();
  {
    py::gil_scoped_release release;
    report = kwollect::Resolve(options, query);
  }
  return FetchReportDict(Unwrap(std::move(report)));
}

py::list CatalogueMetrics(const Catalogue& catalogue, const std::string& uid,
                          const std::vector<std::string>& job_types) {
  py::list out;
  for (const CatalogueMetric& m : catalogue.MetricsOf(uid)) {
    const CatalogueEntry& e = *m.entry;
    py::dict d;
    d["name"] = m.metric_id;
    d["description"] = e.description;
    d["period"] = e.period_ms;
    d["optional_period"] = e.optional_period_ms;
    d["protocol"] = e.protocol;
    py::dict labels;
    for (const auto& [key, value] : e.labels) labels[py::str(key)] = value;
    d["labels"] = labels;
    d["group"] = e.name != m.metric_id ? py::object(py::str(e.name)) : py::object(py::none());
    d["on_demand"] = e.period_ms == 0;
    // The period in a job of these types (none given: a default job, node exporter on).
    int64_t period = EffectivePeriodMs(e, m.metric_id, job_types);
    d["period_in_job"] = period;
    out.append(d);
  }
  return out;
}

}  // namespace
}  // namespace kwatt::python

PYBIND11_MODULE(_core, m) {
  using namespace kwatt::python;
  using kwatt::Catalogue;
  using kwatt::RowTable;
  namespace kp = kwatt::python;
  m.doc() = "kwatt's C++ core (fetching, archives, energy, stats); see the kwatt package";
  m.attr("__version__") = KWATT_VERSION;
  RegisterMeter(m);

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      py::object errors = py::module_::import("kwatt.errors");
      py::object cls = errors.attr(ErrorClassName(e.status.code()));
      PyErr_SetObject(cls.ptr(), py::str(e.status.message()).ptr());
    }
  });

  py::class_<RowTable, std::shared_ptr<RowTable>>(
      m, "Table",
      "Rows in columns (numpy views), string columns as "
      "codes into their category lists")
      .def("__len__", &RowTable::size)
      .def_property_readonly(
          "time", [](const std::shared_ptr<RowTable>& t) { return View(t, t->time); },
          "int64 ns since the epoch, UTC")
      .def_property_readonly(
          "utc_offset", [](const std::shared_ptr<RowTable>& t) { return View(t, t->utc_offset); },
          "int32 seconds, as written in the timestamps")
      .def_property_readonly("value",
                             [](const std::shared_ptr<RowTable>& t) { return View(t, t->value); })
      .def_property_readonly("site_codes",
                             [](const std::shared_ptr<RowTable>& t) { return View(t, t->site); })
      .def_property_readonly("node_codes",
                             [](const std::shared_ptr<RowTable>& t) { return View(t, t->node); })
      .def_property_readonly("device_codes",
                             [](const std::shared_ptr<RowTable>& t) { return View(t, t->device); })
      .def_property_readonly("metric_codes",
                             [](const std::shared_ptr<RowTable>& t) { return View(t, t->metric); })
      .def_property_readonly("labels_codes",
                             [](const std::shared_ptr<RowTable>& t) { return View(t, t->labels); })
      .def_property_readonly("sites", [](const RowTable& t) { return Strings(t.sites); })
      .def_property_readonly("nodes", [](const RowTable& t) { return Strings(t.nodes); })
      .def_property_readonly("devices", [](const RowTable& t) { return Strings(t.devices); })
      .def_property_readonly("metrics", [](const RowTable& t) { return Strings(t.metrics); })
      .def_property_readonly("label_texts",
                             [](const RowTable& t) { return Strings(t.label_texts); })
      .def_property_readonly("report", [](const RowTable& t) { return FetchReportDict(t.report); })
      .def_readonly("complete", &RowTable::complete)
      .def("rows_by_node", &RowsByNode, py::arg("nodes"),
           "{node: [row dicts]} for these node FQDNs, rows in order");

  m.def("fetch", &FetchTable, py::arg("client"), py::kw_only(), py::arg("nodes"), py::arg("start"),
        py::arg("end"), py::arg("job"), py::arg("metrics"), py::arg("summary"), py::arg("progress"),
        py::arg("check_metrics") = true,
        "Fetches a query into a Table (the GIL is released); check_metrics false: metrics no "
        "node reports are not an error");
  m.def("load", &LoadTable, py::arg("dir"), py::kw_only(), py::arg("nodes"), py::arg("metrics"),
        py::arg("start"), py::arg("end"), py::arg("allow_incomplete"), py::arg("threads"),
        "Loads an archive (or part of it) into a Table");
  m.def("backup", &kp::Backup, py::arg("client"), py::arg("dir"), py::kw_only(), py::arg("nodes"),
        py::arg("start"), py::arg("end"), py::arg("job"), py::arg("metrics"), py::arg("summary"),
        py::arg("progress"), "Backs a query up into an archive directory");
  m.def("energy", &kp::Energy, py::arg("client"), py::kw_only(), py::arg("archive"),
        py::arg("nodes"), py::arg("start"), py::arg("end"), py::arg("job"), py::arg("phases"),
        py::arg("roles"), py::arg("metric"), py::arg("baseline"), py::arg("gap_factor"),
        py::arg("progress"));
  m.def("stats", &kp::Stats, py::arg("client"), py::kw_only(), py::arg("archive"), py::arg("nodes"),
        py::arg("start"), py::arg("end"), py::arg("job"), py::arg("metrics"), py::arg("phases"),
        py::arg("roles"), py::arg("progress"));
  m.def("look_up_nodes", &LookUp, py::arg("client"), py::arg("names"),
        "Checks node names against the reference API");
  m.def("resolve", &ResolveQuery, py::arg("client"), py::kw_only(), py::arg("nodes"),
        py::arg("start"), py::arg("end"), py::arg("job"),
        "Resolves a query (a job's nodes, window and types; nodes checked) without fetching");
  py::class_<Catalogue>(m, "Catalogue",
                        "A cluster's metric catalogue, parsed once where it entered (the reference "
                        "API, an archive's manifest)")
      .def_static(
          "from_json", [](std::string_view text) { return Unwrap(Catalogue::FromJson(text)); },
          py::arg("text"), "Parses a cluster object or its `metrics` array")
      .def_property_readonly("json", &Catalogue::json, "Its `metrics` array, as compact JSON")
      .def("__len__", [](const Catalogue& c) { return c.entries().size(); })
      .def("__repr__", [](const Catalogue& c) {
        return "<kwatt._core.Catalogue of " + std::to_string(c.entries().size()) + " entries>";
      });
  m.def("catalogue_metrics", &CatalogueMetrics, py::arg("catalogue"), py::arg("uid"),
        py::arg("job_types") = std::vector<std::string>{},
        "The metric ids a node can report, from its cluster's catalogue");
  m.def("power_sources", &kp::PowerSources, py::kw_only(), py::arg("nodes"), py::arg("metrics"),
        py::arg("labels"), py::arg("times"), py::arg("values"), py::arg("start"), py::arg("end"),
        py::arg("metric") = "",
        "{node: the power metric energy() chooses for it (None: none)} from rows given as "
        "columns, sorted by time");
  m.def(
      "power_metrics", []() { return kwatt::energy::PowerMetrics(); },
      "Power metrics, in the order energy() prefers them");
  m.def(
      "node_fqdn",
      [](const std::string& name) { return Unwrap(kwatt::kwollect::ParseNodeName(name)).Fqdn(); },
      py::arg("name"), "The FQDN of a node name (FQDN, KaVLAN or IPv6 name, uid.site)");
  m.def(
      "parse_time",
      [](const std::string& text) {
        return Unwrap(kwatt::ParseUserTime(text, kwatt::WallClockNow()));
      },
      py::arg("text"),
      "ns since the epoch of a time text: now, epoch seconds, ISO 8601 (no offset: local time)");
  py::class_<kwatt::OutputFile>(
      m, "OutputFile", "How a file kwatt was asked to write is written (core/output_file.h)")
      .def_static(
          "plan",
          [](const std::string& path, const std::vector<std::string>& inputs) {
            return Unwrap(kwatt::OutputFile::Plan(path, inputs));
          },
          py::arg("path"), py::arg("inputs") = std::vector<std::string>(),
          "How `path` is written; refused when it is, or lies inside, one of `inputs`")
      .def_property_readonly("write_path", &kwatt::OutputFile::write_path)
      .def_property_readonly("replaces", &kwatt::OutputFile::replaces)
      .def("commit", [](kwatt::OutputFile& file) { Check(file.Commit()); })
      .def("abandon", &kwatt::OutputFile::Abandon);
  m.def(
      "url_without_credentials",
      [](const std::string& url) { return kwatt::UrlWithoutCredentials(url); }, py::arg("url"),
      "The URL without its user:password@ part, as kwatt stores and shows URLs");
  m.def(
      "format_paris", [](int64_t t) { return kwatt::FormatParisTimestamp(t); }, py::arg("t"),
      "A time as Kwollect writes it (Europe/Paris)");
  m.def(
      "read_manifest",
      [](const std::string& dir) {
        kwatt::archive::Manifest m = Unwrap(kwatt::archive::ReadManifest(dir));
        py::dict d;
        d["format_version"] = m.format_version;
        d["kwatt_version"] = m.kwatt_version;
        d["complete"] = m.complete;
        d["created_at"] = m.created_at;
        d["completed_at"] = m.completed_at;
        d["api"] = m.query.api;
        d["window_start"] =
            m.has_window ? py::object(py::int_(m.window_start)) : py::object(py::none());
        d["window_end"] =
            m.has_window ? py::object(py::int_(m.window_end)) : py::object(py::none());
        d["sites"] = m.sites;
        d["job_types"] = m.job_types;
        py::list nodes;
        for (const auto& n : m.nodes) nodes.append(n.node);
        d["nodes"] = nodes;
        d["rows"] = m.rows();
        d["bytes"] = m.bytes();
        py::dict per_metric;
        for (const auto& [metric, rows] : m.MetricRows()) per_metric[py::str(metric)] = rows;
        d["metric_rows"] = per_metric;
        return d;
      },
      py::arg("dir"), "What an archive's manifest says");
}
