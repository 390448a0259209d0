#include "kwatt/kwollect/client_options.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kwatt/core/text.h"
#include "kwatt/core/yaml_json.h"

namespace kwatt::kwollect {

std::string DefaultConfigPath() {
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.python-grid5000.yaml";
}

void SetApiUrl(std::string_view url, ClientOptions* options) {
  std::string username, password;
  if (UrlCredentials(url, &username, &password) && options->username.empty()) {
    options->username = std::move(username);
    options->password = std::move(password);
  }
  options->api_url = UrlWithoutCredentials(url);
  while (!options->api_url.empty() && options->api_url.back() == '/') options->api_url.pop_back();
}

namespace {

// The file is read with every plain scalar as its text (YamlScalars::kText), as python-grid5000's
// reader gives it: a password "0123" stays "0123".

// A string field: a scalar's text, null as "null"; false for a mapping or a sequence.
bool StringOf(const nlohmann::json& value, std::string* text) {
  if (value.is_string()) {
    *text = value.get<std::string>();
  } else if (value.is_null()) {
    *text = "null";
  } else {
    return false;
  }
  return true;
}

// A number of seconds: a scalar that is one entirely.
bool NumberOf(const nlohmann::json& value, double* number) {
  if (!value.is_string()) return false;
  const std::string& text = value.get_ref<const std::string&>();
  char* end = nullptr;
  errno = 0;
  *number = std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size() && errno == 0;
}

// YAML 1.1's booleans, which verify_ssl takes.
bool BoolWord(std::string_view word, bool* flag) {
  for (const char* yes :
       {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"}) {
    if (word == yes) return *flag = true, true;
  }
  for (const char* no :
       {"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"}) {
    if (word == no) return *flag = false, true;
  }
  return false;
}

// Applies the keys of the python-grid5000 file `config` to `*options`; false when a value has the
// wrong type.
bool ApplyConfig(const nlohmann::json& config, ClientOptions* options) {
  std::string text;
  if (auto it = config.find("username"); it != config.end()) {
    if (!StringOf(*it, &options->username)) return false;
  }
  if (auto it = config.find("password"); it != config.end()) {
    if (!StringOf(*it, &options->password)) return false;
  }
  if (auto it = config.find("uri"); it != config.end()) {
    if (!StringOf(*it, &text)) return false;
    SetApiUrl(text, options);
  }
  if (auto it = config.find("timeout"); it != config.end() && !it->is_null()) {
    if (!NumberOf(*it, &options->timeout_s)) return false;
  }
  if (auto it = config.find("verify_ssl"); it != config.end() && !it->is_null()) {
    bool flag;
    if (it->is_string() && BoolWord(it->get_ref<const std::string&>(), &flag)) {
      options->verify_tls = flag;
    } else {
      if (!StringOf(*it, &text)) return false;
      options->verify_tls = true;
      options->ca_file = text;
    }
  }
  return true;
}

}  // namespace

Status LoadClientOptions(const std::string& path, ClientOptions* options) {
  std::error_code error;
  if (!path.empty() && std::filesystem::exists(path, error)) {
    std::ifstream file(path, std::ios::binary);
    std::stringstream text;
    text << file.rdbuf();
    if (!file) return Status::InvalidArgument(path + ": not readable YAML: cannot read it");
    Result<std::string> json = internal::YamlToJson(text.str(), path, internal::YamlScalars::kText);
    if (!json.ok()) {
      // YamlToJson's message is "<path>:<line>:<column>: <problem>".
      std::string problem = json.status().message();
      if (problem.rfind(path + ":", 0) == 0) problem.erase(0, path.size() + 1);
      return Status::InvalidArgument(path + ": not readable YAML: " + problem);
    }
    nlohmann::json config = nlohmann::json::parse(*json);
    if (!config.is_null() && !config.is_object()) {
      return Status::InvalidArgument(path + ": expected keys such as uri, username, password");
    }
    if (config.is_object() && !ApplyConfig(config, options)) {
      // The value is never quoted: it may be a password.
      return Status::InvalidArgument(path +
                                     ": a value has the wrong type (uri, username and "
                                     "password are strings, timeout a number, verify_ssl "
                                     "a boolean or a CA file path)");
    }
  }
  if (const char* user = std::getenv("KWATT_USERNAME"); user && *user) options->username = user;
  if (const char* pass = std::getenv("KWATT_PASSWORD"); pass && *pass) options->password = pass;
  if (const char* url = std::getenv("KWATT_API_URL"); url && *url) SetApiUrl(url, options);
  return Status::OK();
}

namespace {

std::string Number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

}  // namespace

Status ValidateClientOptions(const ClientOptions& options) {
  // name: the Python keyword (and client option); flag: the CLI's, when it has one.
  auto refuse = [](const char* name, const char* flag, const std::string& value, const char* rule) {
    return Status::InvalidArgument(std::string(name) +
                                   (*flag ? " (" + std::string(flag) + ")" : "") + " must be " +
                                   rule + ", not " + value);
  };
  if (options.api_url.empty()) {
    return Status::InvalidArgument("api_url (--api) is empty: give the API's base URL, e.g. " +
                                   std::string(kDefaultApiUrl));
  }
  // The base URL of an API over HTTP(S), paths appended to it: a query or a fragment would
  // swallow them, and another scheme (file://, ftp://) is no API (its answer would be read as one
  // and shown in messages).
  std::string_view url = options.api_url;
  auto starts = [&](std::string_view prefix) {
    return url.size() >= prefix.size() &&
           std::equal(prefix.begin(), prefix.end(), url.begin(),
                      [](char a, char b) { return a == std::tolower((unsigned char)b); });
  };
  std::string shown = UrlWithoutCredentials(options.api_url);
  if (!starts("http://") && !starts("https://")) {
    return Status::InvalidArgument("api_url (--api) must be an http:// or https:// URL, not " +
                                   shown + ": give the API's base URL, e.g. " +
                                   std::string(kDefaultApiUrl));
  }
  if (url.find_first_of("?#") != std::string_view::npos) {
    return Status::InvalidArgument(
        "api_url (--api) must be the API's base URL, without a query (?) or a fragment (#): " +
        shown + " (kwatt appends /sites/...; e.g. " + std::string(kDefaultApiUrl) + ")");
  }
  if (url.find_first_of(" \t\r\n") != std::string_view::npos) {
    return Status::InvalidArgument("api_url (--api) holds a blank or a line break: " + shown);
  }
  if (!std::isfinite(options.timeout_s) || options.timeout_s <= 0) {
    return refuse("timeout", "", Number(options.timeout_s), "a number of seconds > 0");
  }
  if (!std::isfinite(options.connect_timeout_s) || options.connect_timeout_s <= 0) {
    return refuse("connect_timeout", "", Number(options.connect_timeout_s),
                  "a number of seconds > 0");
  }
  if (options.max_concurrency < 1) {
    return refuse("concurrency", "--concurrency", std::to_string(options.max_concurrency),
                  "at least 1");
  }
  if (options.max_per_site < 1) {
    return refuse("per_site", "--per-site", std::to_string(options.max_per_site), "at least 1");
  }
  if (options.max_rows_per_request < 1) {
    return refuse("rows_per_request", "--rows-per-request",
                  std::to_string(options.max_rows_per_request), "at least 1");
  }
  if (options.max_retries < 0) {
    return refuse("retries", "--retries", std::to_string(options.max_retries), "0 or more");
  }
  if (!std::isfinite(options.backoff_s) || options.backoff_s < 0) {
    return refuse("backoff", "--backoff", Number(options.backoff_s), "a number of seconds >= 0");
  }
  return Status::OK();
}

}  // namespace kwatt::kwollect
