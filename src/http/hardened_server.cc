#include "kwatt/http/hardened_server.h"

#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/core/detail/base64.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <cstring>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "kwatt/core/json_text.h"
#include "kwatt/core/own_cpu.h"
#include "kwatt/core/text.h"
#include "kwatt/core/worker_pool.h"
#include "kwatt/http/access_log.h"

namespace kwatt::http {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {
std::optional<std::string> BasicCredentials(std::string_view authorization);

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}
}  // namespace

bool CaseInsensitiveLess::operator()(const std::string& a, const std::string& b) const {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) <
           std::tolower(static_cast<unsigned char>(y));
  });
}

std::string Request::get_header_value(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

std::string Request::get_param_value(const std::string& key) const {
  auto it = params.find(key);
  return it == params.end() ? std::string() : it->second;
}

bool Request::basic_credentials_are(const std::string& user, const std::string& password) const {
  std::optional<std::string> given = BasicCredentials(get_header_value("Authorization"));
  std::string expected = user + ":" + password;
  if (!given || given->size() != expected.size()) return false;
  unsigned char differ = 0;
  for (size_t i = 0; i < expected.size(); ++i) differ |= (*given)[i] ^ expected[i];
  return differ == 0;
}

std::string Request::basic_user() const {
  std::optional<std::string> given = BasicCredentials(get_header_value("Authorization"));
  return given ? given->substr(0, given->find(':')) : std::string();
}

bool DataSink::write(const char* data, size_t size) {
  out_->append(data, size);
  return !HardenedServer::RequestAbandoned();
}

bool DataSink::write(std::string&& block) {
  if (out_->empty()) {
    out_->swap(block);
    block.clear();
  } else {
    out_->append(block);
  }
  return !HardenedServer::RequestAbandoned();
}

void Response::set_content(std::string content, const std::string& content_type) {
  body = std::move(content);
  headers.erase("Content-Type");
  headers.emplace("Content-Type", content_type);
  provider = nullptr;
}

void Response::set_chunked_content_provider(const std::string& content_type,
                                            ContentProvider content_provider) {
  headers.erase("Content-Type");
  headers.emplace("Content-Type", content_type);
  provider = std::move(content_provider);
}

void Response::set_header(const std::string& name, const std::string& value) {
  // A header's value never carries a line break (no answer splitting).
  if (value.find_first_of("\r\n") != std::string::npos) return;
  headers.emplace(name, value);
}

std::string Response::get_header_value(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

void Response::set_redirect(const std::string& location, int redirect_status) {
  set_header("Location", location);
  status = redirect_status;
}

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

namespace {

// The connection a worker serves, for RequestAbandoned().
struct Current {
  const std::atomic<bool>* closed = nullptr;
  const std::atomic<bool>* stopping = nullptr;
  int fd = -1;
};
thread_local Current current;

// The server's own JSON answer: {"code": status, "message": message}.
void SetJsonError(Response* response, int status, std::string_view message) {
  std::string body = "{\"code\":" + std::to_string(status) + ",\"message\":";
  AppendJsonString(&body, message);
  body += "}";
  response->status = status;
  response->set_content(std::move(body), "application/json; charset=utf-8");
}

// The query's parameters: '&'-separated key=value pairs, '+' a space, percent-decoded.
Params ParseQuery(std::string_view query) {
  Params params;
  auto decode = [](std::string_view text) {
    std::string plus(text);
    std::replace(plus.begin(), plus.end(), '+', ' ');
    return PercentDecode(plus);
  };
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    if (!pair.empty()) {
      size_t eq = pair.find('=');
      params.emplace(decode(pair.substr(0, eq)),
                     eq == std::string_view::npos ? std::string() : decode(pair.substr(eq + 1)));
    }
    if (amp == std::string_view::npos) break;
    query = query.substr(amp + 1);
  }
  return params;
}

// The "user:password" of a Basic Authorization header (its scheme in any case), or nothing.
std::optional<std::string> BasicCredentials(std::string_view authorization) {
  if (authorization.size() < 6 || !IEquals(authorization.substr(0, 6), "basic ")) {
    return std::nullopt;
  }
  std::string_view token = TrimBlanks(authorization.substr(6));
  std::string decoded(beast::detail::base64::decoded_size(token.size()), '\0');
  auto [written, read] = beast::detail::base64::decode(decoded.data(), token.data(), token.size());
  std::string_view rest = token.substr(read);  // only its padding may be left
  if (rest.size() > 2 || rest.find_first_not_of('=') != std::string_view::npos) return std::nullopt;
  decoded.resize(written);
  if (decoded.find(':') == std::string::npos) return std::nullopt;
  return decoded;
}

// What is wrong with a header block as sent, before Beast parses it: {status, message} or {0}.
// Beast takes obs-fold and counts bytes, not fields; RFC 9112 lets a server refuse the first.
std::pair<int, std::string> CheckRawHeader(std::string_view block, const ServerLimits& limits) {
  size_t line_end = block.find("\r\n");
  if (line_end > limits.max_target_bytes) {
    return {414, "the request line is longer than the " + std::to_string(limits.max_target_bytes) +
                     " bytes this server takes: ask with a shorter URL"};
  }
  // A version Beast does not parse: HTTP/2 and later in an HTTP/1 request line is 505, not 400.
  std::string_view line = block.substr(0, line_end);
  std::string_view version = line.substr(line.rfind(' ') + 1);
  if (version.size() == 8 && version.substr(0, 5) == "HTTP/" && version != "HTTP/1.1" &&
      version != "HTTP/1.0" && std::isdigit(static_cast<unsigned char>(version[5])) &&
      version[6] == '.' && std::isdigit(static_cast<unsigned char>(version[7]))) {
    return {505, "this server speaks HTTP/1.1 (and 1.0), not " + std::string(version)};
  }
  size_t fields = 0;
  for (size_t at = line_end; at + 2 < block.size(); at = block.find("\r\n", at + 2)) {
    char first = block[at + 2];
    if (first == '\r') break;  // the empty line that ends the headers
    if (first == ' ' || first == '\t') {
      return {400, "a header line folded onto the next (obs-fold): send each header on one line"};
    }
    if (++fields > limits.max_header_fields) {
      return {431, "more than " + std::to_string(limits.max_header_fields) +
                       " header lines: send fewer"};
    }
  }
  return {0, {}};
}

// A refusal of Beast's parser as a status and a message.
std::pair<int, std::string> ParserRefusal(const beast::error_code& ec, const ServerLimits& limits) {
  using E = bhttp::error;
  if (ec == E::header_limit) {
    return {431, "the request's headers are larger than the " +
                     std::to_string(limits.max_header_bytes) + " bytes this server takes"};
  }
  if (ec == E::body_limit) {
    return {413, "the body is larger than the " + std::to_string(limits.max_body_bytes) +
                     " bytes this server takes: send less"};
  }
  if (ec == E::bad_content_length) {
    return {400,
            "Content-Length is not one length (conflicting values, a sign, not digits, or with "
            "Transfer-Encoding): send the body's size in bytes, once"};
  }
  if (ec == E::bad_transfer_encoding) {
    return {400, "Transfer-Encoding twice, or with Content-Length: send one of them"};
  }
  if (ec == E::bad_chunk || ec == E::bad_chunk_extension) {
    return {400, "a malformed chunk of a chunked body: its size must be hexadecimal digits"};
  }
  if (ec == E::bad_field) {
    return {400, "a malformed header line (no whitespace may come before its colon)"};
  }
  if (ec == E::bad_method || ec == E::bad_target || ec == E::bad_version) {
    return {400, "a malformed request line: METHOD /path HTTP/1.1"};
  }
  return {400, "a malformed request: " + ec.message()};
}

bool HasBody(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "PATCH";
}

}  // namespace

class Connection;

struct HardenedServer::Impl : std::enable_shared_from_this<HardenedServer::Impl> {
  struct Route {
    std::regex pattern;
    std::string method;
    Handler handler;
  };

  explicit Impl(const ServerLimits& l) : limits(l) {}

  ServerLimits limits;
  std::vector<Route> routes;
  PreRoutingHandler pre_routing;
  Handler error_handler;
  std::shared_ptr<AccessLog> log;

  net::io_context loop{1};
  std::optional<tcp::acceptor> acceptor;
  std::optional<WorkerPool> pool;  // the handlers' (kwatt/core/worker_pool.h)
  std::thread loop_thread;
  std::atomic<bool> stopping{false};
  bool serving = false;
  std::mutex shutdown_mutex;
  bool shut = false;

  // On the loop's thread only.
  std::unordered_set<Connection*> connections;
  std::unordered_map<std::string, size_t> per_client;
  std::atomic<size_t> open{0};
  std::optional<net::steady_timer> accept_pause;

  void Accept();
  std::string AllowedMethods(const std::string& path) const;
  // Runs the handlers of a request on a worker.
  void Answer(Request& request, Response& response) const;
  void Finish(const Request& request, Response& response) const;
};

// One client connection, on the loop's thread (its handlers on the pool).
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<HardenedServer::Impl> server, tcp::socket socket, std::string client)
      : server_(std::move(server)),
        limits_(server_->limits),
        stream_(std::move(socket)),
        client_(std::move(client)),
        fd_(stream_.socket().native_handle()) {}

  void Start() {
    server_->connections.insert(this);
    ReadHeader();
  }

  // From the loop: ends it at once (the server stops).
  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
    closed_ = true;
  }

  // Ends it at once, what is unsent dropped (a reset).
  void Abort() {
    beast::error_code ignored;
    stream_.socket().set_option(net::socket_base::linger(true, 0), ignored);
    Close();
  }

  ~Connection() {
    server_->connections.erase(this);
    auto it = server_->per_client.find(client_);
    if (it != server_->per_client.end() && --it->second == 0) server_->per_client.erase(it);
    --server_->open;
  }

 private:
  void ReadHeader() {
    if (server_->stopping || requests_ >= std::max<size_t>(limits_.keep_alive_max_requests, 1)) {
      return Close();
    }
    // Empty lines before a request line are skipped (RFC 9112, 2.2).
    while (buffer_.size() >= 2 && std::string_view(Data(), 2) == "\r\n") buffer_.consume(2);
    std::string_view data(Data(), buffer_.size());
    size_t end = data.find("\r\n\r\n");
    if (end != std::string_view::npos) return OnHeaderBlock(end + 4);
    if (data.size() > limits_.max_header_bytes) {
      std::pair<int, std::string> refusal =
          data.find("\r\n") == std::string_view::npos && data.size() > limits_.max_target_bytes
              ? CheckRawHeader(data, limits_)
              : ParserRefusal(bhttp::error::header_limit, limits_);
      return Refuse(refusal.first, refusal.second);
    }
    if (data.empty()) {
      Deadline(Clock::now() + limits_.keep_alive_timeout);  // idle: wait for a request
    } else {
      if (!header_began_) {
        header_began_ = true;
        header_deadline_ = Clock::now() + limits_.header_timeout;
      }
      Deadline(header_deadline_);
    }
    // The room is what has arrived, at least 512 bytes and at most 16 KiB: thousands of idle
    // connections cost a socket and half a kilobyte each, not a header's worth.
    beast::error_code ignored;
    size_t ready = stream_.socket().available(ignored);
    size_t room = std::min<size_t>(
        {std::max<size_t>(ready, 512), 16 * 1024, limits_.max_header_bytes + 5 - data.size()});
    stream_.async_read_some(buffer_.prepare(std::max<size_t>(room, 1)),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->DeadlineMet();
                              self->buffer_.commit(n);
                              if (ec) return self->OnReadError(ec, /*in_body=*/false);
                              self->ReadHeader();
                            });
  }

  // Each read and write ends at a deadline of the connection's, which cancels it (the stream's
  // own would close the socket): a request cut in the middle is answered 408 first, and an answer
  // the client did not take in time is dropped with the connection (Abort).
  void Deadline(Clock::time_point deadline) {
    stream_.expires_never();
    timed_out_ = false;
    deadline_timer_.expires_at(deadline);
    deadline_timer_.async_wait(
        [weak = weak_from_this(), armed = ++deadline_armed_](beast::error_code ec) {
          std::shared_ptr<Connection> self = weak.lock();
          // A wait that ended before a later Deadline() or DeadlineMet() is not this one's.
          if (ec || !self || armed != self->deadline_armed_) return;
          self->timed_out_ = true;
          beast::error_code ignored;
          self->stream_.socket().cancel(ignored);
        });
  }
  void DeadlineMet() {
    ++deadline_armed_;
    deadline_timer_.cancel();
  }

  void OnReadError(const beast::error_code& ec, bool in_body) {
    // A deadline missed in the middle of a request is answered 408; an idle connection's, or a
    // client that left, is closed without a word.
    if (timed_out_ && (in_body || buffer_.size() > 0) && !server_->stopping) {
      return Refuse(408, in_body ? "the body did not arrive within " +
                                       std::to_string(limits_.body_timeout.count()) + " ms"
                                 : "the request's headers did not arrive within " +
                                       std::to_string(limits_.header_timeout.count()) + " ms");
    }
    Close();
  }

  const char* Data() const { return static_cast<const char*>(buffer_.data().data()); }

  void OnHeaderBlock(size_t size) {
    started_ = Clock::now();
    wall_started_ = std::chrono::system_clock::now();
    header_began_ = false;
    std::string_view block(Data(), size);
    auto [status, message] = CheckRawHeader(block, limits_);
    if (status != 0) return Refuse(status, message);
    parser_.emplace();
    parser_->header_limit(uint32_t(std::min<size_t>(size + 1, UINT32_MAX)));
    parser_->body_limit(limits_.max_body_bytes);
    beast::error_code ec;
    size_t used = parser_->put(net::buffer(block.data(), block.size()), ec);
    if (!ec && !parser_->is_header_done()) ec = bhttp::error::partial_message;
    if (ec) {
      auto [code, why] = ParserRefusal(ec, limits_);
      return Refuse(code, why);
    }
    buffer_.consume(used);
    const auto& header = parser_->get();
    request_ = std::make_unique<Request>();
    request_->method = std::string(header.method_string());
    request_->target = std::string(header.target());
    request_->remote_addr = client_;
    for (const auto& field : header) {
      request_->headers.emplace(std::string(field.name_string()), std::string(field.value()));
    }
    auto [refused, reason] = CheckHeaders(header);
    if (refused != 0) return Refuse(refused, reason);
    if (IEquals(request_->get_header_value("Expect"), "100-continue") && !parser_->is_done()) {
      Deadline(Clock::now() + limits_.write_timeout);
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      return net::async_write(stream_, net::buffer(kContinue),
                              [self = shared_from_this()](beast::error_code ec, size_t) {
                                self->DeadlineMet();
                                if (ec) return self->Close();
                                self->ReadBody();
                              });
    }
    ReadBody();
  }

  // What RFC 9112 refuses that Beast takes: {status, message} or {0}.
  std::pair<int, std::string> CheckHeaders(
      const bhttp::request_parser<bhttp::string_body>::value_type& header) {
    size_t hosts = request_->headers.count("Host");
    if (hosts > 1) return {400, "two Host headers: send one"};
    if (hosts == 0 && header.version() >= 11)
      return {400, "an HTTP/1.1 request needs a Host header"};
    if (header.version() < 10 || header.version() > 11) {
      return {505, "this server speaks HTTP/1.1 (and 1.0)"};
    }
    auto codings = request_->headers.equal_range("Transfer-Encoding");
    for (auto it = codings.first; it != codings.second; ++it) {
      for (std::string_view coding : SplitCommaList(it->second)) {
        if (!IEquals(TrimBlanks(coding), "chunked")) {
          return {501, "the transfer coding '" + std::string(TrimBlanks(coding)) +
                           "' is not one this server reads: send the body chunked or with a "
                           "Content-Length"};
        }
      }
    }
    if (codings.first != codings.second && !parser_->chunked()) {
      return {400, "Transfer-Encoding must end with chunked"};
    }
    if (HasBody(request_->method) && !parser_->content_length() && !parser_->chunked()) {
      return {411, "a " + request_->method + " needs a Content-Length header (or a chunked body)"};
    }
    return {0, {}};
  }

  void ReadBody() {
    if (parser_->is_done()) return Dispatch();
    Deadline(Clock::now() + limits_.body_timeout);
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        self->DeadlineMet();
                        if (!ec) return self->Dispatch();
                        if (ec == bhttp::error::body_limit || ec == bhttp::error::bad_chunk ||
                            ec == bhttp::error::bad_chunk_extension) {
                          auto [code, why] = ParserRefusal(ec, self->limits_);
                          return self->Refuse(code, why);
                        }
                        self->OnReadError(ec, /*in_body=*/true);
                      });
  }

  void Dispatch() {
    ++requests_;
    request_->body = std::move(parser_->get().body());
    keep_alive_ = parser_->get().keep_alive();
    std::string_view target = request_->target;
    size_t question = target.find('?');
    request_->path = PercentDecode(target.substr(0, question));
    if (question != std::string_view::npos)
      request_->params = ParseQuery(target.substr(question + 1));
    response_ = std::make_unique<Response>();
    // The last reference to a connection is let go on the loop (its destructor's bookkeeping
    // is the loop's): the worker hands its own over.
    server_->pool->Post([self = shared_from_this()]() mutable {
      OwnCpuScope own;  // kwatt's work (a meter's exposition is never its target's)
      current = {&self->closed_, &self->server_->stopping, self->fd_};
      self->server_->Answer(*self->request_, *self->response_);
      current = {};
      net::io_context& loop = self->server_->loop;
      net::post(loop, [self = std::move(self)] { self->Write(); });
    });
  }

  // A request refused before its handler: the answer, then the connection closed (what follows
  // on it may not be a request).
  void Refuse(int status, const std::string& message) {
    if (!request_) {
      request_ = std::make_unique<Request>();
      request_->remote_addr = client_;
      started_ = Clock::now();
      wall_started_ = std::chrono::system_clock::now();
    }
    response_ = std::make_unique<Response>();
    SetJsonError(response_.get(), status, message);
    server_->Finish(*request_, *response_);
    keep_alive_ = false;
    Write();
  }

  void Write() {
    if (closed_) return;
    Response& res = *response_;
    bool head = request_->method == "HEAD";
    bool close = !keep_alive_ || server_->stopping || res.status == 400 || res.status == 413 ||
                 res.status == 414 || res.status == 431 ||
                 (HasBody(request_->method) && res.status >= 400) ||
                 requests_ >= std::max<size_t>(limits_.keep_alive_max_requests, 1);
    keep_alive_ = !close;
    if (res.provider && !head) return WriteStreamed(close);
    auto answer = std::make_shared<bhttp::response<bhttp::string_body>>();
    answer->result(unsigned(res.status));
    answer->version(11);
    for (const auto& [name, value] : res.headers) answer->insert(name, value);
    answer->keep_alive(!close);
    if (res.provider) {  // HEAD of a streamed answer
      answer->chunked(true);
      answer->body().clear();
      bytes_ = 0;
    } else {
      answer->body() = head ? std::string() : std::move(res.body);
      answer->content_length(head ? res.body.size() : answer->body().size());
      bytes_ = answer->body().size();
    }
    Deadline(Clock::now() + limits_.write_timeout);
    auto serializer = std::make_shared<bhttp::response_serializer<bhttp::string_body>>(*answer);
    if (head) {
      return bhttp::async_write_header(
          stream_, *serializer,
          [self = shared_from_this(), answer, serializer](beast::error_code ec, size_t) {
            self->DeadlineMet();
            self->Done(ec);
          });
    }
    bhttp::async_write(
        stream_, *serializer,
        [self = shared_from_this(), answer, serializer](beast::error_code ec, size_t) {
          self->DeadlineMet();
          self->Done(ec);
        });
  }

  void WriteStreamed(bool close) {
    auto header = std::make_shared<bhttp::response<bhttp::empty_body>>();
    header->result(unsigned(response_->status));
    header->version(11);
    for (const auto& [name, value] : response_->headers) header->insert(name, value);
    header->keep_alive(!close);
    header->chunked(true);
    auto serializer = std::make_shared<bhttp::response_serializer<bhttp::empty_body>>(*header);
    bytes_ = 0;
    Deadline(Clock::now() + limits_.write_timeout);
    bhttp::async_write_header(
        stream_, *serializer,
        [self = shared_from_this(), header, serializer](beast::error_code ec, size_t) {
          self->DeadlineMet();
          if (ec) return self->Cut();
          self->Produce();
        });
  }

  // The provider's next piece, made on a worker; then written from the loop.
  void Produce() {
    if (closed_ || server_->stopping) return Cut();
    server_->pool->Post([self = shared_from_this()]() mutable {
      OwnCpuScope own;
      DataSink sink(&self->piece_);
      current = {&self->closed_, &self->server_->stopping, self->fd_};
      bool more = false;
      try {
        more = self->response_->provider(self->bytes_, sink);
      } catch (const std::exception&) {
        more = false;
      }
      current = {};
      net::io_context& loop = self->server_->loop;
      net::post(loop, [self = std::move(self), more, last = sink.is_done()] {
        self->WritePiece(more, last);
      });
    });
  }

  void WritePiece(bool more, bool last) {
    if (closed_) return;
    if (!more) {
      // Cut: what was made goes out, then the connection closes with the answer unfinished.
      if (piece_.empty()) return Cut();
      Deadline(Clock::now() + limits_.write_timeout);
      return net::async_write(stream_, bhttp::make_chunk(net::buffer(piece_)),
                              [self = shared_from_this()](beast::error_code, size_t) {
                                self->DeadlineMet();
                                self->Cut();
                              });
    }
    auto after = [self = shared_from_this(), last](beast::error_code ec, size_t) {
      self->DeadlineMet();
      std::string().swap(self->piece_);  // sent: the provider hands over a buffer of its own
      if (ec) return self->Cut();
      if (!last) return self->Produce();
      self->Deadline(Clock::now() + self->limits_.write_timeout);
      net::async_write(self->stream_, bhttp::make_chunk_last(),
                       [self](beast::error_code ec2, size_t) {
                         self->DeadlineMet();
                         self->Done(ec2);
                       });
    };
    bytes_ += piece_.size();
    Deadline(Clock::now() + limits_.write_timeout);
    if (piece_.empty()) return after({}, 0);
    net::async_write(stream_, bhttp::make_chunk(net::buffer(piece_)), std::move(after));
  }

  // A streamed answer given up: the connection closes with the answer unfinished.
  // A client that did not take it in time gets a reset: what the system still held for it is
  // dropped at once rather than sent.
  void Cut() {
    Log();
    timed_out_ ? Abort() : Close();
  }

  void Done(const beast::error_code& ec) {
    Log();
    if (ec) return timed_out_ ? Abort() : Close();
    if (!keep_alive_) return LingeringClose();
    request_.reset();
    response_.reset();
    parser_.reset();
    std::string().swap(piece_);
    if (buffer_.size() == 0) buffer_.shrink_to_fit();  // kept alive, idle: no buffer held
    ReadHeader();
  }

  // After an answer that ends the connection: no more is sent, and what the client still sends
  // (a body that was refused) is read and dropped for a short while, so that its unread bytes do
  // not reset the connection before the client has read the answer.
  void LingeringClose() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    buffer_.clear();
    Deadline(Clock::now() + std::chrono::seconds(2));
    Drain();
  }
  void Drain() {
    // The 2 s deadline set by LingeringClose() holds for the whole drain.
    stream_.async_read_some(buffer_.prepare(64 * 1024),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->drained_ += n;
                              self->buffer_.clear();
                              if (ec || self->drained_ > kDrainBytes) {
                                self->DeadlineMet();
                                return self->Close();
                              }
                              self->Drain();
                            });
  }
  static constexpr size_t kDrainBytes = size_t(16) << 20;

  void Log() {
    if (!server_->log || !request_ || !response_) return;
    AccessRecord record;
    record.client = client_;
    record.user = request_->basic_user();
    record.time = wall_started_;
    record.method = request_->method;
    record.target = request_->target;
    record.status = response_->status;
    record.bytes = bytes_;
    record.referer = request_->get_header_value("Referer");
    record.user_agent = request_->get_header_value("User-Agent");
    record.duration =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started_);
    server_->log->Write(record);
  }

  std::shared_ptr<HardenedServer::Impl> server_;
  const ServerLimits& limits_;
  beast::tcp_stream stream_;
  net::steady_timer deadline_timer_{stream_.get_executor()};
  uint64_t deadline_armed_ = 0;
  bool timed_out_ = false;
  std::string client_;
  int fd_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::unique_ptr<Request> request_;
  std::unique_ptr<Response> response_;
  std::string piece_;
  uint64_t bytes_ = 0;
  size_t requests_ = 0;
  bool keep_alive_ = true;
  bool header_began_ = false;
  size_t drained_ = 0;
  Clock::time_point header_deadline_;
  Clock::time_point started_;
  std::chrono::system_clock::time_point wall_started_;
  std::atomic<bool> closed_{false};
};

