#include "kwatt/kwollect/client_options.h"

#include <yaml-cpp/yaml.h>

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
      return Status::InvalidArgument(path + ": a value has the wrong type (uri, username and "
                                            "password are strings, timeout a number, verify_ssl "
                                            "a boolean or a CA file path)");
    }
  }
  if (const char* user = std::getenv("KWATT_USERNAME"); user && *user) options->username = user;
  if (const char* pass = std::getenv("KWATT_PASSWORD"); pass && *pass) options->password = pass;
  if (const char* url = std::getenv("KWATT_API_URL"); url && *url) SetApiUrl(url, options);
  return Status::OK();
}

}  // namespace kwatt::kwollect
