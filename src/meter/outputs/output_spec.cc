#include "src/meter/outputs/output_spec.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "kwatt/core/text.h"

namespace kwatt::meter::internal {

namespace {

constexpr const char* kKinds =
    "csv:PATH, jsonl:PATH ('-': standard output), influxdb:http://[USER:PASS@]HOST:PORT/DB, "
    "kwollect:https://[USER:PASS@]HOST/stable/sites/SITE, textfile:DIR, archive:DIR, "
    "powerapi-csv:DIR, powerapi-json:PATH, powerapi-formula-json:PATH";

std::string Host(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

std::vector<std::string_view> Segments(std::string_view path) {
  std::vector<std::string_view> out;
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t slash = std::min(path.find('/', begin), path.size());
    if (slash > begin) out.push_back(path.substr(begin, slash - begin));
    begin = slash + 1;
  }
  return out;
}

}  // namespace

std::string HttpUrl::Origin() const {
  return scheme + "://" + Host(host) + (port ? ":" + std::to_string(port) : "");
}

std::string HttpUrl::Shown() const { return Origin() + (path.empty() ? "" : "/" + path); }

Result<HttpUrl> ParseHttpUrl(std::string_view text) {
  HttpUrl url;
  size_t colon = text.find("://");
  if (colon == std::string_view::npos) {
    return Status::InvalidArgument("is not a URL (http://HOST:PORT/... or https://...)");
  }
  url.scheme = std::string(text.substr(0, colon));
  std::transform(url.scheme.begin(), url.scheme.end(), url.scheme.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  if (url.scheme != "http" && url.scheme != "https") {
    return Status::InvalidArgument("has the scheme '" + url.scheme + "': give http:// or https://");
  }
  std::string_view rest = text.substr(colon + 3);
  if (rest.find('#') != std::string_view::npos) {
    return Status::InvalidArgument("has a fragment ('#'), which no output takes");
  }
  size_t authority_end = std::min(rest.find_first_of("/?"), rest.size());
  std::string_view authority = rest.substr(0, authority_end);
  std::string_view after = rest.substr(authority_end);
  if (size_t at = authority.rfind('@'); at != std::string_view::npos) {
    // UrlCredentials percent-decodes, and takes the last '@' as this does.
    std::string userinfo_url = "http://" + std::string(authority.substr(0, at + 1)) + "h";
    UrlCredentials(userinfo_url, &url.username, &url.password);
    authority = authority.substr(at + 1);
  }
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      return Status::InvalidArgument("has an IPv6 address without its closing ']'");
    }
    url.host = std::string(authority.substr(1, close - 1));
    std::string_view tail = authority.substr(close + 1);
    if (!tail.empty() && tail.front() != ':') {
      return Status::InvalidArgument("has something after the IPv6 address's ']'");
    }
    if (!tail.empty()) port_text = tail.substr(1);
  } else {
    size_t port_colon = authority.rfind(':');
    url.host = std::string(authority.substr(0, port_colon));
    if (port_colon != std::string_view::npos) port_text = authority.substr(port_colon + 1);
    if (url.host.find(':') != std::string::npos) {
      return Status::InvalidArgument(
          "has an IPv6 address without brackets: write http://[::1]:PORT");
    }
  }
  if (url.host.empty()) return Status::InvalidArgument("has no host");
  if (authority.find(' ') != std::string_view::npos) {
    return Status::InvalidArgument("has a space in its host");
  }
  if (!port_text.empty() || authority.back() == ':') {
    int port = 0;
    bool digits = !port_text.empty() && port_text.size() <= 5 &&
                  std::all_of(port_text.begin(), port_text.end(),
                              [](unsigned char c) { return std::isdigit(c); });
    if (digits) port = std::stoi(std::string(port_text));
    if (!digits || port < 1 || port > 65535) {
      return Status::InvalidArgument("has the port '" + std::string(port_text) +
                                     "': give a number from 1 to 65535");
    }
    url.port = port;
  }
  size_t question = after.find('?');
  std::string_view path = after.substr(0, question);
  if (question != std::string_view::npos) url.query = std::string(after.substr(question + 1));
  while (!path.empty() && path.front() == '/') path.remove_prefix(1);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  url.path = std::string(path);
  return url;
}

