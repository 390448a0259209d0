// The kwatt command for tests that run it as a user would (the meter's outputs read back by
// `kwatt serve`, `kwatt fetch`, `kwatt inspect`, `kwatt energy`): KWATT_BIN, else the build's.
#ifndef KWATT_SRC_TESTING_KWATT_BINARY_H_
#define KWATT_SRC_TESTING_KWATT_BINARY_H_

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "kwatt/core/status.h"
#include "src/collect/subprocess.h"

namespace kwatt::testing {

inline std::string KwattBinary() {
  if (const char* bin = std::getenv("KWATT_BIN"); bin && *bin) return bin;
  return std::string(KWATT_BINARY_DIR) + "/kwatt";
}

// Runs `kwatt ARGS` to its end (a minute at most).
inline Result<collect::RunResult> RunKwatt(std::vector<std::string> args) {
  args.insert(args.begin(), KwattBinary());
  collect::RunOptions options;
  options.deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  return collect::RunProgram(args, options);
}

// `kwatt serve --simulate --port 0 ARGS`, running until the object goes.
class KwattServer {
 public:
  static Result<std::unique_ptr<KwattServer>> Start(std::vector<std::string> args) {
    std::vector<std::string> argv = {KwattBinary(), "serve", "--simulate", "--port", "0"};
    argv.insert(argv.end(), args.begin(), args.end());
    KWATT_ASSIGN_OR_RETURN(collect::ChildProcess child, collect::ChildProcess::Start(argv));
    std::unique_ptr<KwattServer> server(new KwattServer(std::move(child)));
    std::string line;
    KWATT_ASSIGN_OR_RETURN(collect::ChildProcess::ReadOutcome outcome,
                           server->child_.ReadLine(
                               &line, std::chrono::steady_clock::now() + std::chrono::seconds(30)));
    if (outcome != collect::ChildProcess::ReadOutcome::kLine || line.rfind("http://", 0) != 0) {
      return Status::IOError("kwatt serve did not start: " + line + " " +
                             server->child_.stderr_tail());
    }
    server->url_ = line;  // http://127.0.0.1:PORT/stable
    return server;
  }
  ~KwattServer() { (void)child_.Stop(); }

  const std::string& url() const { return url_; }
  // The URL with credentials in it: http://USER:PASSWORD@127.0.0.1:PORT/stable.
  std::string UrlWith(const std::string& userinfo) const {
    return "http://" + userinfo + "@" + url_.substr(std::string("http://").size());
  }

 private:
  explicit KwattServer(collect::ChildProcess child) : child_(std::move(child)) {}
  collect::ChildProcess child_;
  std::string url_;
};

}  // namespace kwatt::testing

#endif  // KWATT_SRC_TESTING_KWATT_BINARY_H_
