// libcurl, configured once for kwatt's requests. Internal to the kwollect library.
#ifndef KWATT_SRC_KWOLLECT_HTTP_H_
#define KWATT_SRC_KWOLLECT_HTTP_H_

#include <curl/curl.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "kwatt/core/status.h"
#include "kwatt/kwollect/client_options.h"

namespace kwatt::kwollect::internal {

// Process-wide libcurl initialisation, done once on first use.
void EnsureCurlInitialised();

// Sets the options every request shares: auth, TLS, timeouts, keep-alive, user agent.
void ConfigureEasy(CURL* easy, const ClientOptions& options);

// The URL with credentials never in it, for messages.
std::string Redact(const std::string& url);

struct SmallResponse {
  long status = 0;
  std::string body;
  std::string location;        // where a 3xx answer redirects to ("" if none)
  int64_t retry_after_s = -1;  // the answer's Retry-After, in seconds; -1: none
};

// Reads the status, Location and Retry-After of the answer `easy` received into `response`.
void ReadResponseInfo(CURL* easy, SmallResponse* response);

// True for Kwollect's own "too much data" answer: HTTP 500 with its JSON timeout error
// ({"code":"P0001","message":"Request timeout, too much data to process."}, or PostgreSQL's
// statement timeout, code 57014). The only failure that asking for less can cure; any other 5xx
// (a proxy's HTML page...) is not about the request's size.
bool IsKwollectTimeout(long status, const std::string& body);

// Is `status` a transient refusal, to retry after a delay (429, 502, 503, 504)?
bool IsTransientStatus(long status);

// Retry-After values above this are not waited for: the request fails, saying so.
inline constexpr int64_t kMaxRetryAfterSeconds = 120;

// Seconds to wait before attempt `attempt` + 1 (attempt >= 1): the server's Retry-After when it
// gave one, else options.backoff_s doubled at each attempt.
double RetryDelay(const ClientOptions& options, int attempt, int64_t retry_after_s);

// A response whose status is not 200, turned into a Status naming the cause: the server's
// message, where a redirect leads, whether credentials were refused or are missing.
// Codes: Unauthenticated (401), NotFound (404), Unavailable (429, 5xx), InvalidArgument (others,
// redirects included).
Status HttpError(const SmallResponse& response, const std::string& url,
                 const ClientOptions& options);

// GET of a small document (reference API). Transient refusals (429 with its Retry-After, 502,
// 503, 504) are retried as options say; the last answer is returned. Transport failures are
// Unavailable, naming the URL and curl's reason.
Result<SmallResponse> GetSmall(const ClientOptions& options, const std::string& url);

// One connection for small requests one after the other (pushes of custom metrics, InfluxDB
// writes, the probes before them), kept alive from one to the next, with the options' auth, TLS
// and timeouts (ConfigureEasy), and options.timeout_s as the limit of each whole request. A
// request is sent once: what to retry is the caller's decision. Not thread-safe.
class SmallClient {
 public:
  explicit SmallClient(const ClientOptions& options);
  ~SmallClient();
  SmallClient(const SmallClient&) = delete;
  SmallClient& operator=(const SmallClient&) = delete;

  // POSTs `body` (of `content_type`) to `url`; GETs `url`. The answer whatever its status (its
  // body up to 64 kB); Unavailable naming the URL (Redact) and curl's reason when none came.
  Result<SmallResponse> Post(const std::string& url, std::string_view body,
                             const std::string& content_type);
  Result<SmallResponse> Get(const std::string& url);

 private:
  Result<SmallResponse> Perform(const std::string& url);

  ClientOptions options_;
  CURL* easy_ = nullptr;
};

// Percent-encodes a query parameter value.
std::string UrlEncode(const std::string& text);

}  // namespace kwatt::kwollect::internal

#endif  // KWATT_SRC_KWOLLECT_HTTP_H_
