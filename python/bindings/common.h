// What the parts of kwatt._core share: a Status on its way to Python (where it becomes the
// kwatt.errors class of its code), the client options from a dict, and the registration of each
// part's bindings (core.cc registers the module and calls the others).
#ifndef KWATT_PYTHON_BINDINGS_COMMON_H_
#define KWATT_PYTHON_BINDINGS_COMMON_H_

#include <pybind11/pybind11.h>

#include <utility>

#include "kwatt/core/status.h"
#include "kwatt/kwollect/client_options.h"

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
// credentials file's; raises on a wrong one (core.cc).
kwollect::ClientOptions MakeClientOptions(const pybind11::dict& given);

// The meter's bindings (meter.cc): kwatt.measure's engine.
void RegisterMeter(pybind11::module_& m);

}  // namespace kwatt::python

#endif  // KWATT_PYTHON_BINDINGS_COMMON_H_
