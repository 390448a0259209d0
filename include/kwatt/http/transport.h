// Concurrent GETs of large answers streamed to sinks, behind an interface (in the spirit of
// leveldb's Env), so that a user (the Kwollect fetcher: its retry, split, re-plan and ordered
// delivery) can be unit-tested with a fake, without a network.
//
// Thread safety: a Transport is used by one thread at a time.
#ifndef KWATT_HTTP_TRANSPORT_H_
#define KWATT_HTTP_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/http/client.h"

namespace kwatt::http {

// Receives the body of a 200 answer as it arrives. A non-OK result aborts the transfer (it then
// finishes with that status as its `transport` outcome).
using BodySink = std::function<Status(std::string_view chunk)>;

// How a transfer ended.
struct TransferOutcome {
  int64_t id = 0;
  // OK when an answer was received whole, whatever its status; else why not: Unavailable naming
  // the transport's reason (connection refused, connection cut...), or the BodySink's error.
  Status transport;
  ClientResponse response;  // status, Location, Retry-After; `body`: a non-200's (first 64 kB)
  int64_t body_bytes = 0;   // body bytes received, any status
};

class Transport {
 public:
  virtual ~Transport() = default;
  // Starts a GET of `url`; the body of a 200 answer goes to `body`. Returns the transfer's id
  // (distinct from every other id of this transport).
  virtual int64_t Start(const std::string& url, BodySink body) = 0;
  // Makes progress, waiting at most `timeout_ms` when nothing is finished yet (also when no
  // transfer runs); appends the transfers that finished to `done`.
  virtual void Poll(int timeout_ms, std::vector<TransferOutcome>* done) = 0;
};

// libcurl's multi interface: at most settings.max_connections connections, keep-alive, the
// settings' auth, TLS, proxies and timeouts.
std::unique_ptr<Transport> NewCurlTransport(const ClientSettings& settings);

}  // namespace kwatt::http

#endif  // KWATT_HTTP_TRANSPORT_H_
