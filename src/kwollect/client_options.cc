#include "kwatt/kwollect/client_options.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "kwatt/core/text.h"

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

Status LoadClientOptions(const std::string& path, ClientOptions* options) {
  std::error_code error;
  if (!path.empty() && std::filesystem::exists(path, error)) {
    YAML::Node config;
    try {
      config = YAML::LoadFile(path);
    } catch (const YAML::Exception& e) {
      return Status::InvalidArgument(path + ": not readable YAML: " + e.what());
    }
    if (config && !config.IsNull() && !config.IsMap()) {
      return Status::InvalidArgument(path + ": expected keys such as uri, username, password");
    }
    try {
      if (config["username"]) options->username = config["username"].as<std::string>();
      if (config["password"]) options->password = config["password"].as<std::string>();
      if (config["uri"]) SetApiUrl(config["uri"].as<std::string>(), options);
      if (config["timeout"] && !config["timeout"].IsNull()) {
        options->timeout_s = config["timeout"].as<double>();
      }
      if (const YAML::Node verify = config["verify_ssl"]; verify && !verify.IsNull()) {
        bool flag;
        if (YAML::convert<bool>::decode(verify, flag)) {
          options->verify_tls = flag;
        } else {
          options->verify_tls = true;
          options->ca_file = verify.as<std::string>();
        }
      }
    } catch (const YAML::Exception& e) {
      // e.what() may quote the offending value: name the file only, never echo a password.
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
