// influxdb:http://[USER:PASS@]HOST:PORT/DB: InfluxDB 1.x line protocol over HTTP, as PowerAPI's
// power reports are written (doc/meter/outputs.md, "InfluxDB").
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "kwatt/http/client.h"
#include "src/meter/outputs/openers.h"
#include "src/meter/outputs/output_base.h"

namespace kwatt::meter::internal {

namespace {

using http::SmallClient;
using http::UrlEncode;

// A tag value as line protocol reads it back: ',', '=' and ' ' escaped; control characters (which
// it cannot hold) and a final '\' (which would escape what follows) become '?'.
void AppendTagValue(std::string* out, std::string_view value) {
  for (size_t i = 0; i < value.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(value[i]);
    if (c < 0x20 || c == 0x7f || (c == '\\' && i + 1 == value.size())) {
      out->push_back('?');
      continue;
    }
    if (c == ',' || c == '=' || c == ' ') out->push_back('\\');
    out->push_back(char(c));
  }
}

// PowerAPI's scope: "cpu" for a package, "dram" for DRAM, else the domain's kind.
std::string ScopeOf(const Domain& domain) { return domain.kind == "package" ? "cpu" : domain.kind; }

// The server's reason: InfluxDB answers {"error": "..."}.
std::string InfluxError(const http::ClientResponse& response) {
  nlohmann::json body = nlohmann::json::parse(response.body, nullptr, false);
  std::string error;
  if (body.is_object() && body.contains("error") && body["error"].is_string()) {
    error = body["error"].get<std::string>();
  } else if (body.is_object() && body.contains("results") && body["results"].is_array()) {
    for (const auto& result : body["results"]) {
      if (result.is_object() && result.contains("error") && result["error"].is_string()) {
        error = result["error"].get<std::string>();
      }
    }
  }
  if (error.empty()) error = response.body.substr(0, 200);
  return "HTTP " + std::to_string(response.status) + (error.empty() ? "" : ": " + error);
}

class InfluxdbOutput : public HttpRowOutput {
 public:
  InfluxdbOutput(const OutputSpec& spec, const OutputOptions& options,
                 const http::ClientSettings& client)
      : HttpRowOutput(spec.shown, options),
        client_(client),
        write_url_(spec.url.Origin() + "/write?db=" + UrlEncode(spec.database) + "&precision=ns") {}

  // InfluxDB is given each interval's energy, not counters: nothing to keep.
  std::string SaveState() const override { return ""; }
  Status RestoreState(std::string_view) override { return Status::OK(); }

  void Note(std::string note) { AddNote(std::move(note)); }
  SmallClient& client() { return client_; }

 protected:
  Status BeginSeries(const MeterHeader&) override { return Status::OK(); }

  void Encode(const IntervalReport& report, const std::vector<SeriesPoint>& points,
              std::vector<std::string>* items) override {
    double seconds = IntervalSeconds(report);
    std::string time = std::to_string(report.end);
    for (const SeriesPoint& point : points) {
      if (IsGap(report.domains[size_t(point.domain)]) || seconds <= 0) continue;
      const Domain& domain = header().domains[size_t(point.domain)];
      std::string target, key, kind;
      switch (point.kind) {
        case SeriesKind::kMeasured:
          target = domain.source;  // PowerAPI's "rapl": what the counter says
          kind = domain.kind;
          break;
        case SeriesKind::kIdle:
          target = kind = "idle";
          break;
        case SeriesKind::kUnattributed:
          target = kind = "unattributed";
          break;
        case SeriesKind::kOther:
          target = kind = "other";
          break;
        case SeriesKind::kTarget: {
          const Target& t = report.targets[size_t(point.target)].target;
          target = t.name.empty() ? t.key : t.name;
          key = t.key;
          kind = TargetKindName(t.kind);
          break;
        }
      }
      // Tags in key order (what InfluxDB prefers); empty ones left out (it refuses them).
      std::pair<const char*, std::string> tags[] = {
          {"domain", domain.name},
          {"kind", kind},
          {"scope", ScopeOf(domain)},
          {"sensor", header().sensor},
          {"socket", domain.socket >= 0 ? std::to_string(domain.socket) : ""},
          {"source", domain.source},
          {"target", target},
          {"target_key", key},  // ("key" is a keyword of InfluxQL)
      };
      std::string line = "power_consumption";
      for (const auto& [tag, value] : tags) {
        if (value.empty()) continue;
        line += ',';
        line += tag;
        line += '=';
        AppendTagValue(&line, value);
      }
      line += " power=";
      AppendNumber(&line, double(point.microjoules) / 1e6 / seconds);
      line += ",energy=";
      AppendNumber(&line, double(point.microjoules) / 1e6);
      line += ",energy_uj=" + std::to_string(point.microjoules) + "i ";
      line += time;
      items->push_back(std::move(line));
    }
  }

  std::string Body(const std::deque<std::string>& items, size_t count) const override {
    std::string body;
    for (size_t i = 0; i < count; ++i) {
      body += items[i];
      body += '\n';
    }
    return body;
  }

