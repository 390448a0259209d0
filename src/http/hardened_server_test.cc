#include "kwatt/http/hardened_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace kwatt::http::hardened_server_test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A client socket connected to 127.0.0.1:port; -1 on failure.
int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(uint16_t(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void SendAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return;
    done += size_t(n);
  }
}

// What the server sends until it closes the connection, or `limit` passes.
std::string ReadUntilClosed(int fd, milliseconds limit, bool* closed = nullptr) {
  std::string out;
  Clock::time_point end = Clock::now() + limit;
  if (closed) *closed = false;
  while (Clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char buffer[65536];
    ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) {
      if (closed) *closed = true;
      break;
    }
    out.append(buffer, size_t(n));
  }
  return out;
}

// One request on a new connection, closed by the client's "Connection: close".
std::string Ask(int port, const std::string& request, milliseconds limit = milliseconds(20000)) {
  int fd = Connect(port);
  if (fd < 0) return "connect failed";
  SendAll(fd, request);
  std::string answer = ReadUntilClosed(fd, limit);
  ::close(fd);
  return answer;
}

class HardenedServerTest : public ::testing::Test {
 protected:
  void Start(ServerLimits limits) {
    server_ = std::make_unique<HardenedServer>(limits);
    server_->Get("/hello", [](const Request&, Response& res) {
      res.set_content("hello world", "text/plain");
    });
    server_->Post("/hello", [this](const Request& req, Response& res) {
      ++posts_;
      res.set_content("got " + std::to_string(req.body.size()), "text/plain");
    });
    // 64 MB streamed in 256 KiB blocks (kwatt serve's metrics answers: 128 KiB).
    server_->Get("/big", [this](const Request&, Response& res) {
      res.set_chunked_content_provider("text/plain",
                                       [this, sent = size_t(0)](size_t, DataSink& sink) mutable {
                                         std::string block(256 * 1024, 'x');
                                         if (!sink.write(block.data(), block.size())) {
                                           big_cut_ = true;
                                           return false;
                                         }
                                         sent += block.size();
                                         if (sent >= (size_t(64) << 20)) sink.done();
                                         return true;
                                       });
    });
    // A long computation that checks whether it was given up.
    server_->Get("/long", [this](const Request&, Response& res) {
      Clock::time_point end = Clock::now() + std::chrono::seconds(120);
      while (Clock::now() < end && !HardenedServer::RequestAbandoned()) {
        std::this_thread::sleep_for(milliseconds(10));
      }
      long_abandoned_ = HardenedServer::RequestAbandoned();
      long_done_ = true;
      res.set_content("done", "text/plain");
    });
    Result<int> port = server_->Bind("127.0.0.1", 0);
    ASSERT_TRUE(port.ok()) << port.status().message();
    port_ = *port;
    ASSERT_TRUE(server_->Serve().ok());
  }

  std::unique_ptr<HardenedServer> server_;
  int port_ = 0;
  std::atomic<int> posts_{0};
  std::atomic<bool> big_cut_{false};
  std::atomic<bool> long_done_{false};
  std::atomic<bool> long_abandoned_{false};
};

const char* kGet = "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

