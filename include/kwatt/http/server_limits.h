// The limits of kwatt's HTTP servers (the hardened server of `kwatt serve`, `kwatt collect
// --listen` and `kwatt meter --listen`; doc/server.md, "Limits"): how many requests they answer
// at once, and the deadlines that a slow or hostile client cannot push back.
#ifndef KWATT_HTTP_SERVER_LIMITS_H_
#define KWATT_HTTP_SERVER_LIMITS_H_

#include <chrono>
#include <cstddef>

namespace kwatt::http {

// The most worker threads a server may have (`kwatt serve --threads`).
inline constexpr int kMaxThreads = 256;

struct ServerLimits {
  int threads = 8;  // requests answered at once, 1 to kMaxThreads
  // From a request's first byte to the end of its headers.
  std::chrono::milliseconds header_timeout{10'000};
  // From the end of the headers to the end of the body.
  std::chrono::milliseconds body_timeout{60'000};
  // For the client to take each write: the headers, each block of the body (at most 256 KiB for
  // the server's streamed answers). A client that stops reading is cut after this.
  std::chrono::milliseconds write_timeout{30'000};
  // An idle connection (keep-alive, or opened and silent) is closed after this.
  std::chrono::milliseconds keep_alive_timeout{2'000};
  size_t keep_alive_max_requests = 1000;  // requests on one connection
  size_t max_body_bytes = size_t(64) << 20;
};

}  // namespace kwatt::http

#endif  // KWATT_HTTP_SERVER_LIMITS_H_
