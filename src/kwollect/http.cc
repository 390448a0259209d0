#include "kwatt/kwollect/http.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

namespace kwatt::kwollect {

using http::kMaxRetryAfterSeconds;
using http::Redact;

http::ClientSettings HttpSettings(const ClientOptions& options) {
  http::ClientSettings settings;
  settings.user_agent = options.user_agent;
  settings.username = options.username;
  settings.password = options.password;
  settings.verify_tls = options.verify_tls;
  settings.ca_file = options.ca_file;
  settings.timeout_s = options.timeout_s;
  settings.connect_timeout_s = options.connect_timeout_s;
  settings.max_retries = options.max_retries;
  settings.backoff_s = options.backoff_s;
  settings.max_connections = options.max_concurrency;
  return settings;
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

namespace {

// What a body that is not Kwollect's JSON error says, on one line: an HTML page's <title> (a
// proxy's "500 Internal Server Error"), else its text without the markup; else its first 200
// bytes; runs of whitespace as one space.
std::string BodyExcerpt(const std::string& body) {
  size_t open = body.find("<title>");
  if (open != std::string::npos) {
    size_t close = body.find("</title>", open);
    if (close != std::string::npos && close - open - 7 <= 200) {
      return body.substr(open + 7, close - open - 7) + " (an HTML page)";
    }
  }
  const bool html = body.find("<html") != std::string::npos ||
                    body.find("<HTML") != std::string::npos ||
                    body.find("<body") != std::string::npos;
  std::string out;
  bool in_tag = false;
  for (char c : body) {
    if (out.size() >= 200) break;
    if (html && c == '<') in_tag = true;
    if (in_tag) {
      if (c == '>') in_tag = false;
      c = ' ';  // a tag separates words: "<h1>503 ...</h1>No server" -> "503 ... No server"
    }
    bool space = c == ' ' || c == '\n' || c == '\r' || c == '\t';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out.push_back(space ? ' ' : c);
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return html ? out + " (an HTML page)" : out;
}

}  // namespace

Status HttpError(const http::ClientResponse& response, const std::string& url,
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

}  // namespace kwatt::kwollect
