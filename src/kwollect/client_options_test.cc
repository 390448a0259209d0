#include "kwatt/kwollect/client_options.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace kwatt::kwollect::client_options_test {
namespace {

class ClientOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("kwatt-options-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    unsetenv("KWATT_API_URL");
    unsetenv("KWATT_USERNAME");
    unsetenv("KWATT_PASSWORD");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& text) {
    std::string path = (dir_ / "g5k.yaml").string();
    std::ofstream(path) << text;
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(ClientOptionsTest, ReadsPythonGrid5000File) {
  ClientOptions options;
  ASSERT_TRUE(LoadClientOptions(Write("uri: http://127.0.0.1:8080/stable/\nusername: alice\n"
                                      "password: s3cret\nverify_ssl: false\ntimeout: 12\n"),
                                &options)
                  .ok());
  EXPECT_EQ(options.api_url, "http://127.0.0.1:8080/stable");
  EXPECT_EQ(options.username, "alice");
  EXPECT_EQ(options.password, "s3cret");
  EXPECT_FALSE(options.verify_tls);
  EXPECT_EQ(options.timeout_s, 12);
  ClientOptions ca;
  ASSERT_TRUE(LoadClientOptions(Write("verify_ssl: /etc/ssl/certs/ca.pem\n"), &ca).ok());
  EXPECT_TRUE(ca.verify_tls);
  EXPECT_EQ(ca.ca_file, "/etc/ssl/certs/ca.pem");
  EXPECT_EQ(ca.api_url, kDefaultApiUrl);
}

TEST_F(ClientOptionsTest, MissingFileKeepsDefaultsAndEnvironmentWins) {
  ClientOptions options;
  ASSERT_TRUE(LoadClientOptions((dir_ / "absent.yaml").string(), &options).ok());
  EXPECT_EQ(options.api_url, kDefaultApiUrl);
  setenv("KWATT_API_URL", "http://localhost:1/stable", 1);
  setenv("KWATT_PASSWORD", "env-pw", 1);
  ASSERT_TRUE(LoadClientOptions(Write("uri: http://x/stable\npassword: file-pw\n"), &options).ok());
  EXPECT_EQ(options.api_url, "http://localhost:1/stable");
  EXPECT_EQ(options.password, "env-pw");
}

TEST_F(ClientOptionsTest, BadFileIsNamedButPasswordNeverShown) {
  ClientOptions options;
  Status broken = LoadClientOptions(Write("uri: [unclosed\n"), &options);
  EXPECT_EQ(broken.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(broken.message().find("g5k.yaml"), std::string::npos);
  Status typed = LoadClientOptions(Write("password: {a: hunter2}\n"), &options);
  EXPECT_FALSE(typed.ok());
  EXPECT_EQ(typed.message().find("hunter2"), std::string::npos);
}

}  // namespace
}  // namespace kwatt::kwollect::client_options_test

namespace kwatt::kwollect::client_options_test {
namespace {

TEST(ValidateClientOptions, RefusesMeaninglessValuesNamingTheOption) {
  EXPECT_TRUE(ValidateClientOptions(ClientOptions()).ok());
  struct Case {
    void (*set)(ClientOptions*);
    const char* name;
  };
  const Case cases[] = {
      {[](ClientOptions* o) { o->max_concurrency = 0; }, "concurrency"},
      {[](ClientOptions* o) { o->max_concurrency = -3; }, "concurrency"},
      {[](ClientOptions* o) { o->max_per_site = 0; }, "per_site"},
      {[](ClientOptions* o) { o->max_rows_per_request = 0; }, "rows_per_request"},
      {[](ClientOptions* o) { o->max_rows_per_request = -1; }, "rows_per_request"},
      {[](ClientOptions* o) { o->max_retries = -1; }, "retries"},
      {[](ClientOptions* o) { o->backoff_s = -0.5; }, "backoff"},
      {[](ClientOptions* o) { o->backoff_s = std::nan(""); }, "backoff"},
      {[](ClientOptions* o) { o->timeout_s = 0; }, "timeout"},
      {[](ClientOptions* o) { o->timeout_s = -1; }, "timeout"},
      {[](ClientOptions* o) { o->connect_timeout_s = -1; }, "connect_timeout"},
      {[](ClientOptions* o) { o->api_url = ""; }, "api_url"},
      // Issue 21, item 15: the base URL of an HTTP(S) API, nothing else.
      {[](ClientOptions* o) { o->api_url = "file:///etc"; }, "api_url"},
      {[](ClientOptions* o) { o->api_url = "ftp://example.org/stable"; }, "api_url"},
      {[](ClientOptions* o) { o->api_url = "http://example.org/stable?x=1"; }, "api_url"},
      {[](ClientOptions* o) { o->api_url = "https://example.org/stable#top"; }, "api_url"},
      {[](ClientOptions* o) { o->api_url = "example.org/stable"; }, "api_url"},
  };
  for (const Case& c : cases) {
    ClientOptions options;
    c.set(&options);
    Status status = ValidateClientOptions(options);
    ASSERT_FALSE(status.ok()) << c.name;
    EXPECT_EQ(status.code(), Status::Code::kInvalidArgument) << c.name;
    EXPECT_EQ(status.message().rfind(c.name, 0), 0u) << status.message();
  }
  ClientOptions upper;
  upper.api_url = "HTTPS://api.grid5000.fr/stable";
  EXPECT_TRUE(ValidateClientOptions(upper).ok());
  ClientOptions zero_retries;
  zero_retries.max_retries = 0;
  zero_retries.backoff_s = 0;
  EXPECT_TRUE(ValidateClientOptions(zero_retries).ok());
}

}  // namespace
}  // namespace kwatt::kwollect::client_options_test
