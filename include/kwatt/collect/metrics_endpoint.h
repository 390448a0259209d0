// The HTTP endpoint of `kwatt collect --listen HOST:PORT`: a collector's PrometheusText() at
// /metrics, served by kwatt's hardened HTTP server (doc/collect.md; its limits: doc/server.md).
//
// Thread safety: the endpoint answers on threads of its own; Start and the destructor from one
// thread.
#ifndef KWATT_COLLECT_METRICS_ENDPOINT_H_
#define KWATT_COLLECT_METRICS_ENDPOINT_H_

#include <memory>
#include <string>

#include "kwatt/collect/collector.h"
#include "kwatt/core/status.h"

namespace kwatt::collect {

class MetricsEndpoint {
 public:
  // Binds `host`:`port` (0: any free port) and serves `collector`'s text at /metrics until the
  // endpoint is destroyed. IOError naming the address and the system's cause when it cannot
  // bind, or when its threads cannot start.
  // REQUIRES: `collector` outlives the endpoint.
  static Result<std::unique_ptr<MetricsEndpoint>> Start(const Collector* collector,
                                                        const std::string& host, int port);
  ~MetricsEndpoint();  // stops serving: ends the connections and joins the threads
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // The port it listens on (the one the system chose when Start was given 0).
  int port() const { return port_; }

 private:
  struct Server;  // the hardened HTTP server
  MetricsEndpoint();

  std::unique_ptr<Server> server_;
  int port_ = 0;
};

}  // namespace kwatt::collect

#endif  // KWATT_COLLECT_METRICS_ENDPOINT_H_
