// The drivers over HTTP: Prometheus exporters and JSON documents (src/collect/drivers.h).
#include <charconv>
#include <chrono>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <unordered_map>

#include "kwatt/collect/prometheus_text.h"
#include "kwatt/core/json_text.h"
#include "kwatt/http/client.h"
#include "src/collect/drivers.h"

namespace kwatt::collect {
namespace {

constexpr size_t kMaxBodyBytes = 64 << 20;  // an exporter's page is a few hundred kB

// One HTTP connection kept alive between polls.
class HttpGetter {
 public:
  // `url`'s user and password, when given, are sent as HTTP basic authentication (an exporter
  // behind a web configuration).
  explicit HttpGetter(const MetricUrl& url) : client_(SettingsFor(url)) {}

  // GETs `url` into `body`; `name` names the device in errors.
  Status Get(const std::string& url, std::chrono::steady_clock::time_point deadline,
             const std::string& name, std::string* body) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) return Status::Unavailable(name + ": timed out before the request was sent");
    body->clear();
    http::RequestLimits limits;
    limits.timeout_ms = left;
    limits.connect_timeout_ms = left;
    limits.max_body_bytes = kMaxBodyBytes;
    limits.fail_when_larger = true;
    http::TransferError error;
    Result<http::ClientResponse> response = client_.Get(url, limits, &error);
    if (!response.ok()) {
      if (error.reason.empty()) return response.status();  // no request was sent
      switch (error.kind) {
        case http::TransferError::Kind::kTimedOut:
          return Status::Unavailable(name + ": timed out (" + std::to_string(left) + " ms)");
        case http::TransferError::Kind::kTooLarge:
          return Status::Unavailable(name + ": the answer is larger than " +
                                     std::to_string(kMaxBodyBytes >> 20) + " MB");
        case http::TransferError::Kind::kOther:
          return Status::Unavailable(name + ": " + error.reason);
      }
    }
    if (response->status != 200) {
      return Status::Unavailable(name + ": answered HTTP " + std::to_string(response->status));
    }
    *body = std::move(response->body);
    return Status::OK();
  }

 private:
  static http::ClientSettings SettingsFor(const MetricUrl& url) {
    http::ClientSettings settings;
    settings.user_agent = "kwatt-collect";
    settings.username = url.user;
    settings.password = url.password;
    // Devices are on the site's own network: never through a proxy of the environment.
    settings.use_proxy = false;
    return settings;
  }

  http::SmallClient client_;
};

std::string HostPort(const MetricUrl& url, int default_port) {
  std::string host = url.host.find(':') != std::string::npos ? "[" + url.host + "]" : url.host;
  return host + ":" + std::to_string(url.port ? url.port : default_port);
}

std::string JsonText(std::string_view text) {
  std::string out;
  AppendJsonString(&out, text);
  return out;
}

// An epoch in seconds as Python's float() of a label reads it ("1700000000.25"), rounded to the
// microsecond as PostgreSQL's to_timestamp does.
bool ParseEpochSeconds(std::string_view text, UnixNanos* time) {
  double seconds = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (error != std::errc() || end != text.data() + text.size()) return false;
  Result<UnixNanos> nanos = EpochSecondsToNanos(seconds, text);
  if (!nanos.ok()) return false;
  *time = *nanos;
  return true;
}

class PrometheusDevice : public Device {
 public:
  explicit PrometheusDevice(std::vector<MetricDescription> metrics)
      : metrics_(std::move(metrics)),
        url_("http://" + HostPort(metrics_[0].url, 9100) + "/metrics"),
        name_(metrics_[0].url.Redacted()),
        getter_(metrics_[0].url) {}

  Status Poll(const PollRequest& request, std::vector<Reading>* out) override {
    // The exporter's names to keep: those of the active descriptions' paths; every name when one
    // of them has no path (Kwollect's rule).
    std::set<std::string, std::less<>> allowed;
    bool all = false;
    const MetricDescription* first = nullptr;
    for (size_t i = 0; i < metrics_.size(); ++i) {
      if (!request.active.empty() && !request.active[i]) continue;
      if (!first) first = &metrics_[i];
      const std::string& path = metrics_[i].url.path;
      if (path.empty()) all = true;
      for (size_t begin = 0; begin <= path.size();) {
        size_t end = std::min(path.find('-', begin), path.size());
        if (end > begin) allowed.emplace(path.substr(begin, end - begin));
        begin = end + 1;
      }
    }
    if (!first) return Status::OK();
    KWATT_RETURN_IF_ERROR(getter_.Get(url_, request.deadline, name_, &body_));
    size_t before = out->size();
    std::vector<PollProblem> problems;
    std::vector<std::pair<std::string, UnixNanos>> stamped;  // (series, own time) of this scrape
    Status status = ReadPrometheusText(body_, [&](const PrometheusSample& sample) -> Status {
      if (!all && allowed.find(sample.name) == allowed.end()) return Status::OK();
      Reading reading;
      reading.time = request.sent_at;
      reading.device_id = first->device_id;
      reading.metric_id = "prom_" + sample.name;
      reading.value = sample.value;
      bool custom = sample.name == "kwollect_custom";
      std::optional<std::string> own_time;
      for (const auto& [key, value] : sample.labels) {
        if (custom && key == "_timestamp") {
          // Empty (what a textfile collector writes for none): the scrape's time.
          if (!value.empty()) own_time = value;
          continue;
        }
        if (custom && key == "_metric_id" && !value.empty()) {
          reading.metric_id = value;
          continue;
        }
        reading.labels.emplace_back(key, JsonText(value));
      }
      if (own_time && !ParseEpochSeconds(*own_time, &reading.time)) {
        // Kwollect skips the sample; kwatt counts it and says which.
        problems.push_back({PollProblem::Kind::kBadTimestamp,
                            name_ + ": the kwollect_custom sample of _metric_id \"" +
                                reading.metric_id + "\" has _timestamp=\"" + *own_time +
                                "\", which is not epoch seconds (1764633600.5): skipped"});
        return Status::OK();
      }
      if (custom) reading.labels.emplace_back("_metric_origin", "\"prom_kwollect_custom\"");
      if (own_time) {
        // A sample with its own time is the same reading at every scrape until it changes:
        // written once.
        std::string series = reading.metric_id + '\n' + LabelsText(reading.labels);
        stamped.emplace_back(series, reading.time);
        auto last = last_own_time_.find(series);
        if (last != last_own_time_.end() && last->second == reading.time) return Status::OK();
      }
      out->push_back(std::move(reading));
      return Status::OK();
    });
    if (!status.ok()) {
      out->resize(before);  // a scrape is taken whole or not at all
      return Status::Unavailable(name_ + ": the exposition does not read: " + status.message());
    }
    // The samples with their own time that this scrape has (those it no longer has forgotten).
    last_own_time_.clear();
    for (auto& [series, time] : stamped) last_own_time_[std::move(series)] = time;
    for (PollProblem& problem : problems) NoteProblem(problem.kind, std::move(problem.message));
    return Status::OK();
  }

