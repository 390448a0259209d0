// A throwaway InfluxDB 1.x server for tests: Debian's influxd (`make deps` installs the influxdb
// package), run in the foreground (`influxd run -config FILE`) with its meta, data and WAL
// directories in a temporary directory, its HTTP API and its RPC service on 127.0.0.1 only, at
// ports the kernel picks (read back from its log), stopped with the object (collect's
// ChildProcess: its process group).
//
// A machine where `make deps` ran has influxd: a test that needs it fails there, never skips.
#ifndef KWATT_SRC_TESTING_INFLUXD_H_
#define KWATT_SRC_TESTING_INFLUXD_H_

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/http/client.h"
#include "src/collect/subprocess.h"

namespace kwatt::testing {

class TestInfluxd {
 public:
  struct Options {
    // [http] auth-enabled: the admin user (admin, password "secret") is created at start.
    bool auth = false;
  };

  // Starts influxd and waits until /ping answers. InvalidArgument when influxd is not installed;
  // IOError naming its log when it does not start.
  static Result<std::unique_ptr<TestInfluxd>> Start(Options options) {
    const std::string influxd = "/usr/bin/influxd";
    if (::access(influxd.c_str(), X_OK) != 0) {
      return Status::InvalidArgument(influxd +
                                     " is not installed (Debian's influxdb): run make deps");
    }
    std::unique_ptr<TestInfluxd> server(new TestInfluxd());
    server->options_ = options;
    server->dir_ =
        std::filesystem::temp_directory_path() /
        ("kwatt_influxd_" + std::to_string(::getpid()) + "_" + std::to_string(Counter()++));
    std::error_code error;
    std::filesystem::remove_all(server->dir_, error);
    std::filesystem::create_directories(server->dir_, error);
    if (error) return Status::IOError("cannot create " + server->dir_.string());
    KWATT_RETURN_IF_ERROR(server->Run(0));
    if (options.auth) {
      KWATT_ASSIGN_OR_RETURN(std::string answer,
                             server->Query("CREATE USER admin WITH PASSWORD 'secret' WITH ALL "
                                           "PRIVILEGES",
                                           ""));
      if (answer.find("error") != std::string::npos) return Status::IOError(answer);
    }
    return server;
  }
  static Result<std::unique_ptr<TestInfluxd>> Start() { return Start(Options()); }

  ~TestInfluxd() {
    Stop();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // Stops the server (a peer down); its data stays, its port stays unused by it.
  void Stop() {
    if (child_) (void)child_->Stop();
    child_.reset();
  }

  // Starts it again on the same port, with the data it had.
  Status Restart() {
    Stop();
    return Run(port_);
  }

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  const std::filesystem::path& dir() const { return dir_; }

  // The JSON answer of an InfluxQL query (on `db` when not empty), as admin when auth is on.
  Result<std::string> Query(const std::string& query, const std::string& db) const {
    http::ClientSettings options;
    options.timeout_s = 30;
    if (options_.auth) {
      options.username = "admin";
      options.password = "secret";
    }
    http::SmallClient client(options);
    std::string body = "q=" + http::UrlEncode(query);
    if (!db.empty()) body += "&db=" + http::UrlEncode(db);
    KWATT_ASSIGN_OR_RETURN(
        http::ClientResponse response,
        client.Post(url() + "/query", body, "application/x-www-form-urlencoded"));
    if (response.status != 200) {
      return Status::IOError("query answered HTTP " + std::to_string(response.status) + ": " +
                             response.body);
    }
    return response.body;
  }

  std::string Log() const {
    std::ifstream in(dir_ / "influxd.log");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  TestInfluxd() = default;

  static std::atomic<int>& Counter() {
    static std::atomic<int> counter{0};
    return counter;
  }

  // Runs influxd with its HTTP API on `port` (0: any free one, read back from its log).
  Status Run(int port) {
    std::string d = dir_.string();
    {
      std::ofstream conf(dir_ / "influxdb.conf");
      conf << "reporting-disabled = true\n"
           << "bind-address = \"127.0.0.1:0\"\n"
           << "[meta]\n  dir = \"" << d << "/meta\"\n"
           << "[data]\n  dir = \"" << d << "/data\"\n  wal-dir = \"" << d << "/wal\"\n"
           << "  query-log-enabled = false\n"
           << "[http]\n  bind-address = \"127.0.0.1:" << port << "\"\n"
           << "  log-enabled = false\n"
           << "  auth-enabled = " << (options_.auth ? "true" : "false") << "\n"
           << "[monitor]\n  store-enabled = false\n"
           << "[continuous_queries]\n  enabled = false\n";
      if (!conf) return Status::IOError("cannot write " + (dir_ / "influxdb.conf").string());
    }
    std::string log = (dir_ / "influxd.log").string();
    std::ofstream(log, std::ios::trunc).close();
    // Its log into a file (nobody reads it as it runs: a pipe would fill and block it).
    Result<collect::ChildProcess> child = collect::ChildProcess::Start(
        {"/bin/sh", "-c",
         "exec /usr/bin/influxd run -config '" + (dir_ / "influxdb.conf").string() + "' >> '" +
             log + "' 2>&1"});
    if (!child.ok()) return child.status();
    child_ = std::make_unique<collect::ChildProcess>(std::move(*child));
    // "Listening on HTTP ... addr=127.0.0.1:PORT", then /ping.
    const std::regex listening("Listening on HTTP.* addr=127\\.0\\.0\\.1:([0-9]+)");
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      Result<collect::ProcessExit> ended = child_->Wait(std::chrono::steady_clock::now());
      if (ended.ok()) {
        child_.reset();
        return Status::IOError("influxd ended at start (" + ended->Describe() + "): " + Log());
      }
      std::smatch match;
      std::string text = Log();
      if (std::regex_search(text, match, listening)) {
        port_ = std::stoi(match[1]);
        http::ClientSettings options;
        options.timeout_s = 5;
        http::SmallClient client(options);
        Result<http::ClientResponse> ping = client.Get(url() + "/ping");
        if (ping.ok() && ping->status == 204) return Status::OK();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    Stop();
    return Status::IOError("influxd did not answer within 60 s: see " + log);
  }

  Options options_;
  std::filesystem::path dir_;
  std::unique_ptr<collect::ChildProcess> child_;
  int port_ = 0;
};

}  // namespace kwatt::testing

#endif  // KWATT_SRC_TESTING_INFLUXD_H_