Result<OutputSpec> ParseOutputSpec(std::string_view text) {
  OutputSpec spec;
  size_t colon = text.find(':');
  std::string kind(text.substr(0, colon == std::string_view::npos ? text.size() : colon));
  std::string rest(colon == std::string_view::npos ? "" : text.substr(colon + 1));
  spec.shown = colon == std::string_view::npos ? kind : kind + ":" + UrlWithoutCredentials(rest);
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument("output '" + spec.shown + "' " + what);
  };
  if (text.empty())
    return Status::InvalidArgument("an output spec is empty: give " + std::string(kKinds));
  if (colon == std::string_view::npos) {
    std::string hint;
    for (const char* extension : {"csv", "jsonl"}) {
      std::string suffix = std::string(".") + extension;
      if (kind.size() > suffix.size() &&
          kind.compare(kind.size() - suffix.size(), suffix.size(), suffix) == 0) {
        hint = ": write " + std::string(extension) + ":" + kind;
      }
    }
    if (hint.empty()) hint = ": give KIND:WHERE, one of " + std::string(kKinds);
    return bad("names no kind of output" + hint);
  }
  if (kind == "prometheus") {
    return bad(
        "is not an output spec: the Prometheus exposition is served with --listen "
        "HOST:PORT");
  }
  static const std::pair<const char*, OutputKind> kPathKinds[] = {
      {"csv", OutputKind::kCsv},
      {"jsonl", OutputKind::kJsonl},
      {"textfile", OutputKind::kTextfile},
      {"archive", OutputKind::kArchive},
      {"powerapi-csv", OutputKind::kPowerApiCsv},
      {"powerapi-json", OutputKind::kPowerApiJson},
      {"powerapi-formula-json", OutputKind::kPowerApiFormulaJson}};
  const auto* path_kind = std::find_if(std::begin(kPathKinds), std::end(kPathKinds),
                                       [&](const auto& k) { return kind == k.first; });
  if (path_kind != std::end(kPathKinds)) {
    spec.kind = path_kind->second;
    const bool directory = spec.kind == OutputKind::kTextfile ||
                           spec.kind == OutputKind::kArchive ||
                           spec.kind == OutputKind::kPowerApiCsv;
    if (rest.empty()) {
      return bad(std::string("has no path: write ") + kind + ":" +
                 (spec.kind == OutputKind::kTextfile
                      ? "DIR (the node exporter's textfile directory)"
                  : directory ? "DIR"
                              : "PATH, or " + kind + ":- for the standard output"));
    }
    if (rest == "-" && directory) return bad("cannot be the standard output: give a directory");
    if (rest.find('\0') != std::string::npos) return bad("has a NUL byte in its path");
    spec.path = rest;
    spec.shown = kind + ":" + rest;  // a path, shown as it is
    return spec;
  }
  if (kind != "influxdb" && kind != "kwollect") {
    return bad("is of an unknown kind '" + kind + "': give " + std::string(kKinds));
  }
  if (kind == "kwollect") {
    spec.kind = OutputKind::kKwollect;
    if (rest.empty()) return spec;  // the credentials file's API, else Grid'5000's
  } else {
    spec.kind = OutputKind::kInfluxdb;
  }
  Result<HttpUrl> url = ParseHttpUrl(rest);
  if (!url.ok()) {
    return bad(url.status().message() + ": write " +
               (spec.kind == OutputKind::kInfluxdb
                    ? "influxdb:http://[USER:PASS@]HOST:PORT/DATABASE"
                    : "kwollect:https://api.grid5000.fr/stable/sites/SITE (or the base URL of "
                      "kwatt serve, with --site)"));
  }
  spec.url = std::move(*url);
  spec.has_url = true;
  if (!spec.url.query.empty()) return bad("has a query ('?'), which it does not take");
  std::vector<std::string_view> segments = Segments(spec.url.path);
  if (spec.kind == OutputKind::kInfluxdb) {
    if (segments.size() != 1) {
      return bad("should name one database as its path: influxdb:http://HOST:PORT/DATABASE");
    }
    spec.database = std::string(segments[0]);
    spec.url.path.clear();
    return spec;
  }
  // kwollect: ".../sites/SITE" or ".../sites/SITE/metrics" names the site; the base is before it.
  if (!segments.empty() && segments.back() == "metrics") segments.pop_back();
  if (segments.size() >= 2 && segments[segments.size() - 2] == "sites") {
    spec.site = std::string(segments.back());
    segments.resize(segments.size() - 2);
  } else if (!segments.empty() && segments.back() == "sites") {
    return bad("ends with /sites without a site: write .../sites/SITE");
  }
  std::string base;
  for (std::string_view segment : segments)
    base += (base.empty() ? "" : "/") + std::string(segment);
  spec.url.path = base;
  return spec;
}

}  // namespace kwatt::meter::internal
