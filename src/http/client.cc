#include "src/kwollect/http.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "kwatt/core/text.h"

namespace kwatt::kwollect::internal {

void EnsureCurlInitialised() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

void ConfigureEasy(CURL* easy, const ClientOptions& options) {
  curl_easy_setopt(easy, CURLOPT_USERAGENT, options.user_agent.c_str());
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  // HTTP and HTTPS only: no other scheme is an API, nor a redirection to one (file://, ftp://).
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, long(options.connect_timeout_s * 1000));
  // A large answer may take long: fail on a stalled transfer, not on a long one.
  curl_easy_setopt(easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(easy, CURLOPT_LOW_SPEED_TIME, long(std::max(1.0, options.timeout_s)));
  curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, options.verify_tls ? 1L : 0L);
  curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, options.verify_tls ? 2L : 0L);
  if (!options.ca_file.empty()) curl_easy_setopt(easy, CURLOPT_CAINFO, options.ca_file.c_str());
  if (!options.username.empty()) {
    curl_easy_setopt(easy, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(easy, CURLOPT_USERNAME, options.username.c_str());
    curl_easy_setopt(easy, CURLOPT_PASSWORD, options.password.c_str());
  }
  curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");  // whatever the server compresses with
}

std::string Redact(const std::string& url) { return UrlWithoutCredentials(url); }

