// A Prometheus /metrics endpoint on the hardened server (hardened_server.h): GET /metrics answers
// the text a function gives, GET / a line saying where the metrics are. The one endpoint of
// `kwatt collect --listen` (a collector's PrometheusText) and `kwatt meter --listen` (the meter's
// exposition), whose texts are written by kwatt/core/prometheus_writer.h.
//
// Thread safety: `text` is called on the server's threads; Bind, Serve and Stop from one thread.
#ifndef KWATT_HTTP_METRICS_SERVER_H_
#define KWATT_HTTP_METRICS_SERVER_H_

#include <functional>
#include <memory>
#include <string>

#include "kwatt/core/status.h"

namespace kwatt::http {

class MetricsServer {
 public:
  // The exposition's text at a scrape (Prometheus's text format 0.0.4, UTF-8).
  using Text = std::function<std::string()>;

  // Binds `host` ("127.0.0.1", "0.0.0.0", "::1") at `port` (0: any free one, see port()), as a
  // command line's --listen HOST:PORT gives them; `index` is the answer of GET /. Nothing is
  // answered until Serve(). InvalidArgument for a port outside 0..65535; IOError naming HOST:PORT
  // when it cannot be bound (in use, not an address of this machine).
  static Result<std::unique_ptr<MetricsServer>> Bind(const std::string& host, int port, Text text,
                                                     std::string index);
  ~MetricsServer();  // Stop()
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const;
  // "http://HOST:PORT/metrics" (127.0.0.1 or [::1] for a server bound to every interface).
  std::string url() const;
  // Starts answering, on threads of its own. Once. IOError when its threads cannot start.
  Status Serve();
  // Stops answering and joins its threads. Idempotent.
  void Stop();

 private:
  struct Impl;
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kwatt::http

#endif  // KWATT_HTTP_METRICS_SERVER_H_
