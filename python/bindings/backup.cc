// kwatt._core's backups: backup() of a query into an archive directory (kwatt/backup).
#include "kwatt/backup/backup.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kwatt/core/version.h"
#include "kwatt/kwollect/fetch.h"
#include "python/bindings/common.h"

namespace py = pybind11;

namespace kwatt::python {
namespace {

py::dict Backup(Client& client, const std::string& dir, const std::vector<std::string>& nodes,
                std::optional<int64_t> start, std::optional<int64_t> end,
                std::optional<std::pair<std::string, int64_t>> job,
                const std::vector<std::string>& metrics, bool summary, py::object progress) {
  const kwollect::ClientOptions& options = client.Options();
  kwollect::FetchQuery query = MakeQuery(nodes, start, end, job, metrics, summary);
  Watch watch{std::move(progress)};
  Result<backup::BackupOutcome> outcome = Status::OK();
  {
    py::gil_scoped_release release;
    outcome = backup::Backup(options, query, dir, KwattVersion(), watch.Callback());
  }
  watch.RaiseIfInterrupted();
  backup::BackupOutcome done = Unwrap(std::move(outcome));
  py::dict d;
  d["dir"] = dir;
  d["already_complete"] = done.already_complete;
  d["resuming"] = done.resuming;
  d["rows_written"] = done.rows_written;
  d["bytes_written"] = done.bytes_written;
  d["fetch"] = RowsReportDict(done.report);
  d["complete"] = done.finished.ok();
  d["error"] = done.finished.ok() ? py::object(py::none()) : py::str(done.finished.message());
  return d;
}

}  // namespace

void RegisterBackup(py::module_& m) {
  m.def("backup", &Backup, py::arg("client"), py::arg("dir"), py::kw_only(), py::arg("nodes"),
        py::arg("start"), py::arg("end"), py::arg("job"), py::arg("metrics"), py::arg("summary"),
        py::arg("progress"), "Backs a query up into an archive directory");
}

}  // namespace kwatt::python