 private:
  std::vector<MetricDescription> metrics_;
  std::string url_;
  std::string name_;
  HttpGetter getter_;
  std::string body_;
  // The own time of each custom series (metric id and labels) at the last scrape.
  std::unordered_map<std::string, UnixNanos> last_own_time_;
};

class JsonDevice : public Device {
 public:
  JsonDevice(std::vector<MetricDescription> metrics,
             std::vector<nlohmann::json::json_pointer> pointers)
      : metrics_(std::move(metrics)),
        pointers_(std::move(pointers)),
        name_(metrics_[0].url.Redacted()),
        getter_(metrics_[0].url) {}

  Status Poll(const PollRequest& request, std::vector<Reading>* out) override {
    // One GET per distinct document (path and query) of the active metrics.
    std::map<std::string, std::vector<size_t>> documents;
    for (size_t i = 0; i < metrics_.size(); ++i) {
      if (!request.active.empty() && !request.active[i]) continue;
      const MetricUrl& url = metrics_[i].url;
      documents[url.path + (url.query.empty() ? "" : "?" + url.query)].push_back(i);
    }
    size_t before = out->size();
    for (const auto& [document, indices] : documents) {
      std::string url = "http://" + HostPort(metrics_[0].url, 80) + "/" + document;
      Status got = getter_.Get(url, request.deadline, name_, &body_);
      if (!got.ok()) {
        out->resize(before);
        return got;
      }
      nlohmann::json parsed = nlohmann::json::parse(body_, nullptr, /*allow_exceptions=*/false);
      if (parsed.is_discarded()) {
        out->resize(before);
        return Status::Unavailable(name_ + ": /" + document + " is not JSON");
      }
      for (size_t i : indices) {
        const MetricDescription& metric = metrics_[i];
        if (!parsed.contains(pointers_[i])) continue;  // no value this time: no row
        const nlohmann::json& value = parsed.at(pointers_[i]);
        if (value.is_number()) {
          out->push_back(ReadingOf(metric, request.sent_at, value.get<double>()));
        } else if (value.is_boolean()) {
          out->push_back(ReadingOf(metric, request.sent_at, value.get<bool>() ? 1.0 : 0.0));
        } else if (value.is_string()) {
          out->push_back(ReadingOf(metric, request.sent_at, value.get<std::string>()));
        }  // null, lists and objects: no row
      }
    }
    return Status::OK();
  }

 private:
  std::vector<MetricDescription> metrics_;
  std::vector<nlohmann::json::json_pointer> pointers_;
  std::string name_;
  HttpGetter getter_;
  std::string body_;
};

}  // namespace

Result<std::unique_ptr<Device>> MakePrometheusDevice(const std::vector<MetricDescription>& metrics,
                                                     const DriverEnvironment& environment) {
  return std::unique_ptr<Device>(new PrometheusDevice(metrics));
}

Result<std::unique_ptr<Device>> MakeJsonDevice(const std::vector<MetricDescription>& metrics,
                                               const DriverEnvironment& environment) {
  std::vector<nlohmann::json::json_pointer> pointers;
  for (const MetricDescription& metric : metrics) {
    const std::string& pointer = metric.url.fragment;
    if (!pointer.empty() && pointer[0] != '/') {
      return Status::InvalidArgument(metric.origin + ": url's fragment '#" + pointer +
                                     "' should be a JSON pointer (#/power/0), or be left out "
                                     "when the document is the value");
    }
    try {
      pointers.emplace_back(pointer);
    } catch (const nlohmann::json::exception& error) {
      return Status::InvalidArgument(metric.origin + ": url's fragment '#" + pointer +
                                     "' is not a JSON pointer: " + error.what());
    }
  }
  return std::unique_ptr<Device>(new JsonDevice(metrics, std::move(pointers)));
}

}  // namespace kwatt::collect
