// What the parts of kwatt._core share: a Status on its way to Python (where it becomes the
// kwatt.errors class of its code), the client options and queries from Python arguments, the
// progress and Ctrl-C watch of a long call, and the registration of each part's bindings
// (core.cc makes the module and calls the others).
#ifndef KWATT_PYTHON_BINDINGS_COMMON_H_
#define KWATT_PYTHON_BINDINGS_COMMON_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kwatt/core/document_writer.h"
#include "kwatt/core/node_name.h"
#include "kwatt/core/status.h"
#include "kwatt/kwollect/client_options.h"
#include "kwatt/kwollect/fetch.h"

namespace kwatt::python {

// A Status on its way to Python, where it becomes the kwatt.errors class of its code.
struct StatusError {
  Status status;
};

[[noreturn]] inline void Throw(const Status& status) { throw StatusError{status}; }

template <typename T>
T Unwrap(Result<T> result) {
  if (!result.ok()) Throw(result.status());
  return std::move(*result);
}

inline void Check(const Status& status) {
  if (!status.ok()) Throw(status);
}

inline const char* ErrorClassName(Status::Code code) {
  switch (code) {
    case Status::Code::kInvalidArgument:
      return "InvalidArgumentError";
    case Status::Code::kNotFound:
      return "NotFoundError";
    case Status::Code::kCorruption:
      return "CorruptionError";
    case Status::Code::kIOError:
      return "KwattIOError";
    case Status::Code::kUnavailable:
      return "UnavailableError";
    case Status::Code::kUnauthenticated:
      return "AuthenticationError";
    case Status::Code::kPermissionDenied:
      return "KwattPermissionError";
    case Status::Code::kIncomplete:
      return "IncompleteError";
    default:
      return "KwattError";
  }
}

// A dict of client options (api_url, username, password, verify_tls, ca_file, timeout,
// connect_timeout, concurrency, per_site, rows_per_request, retries, backoff, config) over the
// credentials file's; raises on an unknown one, or a credentials file that does not read
// (kwollect.cc). The meter's configuration; kwatt._core.Client for the rest.
kwollect::ClientOptions MakeClientOptions(const pybind11::dict& given);

// kwatt._core.Client: the client's options as given, checked when it is made (an unknown option,
// or one without a meaning, raises then); the credentials file (its "config", else the default
// one) is read when a request first needs the options, so that reading archives never reads it.
class Client {
 public:
  explicit Client(const pybind11::dict& given);  // copied
  // The credentials file's options, then those given; checked. With the GIL held.
  const kwollect::ClientOptions& Options();
  // The API as given (or the default), without credentials: never reads the file.
  const std::string& shown_api() const { return shown_api_; }

 private:
  pybind11::dict given_;
  std::string shown_api_;
  std::optional<kwollect::ClientOptions> options_;
};
// Node names parsed (each once, in order); raises on a wrong one (kwollect.cc).
std::vector<NodeName> ParseNodes(const std::vector<std::string>& names);
// A query from keyword arguments: nodes (names), start, end (int ns), job ((site, id)),
// metrics, summary (kwollect.cc).
kwollect::FetchQuery MakeQuery(const std::vector<std::string>& nodes, std::optional<int64_t> start,
                               std::optional<int64_t> end,
                               std::optional<std::pair<std::string, int64_t>> job,
                               const std::vector<std::string>& metrics, bool summary);
// A fetch report as a dict (kwollect.cc).
pybind11::dict RowsReportDict(const RowsReport& r);

// A document (kwatt/core/document_writer.h) built as Python values: objects as dicts (their
// members in the document's order), arrays as lists, numbers as int and float (core.cc). With the
// GIL held. Take() gives the document once it is whole.
class PythonDocument : public DocumentWriter {
 public:
  void BeginObject() override;
  void EndObject() override;
  void BeginArray() override;
  void EndArray() override;
  void Key(std::string_view key) override;
  void Null() override;
  void Bool(bool value) override;
  void Integer(int64_t value) override;
  void Double(double value) override;
  void String(std::string_view value) override;
  pybind11::object Take();

 private:
  void Add(pybind11::object value);
  struct Open {
    pybind11::object container;  // a dict or a list
    pybind11::object key;        // an object's next key, else None
  };
  std::vector<Open> open_;
  pybind11::object done_;
};

// Calls a Python progress function (under the GIL), and notices Ctrl-C while the GIL is released:
// the fetch then stops (within 0.2 s), and KeyboardInterrupt is raised once it has returned. An
// exception the progress function raises stops the operation too, and is raised as it was.
struct Watch {
  pybind11::object progress;  // None or callable(dict)
  bool interrupted = false;
  std::optional<pybind11::error_already_set> raised;  // by the progress function

  ProgressCallback Callback() {
    return [this](const RowsProgress& p) -> Status {
      pybind11::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) {
        PyErr_Clear();
        interrupted = true;
      } else if (!progress.is_none() && !raised) {
        pybind11::dict d;
        d["requests_done"] = p.requests_done;
        d["requests_total"] = p.requests_total;
        d["rows"] = p.rows;
        d["bytes"] = p.bytes;
        d["seconds"] = p.seconds;
        try {
          progress(d);
        } catch (pybind11::error_already_set& e) {
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
      pybind11::error_already_set error = std::move(*raised);
      raised.reset();
      throw error;
    }
    if (!interrupted) return;
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw pybind11::error_already_set();
  }
};

// Each part's bindings, registered on the module in this order by core.cc.
void RegisterMeter(pybind11::module_& m);     // meter.cc: kwatt.measure's engine
void RegisterCore(pybind11::module_& m);      // core.cc: Table, Catalogue, times, OutputFile
void RegisterKwollect(pybind11::module_& m);  // kwollect.cc: fetch, look_up_nodes, resolve
void RegisterArchive(pybind11::module_& m);   // archive.cc: load, read_manifest
void RegisterBackup(pybind11::module_& m);    // backup.cc: backup
void RegisterEnergy(pybind11::module_& m);    // energy.cc: energy, stats, power sources
void RegisterReport(pybind11::module_& m);    // report.cc: ReportRequest, write_report

}  // namespace kwatt::python

#endif  // KWATT_PYTHON_BINDINGS_COMMON_H_
