// kwatt._core: the C++ toolkit as seen from Python (doc/python.md).
//
// Everything that computes is C++: fetching (with the GIL released), archives, energy, stats, the
// catalogue rules, time parsing. This module only converts: Python arguments into queries, the
// columnar kwatt::RowTable into numpy arrays (views, no copies) and row dicts, reports into dicts.
// One file per part registers that part's bindings (kwollect.cc, archive.cc, energy.cc,
// meter.cc); this one holds the module, core's bindings (Table, Catalogue, times, OutputFile) and
// the translation of a Status into a kwatt.errors exception.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kwatt/core/catalogue.h"
#include "kwatt/core/json_text.h"
#include "kwatt/core/output_file.h"
#include "kwatt/core/row_table.h"
#include "kwatt/core/status.h"
#include "kwatt/core/text.h"
#include "kwatt/core/time.h"
#include "kwatt/core/version.h"
#include "python/bindings/common.h"

namespace py = pybind11;

namespace kwatt::python {
namespace {

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
#if PY_VERSION_HEX >= 0x030A0000
    int was_enabled = PyGC_Disable();
    ~GcPause() {
      if (was_enabled) PyGC_Enable();
    }
#else  // CPython 3.9 has the gc module's calls alone.
    py::module_ gc = py::module_::import("gc");
    bool was_enabled = gc.attr("isenabled")().cast<bool>();
    GcPause() { gc.attr("disable")(); }
    ~GcPause() {
      if (was_enabled) gc.attr("enable")();
    }
#endif
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

void PythonDocument::BeginObject() { open_.push_back({py::dict(), py::none()}); }
void PythonDocument::BeginArray() { open_.push_back({py::list(), py::none()}); }

void PythonDocument::EndObject() {
  py::object container = std::move(open_.back().container);
  open_.pop_back();
  Add(std::move(container));
}
void PythonDocument::EndArray() { EndObject(); }

void PythonDocument::Key(std::string_view key) {
  open_.back().key = py::str(key.data(), key.size());
}
void PythonDocument::Null() { Add(py::none()); }
void PythonDocument::Bool(bool value) { Add(py::bool_(value)); }
void PythonDocument::Integer(int64_t value) { Add(py::int_(value)); }
void PythonDocument::Double(double value) { Add(py::float_(value)); }
void PythonDocument::String(std::string_view value) { Add(py::str(value.data(), value.size())); }

void PythonDocument::Add(py::object value) {
  if (open_.empty()) {
    done_ = std::move(value);
    return;
  }
  Open& top = open_.back();
  if (top.key.is_none()) {
    top.container.cast<py::list>().append(std::move(value));
  } else {
    if (PyDict_SetItem(top.container.ptr(), top.key.ptr(), value.ptr()) != 0) {
      throw py::error_already_set();
    }
    top.key = py::none();
  }
}

py::object PythonDocument::Take() { return std::move(done_); }

void RegisterCore(py::module_& m) {
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
      .def_property_readonly("report", [](const RowTable& t) { return RowsReportDict(t.report); })
      .def_readonly("complete", &RowTable::complete)
      .def("rows_by_node", &RowsByNode, py::arg("nodes"),
           "{node: [row dicts]} for these node FQDNs, rows in order");

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
}

}  // namespace kwatt::python

PYBIND11_MODULE(_core, m) {
  using namespace kwatt::python;
  m.doc() = "kwatt's C++ core (fetching, archives, energy, stats); see the kwatt package";
  m.attr("__version__") = kwatt::KwattVersion();
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

  // Core first: the others' signatures name its classes (Table, Catalogue).
  RegisterCore(m);
  RegisterKwollect(m);
  RegisterArchive(m);
  RegisterBackup(m);
  RegisterEnergy(m);
  RegisterReport(m);
}