std::string HardenedServer::Impl::AllowedMethods(const std::string& path) const {
  bool get = false, post = false;
  for (const Route& route : routes) {
    if (!std::regex_match(path, route.pattern)) continue;
    get = get || route.method == "GET";
    post = post || route.method == "POST";
  }
  if (!get && !post) return std::string();
  return std::string(get ? "GET, HEAD, " : "") + (post ? "POST, " : "") + "OPTIONS";
}

void HardenedServer::Impl::Answer(Request& request, Response& response) const {
  try {
    bool handled = pre_routing && pre_routing(request, response);
    if (!handled && request.method == "OPTIONS") {
      std::string allowed = AllowedMethods(request.path);
      if (!allowed.empty()) {
        response.status = 204;
        response.set_header("Allow", allowed);
        handled = true;
      }
    }
    if (!handled) {
      const std::string& method = request.method == "HEAD" ? std::string("GET") : request.method;
      bool path_known = false;
      for (const Route& route : routes) {
        if (!std::regex_match(request.path, request.matches, route.pattern)) continue;
        path_known = true;
        if (route.method != method) continue;
        route.handler(request, response);
        handled = true;
        break;
      }
      if (!handled) {
        response.status = path_known ? 405 : 404;
        if (path_known) response.set_header("Allow", AllowedMethods(request.path));
      }
    }
  } catch (const std::exception& e) {
    response = Response();
    SetJsonError(&response, 500, e.what());
  }
  Finish(request, response);
}

