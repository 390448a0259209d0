// A throwaway Prometheus node exporter for tests: Debian's prometheus-node-exporter (`make deps`
// installs it) on a free port of 127.0.0.1 (it cannot bind port 0 and say which it got: ports.h),
// serving the *.prom files of a textfile directory, stopped with the object (collect's
// ChildProcess: its process group).
//
// A machine where `make deps` ran has the exporter: a test that needs it fails there, never skips.
#ifndef KWATT_SRC_TESTING_NODE_EXPORTER_H_
#define KWATT_SRC_TESTING_NODE_EXPORTER_H_

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/http/client.h"
#include "src/collect/subprocess.h"
#include "src/testing/ports.h"

namespace kwatt::testing {

class TestNodeExporter {
 public:
  struct Options {
    std::filesystem::path textfile_dir;  // the *.prom files it serves besides
    // The exporter's default collectors too (node_load1...); false: the textfile collector only.
    bool default_collectors = true;
  };

  // Starts the exporter and waits until /metrics answers. IOError naming its standard error when
  // it does not start.
  static Result<std::unique_ptr<TestNodeExporter>> Start(const Options& options) {
    std::unique_ptr<TestNodeExporter> exporter(new TestNodeExporter());
    exporter->port_ = FreeTcpPort();
    if (exporter->port_ <= 0) return Status::IOError("no free TCP port on 127.0.0.1");
    std::vector<std::string> argv = {
        "prometheus-node-exporter",
        "--web.listen-address=127.0.0.1:" + std::to_string(exporter->port_)};
    if (options.default_collectors) {
      argv.push_back("--no-collector.systemd");
    } else {
      argv.push_back("--collector.disable-defaults");
      argv.push_back("--collector.textfile");
    }
    argv.push_back("--collector.textfile.directory=" + options.textfile_dir.string());
    Result<collect::ChildProcess> child = collect::ChildProcess::Start(argv);
    if (!child.ok()) {
      return Status::IOError(child.status().message() +
                             " (Debian's prometheus-node-exporter: make deps)");
    }
    exporter->child_ = std::make_unique<collect::ChildProcess>(std::move(*child));
    http::ClientSettings client_options;
    client_options.timeout_s = 5;
    http::SmallClient client(client_options);
    for (int i = 0; i < 200; ++i) {
      Result<http::ClientResponse> answer = client.Get(exporter->url());
      if (answer.ok() && answer->status == 200) return exporter;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    exporter->child_->DrainStderr();
    return Status::IOError("prometheus-node-exporter did not start: " +
                           exporter->child_->stderr_tail());
  }

  int port() const { return port_; }
  // http://127.0.0.1:PORT/metrics
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/metrics"; }

 private:
  TestNodeExporter() = default;

  int port_ = 0;
  std::unique_ptr<collect::ChildProcess> child_;
};

}  // namespace kwatt::testing

#endif  // KWATT_SRC_TESTING_NODE_EXPORTER_H_
