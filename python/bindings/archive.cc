// kwatt._core's archives: load() into a Table, read_manifest().
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kwatt/archive/reader.h"
#include "kwatt/core/row_batch.h"
#include "kwatt/core/row_table.h"
#include "kwatt/kwollect/fetch.h"
#include "python/bindings/common.h"

namespace py = pybind11;

namespace kwatt::python {
namespace {

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

}  // namespace

void RegisterArchive(py::module_& m) {
  m.def("load", &LoadTable, py::arg("dir"), py::kw_only(), py::arg("nodes"), py::arg("metrics"),
        py::arg("start"), py::arg("end"), py::arg("allow_incomplete"), py::arg("threads"),
        "Loads an archive (or part of it) into a Table");
  m.def(
      "read_manifest",
      [](const std::string& dir) {
        archive::Manifest m = Unwrap(archive::ReadManifest(dir));
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

}  // namespace kwatt::python
