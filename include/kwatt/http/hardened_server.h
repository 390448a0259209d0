// The HTTP server of every endpoint kwatt serves (`kwatt serve`, `kwatt collect --listen`,
// `kwatt meter --listen`; doc/server.md, "The HTTP server"): Boost.Beast's HTTP/1.1 parser and
// serializer on one Boost.Asio event loop, handlers on a bounded pool of threads.
//
// Every connection waits on the event loop, never on a thread: an idle, slow or silent client
// costs a socket and a few kilobytes, and is cut at its deadline (ServerLimits). A handler runs on
// a worker once its request is read whole; a streamed answer's provider runs on a worker for each
// piece, after the client has taken the last one, so a client that does not read holds no worker.
//
// Requests are taken as RFC 9112 says, and refused at once, the connection closed, otherwise:
//   - a body, on any method, is read within the one body limit (413 for Content-Length or chunked
//     alike) and never taken as a request; without a length a POST is 411;
//   - conflicting, signed or non-numeric Content-Length, Content-Length with Transfer-Encoding,
//     a malformed chunk size: 400; a transfer coding other than chunked: 501;
//   - headers beyond `max_header_bytes` or `max_header_fields`: 431; two Host headers, none in
//     HTTP/1.1, an obs-folded line, whitespace before a colon: 400; a request line longer than
//     `max_target_bytes`: 414;
//   - trailers are read and ignored; Expect: 100-continue is answered before the body is read;
//   - Range is ignored (never a 206); OPTIONS on a route answers 204 with Allow; every answer
//     carries the security headers; beyond `max_connections` (or a client's share) a connection
//     is answered 503 and closed.
// Each answer is written to the access log, when one is set (access_log.h).
//
// Thread safety: configure (routes, handlers, log) before Serve(); Shutdown() may be called from
// any thread. Handlers run on the worker threads, several at once.
#ifndef KWATT_HTTP_HARDENED_SERVER_H_
#define KWATT_HTTP_HARDENED_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/http/message.h"
#include "kwatt/http/server_limits.h"

namespace kwatt::http {

class AccessLog;

class HardenedServer {
 public:
  using Handler = std::function<void(const Request&, Response&)>;
  // True when it answered the request (routing stops).
  using PreRoutingHandler = std::function<bool(const Request&, Response&)>;

  explicit HardenedServer(const ServerLimits& limits = ServerLimits());
  ~HardenedServer();  // Shutdown()

  HardenedServer(const HardenedServer&) = delete;
  HardenedServer& operator=(const HardenedServer&) = delete;

  const ServerLimits& limits() const;

  // Routes: a regular expression over the whole decoded path; the first that matches answers.
  // A GET route answers HEAD too (headers only).
  HardenedServer& Get(const std::string& pattern, Handler handler);
  HardenedServer& Post(const std::string& pattern, Handler handler);
  // Runs before routing, after the request is read and checked.
  HardenedServer& set_pre_routing_handler(PreRoutingHandler handler);
  // Runs on every answer of status >= 400 (the server's own refusals too), to give it a body.
  HardenedServer& set_error_handler(Handler handler);
  // Where each answer is logged (nullptr: nowhere).
  HardenedServer& set_access_log(std::shared_ptr<AccessLog> log);

  // Binds `host`:`port` (0: any free port) with SO_REUSEADDR (not SO_REUSEPORT, with which a
  // second server would share the port). The port, or IOError naming the address and the
  // system's cause ("Cannot assign requested address": not an address of this machine).
  Result<int> Bind(const std::string& host, int port);
  // Starts the worker threads and the event loop; returns once it serves. Raises the process's
  // soft limit of open files to its hard limit, so that max_connections can be met. IOError when
  // the threads cannot be started. REQUIRES: Bind succeeded.
  Status Serve();
  // Stops accepting, closes every connection (a streamed answer is cut; a handler computing for
  // long sees RequestAbandoned()), and joins the threads. Idempotent.
  void Shutdown();
  bool Stopping() const;

  // For a handler that computes for long before it writes: true when the request it answers has
  // been given up (its client closed the connection, or the server is stopping), so that it
  // stops. False outside a HardenedServer's handler.
  static bool RequestAbandoned();

  // Connections open now (for tests and the limits' checks).
  size_t OpenConnections() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// The security headers every answer of a HardenedServer carries (exposed for tests).
const std::vector<std::pair<std::string, std::string>>& SecurityHeaders();

}  // namespace kwatt::http

#endif  // KWATT_HTTP_HARDENED_SERVER_H_
