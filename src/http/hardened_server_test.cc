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
    server_->Get("/hello", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("hello world", "text/plain");
    });
    server_->Post("/hello", [this](const httplib::Request& req, httplib::Response& res) {
      ++posts_;
      res.set_content("got " + std::to_string(req.body.size()), "text/plain");
    });
    // 64 MB streamed in 256 KiB blocks, as kwatt serve's metrics answers are.
    server_->Get("/big", [this](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider(
          "text/plain", [this, sent = size_t(0)](size_t, httplib::DataSink& sink) mutable {
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
    server_->Get("/long", [this](const httplib::Request&, httplib::Response& res) {
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
          char b;
          if (::recv(slow[s], &b, 1, MSG_DONTWAIT) <= 0) cut[s] = true;
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

// A client that asks for a large answer and never reads it is cut at the write deadline.
TEST_F(HardenedServerTest, ClientThatStopsReadingIsCut) {
  ServerLimits limits;
  limits.write_timeout = milliseconds(1000);
  Start(limits);
  int fd = Connect(port_);
  int small = 4096;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  SendAll(fd, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n");
  Clock::time_point end = Clock::now() + std::chrono::seconds(30);
  while (!big_cut_ && Clock::now() < end) std::this_thread::sleep_for(milliseconds(50));
  EXPECT_TRUE(big_cut_) << "the server still waits on a client that does not read";
  ::close(fd);
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
  EXPECT_NE(conflicting.find("conflicting Content-Length headers (2 and 3)"), std::string::npos)
      << conflicting;
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
