// The HTTP server of every endpoint kwatt serves (`kwatt serve`, `kwatt collect --listen`,
// `kwatt meter --listen`): cpp-httplib's routing over connections that hostile or broken clients
// cannot hold (doc/server.md, "Limits").
//
// cpp-httplib 0.11 times out each recv and send alone, so a client that sends one byte of its
// request every few seconds, or reads one byte of its answer now and then, holds a thread for
// ever, and as many such clients as threads stop the server for everyone. HardenedServer serves
// each connection itself, with deadlines that such a client cannot push back:
//   - the request line and headers must arrive within `header_timeout` of the request's first
//     byte, and the body within `body_timeout` of the headers' end;
//   - each write to the client (the headers, each block of the body) must be taken within
//     `write_timeout`;
//   - an idle keep-alive connection is closed after `keep_alive_timeout`.
// A slow client therefore holds one thread for a bounded time: fewer slow clients than threads
// leave the others answered at once, and more only delay them until the deadlines.
// It also checks what httplib takes as it comes: conflicting, signed or oversized Content-Length
// (400 or 413, before any body is read, and the connection is closed), a body without a length
// (411); it never answers 206 (Range headers are ignored: every answer is whole), answers OPTIONS
// on a route with 204 and Allow, and adds nosniff, frame and content-security headers to every
// answer. Bind errors name the system's cause.
//
// Thread safety: configure (routes, handlers) before Serve(); Shutdown() may be called from any
// thread. Handlers run on the worker threads.
//
// The one public header that names a third-party type: a HardenedServer is an httplib::Server,
// whose users register handlers over httplib's Request and Response; hiding them would mean a
// second request and response model for the same server. The parts that serve (server, collect,
// the meter's outputs) include it; the CLI and the bindings do not (they use
// kwatt/http/server_limits.h and the parts' own endpoints).
#ifndef KWATT_HTTP_HARDENED_SERVER_H_
#define KWATT_HTTP_HARDENED_SERVER_H_

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/http/server_limits.h"

namespace kwatt::http {

class HardenedServer : public httplib::Server {
 public:
  explicit HardenedServer(const ServerLimits& limits = ServerLimits());
  ~HardenedServer() override;  // Shutdown()

  HardenedServer(const HardenedServer&) = delete;
  HardenedServer& operator=(const HardenedServer&) = delete;

  const ServerLimits& limits() const { return limits_; }

  // Routes, recorded for OPTIONS (they hide httplib's, which they call).
  HardenedServer& Get(const std::string& pattern, Handler handler);
  HardenedServer& Post(const std::string& pattern, Handler handler);
  // Runs after the server's own checks, before routing (and before a body is read); hides
  // httplib's.
  HardenedServer& set_pre_routing_handler(HandlerWithResponse handler);

  // Binds `host`:`port` (0: any free port) with SO_REUSEADDR (not SO_REUSEPORT, with which a
  // second server would share the port). The port, or IOError naming the address and the
  // system's cause ("Cannot assign requested address": not an address of this machine).
  Result<int> Bind(const std::string& host, int port);
  // Starts the worker threads and serves on a thread of its own; returns once it serves.
  // IOError when the threads cannot be started. REQUIRES: Bind succeeded.
  Status Serve();
  // Stops accepting, ends the connections (a request being answered is cut within about 0.1 s
  // of its next read or write, or when its handler checks RequestAbandoned()), and joins the
  // threads. Closes the socket of a server bound and never served. Idempotent.
  void Shutdown();
  bool Stopping() const;

  // For a handler that computes for long before it writes: true when the request it answers has
  // been given up (its client closed the connection, or the server is stopping), so that it
  // stops. False outside a HardenedServer's handler.
  static bool RequestAbandoned();

 private:
  struct Route {
    std::regex pattern;
    std::string method;
  };
  bool process_and_close_socket(socket_t sock) override;
  std::string AllowedMethods(const std::string& path) const;

  ServerLimits limits_;
  std::vector<Route> routes_;
  HandlerWithResponse user_pre_routing_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> ended_{false};
  bool bound_ = false;
  bool serving_ = false;
  std::thread thread_;
};

// The security headers every answer of a HardenedServer carries (exposed for tests).
const std::vector<std::pair<std::string, std::string>>& SecurityHeaders();

}  // namespace kwatt::http

#endif  // KWATT_HTTP_HARDENED_SERVER_H_
