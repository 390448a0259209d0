// libcurl, configured once for kwatt's requests. Internal to the kwollect library.
#ifndef KWATT_SRC_KWOLLECT_HTTP_H_
#define KWATT_SRC_KWOLLECT_HTTP_H_

#include <curl/curl.h>

#include <string>

#include "kwatt/core/status.h"
#include "kwatt/kwollect/client_options.h"

namespace kwatt::kwollect::internal {

// Process-wide libcurl initialisation, done once on first use.
void EnsureCurlInitialised();

// Sets the options every request shares: auth, TLS, timeouts, keep-alive, user agent.
void ConfigureEasy(CURL* easy, const ClientOptions& options);

// The URL with credentials never in it, for messages.
std::string Redact(const std::string& url);

// A response whose status is not 200, turned into a Status with the server's message.
Status HttpError(long status, const std::string& body, const std::string& url);

struct SmallResponse {
  long status = 0;
  std::string body;
};

// GET of a small document (reference API). Transport failures are Unavailable, naming the URL and
// curl's reason.
Result<SmallResponse> GetSmall(const ClientOptions& options, const std::string& url);

// Percent-encodes a query parameter value.
std::string UrlEncode(const std::string& text);

}  // namespace kwatt::kwollect::internal

#endif  // KWATT_SRC_KWOLLECT_HTTP_H_
