// The limits of kwatt's HTTP servers (the hardened server of `kwatt serve`, `kwatt collect
// --listen` and `kwatt meter --listen`; doc/server.md, "Limits"): how many requests they answer
// at once, how many connections and how large a request they take, and the deadlines that a slow
// or hostile client cannot push back. What a client meets at each: doc/server.md, "Limits".
#ifndef KWATT_HTTP_SERVER_LIMITS_H_
#define KWATT_HTTP_SERVER_LIMITS_H_

#include <chrono>
#include <cstddef>

namespace kwatt::http {

// The most worker threads a server may have (`kwatt serve --threads`).
inline constexpr int kMaxThreads = 256;

struct ServerLimits {
  int threads = 8;  // handlers run at once (the worker pool), 1 to kMaxThreads
  // Connections open at once; beyond it a connection is answered 503 and closed. Bounded by the
  // process's open files limit (raised to its hard limit by Serve()).
  size_t max_connections = 10'000;
  // Connections open at once from one client address (0: no cap of its own); beyond it, 503.
  size_t max_connections_per_client = 0;
  // The request line and headers together; beyond it, 431.
  size_t max_header_bytes = 64 * 1024;
  size_t max_header_fields = 100;       // header lines; beyond it, 431
  size_t max_target_bytes = 16 * 1024;  // the request line; beyond it, 414
  // From a request's first byte to the end of its headers.
  std::chrono::milliseconds header_timeout{10'000};
  // From the end of the headers to the end of the body.
  std::chrono::milliseconds body_timeout{60'000};
  // For the client to take each write: the headers, each piece of a streamed body (128
  // KiB for the server's answers). A client that stops reading is cut after this.
  std::chrono::milliseconds write_timeout{30'000};
  // An idle connection (keep-alive, or opened and silent) is closed after this.
  std::chrono::milliseconds keep_alive_timeout{2'000};
  size_t keep_alive_max_requests = 1000;     // requests on one connection
  size_t max_body_bytes = size_t(64) << 20;  // Content-Length or chunked alike; beyond it, 413
};

}  // namespace kwatt::http

#endif  // KWATT_HTTP_SERVER_LIMITS_H_
