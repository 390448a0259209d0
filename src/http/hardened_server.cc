#include "kwatt/http/hardened_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <system_error>

namespace kwatt::http {
namespace {

using Clock = std::chrono::steady_clock;
// How often a wait looks whether the server stops.
constexpr auto kSlice = std::chrono::milliseconds(100);

// The connection a worker thread serves, for the hooks httplib calls without it.
struct Connection {
  socket_t sock = -1;
  const HardenedServer* server = nullptr;
  int refusal_status = 0;  // nonzero: the request is refused before its body is read
  std::string refusal;
  bool timed_out = false;    // a read missed its deadline
  bool close_after = false;  // what follows on the connection may not be a request
};
thread_local Connection* current_connection = nullptr;

// 1 when `sock` is ready for `events` before `deadline`, 0 when the deadline passed first, -1 on
// an error or when the server stops.
int WaitFor(socket_t sock, short events, Clock::time_point deadline, const HardenedServer& server) {
  for (;;) {
    if (server.Stopping()) return -1;
    Clock::time_point now = Clock::now();
    if (now >= deadline) return 0;
    auto wait = std::min<Clock::duration>(deadline - now, kSlice);
    int ms = int(std::chrono::ceil<std::chrono::milliseconds>(wait).count());
    pollfd p{sock, events, 0};
    int ready = ::poll(&p, 1, std::max(ms, 1));
    if (ready < 0 && errno != EINTR) return -1;
    if (ready > 0) return 1;  // with POLLHUP or POLLERR too: the recv or send that follows says
  }
}

std::string Numeric(const sockaddr_storage& address, int* port) {
  char host[NI_MAXHOST] = "";
  char service[NI_MAXSERV] = "";
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&address), sizeof(address), host,
                    sizeof(host), service, sizeof(service), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    *port = 0;
    return std::string();
  }
  *port = std::atoi(service);
  return host;
}

// A connection's stream, whose reads and writes keep to the request's deadlines.
class DeadlineStream final : public httplib::Stream {
 public:
  DeadlineStream(Connection* connection, const ServerLimits& limits)
      : connection_(connection),
        sock_(connection->sock),
        limits_(limits),
        server_(*connection->server) {}

  void BeginRequest() { read_deadline_ = Clock::now() + limits_.header_timeout; }
  void BeginBody() { read_deadline_ = Clock::now() + limits_.body_timeout; }
  bool HasBuffered() const { return begin_ < end_; }

  bool is_readable() const override {
    return HasBuffered() || WaitFor(sock_, POLLIN, read_deadline_, server_) == 1;
  }
  bool is_writable() const override {
    return WaitFor(sock_, POLLOUT, Clock::now() + limits_.write_timeout, server_) == 1;
  }

  ssize_t read(char* ptr, size_t size) override {
    if (!HasBuffered()) {
      begin_ = end_ = 0;
      for (;;) {
        int ready = WaitFor(sock_, POLLIN, read_deadline_, server_);
        if (ready == 0) connection_->timed_out = true;
        if (ready != 1) return -1;
        ssize_t got = ::recv(sock_, buffer_, sizeof(buffer_), MSG_DONTWAIT);
        if (got > 0) {
          end_ = size_t(got);
          break;
        }
        if (got == 0) return 0;
        if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      }
    }
    size_t n = std::min(size, end_ - begin_);
    std::memcpy(ptr, buffer_ + begin_, n);
    begin_ += n;
    return ssize_t(n);
  }

  // All of `size` bytes, or -1 when the client does not take them within write_timeout.
  ssize_t write(const char* ptr, size_t size) override {
    Clock::time_point deadline = Clock::now() + limits_.write_timeout;
    size_t done = 0;
    while (done < size) {
      if (WaitFor(sock_, POLLOUT, deadline, server_) != 1) return -1;
      ssize_t sent = ::send(sock_, ptr + done, size - done, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (sent > 0) {
        done += size_t(sent);
      } else if (sent < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
        return -1;
      }
    }
    return ssize_t(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    port = 0;
    if (::getpeername(sock_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      ip = Numeric(address, &port);
    }
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    port = 0;
    if (::getsockname(sock_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      ip = Numeric(address, &port);
    }
  }
  socket_t socket() const override { return sock_; }

 private:
  Connection* connection_;
  socket_t sock_;
  const ServerLimits& limits_;
  const HardenedServer& server_;
  Clock::time_point read_deadline_ = Clock::now();
  char buffer_[4096];
  size_t begin_ = 0, end_ = 0;
};

// httplib's ThreadPool, but one whose threads failing to start is an error returned, not an
// exception out of a constructor (which ends the process).
class WorkerPool final : public httplib::TaskQueue {
 public:
  Status Start(int threads) {
    for (int i = 0; i < threads; ++i) {
      try {
        threads_.emplace_back([this] { Work(); });
      } catch (const std::system_error& e) {
        shutdown();
        return Status::IOError("cannot start " + std::to_string(threads) +
                               " threads to serve requests (" + e.what() +
                               "): give fewer with --threads");
      }
    }
    return Status::OK();
  }
  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }
  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      shutdown_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  void Work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return shutdown_ || !jobs_.empty(); });
        if (jobs_.empty()) return;  // shut down, nothing left (queued sockets are still closed)
        fn = std::move(jobs_.front());
        jobs_.pop_front();
      }
      fn();
    }
  }
  std::vector<std::thread> threads_;
  std::deque<std::function<void()>> jobs_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool shutdown_ = false;
};

