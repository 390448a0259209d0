// The Kwollect API over kwatt's HTTP client (kwatt/http/client.h): the client settings that
// ClientOptions give, and what Kwollect's answers that are not 200 mean.
#ifndef KWATT_KWOLLECT_HTTP_H_
#define KWATT_KWOLLECT_HTTP_H_

#include <string>

#include "kwatt/core/status.h"
#include "kwatt/http/client.h"
#include "kwatt/kwollect/client_options.h"

namespace kwatt::kwollect {

// The HTTP settings of `options`: its credentials, TLS, timeouts, retries, user agent, and
// max_concurrency as the transport's connections.
http::ClientSettings HttpSettings(const ClientOptions& options);

// True for Kwollect's own "too much data" answer: HTTP 500 with its JSON timeout error
// ({"code":"P0001","message":"Request timeout, too much data to process."}, or PostgreSQL's
// statement timeout, code 57014). The only failure that asking for less can cure; any other 5xx
// (a proxy's HTML page...) is not about the request's size.
bool IsKwollectTimeout(long status, const std::string& body);

// A response whose status is not 200, turned into a Status naming the cause: the server's
// message, where a redirect leads, whether credentials were refused or are missing.
// Codes: Unauthenticated (401), NotFound (404), Unavailable (429, 5xx), InvalidArgument (others,
// redirects included).
Status HttpError(const http::ClientResponse& response, const std::string& url,
                 const ClientOptions& options);

}  // namespace kwatt::kwollect

#endif  // KWATT_KWOLLECT_HTTP_H_
