#include "kwatt/http/access_log.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "kwatt/http/hardened_server.h"
#include "src/testing/temp_dir.h"

namespace kwatt::http::access_log_test {
namespace {

TEST(AccessLog, CombinedLogFormatWithTheDuration) {
  AccessRecord record;
  record.client = "192.0.2.7";
  record.user = "alice";
  record.time = std::chrono::system_clock::from_time_t(1796490241);  // 2026-12-05 17:04:01 UTC
  record.method = "GET";
  record.target = "/stable/sites?x=1";
  record.status = 200;
  record.bytes = 1234;
  record.user_agent = "curl/7.88.1";
  record.duration = std::chrono::microseconds(1520);
  EXPECT_EQ(AccessLog::Format(record),
            "192.0.2.7 - alice [05/Dec/2026:17:04:01 +0000] \"GET /stable/sites?x=1 HTTP/1.1\" "
            "200 1234 \"-\" \"curl/7.88.1\" 1520\n");
  AccessRecord refused;
  refused.client = "192.0.2.7";
  refused.time = record.time;
  refused.status = 503;
  EXPECT_EQ(AccessLog::Format(refused),
            "192.0.2.7 - - [05/Dec/2026:17:04:01 +0000] \"-\" 503 - \"-\" \"-\" 0\n");
  // A client's bytes cannot forge a line or a field.
  record.user_agent = "x\" 200\n1.2.3.4 - root";
  std::string line = AccessLog::Format(record);
  EXPECT_EQ(line.find('\n'), line.size() - 1) << line;
  EXPECT_NE(line.find("\"x\\\" 200\\x0a1.2.3.4 - root\""), std::string::npos) << line;
}

TEST(AccessLog, CredentialsInTheQueryAreRedacted) {
  EXPECT_EQ(AccessLog::Redacted("/a?password=hunter2&nodes=n1&api_token=t&Secret=s&key"),
            "/a?password=REDACTED&nodes=n1&api_token=REDACTED&Secret=REDACTED&key");
  EXPECT_EQ(AccessLog::Redacted("/a?pass%77ord=x"), "/a?pass%77ord=REDACTED");
  EXPECT_EQ(AccessLog::Redacted("/plain"), "/plain");
}

TEST(AccessLog, TheServerLogsEachAnswerWithItsUserNeverThePassword) {
  testing::TempDir dir;
  std::string path = (dir.root() / "access.log").string();
  {
    Result<std::shared_ptr<AccessLog>> log = AccessLog::Open(path);
    ASSERT_TRUE(log.ok()) << log.status().message();
    HardenedServer server;
    server.set_access_log(*log);
    server.Get("/hello",
               [](const Request&, Response& res) { res.set_content("hi", "text/plain"); });
    Result<int> port = server.Bind("127.0.0.1", 0);
    ASSERT_TRUE(port.ok());
    ASSERT_TRUE(server.Serve().ok());
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(uint16_t(*port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    std::string request =
        "GET /hello?token=abc HTTP/1.1\r\nHost: x\r\nAuthorization: Basic dTpwQHNz\r\n"
        "User-Agent: test\r\nConnection: close\r\n\r\n";
    ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), ssize_t(request.size()));
    char buffer[4096];
    while (::recv(fd, buffer, sizeof(buffer), 0) > 0) {
    }
    ::close(fd);
    server.Shutdown();
  }  // the log's thread writes what is queued, then closes
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string line = text.str();
  EXPECT_EQ(line.rfind("127.0.0.1 - u [", 0), 0u) << line;
  EXPECT_NE(line.find("\"GET /hello?token=REDACTED HTTP/1.1\" 200 2 \"-\" \"test\" "),
            std::string::npos)
      << line;
  EXPECT_EQ(line.find("p@ss"), std::string::npos) << line;
  EXPECT_EQ(line.find("dTpwQHNz"), std::string::npos) << line;
}

TEST(AccessLog, AFileThatCannotBeOpenedIsNamed) {
  Result<std::shared_ptr<AccessLog>> log = AccessLog::Open("/nonexistent-dir/access.log");
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find("/nonexistent-dir/access.log"), std::string::npos);
}

}  // namespace
}  // namespace kwatt::http::access_log_test
