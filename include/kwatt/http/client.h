// kwatt's HTTP client: libcurl, configured in one place for every request kwatt sends (the
// Kwollect client, the meter's InfluxDB and Kwollect outputs, the collector's HTTP devices).
// No libcurl type here: the connection of a SmallClient lives in its implementation (src/http/).
#ifndef KWATT_HTTP_CLIENT_H_
#define KWATT_HTTP_CLIENT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kwatt/core/status.h"

namespace kwatt::http {

// What every request of a client shares: auth, TLS, timeouts, proxies, user agent, retries.
struct ClientSettings {
  std::string user_agent = "kwatt";
  std::string username;           // HTTP Basic auth; empty: none
  std::string password;           // never printed, logged or put in an error
  bool verify_tls = true;         // verify the server's certificate
  std::string ca_file;            // CA bundle to verify with; empty: the system's
  bool use_proxy = true;          // false: never through a proxy of the environment (http_proxy...)
  double timeout_s = 300;         // a transfer making no progress this long fails (SmallClient:
                                  // the limit of each whole request)
  double connect_timeout_s = 30;  // to open a connection
  int max_retries = 5;            // GetSmall's retries of a transient refusal
  double backoff_s = 0.5;         // first retry delay; doubles each time
  int max_connections = 12;       // a transport's connections open at once
};

struct ClientResponse {
  long status = 0;
  std::string body;
  std::string location;        // where a 3xx answer redirects to ("" if none)
  int64_t retry_after_s = -1;  // the answer's Retry-After, in seconds; -1: none
};

// The URL with credentials never in it, for messages.
std::string Redact(const std::string& url);

// Percent-encodes a query parameter value.
std::string UrlEncode(const std::string& text);

// Is `status` a transient refusal, to retry after a delay (429, 502, 503, 504)?
bool IsTransientStatus(long status);

// Retry-After values above this are not waited for: the request fails, saying so.
inline constexpr int64_t kMaxRetryAfterSeconds = 120;

// Seconds to wait before attempt `attempt` + 1 (attempt >= 1): the server's Retry-After when it
// gave one, else settings.backoff_s doubled at each attempt.
double RetryDelay(const ClientSettings& settings, int attempt, int64_t retry_after_s);

// GET of a small document. Transient refusals (429 with its Retry-After, 502, 503, 504) are
// retried as settings say; the last answer is returned. Transport failures are Unavailable,
// naming the URL (Redact) and curl's reason.
Result<ClientResponse> GetSmall(const ClientSettings& settings, const std::string& url);

// The limits of one SmallClient request.
struct RequestLimits {
  int64_t timeout_ms = -1;           // the whole request; < 0: settings.timeout_s
  int64_t connect_timeout_ms = -1;   // < 0: settings.connect_timeout_s
  size_t max_body_bytes = 64 << 10;  // body bytes kept
  bool fail_when_larger = false;     // a larger body fails the request (kTooLarge), not cut short
};

// Why a request got no answer.
struct TransferError {
  enum class Kind { kTimedOut, kTooLarge, kOther };
  Kind kind = Kind::kOther;
  std::string reason;  // curl's short reason ("Couldn't connect to server")
};

// One connection for small requests one after the other (pushes of custom metrics, InfluxDB
// writes, the probes before them, a collector's polls of one device), kept alive from one to the
// next, with the settings' auth, TLS, proxies and timeouts. A request is sent once: what to retry
// is the caller's decision.
//
// Thread safety: not thread-safe; a client belongs to one thread at a time.
class SmallClient {
 public:
  explicit SmallClient(const ClientSettings& settings);
  ~SmallClient();
  SmallClient(const SmallClient&) = delete;
  SmallClient& operator=(const SmallClient&) = delete;

  // POSTs `body` (of `content_type`) to `url`; GETs `url`. The answer whatever its status (its
  // body up to `limits.max_body_bytes`); Unavailable naming the URL (Redact) and curl's reason
  // when none came, and then, when `error` is not null, why in *error.
  Result<ClientResponse> Post(const std::string& url, std::string_view body,
                              const std::string& content_type);
  Result<ClientResponse> Get(const std::string& url, const RequestLimits& limits = {},
                             TransferError* error = nullptr);

 private:
  struct Connection;  // libcurl's easy handle, with the settings
  std::unique_ptr<Connection> connection_;
};

}  // namespace kwatt::http

#endif  // KWATT_HTTP_CLIENT_H_
