// The access log of kwatt's HTTP servers (`kwatt serve --log [FILE]`; doc/server.md, "Access
// log"): one line per answer in Apache's Combined Log Format with the duration after it,
//   127.0.0.1 - alice [05/Dec/2026:17:04:01 +0000] "GET /stable/sites HTTP/1.1" 200 1234 "-"
//   "curl/7.88.1" 1520
// (client address, user of Basic authentication or "-", time in UTC, request line, status, body
// bytes sent, Referer, User-Agent, duration in microseconds). The request line never holds a
// credential: the values of query parameters named like one (password, token, key, secret...)
// are written as "REDACTED", and the Authorization header is never written, only its user.
//
// Lines are handed to a thread of the log's own, so that a slow disk or terminal never blocks the
// event loop; past `kMaxQueuedLines` waiting, lines are dropped and their number written once the
// log catches up.
//
// Thread safety: Write may be called from any thread.
#ifndef KWATT_HTTP_ACCESS_LOG_H_
#define KWATT_HTTP_ACCESS_LOG_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kwatt/core/status.h"

namespace kwatt::http {

struct AccessRecord {
  std::string client;                          // numeric address
  std::string user;                            // "" when none
  std::chrono::system_clock::time_point time;  // when the request's headers were read
  std::string method;
  std::string target;  // as sent (redacted when written)
  int status = 0;
  uint64_t bytes = 0;  // body bytes sent
  std::string referer;
  std::string user_agent;
  std::chrono::microseconds duration{0};
};

class AccessLog {
 public:
  static constexpr size_t kMaxQueuedLines = 100'000;

  // "-" or "": stderr; else the file, appended to (created 0640).
  static Result<std::shared_ptr<AccessLog>> Open(const std::string& path);
  ~AccessLog();  // writes what is queued, then closes

  void Write(const AccessRecord& record);

  // The line of a record, as written.
  static std::string Format(const AccessRecord& record);
  // A request target with the credentials of its query replaced by "REDACTED".
  static std::string Redacted(std::string_view target);

  struct Impl;

 private:
  explicit AccessLog(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kwatt::http

#endif  // KWATT_HTTP_ACCESS_LOG_H_
