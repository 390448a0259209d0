// libcurl's easy handles configured as ClientSettings say: what SmallClient, GetSmall and the
// transport share. Private to the http part.
#ifndef KWATT_SRC_HTTP_CURL_EASY_H_
#define KWATT_SRC_HTTP_CURL_EASY_H_

#include <curl/curl.h>

#include "kwatt/http/client.h"

namespace kwatt::http::internal {

// Process-wide libcurl initialisation, done once on first use.
void EnsureCurlInitialised();

// Sets the options every request shares: auth, TLS, timeouts, proxies, keep-alive, user agent.
void ConfigureEasy(CURL* easy, const ClientSettings& settings);

// Reads the status, Location and Retry-After of the answer `easy` received into `response`.
void ReadResponseInfo(CURL* easy, ClientResponse* response);

}  // namespace kwatt::http::internal

#endif  // KWATT_SRC_HTTP_CURL_EASY_H_
