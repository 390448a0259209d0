#include "kwatt/http/metrics_server.h"

#include "kwatt/http/hardened_server.h"

namespace kwatt::http {

struct MetricsServer::Impl {
  HardenedServer http;  // deadlines and checks of every kwatt endpoint (doc/server.md)
  std::string host;
  int port = 0;
};

Result<std::unique_ptr<MetricsServer>> MetricsServer::Bind(const std::string& host, int port,
                                                           Text text, std::string index) {
  if (port < 0 || port > 65535) {
    const std::string shown = (host.find(':') != std::string::npos ? "[" + host + "]" : host) +
                              ":" + std::to_string(port);
    return Status::InvalidArgument(shown + " is not a TCP port: give 1 to 65535, or 0 for any");
  }
  auto impl = std::make_unique<Impl>();
  impl->host = host;
  impl->http.Get("/metrics", [text = std::move(text)](const Request&, Response& response) {
    response.set_content(text(), "text/plain; version=0.0.4; charset=utf-8");
  });
  impl->http.Get("/", [index = std::move(index)](const Request&, Response& response) {
    response.set_content(index, "text/plain; charset=utf-8");
  });
  KWATT_ASSIGN_OR_RETURN(impl->port, impl->http.Bind(host, port));
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsServer::~MetricsServer() { Stop(); }

int MetricsServer::port() const { return impl_->port; }

std::string MetricsServer::url() const {
  const std::string& h = impl_->host;
  const std::string host = h == "0.0.0.0"                     ? "127.0.0.1"
                           : h == "::"                        ? "[::1]"
                           : h.find(':') != std::string::npos ? "[" + h + "]"
                                                              : h;
  return "http://" + host + ":" + std::to_string(impl_->port) + "/metrics";
}

Status MetricsServer::Serve() { return impl_->http.Serve(); }

void MetricsServer::Stop() { impl_->http.Shutdown(); }

}  // namespace kwatt::http