void HardenedServer::Impl::Finish(const Request& request, Response& response) const {
  if (response.status == -1)
    response.status = (response.body.empty() && !response.provider) ? 404 : 200;
  if (response.status >= 400 && error_handler) {
    try {
      error_handler(request, response);
    } catch (const std::exception&) {
    }
  }
  for (const auto& [name, value] : SecurityHeaders()) {
    if (!response.has_header(name)) response.set_header(name, value);
  }
}

void HardenedServer::Impl::Accept() {
  acceptor->async_accept(
      loop, [self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
        if (self->stopping || !self->acceptor->is_open()) return;
        if (ec) {
          // Out of file descriptors (or another passing error): wait a little rather than spin.
          self->accept_pause.emplace(self->loop, std::chrono::milliseconds(50));
          self->accept_pause->async_wait([self](beast::error_code wait) {
            if (!wait && !self->stopping) self->Accept();
          });
          return;
        }
        beast::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        std::string client;
        tcp::endpoint peer = socket.remote_endpoint(ignored);
        if (!ignored) client = peer.address().to_string();
        size_t& mine = self->per_client[client];
        bool over_all = self->open >= self->limits.max_connections;
        bool over_client = self->limits.max_connections_per_client > 0 &&
                           mine >= self->limits.max_connections_per_client;
        if (over_all || over_client) {
          if (mine == 0) self->per_client.erase(client);
          // Answered at once without reading (the socket takes these few bytes), then closed.
          static const std::string kBusy =
              "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 1\r\n"
              "Content-Type: application/json; charset=utf-8\r\nContent-Length: 74\r\n\r\n"
              "{\"code\":503,\"message\":\"too many connections: try again in a little while\"}";
          ::send(socket.native_handle(), kBusy.data(), kBusy.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
          socket.shutdown(tcp::socket::shutdown_both, ignored);
          socket.close(ignored);
          if (self->log) {
            AccessRecord record;
            record.client = client;
            record.time = std::chrono::system_clock::now();
            record.status = 503;
            self->log->Write(record);
          }
        } else {
          ++mine;
          ++self->open;
          std::make_shared<Connection>(self, std::move(socket), std::move(client))->Start();
        }
        self->Accept();
      });
}

HardenedServer::HardenedServer(const ServerLimits& limits) : impl_(std::make_shared<Impl>(limits)) {
  impl_->limits.threads = std::clamp(impl_->limits.threads, 1, kMaxThreads);
  impl_->limits.max_connections = std::max<size_t>(impl_->limits.max_connections, 1);
}

HardenedServer::~HardenedServer() { Shutdown(); }

const ServerLimits& HardenedServer::limits() const { return impl_->limits; }

HardenedServer& HardenedServer::Get(const std::string& pattern, Handler handler) {
  impl_->routes.push_back({std::regex(pattern), "GET", std::move(handler)});
  return *this;
}

HardenedServer& HardenedServer::Post(const std::string& pattern, Handler handler) {
  impl_->routes.push_back({std::regex(pattern), "POST", std::move(handler)});
  return *this;
}

HardenedServer& HardenedServer::set_pre_routing_handler(PreRoutingHandler handler) {
  impl_->pre_routing = std::move(handler);
  return *this;
}

HardenedServer& HardenedServer::set_error_handler(Handler handler) {
  impl_->error_handler = std::move(handler);
  return *this;
}

HardenedServer& HardenedServer::set_access_log(std::shared_ptr<AccessLog> log) {
  impl_->log = std::move(log);
  return *this;
}

Result<int> HardenedServer::Bind(const std::string& host, int port) {
  std::string shown =
      (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  if (port < 0 || port > 65535) {
    return Status::InvalidArgument(shown + " is not a TCP port: give 1 to 65535, or 0 for any");
  }
  beast::error_code ec;
  tcp::endpoint endpoint;
  net::ip::address address = net::ip::make_address(host, ec);
  if (ec) {
    tcp::resolver resolver(impl_->loop);
    auto found = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
    if (ec || found.empty()) {
      return Status::IOError("cannot listen on " + shown + ": the address cannot be resolved (" +
                             "give one of this machine's addresses, 127.0.0.1 for this machine "
                             "only, or 0.0.0.0 for all)");
    }
    endpoint = found.begin()->endpoint();
  } else {
    endpoint = tcp::endpoint(address, uint16_t(port));
  }
  tcp::acceptor acceptor(impl_->loop);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    int error = ec.value();
    std::string hint =
        error == EADDRINUSE ? "another program listens there: give another port, or 0 for any "
                              "free one"
        : error == EADDRNOTAVAIL
            ? "no interface of this machine has that address: give one of its addresses, "
              "127.0.0.1 for this machine only, or 0.0.0.0 for all"
        : error == EACCES ? "ports below 1024 need privileges: give a port above 1023, or 0"
                          : "";
    return Status::IOError("cannot listen on " + shown + ": " + std::strerror(error) +
                           (hint.empty() ? "" : " (" + hint + ")"));
  }
  int bound = acceptor.local_endpoint().port();
  impl_->acceptor.emplace(std::move(acceptor));
  return bound;
}

Status HardenedServer::Serve() {
  Impl& impl = *impl_;
  if (impl.serving) return Status::OK();
  if (!impl.acceptor) return Status::Internal("Serve() before a successful Bind()");
  // As Go's runtime does: the soft limit of open files up to the hard one, for max_connections.
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
  try {
    impl.pool.emplace(size_t(impl.limits.threads));
  } catch (const std::system_error& e) {
    return Status::IOError("cannot start " + std::to_string(impl.limits.threads) +
                           " threads to serve requests (" + e.what() +
                           "): give fewer with --threads");
  }
  impl.Accept();
  try {
    impl.loop_thread = std::thread([&impl] {
      OwnCpuScope own;
      auto guard = net::make_work_guard(impl.loop);
      impl.loop.run();
    });
  } catch (const std::system_error& e) {
    impl.pool->Stop();
    impl.pool->Join();
    return Status::IOError(std::string("cannot start the server's event loop: ") + e.what());
  }
  impl.serving = true;
  return Status::OK();
}

void HardenedServer::Shutdown() {
  Impl& impl = *impl_;
  std::lock_guard<std::mutex> lock(impl.shutdown_mutex);
  if (impl.shut) return;
  impl.shut = true;
  impl.stopping = true;
  if (!impl.serving) {
    if (impl.acceptor) {
      beast::error_code ignored;
      impl.acceptor->close(ignored);
    }
    return;
  }
  // On the loop: no more connections, and each open one closed (its reads and writes end).
  std::promise<void> closed;
  net::post(impl.loop, [&impl, &closed] {
    beast::error_code ignored;
    impl.acceptor->close(ignored);
    if (impl.accept_pause) impl.accept_pause->cancel();
    for (Connection* connection :
         std::vector<Connection*>(impl.connections.begin(), impl.connections.end())) {
      connection->Close();
    }
    closed.set_value();
  });
  closed.get_future().wait();
  // Handlers running see RequestAbandoned() and return; queued ones are dropped.
  impl.pool->Stop();
  impl.pool->Join();
  impl.loop.stop();
  if (impl.loop_thread.joinable()) impl.loop_thread.join();
  // What the loop still held (connections waiting on a handler's answer) goes with it.
  impl.loop.restart();
  impl.loop.poll();
  impl.pool.reset();
}

bool HardenedServer::Stopping() const { return impl_->stopping; }

size_t HardenedServer::OpenConnections() const { return impl_->open; }

bool HardenedServer::RequestAbandoned() {
  if (!current.closed) return false;
  if (*current.closed || *current.stopping) return true;
  pollfd p{current.fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLHUP | POLLERR | POLLRDHUP)) != 0;
}

}  // namespace kwatt::http
