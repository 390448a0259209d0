// kwollect:URL: the meter's rows pushed as Kwollect custom metrics, POST /sites/SITE/metrics as
// Grid'5000 and `kwatt serve --auth` take them (doc/meter/outputs.md, "Kwollect").
#include "kwatt/core/json_text.h"
#include "kwatt/http/client.h"
#include "kwatt/kwollect/client_options.h"
#include "kwatt/kwollect/http.h"
#include "src/meter/outputs/openers.h"
#include "src/meter/outputs/output_base.h"

namespace kwatt::meter::internal {

namespace {

using http::SmallClient;

class KwollectOutput : public HttpRowOutput {
 public:
  KwollectOutput(std::string name, const OutputOptions& options,
                 const kwollect::ClientOptions& client, std::string site, std::string node)
      : HttpRowOutput(std::move(name), options),
        client_options_(client),
        client_(kwollect::HttpSettings(client)),
        site_url_(client.api_url + "/sites/" + site),
        node_(std::move(node)) {}

  // Whether the API knows the site (and takes the credentials); a note when it does not answer.
  Status Probe() {
    Result<http::ClientResponse> answer = client_.Get(site_url_);
    if (answer.ok() && answer->status == 200) return Status::OK();
    if (!answer.ok() || answer->status >= 500 || answer->status == 429) {
      AddNote(name_ + ": the API does not answer (" +
              (answer.ok() ? kwollect::HttpError(*answer, site_url_, client_options_).message()
                           : answer.status().message()) +
              "): rows wait for it, " + std::to_string(options_.max_buffered_rows) + " at most");
      return Status::OK();
    }
    Status error = kwollect::HttpError(*answer, site_url_, client_options_);
    if (answer->status == 404) {
      return Status::NotFound("output '" + name_ + "': the API has no such site (" +
                              error.message() + "): check the site in the URL (.../sites/SITE)");
    }
    return error.WithContext("output '" + name_ + "'");
  }

 protected:
  Status BeginSeries(const MeterHeader&) override { return Status::OK(); }

  void Encode(const IntervalReport& report, const std::vector<SeriesPoint>& points,
              std::vector<std::string>* items) override {
    KwollectRows(header(), report, points, &rows_);
    std::string prefix = "{\"timestamp\":" + FormatEpochSeconds(report.end) + ",\"device_id\":";
    AppendJsonString(&prefix, node_);
    prefix += ",\"metric_id\":";
    for (const MeterRow& row : rows_) {
      std::string item = prefix;
      AppendJsonString(&item, row.metric);
      item += ",\"value\":";
      AppendNumber(&item, row.value);
      item += ",\"labels\":";
      item += LabelsJson(row.labels);
      item += '}';
      items->push_back(std::move(item));
    }
  }

  std::string Body(const std::deque<std::string>& items, size_t count) const override {
    std::string body = "[";
    for (size_t i = 0; i < count; ++i) {
      if (i) body += ',';
      body += items[i];
    }
    body += ']';
    return body;
  }

  Status Send(const std::string& body) override {
    std::string url = site_url_ + "/metrics";
    Result<http::ClientResponse> response = client_.Post(url, body, "application/json");
    if (!response.ok()) return response.status();
    if (response->status >= 200 && response->status < 300) return Status::OK();
    Status error = kwollect::HttpError(*response, url, client_options_);
    if (response->status == 408) return Status::Unavailable(error.message());
    return error;
  }

 private:
  const kwollect::ClientOptions client_options_;
  SmallClient client_;
  const std::string site_url_;  // ".../stable/sites/lyon"
  const std::string node_;
  std::vector<MeterRow> rows_;
};

}  // namespace

Result<std::unique_ptr<OutputSink>> OpenKwollectOutput(const OutputSpec& spec,
                                                       const OutputOptions& options) {
  kwollect::ClientOptions client;
  std::string file =
      options.credentials_file.empty() ? kwollect::DefaultConfigPath() : options.credentials_file;
  Status loaded = kwollect::LoadClientOptions(file, &client);
  if (!loaded.ok()) return loaded.WithContext("output '" + spec.shown + "'");
  if (spec.has_url) {
    client.api_url = spec.url.Shown();
    if (!spec.url.username.empty()) {  // the URL's credentials win over the file's
      client.username = spec.url.username;
      client.password = spec.url.password;
    }
  }
  KWATT_ASSIGN_OR_RETURN(NodeIdentity identity,
                         ResolveNode(options, /*need_site=*/spec.site.empty(), spec.shown));
  std::string site = spec.site.empty() ? identity.site : spec.site;
  if (site.find_first_of("/?#., ") != std::string::npos) {
    return Status::InvalidArgument("output '" + spec.shown + "': '" + site +
                                   "' is not a site's uid (lyon, nancy...)");
  }
  client.timeout_s = options.timeout_seconds;
  client.connect_timeout_s = options.connect_timeout_seconds;
  client.verify_tls = client.verify_tls && options.verify_tls;
  if (!options.ca_file.empty()) client.ca_file = options.ca_file;
  client.user_agent = "kwatt-meter";
  std::string name = "kwollect:" + client.api_url + "/sites/" + site;
  auto output = std::make_unique<KwollectOutput>(name, options, client, site, identity.node);
  if (options.probe_peer) KWATT_RETURN_IF_ERROR(output->Probe());
  return std::unique_ptr<OutputSink>(std::move(output));
}

}  // namespace kwatt::meter::internal