void ReadResponseInfo(CURL* easy, SmallResponse* response) {
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

bool IsKwollectTimeout(long status, const std::string& body) {
  if (status != 500) return false;
  nlohmann::json doc = nlohmann::json::parse(body, nullptr, false);
  if (!doc.is_object()) return false;
  if (auto code = doc.find("code"); code != doc.end() && code->is_string() && *code == "57014") {
    return true;  // PostgreSQL: canceling statement due to statement timeout
  }
  auto message = doc.find("message");
  if (message == doc.end() || !message->is_string()) return false;
  std::string text = message->get<std::string>();
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  return text.find("timeout") != std::string::npos ||
         text.find("too much data") != std::string::npos;
}

bool IsTransientStatus(long status) {
  return status == 429 || status == 502 || status == 503 || status == 504;
}

double RetryDelay(const ClientOptions& options, int attempt, int64_t retry_after_s) {
  if (retry_after_s >= 0) return double(retry_after_s);
  return options.backoff_s * std::pow(2.0, attempt - 1);
}

namespace {

// What a body that is not Kwollect's JSON error says, on one line: an HTML page's <title> (a
// proxy's "500 Internal Server Error"), else its first 200 bytes with runs of whitespace as one
// space.
std::string BodyExcerpt(const std::string& body) {
  size_t open = body.find("<title>");
  if (open != std::string::npos) {
    size_t close = body.find("</title>", open);
    if (close != std::string::npos && close - open - 7 <= 200) {
      return body.substr(open + 7, close - open - 7) + " (an HTML page)";
    }
  }
  std::string out;
  for (char c : body.substr(0, 200)) {
    bool space = c == ' ' || c == '\n' || c == '\r' || c == '\t';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out.push_back(space ? ' ' : c);
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

Status HttpError(const SmallResponse& response, const std::string& url,
                 const ClientOptions& options) {
  const long status = response.status;
  const std::string& body = response.body;
  std::string message;
  nlohmann::json doc = nlohmann::json::parse(body, nullptr, false);
  if (doc.is_object()) {
    if (doc.contains("message") && doc["message"].is_string()) {
      message = doc["message"].get<std::string>();
    }
    if (doc.contains("details") && doc["details"].is_string()) {
      message += " (" + doc["details"].get<std::string>() + ")";
    }
  }
  if (message.empty()) message = BodyExcerpt(body);
  std::string text = "HTTP " + std::to_string(status) + " from " + Redact(url) +
                     (message.empty() ? "" : ": " + message);
  if (status == 401) {
    if (!options.username.empty()) {
      return Status::Unauthenticated(
          "the API refused the credentials of user " + options.username + " (" + text +
          "): check the password in ~/.python-grid5000.yaml (or KWATT_PASSWORD)");
    }
    return Status::Unauthenticated(
        "the API needs credentials (" + text +
        "): set username and password in ~/.python-grid5000.yaml (or KWATT_USERNAME and "
        "KWATT_PASSWORD); none are needed from inside Grid'5000");
  }
  if (status >= 300 && status < 400) {
    std::string where =
        response.location.empty() ? "(no Location given)" : Redact(response.location);
    std::string advice = "kwatt does not follow redirects";
    // The same path under another base: that base is the API URL to give.
    if (url.rfind(options.api_url, 0) == 0 && !response.location.empty()) {
      std::string path = url.substr(options.api_url.size());
      path = path.substr(0, path.find('?'));
      const std::string& to = response.location;
      std::string to_path = to.substr(0, to.find('?'));
      if (!path.empty() && to_path.size() > path.size() &&
          to_path.compare(to_path.size() - path.size(), path.size(), path) == 0) {
        advice += ": give --api " + Redact(to_path.substr(0, to_path.size() - path.size())) +
                  " (or uri in ~/.python-grid5000.yaml)";
      }
    }
    return Status::InvalidArgument("HTTP " + std::to_string(status) + " from " + Redact(url) +
                                   " redirects to " + where + "; " + advice);
  }
  if (status == 429) {
    std::string wait;
    if (response.retry_after_s > kMaxRetryAfterSeconds) {
      wait = " and asks to wait " + std::to_string(response.retry_after_s) +
             " s, longer than kwatt waits (" + std::to_string(kMaxRetryAfterSeconds) + " s)";
    } else if (response.retry_after_s >= 0) {
      wait = " (Retry-After: " + std::to_string(response.retry_after_s) + " s)";
    }
    return Status::Unavailable("HTTP 429 from " + Redact(url) +
                               ": the API limits the request rate" + wait +
                               "; try again later, or with a lower --concurrency");
  }
  if (status == 404) return Status::NotFound(text);
  if (status >= 500) return Status::Unavailable(text);
  return Status::InvalidArgument(text);
}

namespace {

size_t AppendBody(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

}  // namespace

Result<SmallResponse> GetSmall(const ClientOptions& options, const std::string& url) {
  EnsureCurlInitialised();
  CURL* easy = curl_easy_init();
  if (!easy) return Status::Internal("curl_easy_init failed");
  SmallResponse response;
  char error[CURL_ERROR_SIZE] = "";
  ConfigureEasy(easy, options);
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, error);
  for (int attempt = 1;; ++attempt) {
    response = SmallResponse();
    error[0] = '\0';
    CURLcode code = curl_easy_perform(easy);
    ReadResponseInfo(easy, &response);
    if (code != CURLE_OK) {
      curl_easy_cleanup(easy);
      return Status::Unavailable("cannot reach " + Redact(url) + ": " +
                                 (error[0] ? error : curl_easy_strerror(code)));
    }
    if (!IsTransientStatus(response.status) || attempt > options.max_retries ||
        response.retry_after_s > kMaxRetryAfterSeconds) {
      break;
    }
    std::this_thread::sleep_for(
        std::chrono::duration<double>(RetryDelay(options, attempt, response.retry_after_s)));
  }
  curl_easy_cleanup(easy);
  return response;
}

namespace {

constexpr size_t kMaxSmallBody = 64 << 10;

size_t AppendBoundedBody(char* data, size_t size, size_t count, void* user) {
  auto* body = static_cast<std::string*>(user);
  size_t bytes = size * count;
  body->append(data, std::min(bytes, kMaxSmallBody - std::min(kMaxSmallBody, body->size())));
  return bytes;
}

}  // namespace

SmallClient::SmallClient(const ClientOptions& options) : options_(options) {
  EnsureCurlInitialised();
  easy_ = curl_easy_init();
}

SmallClient::~SmallClient() {
  if (easy_) curl_easy_cleanup(easy_);
}

Result<SmallResponse> SmallClient::Perform(const std::string& url) {
  SmallResponse response;
  char error[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(easy_, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy_, CURLOPT_WRITEFUNCTION, AppendBoundedBody);
  curl_easy_setopt(easy_, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(easy_, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(easy_, CURLOPT_TIMEOUT_MS, long(options_.timeout_s * 1000));
  CURLcode code = curl_easy_perform(easy_);
  curl_easy_setopt(easy_, CURLOPT_ERRORBUFFER, nullptr);
  if (code != CURLE_OK) {
    return Status::Unavailable("cannot reach " + Redact(url) + ": " +
                               (error[0] ? error : curl_easy_strerror(code)));
  }
  ReadResponseInfo(easy_, &response);
  return response;
}

Result<SmallResponse> SmallClient::Post(const std::string& url, std::string_view body,
                                        const std::string& content_type) {
  if (!easy_) return Status::Internal("curl_easy_init failed");
  curl_easy_reset(easy_);  // keeps the connection, forgets the last request's options
  ConfigureEasy(easy_, options_);
  curl_slist* headers = curl_slist_append(nullptr, ("Content-Type: " + content_type).c_str());
  headers = curl_slist_append(headers, "Expect:");  // no 100-continue round trip for large bodies
  curl_easy_setopt(easy_, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(easy_, CURLOPT_POST, 1L);
  curl_easy_setopt(easy_, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(easy_, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.size()));
  Result<SmallResponse> response = Perform(url);
  curl_easy_setopt(easy_, CURLOPT_HTTPHEADER, nullptr);
  curl_slist_free_all(headers);
  return response;
}

Result<SmallResponse> SmallClient::Get(const std::string& url) {
  if (!easy_) return Status::Internal("curl_easy_init failed");
  curl_easy_reset(easy_);
  ConfigureEasy(easy_, options_);
  curl_easy_setopt(easy_, CURLOPT_HTTPGET, 1L);
  return Perform(url);
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

}  // namespace kwatt::kwollect::internal
