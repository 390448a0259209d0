#include "kwatt/collect/metrics_endpoint.h"

#include "kwatt/http/hardened_server.h"

namespace kwatt::collect {

struct MetricsEndpoint::Server {
  http::HardenedServer http;
};

MetricsEndpoint::MetricsEndpoint() : server_(std::make_unique<Server>()) {}

MetricsEndpoint::~MetricsEndpoint() = default;

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const Collector* collector,
                                                                const std::string& host, int port) {
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint());
  http::HardenedServer& http = endpoint->server_->http;
  http.Get("/metrics", [collector](const http::Request&, http::Response& response) {
    response.set_content(collector->PrometheusText(), "text/plain; version=0.0.4");
  });
  KWATT_ASSIGN_OR_RETURN(endpoint->port_, http.Bind(host, port));
  KWATT_RETURN_IF_ERROR(http.Serve());
  return endpoint;
}

}  // namespace kwatt::collect
