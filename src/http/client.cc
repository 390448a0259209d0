#include "kwatt/http/client.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include "kwatt/core/backoff.h"
#include "kwatt/core/text.h"
#include "src/http/curl_easy.h"

namespace kwatt::http {
namespace internal {

void EnsureCurlInitialised() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

void ConfigureEasy(CURL* easy, const ClientSettings& settings) {
  curl_easy_setopt(easy, CURLOPT_USERAGENT, settings.user_agent.c_str());
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  // HTTP and HTTPS only: no other scheme is an API, nor a redirection to one (file://, ftp://).
#if LIBCURL_VERSION_NUM >= 0x075500  // 7.85, where the bit masks are deprecated
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else  // Debian 11's 7.74, which the wheels carry
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS, long(CURLPROTO_HTTP | CURLPROTO_HTTPS));
  curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS, long(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
  curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, long(settings.connect_timeout_s * 1000));
  // A large answer may take long: fail on a stalled transfer, not on a long one.
  curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME, long(std::max(1.0, settings.timeout_s)));
  curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, settings.verify_tls ? 1L : 0L);
  curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, settings.verify_tls ? 2L : 0L);
  if (!settings.ca_file.empty()) curl_easy_setopt(easy, CURLOPT_CAINFO, settings.ca_file.c_str());
  if (!settings.username.empty()) {
    curl_easy_setopt(easy, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(easy, CURLOPT_USERNAME, settings.username.c_str());
    curl_easy_setopt(easy, CURLOPT_PASSWORD, settings.password.c_str());
  }
  curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");  // whatever the server compresses with
  if (!settings.use_proxy) curl_easy_setopt(easy, CURLOPT_PROXY, "");
}

void ReadResponseInfo(CURL* easy, ClientResponse* response) {
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &response->status);
  char* location = nullptr;
  if (curl_easy_getinfo(easy, CURLINFO_REDIRECT_URL, &location) == CURLE_OK && location) {
    response->location = location;
  }
  curl_off_t retry_after = 0;
  if (curl_easy_getinfo(easy, CURLINFO_RETRY_AFTER, &retry_after) == CURLE_OK && retry_after > 0) {
    response->retry_after_s = int64_t(retry_after);
  }
}

}  // namespace internal

using internal::ConfigureEasy;
using internal::EnsureCurlInitialised;
using internal::ReadResponseInfo;

std::string Redact(const std::string& url) { return UrlWithoutCredentials(url); }

bool IsTransientStatus(long status) {
  return status == 429 || status == 502 || status == 503 || status == 504;
}

double RetryDelay(const ClientSettings& settings, int attempt, int64_t retry_after_s) {
  if (retry_after_s >= 0) return double(retry_after_s);
  return BackoffPolicy{settings.backoff_s}.DelayBefore(attempt);
}

namespace {

size_t AppendBody(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

}  // namespace

Result<ClientResponse> GetSmall(const ClientSettings& settings, const std::string& url) {
  EnsureCurlInitialised();
  CURL* easy = curl_easy_init();
  if (!easy) return Status::Internal("curl_easy_init failed");
  ClientResponse response;
  char error[CURL_ERROR_SIZE] = "";
  ConfigureEasy(easy, settings);
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, error);
  for (int attempt = 1;; ++attempt) {
    response = ClientResponse();
    error[0] = '\0';
    CURLcode code = curl_easy_perform(easy);
    ReadResponseInfo(easy, &response);
    if (code != CURLE_OK) {
      curl_easy_cleanup(easy);
      return Status::Unavailable("cannot reach " + Redact(url) + ": " +
                                 (error[0] ? error : curl_easy_strerror(code)));
    }
    if (!IsTransientStatus(response.status) || attempt > settings.max_retries ||
        response.retry_after_s > kMaxRetryAfterSeconds) {
      break;
    }
    std::this_thread::sleep_for(
        std::chrono::duration<double>(RetryDelay(settings, attempt, response.retry_after_s)));
  }
  curl_easy_cleanup(easy);
  return response;
}

