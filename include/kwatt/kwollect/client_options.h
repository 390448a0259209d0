// How kwatt reaches a Kwollect API: address, credentials, TLS, timeouts and politeness.
//
// Long-lived settings, apart from the per-query options of fetch.h. Defaults are polite to
// Grid'5000's API.
#ifndef KWATT_KWOLLECT_CLIENT_OPTIONS_H_
#define KWATT_KWOLLECT_CLIENT_OPTIONS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "kwatt/core/status.h"

namespace kwatt::kwollect {

inline constexpr const char* kDefaultApiUrl = "https://api.grid5000.fr/stable";

struct ClientOptions {
  std::string api_url = kDefaultApiUrl;  // base URL, ".../stable"
  std::string username;                  // HTTP Basic auth; empty: none (inside Grid'5000)
  std::string password;                  // never printed, logged or put in an error
  bool verify_tls = true;                // verify the server's certificate
  std::string ca_file;                   // CA bundle to verify with; empty: the system's
  double timeout_s = 300;                // a request making no progress this long fails
  double connect_timeout_s = 30;
  int max_concurrency = 12;              // requests in flight, all sites together
  int max_per_site = 3;                  // requests in flight per site
  int64_t max_rows_per_request = 50000;  // the planner's budget per request
  int max_retries = 5;                   // per request, for transient failures
  double backoff_s = 0.5;                // first retry delay; doubles each time
  std::string user_agent = "kwatt";
};

// Sets options->api_url from `url`, the one way a base URL enters the options: trailing '/'
// removed, and credentials in it ("https://user:password@host/stable") moved out into username
// and password (percent-decoded; a username already set wins), so that api_url, which is stored
// in archives and shown in messages, never holds a credential.
void SetApiUrl(std::string_view url, ClientOptions* options);

// Reads `path` (python-grid5000's YAML: uri, username, password, verify_ssl (bool or CA path),
// timeout) into `options`; a missing file leaves them unchanged. Then applies the environment:
// KWATT_API_URL, KWATT_USERNAME, KWATT_PASSWORD (which win over the file).
// Errors: InvalidArgument for an unreadable or malformed file, naming it and the key.
Status LoadClientOptions(const std::string& path, ClientOptions* options);

// Checks that every option has a meaning: api_url not empty; timeout_s and connect_timeout_s
// finite and > 0; max_concurrency, max_per_site and max_rows_per_request >= 1; max_retries >= 0;
// backoff_s finite and >= 0. Fetch, Resolve and LookUpNodes call it first, so every front end
// (CLI, Python) gets the same checks. Errors: InvalidArgument naming the option (as the Python
// keyword and the CLI flag call it) and its value.
Status ValidateClientOptions(const ClientOptions& options);

// "~/.python-grid5000.yaml" with $HOME expanded.
std::string DefaultConfigPath();

}  // namespace kwatt::kwollect

#endif  // KWATT_KWOLLECT_CLIENT_OPTIONS_H_
