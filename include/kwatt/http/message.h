// A request and its answer as kwatt's HTTP handlers see them (the server of hardened_server.h):
// the request line, headers and query already parsed and checked, the answer's status, headers
// and body, or a provider that streams the body in pieces.
//
// Thread safety: a Request and its Response belong to the one handler that answers them.
#ifndef KWATT_HTTP_MESSAGE_H_
#define KWATT_HTTP_MESSAGE_H_

#include <cstddef>
#include <functional>
#include <map>
#include <regex>
#include <string>

namespace kwatt::http {

// Header names compare without case (RFC 9110).
struct CaseInsensitiveLess {
  bool operator()(const std::string& a, const std::string& b) const;
};
using Headers = std::multimap<std::string, std::string, CaseInsensitiveLess>;
using Params = std::multimap<std::string, std::string>;

struct Request {
  std::string method;  // "GET", "HEAD", "POST", "OPTIONS"...
  std::string target;  // as sent: "/stable/sites?x=1"
  std::string path;    // the target's path, percent-decoded
  Params params;       // the query's parameters, decoded ("+" is a space)
  Headers headers;
  std::string body;         // read whole, within the server's body limit
  std::smatch matches;      // the route's pattern matched against `path`
  std::string remote_addr;  // the client's address, numeric

  bool has_header(const std::string& name) const { return headers.count(name) > 0; }
  // The first value of that header, or "".
  std::string get_header_value(const std::string& name) const;
  bool has_param(const std::string& key) const { return params.count(key) > 0; }
  // The first value of that parameter, or "".
  std::string get_param_value(const std::string& key) const;
  // Whether the Authorization header gives these HTTP Basic credentials (the scheme's name in
  // any case; the password compared in constant time).
  bool basic_credentials_are(const std::string& user, const std::string& password) const;
  // The user of its HTTP Basic credentials, or "" (for the access log).
  std::string basic_user() const;
};

// Where a streamed answer's provider writes. `write` keeps the bytes for the server to send once
// the provider returns; it is false when the answer is given up (its client left, or the server
// stops), and the provider should then return false. `done` ends the answer after these bytes.
class DataSink {
 public:
  explicit DataSink(std::string* out) : out_(out) {}
  bool write(const char* data, size_t size);
  // The same, taking `block` whole (no copy when it is the piece's first bytes).
  bool write(std::string&& block);
  void done() { done_ = true; }
  bool is_done() const { return done_; }

 private:
  std::string* out_;
  bool done_ = false;
};

// Called again each time the server has sent what the last call wrote (so a client that does not
// read holds no thread): it writes the next piece, calls sink.done() after the last one, and
// returns true; false cuts the answer (the connection is closed with the answer unfinished, so
// that no client takes it for a whole one). `offset` is the number of bytes sent before.
using ContentProvider = std::function<bool(size_t offset, DataSink& sink)>;

struct Response {
  int status = -1;  // -1: 200 when the handler set content, else 404
  Headers headers;
  std::string body;
  ContentProvider provider;  // set: the body is streamed (chunked), `body` is unused

  void set_content(std::string content, const std::string& content_type);
  void set_chunked_content_provider(const std::string& content_type, ContentProvider provider);
  // Adds a header (another of the same name stays).
  void set_header(const std::string& name, const std::string& value);
  bool has_header(const std::string& name) const { return headers.count(name) > 0; }
  std::string get_header_value(const std::string& name) const;
  void set_redirect(const std::string& location, int status = 302);
};

}  // namespace kwatt::http

#endif  // KWATT_HTTP_MESSAGE_H_
