#include "src/kwollect/http.h"

#include <mutex>
#include <nlohmann/json.hpp>

#include "kwatt/core/text.h"

namespace kwatt::kwollect::internal {

void EnsureCurlInitialised() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

void ConfigureEasy(CURL* easy, const ClientOptions& options) {
  curl_easy_setopt(easy, CURLOPT_USERAGENT, options.user_agent.c_str());
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
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

Status HttpError(long status, const std::string& body, const std::string& url) {
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
  if (message.empty()) message = body.substr(0, 200);
  std::string text = "HTTP " + std::to_string(status) + " from " + Redact(url) +
                     (message.empty() ? "" : ": " + message);
  if (status == 401) {
    return Status::Unauthenticated(
        text + " — set username and password in ~/.python-grid5000.yaml (or KWATT_USERNAME and "
               "KWATT_PASSWORD)");
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
  CURLcode code = curl_easy_perform(easy);
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &response.status);
  curl_easy_cleanup(easy);
  if (code != CURLE_OK) {
    return Status::Unavailable("cannot reach " + Redact(url) + ": " +
                               (error[0] ? error : curl_easy_strerror(code)));
  }
  return response;
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