  Status Send(const std::string& body) override {
    Result<http::ClientResponse> response =
        client_.Post(write_url_, body, "text/plain; charset=utf-8");
    if (!response.ok()) return response.status();
    long status = response->status;
    if (status == 204 || status == 200) return Status::OK();
    std::string what = name_ + ": " + InfluxError(*response);
    if (status == 408 || status == 429 || status >= 500) return Status::Unavailable(what);
    if (status == 401) return Status::Unauthenticated(what);
    if (status == 403) return Status::PermissionDenied(what);
    if (status == 404) return Status::NotFound(what);
    return Status::InvalidArgument(what);
  }

 private:
  SmallClient client_;
  const std::string write_url_;
};

// Pings the server, then makes sure the database exists (created when missing, as PowerAPI does).
// A server that does not answer is a note: rows wait for it.
Status Probe(const OutputSpec& spec, const OutputOptions& options,
             const http::ClientSettings& client_options, InfluxdbOutput* output) {
  SmallClient& client = output->client();
  std::string origin = spec.url.Origin();
  Result<http::ClientResponse> ping = client.Get(origin + "/ping");
  if (!ping.ok() || ping->status >= 500) {
    output->Note(spec.shown + ": the InfluxDB server does not answer (" +
                 (ping.ok() ? InfluxError(*ping) : ping.status().message()) +
                 "): rows wait for it, " + std::to_string(options.max_buffered_rows) + " at most");
    return Status::OK();
  }
  if (ping->status != 204 && ping->status != 200) {
    return Status::InvalidArgument("output '" + spec.shown + "': " + origin + "/ping answered " +
                                   InfluxError(*ping) + ": is it an InfluxDB 1.x server?");
  }
  Result<http::ClientResponse> shown =
      client.Get(origin + "/query?q=" + UrlEncode("SHOW DATABASES"));
  if (!shown.ok()) return shown.status().WithContext("output '" + spec.shown + "'");
  if (shown->status == 401 || shown->status == 403) {
    return Status::Unauthenticated(
        "output '" + spec.shown + "': the InfluxDB server refused " +
        (client_options.username.empty() ? std::string("to answer without credentials")
                                         : "the credentials of " + client_options.username) +
        " (" + InfluxError(*shown) +
        "): give influxdb:http://USER:PASSWORD@HOST:PORT/DB, or INFLUX_USERNAME and "
        "INFLUX_PASSWORD");
  }
  nlohmann::json answer = nlohmann::json::parse(shown->body, nullptr, false);
  bool exists = false;
  if (shown->status == 200 && answer.is_object()) {
    for (const auto& result : answer.value("results", nlohmann::json::array())) {
      for (const auto& series : result.value("series", nlohmann::json::array())) {
        for (const auto& row : series.value("values", nlohmann::json::array())) {
          if (row.is_array() && !row.empty() && row[0] == spec.database) exists = true;
        }
      }
    }
  }
  if (exists) return Status::OK();
  std::string quoted = "\"";
  for (char c : spec.database) quoted += c == '"' ? std::string("\\\"") : std::string(1, c);
  quoted += "\"";
  Result<http::ClientResponse> created =
      client.Post(origin + "/query", "q=" + UrlEncode("CREATE DATABASE " + quoted),
                  "application/x-www-form-urlencoded");
  if (!created.ok()) return created.status().WithContext("output '" + spec.shown + "'");
  nlohmann::json result = nlohmann::json::parse(created->body, nullptr, false);
  bool failed = created->status != 200 || !result.is_object() ||
                result.dump().find("\"error\"") != std::string::npos;
  if (failed) {
    return Status::PermissionDenied("output '" + spec.shown + "': the database " + spec.database +
                                    " does not exist, and could not be created (" +
                                    InfluxError(*created) + "): create it (influx -execute " +
                                    "'CREATE DATABASE " + quoted + "') or give another one");
  }
  output->Note(spec.shown + ": created the database " + spec.database);
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<OutputSink>> OpenInfluxdbOutput(const OutputSpec& spec,
                                                       const OutputOptions& options) {
  http::ClientSettings client;
  client.username = spec.url.username;
  client.password = spec.url.password;
  if (client.username.empty()) {
    // The influx client's variables: a password on the command line is seen by every user.
    if (const char* user = std::getenv("INFLUX_USERNAME"); user && *user) client.username = user;
    if (const char* pass = std::getenv("INFLUX_PASSWORD"); pass && *pass) client.password = pass;
  }
  client.timeout_s = options.timeout_seconds;
  client.connect_timeout_s = options.connect_timeout_seconds;
  client.verify_tls = options.verify_tls;
  client.ca_file = options.ca_file;
  client.user_agent = "kwatt-meter";
  auto output = std::make_unique<InfluxdbOutput>(spec, options, client);
  if (options.probe_peer) KWATT_RETURN_IF_ERROR(Probe(spec, options, client, output.get()));
  return std::unique_ptr<OutputSink>(std::move(output));
}

}  // namespace kwatt::meter::internal