// What is wrong with the request's framing, found from its headers before any body is read:
// {status, message}, or {0, ""}.
std::pair<int, std::string> CheckFraming(const httplib::Request& req, size_t max_body_bytes) {
  auto lengths = req.headers.equal_range("Content-Length");
  std::string length;
  int count = 0;
  for (auto it = lengths.first; it != lengths.second; ++it, ++count) {
    const std::string& value = it->second;
    if (value.empty() || value.size() > 19 ||
        !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return {400, "Content-Length '" + value +
                       "' is not a length: send the body's size in bytes, digits only"};
    }
    if (count > 0 && value != length) {
      return {400,
              "conflicting Content-Length headers (" + length + " and " + value + "): send one"};
    }
    length = value;
  }
  bool chunked = req.has_header("Transfer-Encoding");
  if (count > 0 && chunked) {
    return {400, "both Content-Length and Transfer-Encoding: send one of them"};
  }
  if (count > 0 && std::stoull(length) > max_body_bytes) {
    return {413, "the body (" + length + " bytes) is larger than the " +
                     std::to_string(max_body_bytes) + " bytes this server takes: send less"};
  }
  bool has_body = req.method == "POST" || req.method == "PUT" || req.method == "PATCH";
  if (has_body && count == 0 && !chunked) {
    return {411, "a " + req.method + " needs a Content-Length header (or a chunked body)"};
  }
  return {0, std::string()};
}

std::string JsonQuoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

const std::vector<std::pair<std::string, std::string>>& SecurityHeaders() {
  // The dashboard loads its scripts, styles and data from this server, and no inline script.
  static const std::vector<std::pair<std::string, std::string>> headers = {
      {"X-Content-Type-Options", "nosniff"},
      {"X-Frame-Options", "DENY"},
      {"Content-Security-Policy",
       "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
       "form-action 'self'; frame-ancestors 'none'"},
      {"Referrer-Policy", "no-referrer"},
  };
  return headers;
}

HardenedServer::HardenedServer(const ServerLimits& limits) : limits_(limits) {
  limits_.threads = std::clamp(limits_.threads, 1, kMaxThreads);
  set_keep_alive_max_count(std::max<size_t>(limits_.keep_alive_max_requests, 1));
  set_payload_max_length(limits_.max_body_bytes);
  // Small answers are written in two sends, headers then body: without TCP_NODELAY the second
  // waits for the client's delayed ACK, 40 ms a request.
  set_tcp_nodelay(true);
  set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  httplib::Server::set_pre_routing_handler(
      [this](const httplib::Request& req, httplib::Response& res) {
        Connection* connection = current_connection;
        if (connection && connection->refusal_status != 0) {
          res.status = connection->refusal_status;
          res.set_content("{\"code\":" + std::to_string(res.status) +
                              ",\"message\":" + JsonQuoted(connection->refusal) + "}",
                          "application/json; charset=utf-8");
          return HandlerResponse::Handled;
        }
        if (user_pre_routing_ && user_pre_routing_(req, res) == HandlerResponse::Handled) {
          return HandlerResponse::Handled;
        }
        if (req.method == "OPTIONS") {
          std::string allowed = AllowedMethods(req.path);
          if (allowed.empty()) return HandlerResponse::Unhandled;  // 404
          res.status = 204;
          res.set_header("Allow", allowed);
          return HandlerResponse::Handled;
        }
        return HandlerResponse::Unhandled;
      });
  set_post_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    for (const auto& [name, value] : SecurityHeaders()) {
      if (!res.has_header(name.c_str())) res.set_header(name, value);
    }
    Connection* connection = current_connection;
    if (!connection) return;
    // httplib answers 400 to a request it could not read whole.
    if (connection->timed_out && res.status == 400) res.status = 408;
    bool has_body = req.method == "POST" || req.method == "PUT" || req.method == "PATCH";
    connection->close_after = connection->refusal_status != 0 || connection->timed_out ||
                              res.status == 400 || res.status == 413 || res.status == 414 ||
                              (has_body && res.status >= 400);
    if (connection->close_after) {
      // A body not read, or not whole: what follows on the connection may not be a request.
      res.headers.erase("Keep-Alive");
      res.headers.erase("Connection");
      res.set_header("Connection", "close");
    }
  });
}

HardenedServer::~HardenedServer() { Shutdown(); }

HardenedServer& HardenedServer::Get(const std::string& pattern, Handler handler) {
  routes_.push_back({std::regex(pattern), "GET"});
  httplib::Server::Get(pattern, std::move(handler));
  return *this;
}