TEST_F(HardenedServerTest, AnswersWithTheSecurityHeaders) {
  Start(ServerLimits());
  std::string answer = Ask(port_, kGet);
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  EXPECT_NE(answer.find("hello world"), std::string::npos);
  std::string missing = Ask(port_, "GET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(missing.rfind("HTTP/1.1 404", 0), 0u) << missing;
  for (const std::string& text : {answer, missing}) {
    for (const auto& [name, value] : SecurityHeaders()) {
      EXPECT_NE(text.find(name + ": " + value), std::string::npos) << name << " in " << text;
    }
  }
}

// A client that trickles its headers a byte at a time is cut at the header deadline, and fewer
// such clients than threads leave the server answering the others at once.
TEST_F(HardenedServerTest, TricklingHeadersAreCutAndDoNotStallTheServer) {
  ServerLimits limits;
  limits.threads = 3;
  limits.header_timeout = milliseconds(5000);
  Start(limits);
  std::vector<int> slow;
  for (int i = 0; i < 2; ++i) slow.push_back(Connect(port_));
  std::atomic<bool> stop{false};
  std::array<std::atomic<bool>, 2> cut{false, false};  // read by this thread while set
  std::thread trickle([&] {
    std::string request = "GET /hello HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    for (size_t i = 0; !stop; ++i) {
      for (size_t s = 0; s < slow.size(); ++s) {
        if (cut[s]) continue;
        char c = i < request.size() ? request[i] : 'a';
        if (::send(slow[s], &c, 1, MSG_NOSIGNAL) != 1) cut[s] = true;
        pollfd p{slow[s], POLLIN, 0};
        if (::poll(&p, 1, 0) > 0) {
          char b[4096];  // the 408, then the end of the connection
          if (::recv(slow[s], b, sizeof(b), MSG_DONTWAIT) <= 0) cut[s] = true;
        }
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
  });
  std::this_thread::sleep_for(milliseconds(300));
  Clock::time_point asked = Clock::now();
  std::string answer = Ask(port_, kGet);
  // "At once": well under the header deadline the slow clients are held to (generous for a
  // loaded machine and the sanitizers).
  EXPECT_LT(Clock::now() - asked, milliseconds(4000)) << "the server stalled";
  EXPECT_NE(answer.find("hello world"), std::string::npos) << answer;
  // The trickling clients are cut though they never stop sending (generous: 5 s deadline).
  Clock::time_point end = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < end && !(cut[0] && cut[1])) std::this_thread::sleep_for(milliseconds(50));
  stop = true;
  trickle.join();
  EXPECT_TRUE(cut[0] && cut[1]) << "a client trickling its headers was never cut";
  for (int fd : slow) ::close(fd);
}

// A body sent a byte at a time is cut at the body deadline; the handler never runs.
TEST_F(HardenedServerTest, TricklingBodyIsCut) {
  ServerLimits limits;
  limits.body_timeout = milliseconds(1000);
  limits.header_timeout = milliseconds(60000);  // not what cuts it
  Start(limits);
  int fd = Connect(port_);
  SendAll(fd, "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n");
  bool closed = false;
  std::string answer;
  Clock::time_point began = Clock::now();
  while (!closed && Clock::now() < began + std::chrono::seconds(60)) {
    SendAll(fd, "a");
    answer += ReadUntilClosed(fd, milliseconds(100), &closed);
  }
  EXPECT_TRUE(closed);
  // Generous: the body deadline is 1 s, the next request's header deadline 60 s.
  EXPECT_LT(Clock::now() - began, std::chrono::seconds(30));
  EXPECT_EQ(answer.rfind("HTTP/1.1 408", 0), 0u) << answer;
  EXPECT_EQ(posts_, 0);
  ::close(fd);
}

// A client that asks for a large answer and never reads it is cut at the write deadline, and
// holds no worker meanwhile: with one worker, a GET is answered at once.
TEST_F(HardenedServerTest, ClientThatStopsReadingIsCutAndHoldsNoWorker) {
  ServerLimits limits;
  limits.threads = 1;
  limits.write_timeout = milliseconds(1000);
  Start(limits);
  std::vector<int> readers;
  for (int i = 0; i < 3; ++i) {
    int fd = Connect(port_);
    int small = 4096;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    SendAll(fd, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n");
    readers.push_back(fd);
  }
  std::this_thread::sleep_for(milliseconds(300));
  Clock::time_point asked = Clock::now();
  std::string answer = Ask(port_, kGet);
  EXPECT_LT(Clock::now() - asked, milliseconds(900))
      << "a client that does not read holds a worker";
  EXPECT_NE(answer.find("hello world"), std::string::npos) << answer;
  // Cut after the write deadline: what the server had sent, then the end of the connection.
  std::this_thread::sleep_for(milliseconds(3000));
  for (int fd : readers) {
    bool closed = false;
    std::string got = ReadUntilClosed(fd, milliseconds(20000), &closed);
    EXPECT_TRUE(closed) << "the server still waits on a client that does not read";
    EXPECT_LT(got.size(), size_t(64) << 20);
    ::close(fd);
  }
  Clock::time_point end = Clock::now() + std::chrono::seconds(10);
  while (server_->OpenConnections() > 0 && Clock::now() < end) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(server_->OpenConnections(), 0u);
}

TEST_F(HardenedServerTest, RefusesBadContentLengthBeforeReadingTheBody) {
  Start(ServerLimits());
  struct Case {
    std::string headers;
    std::string status;
  };
  for (const Case& c : std::vector<Case>{
           {"Content-Length: 5\r\nContent-Length: 7\r\n", "400"},
           {"Content-Length: -1\r\n", "400"},
           {"Content-Length: +5\r\n", "400"},
           {"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "400"},
           {"Content-Length: 99999999999\r\n", "413"},
           {"", "411"},
       }) {
    int fd = Connect(port_);
    // No body follows: an answer at once means the server did not wait for one.
    SendAll(fd, "POST /hello HTTP/1.1\r\nHost: x\r\n" + c.headers + "\r\n");
    bool closed = false;
    std::string answer = ReadUntilClosed(fd, milliseconds(20000), &closed);
    EXPECT_EQ(answer.rfind("HTTP/1.1 " + c.status, 0), 0u) << c.headers << " -> " << answer;
    EXPECT_TRUE(closed) << c.headers;
    EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
    ::close(fd);
  }
  EXPECT_EQ(posts_, 0);
  std::string conflicting = Ask(
      port_, "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nab");
  EXPECT_NE(conflicting.find("Content-Length is not one length"), std::string::npos) << conflicting;
  std::string good =
      Ask(port_,
          "POST /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 3\r\n\r\nabc");
  EXPECT_NE(good.find("got 3"), std::string::npos) << good;
}

TEST_F(HardenedServerTest, NeverAnswers206) {
  Start(ServerLimits());
  std::string answer =
      Ask(port_, "GET /hello HTTP/1.1\r\nHost: x\r\nRange: bytes=2-4\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  EXPECT_NE(answer.find("hello world"), std::string::npos) << answer;
  EXPECT_EQ(answer.find("Content-Range"), std::string::npos) << answer;
}

TEST_F(HardenedServerTest, OptionsNamesTheMethodsOfAResource) {
  Start(ServerLimits());
  std::string answer =
      Ask(port_, "OPTIONS /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(answer.rfind("HTTP/1.1 204", 0), 0u) << answer;
  EXPECT_NE(answer.find("Allow: GET, HEAD, POST, OPTIONS"), std::string::npos) << answer;
  std::string missing =
      Ask(port_, "OPTIONS /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(missing.rfind("HTTP/1.1 404", 0), 0u) << missing;
}

TEST_F(HardenedServerTest, HandlerSeesItsClientLeave) {
  Start(ServerLimits());
  int fd = Connect(port_);
  SendAll(fd, "GET /long HTTP/1.1\r\nHost: x\r\n\r\n");
  std::this_thread::sleep_for(milliseconds(200));
  ::close(fd);
  Clock::time_point end = Clock::now() + std::chrono::seconds(30);
  while (!long_done_ && Clock::now() < end) std::this_thread::sleep_for(milliseconds(20));
  EXPECT_TRUE(long_done_);
  EXPECT_TRUE(long_abandoned_);
}

TEST_F(HardenedServerTest, ShutdownEndsALongAnswerPromptly) {
  Start(ServerLimits());
  int fd = Connect(port_);
  SendAll(fd, "GET /long HTTP/1.1\r\nHost: x\r\n\r\n");
  int idle = Connect(port_);  // a silent connection too
  std::this_thread::sleep_for(milliseconds(200));
  Clock::time_point asked = Clock::now();
  server_->Shutdown();
  // Generous: the handler runs for 120 s unless it sees the server stop.
  EXPECT_LT(Clock::now() - asked, std::chrono::seconds(10));
  EXPECT_TRUE(long_abandoned_);
  ::close(fd);
  ::close(idle);
}

// Idle connections cost a socket, not a thread: with one worker and many silent connections, a
// GET is answered at once; the idle ones are closed after keep_alive_timeout.
TEST_F(HardenedServerTest, IdleConnectionsDoNotStallTheServer) {
  ServerLimits limits;
  limits.threads = 1;
  limits.keep_alive_timeout = milliseconds(1500);
  Start(limits);
  std::vector<int> idle;
  for (int i = 0; i < 300; ++i) idle.push_back(Connect(port_));
  std::this_thread::sleep_for(milliseconds(100));
  Clock::time_point asked = Clock::now();
  std::string answer = Ask(port_, kGet);
  EXPECT_LT(Clock::now() - asked, milliseconds(900)) << "idle connections stall the server";
  EXPECT_NE(answer.find("hello world"), std::string::npos) << answer;
  bool closed = false;
  ReadUntilClosed(idle.front(), milliseconds(10000), &closed);
  EXPECT_TRUE(closed) << "an idle connection was never closed";
  for (int fd : idle) ::close(fd);
}

// The bytes of a body are a body, whatever the method: never a second request.
TEST_F(HardenedServerTest, ABodyOnAGetIsReadAndDroppedNeverRunAsARequest) {
  Start(ServerLimits());
  std::string smuggled = "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc";
  std::string answer =
      Ask(port_, "GET /hello HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                     std::to_string(smuggled.size()) + "\r\nConnection: close\r\n\r\n" + smuggled);
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  EXPECT_EQ(answer.find("HTTP/1.1", 5), std::string::npos) << "two answers: " << answer;
  EXPECT_EQ(posts_, 0);
  // Chunked alike.
  std::string chunked = Ask(
      port_,
      "GET /hello HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
      "Connection: close\r\n\r\n" +
          [&] {
            char size[16];
            std::snprintf(size, sizeof(size), "%zx", smuggled.size());
            return std::string(size) + "\r\n" + smuggled + "\r\n0\r\n\r\n";
          }());
  EXPECT_EQ(chunked.rfind("HTTP/1.1 200", 0), 0u) << chunked;
  EXPECT_EQ(posts_, 0);
}

// Framings that proxies and servers read differently are refused at once, and the connection
// closed: nothing after them is taken as a request.
TEST_F(HardenedServerTest, AmbiguousFramingIsRefusedAtOnce) {
  Start(ServerLimits());
  struct Case {
    std::string headers;
    std::string body;
    std::string status;
  };
  std::string next = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
  for (const Case& c : std::vector<Case>{
           {"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n", "400"},
           {"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", "0\r\n\r\n", "400"},
           {"Transfer-Encoding: xchunked\r\n", "", "501"},
           {"Transfer-Encoding: chunked, identity\r\n", "", "501"},
           {"Transfer-Encoding: gzip, chunked\r\n", "", "501"},
           {"Transfer-Encoding : chunked\r\n", "", "400"},
           {"Transfer-Encoding: chunked\r\n", "-1\r\nabc\r\n0\r\n\r\n", "400"},
           {"Transfer-Encoding: chunked\r\n", "zz\r\nabc\r\n0\r\n\r\n", "400"},
       }) {
    int fd = Connect(port_);
    Clock::time_point asked = Clock::now();
    SendAll(fd, "POST /hello HTTP/1.1\r\nHost: x\r\n" + c.headers + "\r\n" + c.body + next);
    bool closed = false;
    std::string answer = ReadUntilClosed(fd, milliseconds(20000), &closed);
    EXPECT_LT(Clock::now() - asked, milliseconds(5000)) << c.headers << ": not at once";
    EXPECT_EQ(answer.rfind("HTTP/1.1 " + c.status, 0), 0u) << c.headers << " -> " << answer;
    EXPECT_EQ(answer.find("HTTP/1.1", 5), std::string::npos) << c.headers << " -> " << answer;
    EXPECT_TRUE(closed) << c.headers;
    ::close(fd);
  }
  EXPECT_EQ(posts_, 0);
}

TEST_F(HardenedServerTest, HeadersAsRfc9112Says) {
  Start(ServerLimits());
  struct Case {
    std::string request;
    std::string status;
  };
  std::string many;
  for (int i = 0; i < 1000; ++i) many += "X-" + std::to_string(i) + ": y\r\n";
  for (const Case& c : std::vector<Case>{
           {"GET /hello HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", "400"},
           {"GET /hello HTTP/1.1\r\n\r\n", "400"},
           {"GET /hello HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n", "400"},
           {"GET /hello HTTP/1.1\r\nHost: x\r\n" + many + "\r\n", "431"},
           {"GET /hello HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(100'000, 'a') + "\r\n\r\n",
            "431"},
           {"GET /" + std::string(20'000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n", "414"},
           {"GET /hello HTTP/2.0\r\nHost: x\r\n\r\n", "505"},
       }) {
    std::string answer = Ask(port_, c.request);
    EXPECT_EQ(answer.rfind("HTTP/1.1 " + c.status, 0), 0u)
        << c.request.substr(0, 80) << " -> " << answer.substr(0, 300);
  }
  // Trailers are read and ignored.
  std::string trailers = Ask(port_,
                             "POST /hello HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                             "Connection: close\r\n\r\n3\r\nabc\r\n0\r\nX-Checksum: 1\r\n\r\n");
  EXPECT_NE(trailers.find("got 3"), std::string::npos) << trailers;
  // Pipelined requests are answered in order.
  std::string two = Ask(port_,
                        "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"
                        "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  size_t first = two.find("hello world");
  EXPECT_NE(first, std::string::npos) << two;
  EXPECT_NE(two.find("hello world", first + 1), std::string::npos) << two;
}

// One body limit for every framing: 413, before the body is read whole.
TEST_F(HardenedServerTest, OneBodyLimitForEveryFraming) {
  ServerLimits limits;
  limits.max_body_bytes = 1000;
  Start(limits);
  std::string chunk(600, 'a');
  std::string chunked = "258\r\n" + chunk + "\r\n258\r\n" + chunk + "\r\n0\r\n\r\n";
  std::string answer =
      Ask(port_, "POST /hello HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked);
  EXPECT_EQ(answer.rfind("HTTP/1.1 413", 0), 0u) << answer;
  std::string length =
      Ask(port_, "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 1200\r\n\r\n" +
                     std::string(1200, 'a'));
  EXPECT_EQ(length.rfind("HTTP/1.1 413", 0), 0u) << length;
  EXPECT_EQ(posts_, 0);
}

TEST_F(HardenedServerTest, ConnectionsBeyondTheLimitsAre503) {
  ServerLimits limits;
  limits.max_connections = 5;
  Start(limits);
  std::vector<int> held;
  for (int i = 0; i < 5; ++i) held.push_back(Connect(port_));
  std::this_thread::sleep_for(milliseconds(200));
  std::string refused = Ask(port_, kGet);
  EXPECT_EQ(refused.rfind("HTTP/1.1 503", 0), 0u) << refused;
  for (int fd : held) ::close(fd);
  Clock::time_point end = Clock::now() + std::chrono::seconds(10);
  std::string answer;
  while (Clock::now() < end && answer.find("hello world") == std::string::npos) {
    answer = Ask(port_, kGet);
  }
  EXPECT_NE(answer.find("hello world"), std::string::npos) << answer;
}

TEST_F(HardenedServerTest, AClientsShareOfConnections) {
  ServerLimits limits;
  limits.max_connections_per_client = 3;
  Start(limits);
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) held.push_back(Connect(port_));
  std::this_thread::sleep_for(milliseconds(200));
  std::string refused = Ask(port_, kGet);
  EXPECT_EQ(refused.rfind("HTTP/1.1 503", 0), 0u) << refused;
  for (int fd : held) ::close(fd);
}

TEST(HardenedServerCredentials, TheBasicSchemeInAnyCase) {
  Request request;
  request.headers.emplace("Authorization", "basic dTpwQHNz");  // u:p@ss
  EXPECT_TRUE(request.basic_credentials_are("u", "p@ss"));
  EXPECT_FALSE(request.basic_credentials_are("u", "p@sS"));
  EXPECT_EQ(request.basic_user(), "u");
  Request upper;
  upper.headers.emplace("authorization", "BASIC dTpwQHNz");
  EXPECT_TRUE(upper.basic_credentials_are("u", "p@ss"));
  Request bad;
  bad.headers.emplace("Authorization", "Basic dTpwQHNz!!");
  EXPECT_FALSE(bad.basic_credentials_are("u", "p@ss"));
  Request bearer;
  bearer.headers.emplace("Authorization", "Bearer dTpwQHNz");
  EXPECT_FALSE(bearer.basic_credentials_are("u", "p@ss"));
  EXPECT_EQ(bearer.basic_user(), "");
}

TEST(HardenedServerBind, NamesTheCause) {
  HardenedServer server;
  // 192.0.2.1 (TEST-NET-1) is no address of this machine.
  Result<int> port = server.Bind("192.0.2.1", 0);
  ASSERT_FALSE(port.ok());
  EXPECT_NE(port.status().message().find("Cannot assign requested address"), std::string::npos)
      << port.status().message();
  EXPECT_NE(port.status().message().find("192.0.2.1:0"), std::string::npos);
  EXPECT_EQ(port.status().message().find("in use"), std::string::npos);

  HardenedServer first;
  Result<int> taken = first.Bind("127.0.0.1", 0);
  ASSERT_TRUE(taken.ok());
  ASSERT_TRUE(first.Serve().ok());
  HardenedServer second;
  Result<int> again = second.Bind("127.0.0.1", *taken);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("Address already in use"), std::string::npos)
      << again.status().message();
}

}  // namespace
}  // namespace kwatt::http::hardened_server_test
