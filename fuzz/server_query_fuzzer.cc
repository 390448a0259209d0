// The simulated Kwollect server's request handling: each input is the path and query of a GET
// (e.g. "/sites/lyon/metrics?nodes=nova-1&start_time=..."), sent over loopback to a server
// started once in this process. No crash, no hang (answers above 20,000 rows are refused as
// Kwollect's timeout), and an answer for every request.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>

#include "fuzz/fuzz_util.h"
#include "fuzz/loopback.h"
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

// The status line of the answer to a GET of `target` on a connection of its own ("Connection:
// close": the answer ends where the server closes), or "" when none came within 20 s.
std::string StatusLineOf(int port, const std::string& target) {
  int fd = kwatt::fuzz::ConnectLoopback(port);
  std::string answer;
  std::string request =
      "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == ssize_t(request.size())) {
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      int ready = ::poll(&p, 1, 20'000);
      if (ready < 0 && errno == EINTR) continue;  // libFuzzer's timer signal
      if (ready <= 0) break;
      char buffer[65536];
      ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      if (answer.size() < 4096) answer.append(buffer, size_t(n));
    }
  }
  kwatt::fuzz::CloseAborting(fd);
  return answer.substr(0, answer.find("\r\n"));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string target(reinterpret_cast<const char*>(data), size);
  // A request line holds no space, CR or LF; a path starts with '/'.
  for (char& c : target) {
    if (c == ' ' || c == '\r' || c == '\n' || c == '\0') c = '+';
  }
  if (target.empty() || target[0] != '/') target.insert(0, "/");
  std::string status = StatusLineOf(TheServer().port(), "/stable" + target);
  KWATT_FUZZ_CHECK(status.rfind("HTTP/1.1 ", 0) == 0);  // an answer, whatever the request
  return 0;
}
