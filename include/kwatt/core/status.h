// kwatt's one error vocabulary (see doc/errors.md).
//
// Every fallible call returns a Status, or a Result<T> holding either a value or a non-OK Status.
// An OK Status carries no allocation. Messages name what is wrong and, where it helps, what to do;
// they never contain a credential.
//
// Thread safety: Status and Result are values; distinct objects may be used from distinct threads.
#ifndef KWATT_CORE_STATUS_H_
#define KWATT_CORE_STATUS_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace kwatt {

// [[nodiscard]]: a Status or Result that is dropped unread is a compile error (-Werror); a call
// whose failure truly does not matter says so with a (void) cast and a comment.
class [[nodiscard]] Status {
 public:
  // The codes, each with a named constructor below. The Python boundary maps each to a subclass
  // of kwatt.Error; the CLI maps them to exit statuses (doc/errors.md).
  enum class Code {
    kOk = 0,
    kInvalidArgument,   // the caller's input is wrong (bad time, unknown option value...)
    kNotFound,          // a named thing (site, node, job, file) does not exist
    kCorruption,        // stored or received data is damaged or malformed
    kIOError,           // the operating system refused (open, write, bind...)
    kUnavailable,       // a remote service failed in a way that may pass (5xx, refused, cut)
    kUnauthenticated,   // credentials missing or refused
    kPermissionDenied,  // the system refused for want of a permission (root-only file, perf)
    kIncomplete,        // an operation stopped before its end; what was done is kept
    kInternal,          // a bug in kwatt
  };

  Status() = default;  // OK

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string_view message) {
    return Status(Code::kInvalidArgument, message);
  }
  static Status NotFound(std::string_view message) { return Status(Code::kNotFound, message); }
  static Status Corruption(std::string_view message) { return Status(Code::kCorruption, message); }
  static Status IOError(std::string_view message) { return Status(Code::kIOError, message); }
  static Status Unavailable(std::string_view message) {
    return Status(Code::kUnavailable, message);
  }
  static Status Unauthenticated(std::string_view message) {
    return Status(Code::kUnauthenticated, message);
  }
  static Status PermissionDenied(std::string_view message) {
    return Status(Code::kPermissionDenied, message);
  }
  static Status Incomplete(std::string_view message) { return Status(Code::kIncomplete, message); }
  static Status Internal(std::string_view message) { return Status(Code::kInternal, message); }

  bool ok() const { return state_ == nullptr; }
  Code code() const { return state_ ? state_->code : Code::kOk; }
  // The message alone ("" when OK).
  const std::string& message() const;
  // "NotFound: message", or "OK".
  std::string ToString() const;
  // A copy with "context: " put before the message; OK stays OK.
  Status WithContext(std::string_view context) const;

  static std::string_view CodeName(Code code);

 private:
  struct State {
    Code code;
    std::string message;
  };
  Status(Code code, std::string_view message)
      : state_(std::make_shared<const State>(State{code, std::string(message)})) {}
  std::shared_ptr<const State> state_;  // null when OK; immutable, so copies may share it
};

// Either a T or a non-OK Status.
// REQUIRES: value() only when ok(); status() is OK exactly when a value is held.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    if (status_.ok()) status_ = Status::Internal("Result built from an OK Status without a value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace kwatt

// Returns early from the enclosing function when `expr` (a Status) is not OK.
#define KWATT_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::kwatt::Status kwatt_status_ = (expr);        \
    if (!kwatt_status_.ok()) return kwatt_status_; \
  } while (0)

// Declares or assigns `lhs` from `expr` (a Result<T>), or returns its Status from the enclosing
// function when it holds none:
//   KWATT_ASSIGN_OR_RETURN(Manifest manifest, ReadManifest(dir));
#define KWATT_ASSIGN_OR_RETURN(lhs, expr) \
  KWATT_ASSIGN_OR_RETURN_IMPL_(KWATT_STATUS_CONCAT_(kwatt_result_, __LINE__), lhs, expr)
#define KWATT_ASSIGN_OR_RETURN_IMPL_(result, lhs, expr) \
  auto result = (expr);                                 \
  if (!result.ok()) return result.status();             \
  lhs = std::move(result).value()
#define KWATT_STATUS_CONCAT_(a, b) KWATT_STATUS_CONCAT_INNER_(a, b)
#define KWATT_STATUS_CONCAT_INNER_(a, b) a##b

#endif  // KWATT_CORE_STATUS_H_
