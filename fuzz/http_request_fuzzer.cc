// kwatt's HTTP server as a client meets it: each input is the bytes a client sends on one
// connection (request lines, headers, bodies, several requests), sent over loopback to a
// HardenedServer started once in this process, then the client's half closed. Beast's parser is
// fuzzed by Boost's own harnesses; this one covers what kwatt does around it: its reading of the
// header block, its RFC 9112 checks, body limits for both framings, pipelining and its answers.
// No crash, no hang, no leak; every answer a well-formed status line; never more answers than
// request lines sent (a body is never taken as a request); the server answers afterwards.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "fuzz/loopback.h"
#include "kwatt/http/hardened_server.h"

namespace {

using kwatt::http::HardenedServer;

int TheServersPort() {
  static std::unique_ptr<HardenedServer> server;
  static const int port = [] {
    kwatt::http::ServerLimits limits;
    limits.threads = 2;
    limits.max_body_bytes = 4096;  // within reach of the fuzzer's inputs
    limits.max_header_bytes = 2048;
    limits.max_header_fields = 20;
    limits.max_target_bytes = 512;
    limits.header_timeout = std::chrono::milliseconds(2000);
    limits.body_timeout = std::chrono::milliseconds(2000);
    server = std::make_unique<HardenedServer>(limits);
    server->Get("/x", [](const kwatt::http::Request&, kwatt::http::Response& res) {
      res.set_content("ok", "text/plain");
    });
    server->Post("/x", [](const kwatt::http::Request& req, kwatt::http::Response& res) {
      res.set_content("got " + std::to_string(req.body.size()), "text/plain");
    });
    server->Get("/stream", [](const kwatt::http::Request&, kwatt::http::Response& res) {
      res.set_chunked_content_provider("text/plain",
                                       [](size_t offset, kwatt::http::DataSink& sink) {
                                         sink.write("abc", 3);
                                         if (offset >= 9) sink.done();
                                         return true;
                                       });
    });
    kwatt::Result<int> bound = server->Bind("127.0.0.1", 0);
    KWATT_FUZZ_CHECK(bound.ok());
    KWATT_FUZZ_CHECK(server->Serve().ok());
    return *bound;
  }();
  return port;
}

// Sends `input` on a new connection, closes the sending half, and returns what the server sent
// until it closed ("" with *hung when nothing ended it within 10 s).
std::string Exchange(std::string_view input, bool* hung) {
  int fd = kwatt::fuzz::ConnectLoopback(TheServersPort());
  std::string answer;
  *hung = false;
  size_t sent = 0;
  while (sent < input.size()) {
    ssize_t n = ::send(fd, input.data() + sent, input.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the server refused and closed: its answer is still there to read
    sent += size_t(n);
  }
  ::shutdown(fd, SHUT_WR);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      *hung = true;
      break;
    }
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, int(left.count()));
    if (ready < 0 && errno == EINTR) continue;  // libFuzzer's timer signal
    if (ready <= 0) continue;
    char buffer[65536];
    ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    answer.append(buffer, size_t(n));
  }
  kwatt::fuzz::CloseAborting(fd);
  return answer;
}

size_t Count(std::string_view text, std::string_view what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + 1)) {
    ++count;
  }
  return count;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  bool hung = false;
  std::string answer = Exchange(input, &hung);
  KWATT_FUZZ_CHECK(!hung);  // every input ends: the client's end of input closes the request
  if (!answer.empty()) {
    KWATT_FUZZ_CHECK(answer.rfind("HTTP/1.1 ", 0) == 0);
    KWATT_FUZZ_CHECK(answer.size() > 12 && answer[12] == ' ');  // "HTTP/1.1 NNN "
    // Each answer's status line starts the answer or follows a line end (no body here holds
    // one). No more answers than request lines sent (one more: a malformed start refused; a
    // 100 Continue before a body).
    size_t answers = 1 + Count(answer, "\nHTTP/1.1 ");
    KWATT_FUZZ_CHECK(answers <= 2 * Count(input, "HTTP/1.") + 1);
  }
  static std::atomic<int> inputs{0};
  if (++inputs % 500 == 0) {  // still serving
    std::string check = Exchange("GET /x HTTP/1.1\r\nHost: x\r\n\r\n", &hung);
    KWATT_FUZZ_CHECK(check.rfind("HTTP/1.1 200", 0) == 0);
  }
  return 0;
}
