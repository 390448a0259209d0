// The simulated Kwollect server's request handling: each input is the path and query of a GET
// (e.g. "/sites/lyon/metrics?nodes=nova-1&start_time=..."), sent over loopback to a server
// started once in this process. No crash, no hang (answers above 20,000 rows are refused as
// Kwollect's timeout), and an answer for every request.
#include <httplib.h>

#include <cstdint>
#include <memory>
#include <string>

#include "fuzz/fuzz_util.h"
#include "kwatt/server/server.h"

namespace {

kwatt::server::Server& TheServer() {
  static std::unique_ptr<kwatt::server::Server> server = [] {
    kwatt::server::ServerOptions options;
    options.max_rows = 20000;
    options.threads = 2;
    kwatt::Result<std::unique_ptr<kwatt::server::Server>> started =
        kwatt::server::Server::Start(options);
    KWATT_FUZZ_CHECK(started.ok());
    return std::move(*started);
  }();
  return *server;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string target(reinterpret_cast<const char*>(data), size);
  // A request line holds no space, CR or LF; a path starts with '/'.
  for (char& c : target) {
    if (c == ' ' || c == '\r' || c == '\n' || c == '\0') c = '+';
  }
  if (target.empty() || target[0] != '/') target.insert(0, "/");
  static httplib::Client client("127.0.0.1", TheServer().port());
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);  // else each request waits for a delayed ACK (40 ms)
  client.set_read_timeout(20);
  httplib::Result result = client.Get("/stable" + target);
  KWATT_FUZZ_CHECK(result);  // an answer, whatever the request
  return 0;
}