HardenedServer& HardenedServer::Post(const std::string& pattern, Handler handler) {
  routes_.push_back({std::regex(pattern), "POST"});
  httplib::Server::Post(pattern, std::move(handler));
  return *this;
}

HardenedServer& HardenedServer::set_pre_routing_handler(HandlerWithResponse handler) {
  user_pre_routing_ = std::move(handler);
  return *this;
}

std::string HardenedServer::AllowedMethods(const std::string& path) const {
  bool get = false, post = false;
  for (const Route& route : routes_) {
    if (!std::regex_match(path, route.pattern)) continue;
    get = get || route.method == "GET";
    post = post || route.method == "POST";
  }
  if (!get && !post) return std::string();
  return std::string(get ? "GET, HEAD, " : "") + (post ? "POST, " : "") + "OPTIONS";
}

Result<int> HardenedServer::Bind(const std::string& host, int port) {
  std::string shown =
      (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  if (port < 0 || port > 65535) {
    return Status::InvalidArgument(shown + " is not a TCP port: give 1 to 65535, or 0 for any");
  }
  errno = 0;
  int bound = port == 0 ? bind_to_any_port(host) : (bind_to_port(host, port) ? port : -1);
  if (bound <= 0) {
    int error = errno;
    std::string why = error ? std::strerror(error) : "the address cannot be resolved";
    std::string hint =
        error == EADDRINUSE ? "another program listens there: give another port, or 0 for any "
                              "free one"
        : error == EADDRNOTAVAIL || error == 0
            ? "no interface of this machine has that address: give one of its addresses, "
              "127.0.0.1 for this machine only, or 0.0.0.0 for all"
        : error == EACCES ? "ports below 1024 need privileges: give a port above 1023, or 0"
                          : "";
    return Status::IOError("cannot listen on " + shown + ": " + why +
                           (hint.empty() ? "" : " (" + hint + ")"));
  }
  bound_ = true;
  return bound;
}

Status HardenedServer::Serve() {
  if (serving_) return Status::OK();
  auto pool = std::make_unique<WorkerPool>();
  KWATT_RETURN_IF_ERROR(pool->Start(limits_.threads));
  WorkerPool* raw = pool.release();  // listen_after_bind owns it from here, and deletes it
  new_task_queue = [raw] { return raw; };
  // Each read and write waits itself; these only back up the socket's own blocking calls.
  set_read_timeout(std::chrono::duration_cast<std::chrono::seconds>(limits_.body_timeout).count() +
                   1);
  set_write_timeout(
      std::chrono::duration_cast<std::chrono::seconds>(limits_.write_timeout).count() + 1);
  serving_ = true;
  thread_ = std::thread([this] {
    listen_after_bind();
    ended_ = true;
  });
  // Until it runs, httplib's stop() would not stop it.
  while (!is_running() && !ended_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return Status::OK();
}

void HardenedServer::Shutdown() {
  stopping_ = true;
  if (!serving_) {
    socket_t sock = svr_sock_.exchange(INVALID_SOCKET);
    if (sock != INVALID_SOCKET) ::close(sock);
    return;
  }
  stop();
  if (thread_.joinable()) thread_.join();
}

bool HardenedServer::Stopping() const { return stopping_ || svr_sock_ == INVALID_SOCKET; }

bool HardenedServer::RequestAbandoned() {
  Connection* connection = current_connection;
  if (!connection) return false;
  if (connection->server->Stopping()) return true;
  pollfd p{connection->sock, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLHUP | POLLERR | POLLRDHUP)) != 0;
}

bool HardenedServer::process_and_close_socket(socket_t sock) {
  Connection connection;
  connection.sock = sock;
  connection.server = this;
  DeadlineStream stream(&connection, limits_);
  bool ret = false;
  for (size_t left = std::max<size_t>(limits_.keep_alive_max_requests, 1); left > 0; --left) {
    // The next request's first byte (the first request's too) within the keep-alive time.
    if (Stopping()) break;
    if (!stream.HasBuffered() &&
        WaitFor(sock, POLLIN, Clock::now() + limits_.keep_alive_timeout, *this) != 1) {
      break;
    }
    stream.BeginRequest();
    connection.refusal_status = 0;
    connection.refusal.clear();
    connection.close_after = false;
    current_connection = &connection;
    bool closed = false;
    ret = process_request(stream, left == 1, closed, [&](httplib::Request& req) {
      // The headers are read: the body's own deadline starts.
      stream.BeginBody();
      // Every answer is whole: a 206 would need a Content-Range that streamed answers lack.
      req.ranges.clear();
      auto [status, message] = CheckFraming(req, limits_.max_body_bytes);
      connection.refusal_status = status;
      connection.refusal = std::move(message);
    });
    current_connection = nullptr;
    if (!ret || closed || connection.close_after || connection.timed_out) break;
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ret;
}

}  // namespace kwatt::http