namespace {

// Where a request's body goes: kept up to `limit` bytes; past it, cut short or, when `fail`,
// the transfer fails.
struct BodyBuffer {
  std::string* body = nullptr;
  size_t limit = 0;
  bool fail = false;
  bool too_large = false;
};

size_t AppendBoundedBody(char* data, size_t size, size_t count, void* user) {
  auto* buffer = static_cast<BodyBuffer*>(user);
  std::string* body = buffer->body;
  size_t bytes = size * count;
  if (buffer->fail) {
    buffer->too_large = body->size() + bytes > buffer->limit;
    if (buffer->too_large) return 0;  // fails the transfer
    body->append(data, bytes);
    return bytes;
  }
  body->append(data, std::min(bytes, buffer->limit - std::min(buffer->limit, body->size())));
  return bytes;
}

}  // namespace

struct SmallClient::Connection {
  explicit Connection(const ClientSettings& settings) : settings(settings) {
    EnsureCurlInitialised();
    easy = curl_easy_init();
  }
  ~Connection() {
    if (easy) curl_easy_cleanup(easy);
  }

  // Sends the request set up on `easy`.
  Result<ClientResponse> Perform(const std::string& url, const RequestLimits& limits,
                                 TransferError* failure) {
    ClientResponse response;
    BodyBuffer buffer{&response.body, limits.max_body_bytes, limits.fail_when_larger};
    char error[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, AppendBoundedBody);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &buffer);
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(
        easy, CURLOPT_TIMEOUT_MS,
        limits.timeout_ms >= 0 ? long(limits.timeout_ms) : long(settings.timeout_s * 1000));
    if (limits.connect_timeout_ms >= 0) {
      curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, long(limits.connect_timeout_ms));
    }
    CURLcode code = curl_easy_perform(easy);
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, nullptr);
    if (code != CURLE_OK) {
      if (failure) {
        failure->reason = curl_easy_strerror(code);
        failure->kind = code == CURLE_OPERATION_TIMEDOUT ? TransferError::Kind::kTimedOut
                        : code == CURLE_WRITE_ERROR && buffer.too_large
                            ? TransferError::Kind::kTooLarge
                            : TransferError::Kind::kOther;
      }
      return Status::Unavailable("cannot reach " + Redact(url) + ": " +
                                 (error[0] ? error : curl_easy_strerror(code)));
    }
    ReadResponseInfo(easy, &response);
    return response;
  }

  const ClientSettings settings;
  CURL* easy = nullptr;
};

SmallClient::SmallClient(const ClientSettings& settings)
    : connection_(std::make_unique<Connection>(settings)) {}

SmallClient::~SmallClient() = default;

Result<ClientResponse> SmallClient::Post(const std::string& url, std::string_view body,
                                         const std::string& content_type) {
  CURL* easy = connection_->easy;
  if (!easy) return Status::Internal("curl_easy_init failed");
  curl_easy_reset(easy);  // keeps the connection, forgets the last request's options
  ConfigureEasy(easy, connection_->settings);
  curl_slist* headers = curl_slist_append(nullptr, ("Content-Type: " + content_type).c_str());
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip for large bodies
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(easy, CURLOPT_POST, 1L);
  curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.size()));
  Result<ClientResponse> response = connection_->Perform(url, RequestLimits(), nullptr);
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, nullptr);
  curl_slist_free_all(headers);
  return response;
}

Result<ClientResponse> SmallClient::Get(const std::string& url, const RequestLimits& limits,
                                        TransferError* error) {
  CURL* easy = connection_->easy;
  if (!easy) return Status::Internal("curl_easy_init failed");
  curl_easy_reset(easy);
  ConfigureEasy(easy, connection_->settings);
  curl_easy_setopt(easy, CURLOPT_HTTPGET, 1L);
  return connection_->Perform(url, limits, error);
}

std::string UrlEncode(const std::string& text) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(char(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace kwatt::http
