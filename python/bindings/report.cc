// kwatt._core's report: the request of kwatt.report() as a class (its fields those of `kwatt
// report`'s options), and write_report(), the report part's one call, its figures drawn by the
// Python function given, in this process.
#include "kwatt/report/report.h"

#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "python/bindings/common.h"

namespace py = pybind11;

namespace kwatt::python {
namespace {

// What write_report() returns: report::ReportWritten, its figures' error as text.
struct Written {
  std::string dir;
  size_t runs = 0;
  bool complete = true;
  bool figures = false;
  std::optional<std::string> figures_error;  // why the figures were not drawn, when asked
  py::list failures;  // [(run, [piece dict as a fetch report's])] of the runs read in part
};

Written WriteReport(const report::ReportRequest& given, const std::string& output, Client& client,
                    const py::object& draw, const py::object& progress) {
  report::ReportRequest request = given;
  // The client's options (and its credentials file) only for a run that is no archive.
  for (const std::vector<std::string>* runs : {&request.runs, &request.versus}) {
    for (const std::string& run : *runs) {
      std::error_code error;
      if (!std::filesystem::is_directory(run, error) && report::IsJob(run)) {
        request.reading.client = client.Options();
      }
    }
  }
  Watch watch{progress};
  request.reading.progress = [&watch](const std::string&) { return watch.Callback(); };
  // The figures, drawn by `draw(dir)` under the GIL: an exception it raises is the figures'
  // error (the report is written without them), but Ctrl-C stops the report.
  std::optional<py::error_already_set> interrupted;
  report::DrawFigures figures;
  if (!draw.is_none()) {
    figures = [&](const std::string& dir) -> Status {
      py::gil_scoped_acquire gil;
      try {
        draw(dir);
        return Status::OK();
      } catch (py::error_already_set& e) {
        if (e.matches(PyExc_KeyboardInterrupt)) {
          interrupted.emplace(std::move(e));
          return Status::Incomplete("interrupted");
        }
        // "ExceptionType: its message", without the traceback pybind11 adds to what().
        return Status::IOError(std::string(py::str(e.type().attr("__name__"))) + ": " +
                               std::string(py::str(e.value())));
      }
    };
  }
  Result<report::ReportWritten> written = Status::OK();
  {
    py::gil_scoped_release release;
    written = report::WriteReport(request, output, figures);
  }
  watch.RaiseIfInterrupted();
  if (interrupted) throw std::move(*interrupted);
  report::ReportWritten done = Unwrap(std::move(written));
  Written out{done.dir, done.runs, done.complete, done.figures, std::nullopt, py::list()};
  if (!done.figures_status.ok()) out.figures_error = done.figures_status.message();
  for (const auto& [run, pieces] : done.failures) {
    RowsReport missing;
    missing.failures = pieces;
    out.failures.append(py::make_tuple(run, RowsReportDict(missing)["failures"]));
  }
  return out;
}

}  // namespace

void RegisterReport(py::module_& m) {
  using report::ReportRequest;
  py::class_<ReportRequest>(m, "ReportRequest",
                            "What kwatt.report() is asked: each field as `kwatt report`'s option")
      .def(py::init<>())
      .def_readwrite("runs", &ReportRequest::runs)
      .def_readwrite("versus", &ReportRequest::versus)
      .def_readwrite("api", &ReportRequest::api)
      .def_readwrite("config", &ReportRequest::config)
      .def_readwrite("confidence", &ReportRequest::confidence)
      .def_readwrite("carbon_intensity", &ReportRequest::carbon_intensity)
      .def_readwrite("carbon_source", &ReportRequest::carbon_source)
      .def_readwrite("pue", &ReportRequest::pue)
      .def_readwrite("pue_source", &ReportRequest::pue_source)
      .def_readwrite("title", &ReportRequest::title)
      .def_property(
          "nodes",
          [](const ReportRequest& r) {
            std::vector<std::string> out;
            for (const NodeName& node : r.reading.nodes) out.push_back(node.Fqdn());
            return out;
          },
          [](ReportRequest& r, const std::vector<std::string>& names) {
            r.reading.nodes = ParseNodes(names);
          })
      .def_property(
          "start", [](const ReportRequest& r) { return r.reading.start; },
          [](ReportRequest& r, std::optional<int64_t> t) { r.reading.start = t; })
      .def_property(
          "end", [](const ReportRequest& r) { return r.reading.end; },
          [](ReportRequest& r, std::optional<int64_t> t) { r.reading.end = t; })
#define KWATT_READING_FIELD(name, field)                            \
  def_property(                                                     \
      name, [](const ReportRequest& r) { return r.reading.field; }, \
      [](ReportRequest& r, const decltype(r.reading.field)& v) { r.reading.field = v; })
      .KWATT_READING_FIELD("summary", summary)
      .KWATT_READING_FIELD("phases", phases)
      .KWATT_READING_FIELD("roles", roles)
      .KWATT_READING_FIELD("metric", metric)
      .KWATT_READING_FIELD("accuracies", accuracies)
      .KWATT_READING_FIELD("clock_offset", clock_offset_s)
      .KWATT_READING_FIELD("gap_factor", gap_factor)
      .KWATT_READING_FIELD("with_archives", with_archives)
#undef KWATT_READING_FIELD
      .def("command", &report::ReportCommand, py::arg("output"),
           "The `kwatt report` command that makes this report again (no credentials)");
  py::class_<Written>(m, "ReportWritten", "What write_report() wrote")
      .def_readonly("dir", &Written::dir)
      .def_readonly("runs", &Written::runs)
      .def_readonly("complete", &Written::complete)
      .def_readonly("figures", &Written::figures)
      .def_readonly("figures_error", &Written::figures_error)
      .def_readonly("failures", &Written::failures);
  m.def("write_report", &WriteReport, py::arg("request"), py::arg("output"), py::kw_only(),
        py::arg("client"), py::arg("draw"), py::arg("progress") = py::none());
}

}  // namespace kwatt::python
