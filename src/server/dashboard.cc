#include "src/server/dashboard.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "kwatt/core/text.h"
#include "kwatt/energy/energy.h"
#include "kwatt/energy/workflow.h"
#include "kwatt/http/hardened_server.h"
#include "kwatt/rows/text_sinks.h"
#include "src/server/downsample.h"
#include "src/server/embedded_dashboard.h"

namespace kwatt::server::internal {
namespace {

using nlohmann::ordered_json;

constexpr const char* kJson = "application/json; charset=utf-8";
constexpr size_t kBatchRows = 65536;
// The site page's latest power: the newest value of the last minute.
constexpr int64_t kLatestWindowNs = 60 * kNanosPerSecond;
// The node page lists at most this many of its jobs, the newest.
constexpr size_t kNodeJobs = 200;

std::string Dump(const ordered_json& body) {
  return body.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

// `text` gzipped at zlib's fastest level; false when zlib fails.
bool Gzip(std::string_view text, std::string* out) {
  z_stream z{};
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return false;
  out->resize(deflateBound(&z, uLong(text.size())));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = uInt(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out->data());
  z.avail_out = uInt(out->size());
  int done = deflate(&z, Z_FINISH);
  out->resize(z.total_out);
  deflateEnd(&z);
  return done == Z_STREAM_END;
}

// An answer (JSON unless said), gzipped when the client accepts it and it is worth it: a series
// answer is mostly numbers and nulls and shrinks 5 to 25 times, in milliseconds; the page's
// scripts and styles 3 times.
void Send(const http::Request& req, http::Response& res, std::string body,
          const std::string& content_type = kJson) {
  if (body.size() >= 1024 &&
      req.get_header_value("Accept-Encoding").find("gzip") != std::string::npos) {
    std::string compressed;
    if (Gzip(body, &compressed)) {
      res.set_header("Content-Encoding", "gzip");
      res.set_header("Vary", "Accept-Encoding");
      res.set_content(std::move(compressed), content_type);
      return;
    }
  }
  res.set_content(std::move(body), content_type);
}

void Error(http::Response& res, int status, const std::string& message) {
  ordered_json body;
  body["code"] = status;
  body["message"] = message;
  res.status = status;
  res.set_content(Dump(body), kJson);
}

void ErrorOf(http::Response& res, const Status& status) {
  int code = status.code() == Status::Code::kNotFound          ? 404
             : status.code() == Status::Code::kInvalidArgument ? 400
             : status.code() == Status::Code::kIncomplete      ? 503
                                                               : 500;
  Error(res, code, status.message());
}

double Seconds(UnixNanos t) { return double(t) / double(kNanosPerSecond); }
int64_t WholeSeconds(UnixNanos t) { return FloorDiv(t, kNanosPerSecond); }

// A job's window as the OAR API shows it (whole seconds), and as `kwatt energy --job` reads it:
// [started_at, stopped_at], or [started_at, now] while it runs.
struct JobWindow {
  UnixNanos start = 0, end = 0;
  bool running = false;
  bool waiting = false;
};
JobWindow WindowOf(const jobs::Job& job, UnixNanos now) {
  JobWindow w;
  UnixNanos end = job.EffectiveEnd();
  w.waiting = now < job.started_at;
  w.running = !w.waiting && now < end;
  w.start = WholeSeconds(job.started_at) * kNanosPerSecond;
  w.end = w.running ? now : WholeSeconds(end) * kNanosPerSecond;
  if (w.waiting) w.end = w.start;
  return w;
}

// `text` as a whole integer (no sign other than '-', no space, nothing after it).
std::optional<int64_t> ParseInteger(const std::string& text) {
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// `text` as a whole finite decimal number.
std::optional<double> ParseNumber(const std::string& text) {
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty() ||
      !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

std::vector<std::string> ListParam(const http::Request& req, const char* key) {
  std::vector<std::string> out;
  auto range = req.params.equal_range(key);
  for (auto it = range.first; it != range.second; ++it) {
    for (std::string& item : SplitCommaList(it->second)) {
      if (!item.empty()) out.push_back(std::move(item));
    }
  }
  return out;
}

bool IsTrue(const http::Request& req, const char* key) {
  std::string v = req.get_param_value(key);
  return v == "1" || v == "true" || v == "yes";
}

class Dashboard {
 public:
  explicit Dashboard(DashboardContext context) : c_(std::move(context)) {}

  // The routes hold `dashboard` (shared), so that it lives as long as the server's handlers.
  static void Register(std::shared_ptr<Dashboard> dashboard, http::HardenedServer* http);

 private:
  const simulate::Site* SiteOr404(const std::string& uid, http::Response& res) {
    const simulate::Site* site = c_.testbed->FindSite(uid);
    if (!site) Error(res, 404, "Site '" + uid + "' does not exist");
    return site;
  }
  // The job of the request's `id` (path) or `job_id` (parameter); an answer written when none.
  std::optional<jobs::Job> JobOr404(const simulate::Site& site, const std::string& id,
                                    http::Response& res) {
    std::optional<int64_t> uid = ParseInteger(id);
    if (!uid) {
      Error(res, 400, "job id '" + id + "' is not an integer");
      return std::nullopt;
    }
    Result<jobs::Job> job = c_.find_job(site.uid, *uid);
    if (!job.ok()) {
      if (job.status().code() == Status::Code::kNotFound) {
        Error(res, 404, "Job " + id + " not found on site " + site.uid);
      } else {
        ErrorOf(res, job.status());
      }
      return std::nullopt;
    }
    return *job;
  }

  // Every row of `answer`, batch after batch, into `consume`. InvalidArgument (a 400 naming the
  // limit) beyond max_rows_read rows; Incomplete as soon as the client leaves or the server stops.
  template <typename Consume>
  Status ReadAll(MetricsAnswer& answer, Consume consume) const {
    RowBatch batch;
    const StringInterner* interner = nullptr;
    int64_t rows = 0;
    while (answer.NextRows(&batch, &interner, kBatchRows)) {
      if (http::HardenedServer::RequestAbandoned()) {
        return Status::Incomplete("the client left, or the server stops");
      }
      rows += int64_t(batch.size());
      if (rows > c_.max_rows_read) {
        return Status::InvalidArgument(
            "this answer reads more than " + std::to_string(c_.max_rows_read) +
            " rows, the most one dashboard answer reads: ask for a shorter window, fewer nodes "
            "or fewer metrics (kwatt fetch, kwatt energy and the metrics API have no such "
            "limit)");
      }
      KWATT_RETURN_IF_ERROR(consume(batch, *interner));
    }
    return answer.status();
  }

  void SiteList(const http::Request& req, http::Response& res);
  void SitePage(const http::Request& req, http::Response& res);
  void JobList(const http::Request& req, http::Response& res);
  void JobPage(const http::Request& req, http::Response& res);
  void Energy(const http::Request& req, http::Response& res);
  void SeriesAnswer(const http::Request& req, http::Response& res);
  void Rows(const http::Request& req, http::Response& res);
  void NodeMetrics(const http::Request& req, http::Response& res);

  ordered_json JobSummary(const jobs::Job& job, UnixNanos now);
  // Each of `devices`' latest power (the site page's and the node page's): for the first power
  // metric, in the order `kwatt energy` prefers, with a value over the last minute, the newest
  // value (summed over the series: a node on two PDU outlets); absent for a node without one.
  Result<std::map<std::string, ordered_json>> LatestPower(const simulate::Site& site,
                                                          const std::vector<std::string>& devices,
                                                          UnixNanos now);
  std::vector<std::string> MetricsOfNode(const simulate::Node& node);

  // The query of a series or rows request: devices, metrics and window (from `job_id` when
  // given, explicit values overriding). False when an error answer was written.
  struct Query {
    const simulate::Site* site = nullptr;
    std::vector<std::string> devices, metrics;
    UnixNanos start = 0, end = 0, now = 0;
  };
  bool ParseQuery(const http::Request& req, http::Response& res, Query* query);

  DashboardContext c_;
};

std::vector<std::string> Dashboard::MetricsOfNode(const simulate::Node& node) {
  std::vector<std::string> out;
  Result<Catalogue> catalogue = c_.catalogue(*node.cluster);
  const Catalogue& cat = catalogue.ok() ? *catalogue : node.cluster->catalogue;
  std::set<std::string> seen;
  for (const CatalogueMetric& m : cat.MetricsOf(node.uid)) {
    if (seen.insert(m.metric_id).second) out.push_back(m.metric_id);
  }
  return out;
}

ordered_json Dashboard::JobSummary(const jobs::Job& job, UnixNanos now) {
  JobWindow w = WindowOf(job, now);
  ordered_json out;
  out["uid"] = job.uid;
  out["site"] = job.site;
  out["user"] = job.user;
  out["name"] = job.name.empty() ? ordered_json(nullptr) : ordered_json(job.name);
  out["state"] = w.waiting ? "waiting" : w.running ? "running" : "terminated";
  out["nodes"] = job.nodes;
  out["types"] = job.types;
  out["start"] = WholeSeconds(job.started_at);
  out["stop"] = w.running || w.waiting ? ordered_json(nullptr)
                                       : ordered_json(WholeSeconds(job.EffectiveEnd()));
  out["duration_s"] = Seconds(w.end - w.start);
  return out;
}

void Dashboard::SiteList(const http::Request& req, http::Response& res) {
  ordered_json sites = ordered_json::array();
  for (const auto& site : c_.testbed->sites()) {
    ordered_json item;
    item["uid"] = site->uid;
    item["name"] = site->name;
    size_t nodes = 0;
    for (const simulate::Cluster* cluster : site->clusters) nodes += cluster->nodes.size();
    item["nodes"] = nodes;
    sites.push_back(item);
  }
  ordered_json out;
  out["api"] = c_.api_prefix;
  out["now"] = Seconds(c_.now());
  out["sites"] = sites;
  Send(req, res, Dump(out));
}

Result<std::map<std::string, ordered_json>> Dashboard::LatestPower(
    const simulate::Site& site, const std::vector<std::string>& devices, UnixNanos now) {
  // node -> metric -> labels -> newest (time, value).
  std::map<std::string, std::map<std::string, std::map<std::string, std::pair<UnixNanos, double>>>>
      latest;
  KWATT_ASSIGN_OR_RETURN(
      std::shared_ptr<MetricsAnswer> answer,
      c_.open_rows(site, devices, energy::PowerMetrics(), now - kLatestWindowNs, now, now));
  KWATT_RETURN_IF_ERROR(
      ReadAll(*answer, [&](const RowBatch& batch, const StringInterner& interner) {
        for (size_t i = 0; i < batch.size(); ++i) {
          if (std::isnan(batch.value[i])) continue;
          auto& slot = latest[std::string(interner.Get(batch.device[i]))][std::string(
              interner.Get(batch.metric[i]))][std::string(interner.Get(batch.labels[i]))];
          if (batch.time[i] >= slot.first) slot = {batch.time[i], batch.value[i]};
        }
        return Status::OK();
      }));
  std::map<std::string, ordered_json> out;
  for (const auto& [node, of_node] : latest) {
    for (const std::string& metric : energy::PowerMetrics()) {  // in order of preference
      auto of_metric = of_node.find(metric);
      if (of_metric == of_node.end()) continue;
      double watts = 0;
      UnixNanos t = 0;
      for (const auto& [labels, newest] : of_metric->second) {  // 2 PSUs: their sum
        watts += newest.second;
        t = std::max(t, newest.first);
      }
      out[node] = {{"metric", metric}, {"watts", watts}, {"time", Seconds(t)}};
      break;
    }
  }
  return out;
}

void Dashboard::SitePage(const http::Request& req, http::Response& res) {
  const simulate::Site* site = SiteOr404(req.matches[1], res);
  if (!site) return;
  UnixNanos now = c_.now();
  std::vector<std::string> devices;
  for (const simulate::Cluster* cluster : site->clusters) {
    for (const simulate::Node* node : cluster->nodes) devices.push_back(node->uid);
  }
  Result<std::map<std::string, ordered_json>> latest = LatestPower(*site, devices, now);
  if (!latest.ok()) return ErrorOf(res, latest.status());
  Result<std::vector<jobs::Job>> jobs = c_.jobs_of(site->uid);
  if (!jobs.ok()) return ErrorOf(res, jobs.status());
  std::map<std::string, std::vector<int64_t>> running;
  for (const jobs::Job& job : *jobs) {
    if (!WindowOf(job, now).running) continue;
    for (const std::string& node : job.nodes) running[node].push_back(job.uid);
  }
  ordered_json clusters = ordered_json::array();
  for (const simulate::Cluster* cluster : site->clusters) {
    ordered_json nodes = ordered_json::array();
    for (const simulate::Node* node : cluster->nodes) {
      ordered_json item;
      item["uid"] = node->uid;
      auto power = latest->find(node->uid);
      item["power"] = power == latest->end() ? ordered_json(nullptr) : power->second;
      item["jobs"] = running[node->uid];
      nodes.push_back(item);
    }
    ordered_json item;
    item["uid"] = cluster->uid;
    item["model"] = cluster->model;
    item["nodes"] = nodes;
    clusters.push_back(item);
  }
  ordered_json out;
  out["uid"] = site->uid;
  out["name"] = site->name;
  out["now"] = Seconds(now);
  out["clusters"] = clusters;
  Send(req, res, Dump(out));
}

void Dashboard::JobList(const http::Request& req, http::Response& res) {
  const simulate::Site* site = SiteOr404(req.matches[1], res);
  if (!site) return;
  Result<std::vector<jobs::Job>> jobs = c_.jobs_of(site->uid);
  if (!jobs.ok()) return ErrorOf(res, jobs.status());
  std::sort(jobs->begin(), jobs->end(),
            [](const jobs::Job& a, const jobs::Job& b) { return a.uid > b.uid; });
  UnixNanos now = c_.now();
  ordered_json items = ordered_json::array();
  for (const jobs::Job& job : *jobs) items.push_back(JobSummary(job, now));
  ordered_json out;
  out["site"] = site->uid;
  out["now"] = Seconds(now);
  out["jobs"] = items;
  Send(req, res, Dump(out));
}

void Dashboard::JobPage(const http::Request& req, http::Response& res) {
  const simulate::Site* site = SiteOr404(req.matches[1], res);
  if (!site) return;
  std::optional<jobs::Job> job = JobOr404(*site, req.matches[2], res);
  if (!job) return;
  UnixNanos now = c_.now();
  ordered_json out = JobSummary(*job, now);
  JobWindow w = WindowOf(*job, now);
  out["window"] = {{"start", Seconds(w.start)}, {"end", Seconds(w.end)}};
  out["now"] = Seconds(now);
  ordered_json nodes = ordered_json::array();
  for (const std::string& uid : job->nodes) {
    ordered_json item;
    item["uid"] = uid;
    const simulate::Node* node = c_.testbed->FindNode(*site, uid);
    item["cluster"] = node ? ordered_json(node->cluster->uid) : ordered_json(nullptr);
    item["metrics"] = node ? MetricsOfNode(*node) : std::vector<std::string>();
    nodes.push_back(item);
  }
  out["node_details"] = nodes;
  // The load phases of a simulated job (a store's jobs have none), cycled when they repeat, until
  // the job's end.
  ordered_json phases = ordered_json::array();
  int64_t cycle = 0;
  for (const jobs::LoadPhase& phase : job->phases) cycle += phase.duration_ns;
  UnixNanos t = job->started_at, end = job->EffectiveEnd();
  for (size_t i = 0; cycle > 0 && t < end && phases.size() < 1000; ++i) {
    if (i == job->phases.size()) {
      if (!job->repeat_phases) break;
      i = 0;
    }
    const jobs::LoadPhase& phase = job->phases[i];
    phases.push_back({{"name", phase.name},
                      {"start", Seconds(t)},
                      {"end", Seconds(std::min(t + phase.duration_ns, end))},
                      {"cpu", phase.cpu},
                      {"network", phase.network},
                      {"gpu", phase.gpu}});
    t += phase.duration_ns;
  }
  out["phases"] = phases;
  std::string host = req.get_header_value("Host");
  std::string api = "http://" + (host.empty() ? std::string("127.0.0.1") : host) + c_.api_prefix;
  std::string id = site->uid + ":" + std::to_string(job->uid);
  out["api"] = api;
  // The Host header is the client's text: quoted, so that a command copied runs nothing else.
  out["backup_command"] = "kwatt backup --api " + ShellQuoted(api) + " --job " + id + " -o job-" +
                          site->uid + "-" + std::to_string(job->uid);
  out["energy_command"] = "kwatt energy --api " + ShellQuoted(api) + " --job " + id;
  Send(req, res, Dump(out));
}

void Dashboard::Energy(const http::Request& req, http::Response& res) {
  const simulate::Site* site = SiteOr404(req.matches[1], res);
  if (!site) return;
  std::optional<jobs::Job> job = JobOr404(*site, req.matches[2], res);
  if (!job) return;
  UnixNanos now = c_.now();
  JobWindow w = WindowOf(*job, now);
  if (w.waiting) return Error(res, 400, "job " + std::to_string(job->uid) + " has not started");
  // What `kwatt energy --job SITE:ID` does: the job's nodes and window (a RowsReport), their
  // power and energy-counter rows into an EnergySink, and its report.
  RowsReport resolved;
  resolved.start = w.start;
  resolved.end = w.end;
  resolved.job_types = job->types;
  resolved.job_user = job->user;
  resolved.job_started = w.start;
  if (!w.running) resolved.job_stopped = w.end;
  std::set<std::string> clusters;
  for (const std::string& uid : job->nodes) {
    resolved.nodes.push_back(NodeName{uid, site->uid});
    const simulate::Node* node = c_.testbed->FindNode(*site, uid);
    if (!node || !clusters.insert(node->cluster->uid).second) continue;
    Result<Catalogue> catalogue = c_.catalogue(*node->cluster);
    resolved.catalogues.push_back(
        {site->uid + "/" + node->cluster->uid,
         catalogue.ok() ? std::move(*catalogue) : node->cluster->catalogue});
  }
  // The one energy workflow (energy::EnergyOf), its rows the job's from this server's own data,
  // read the margin beyond the job's window as every energy reads them.
  auto feed = [&](const std::vector<std::string>& metrics, RowSink* sink) -> Result<RowsReport> {
    KWATT_RETURN_IF_ERROR(sink->Begin(resolved));
    const int64_t margin = energy::EnergyFetchMargin(false);
    KWATT_ASSIGN_OR_RETURN(
        std::shared_ptr<MetricsAnswer> answer,
        c_.open_rows(*site, job->nodes, metrics, w.start - margin, w.end + margin, now));
    KWATT_RETURN_IF_ERROR(
        ReadAll(*answer, [&](const RowBatch& batch, const StringInterner& interner) {
          return sink->Write(site->uid, batch, interner);
        }));
    return resolved;
  };
  Result<energy::EnergyOutcome> outcome = energy::EnergyOf(feed, energy::EnergyOptions());
  if (!outcome.ok()) return ErrorOf(res, outcome.status());
  // As `kwatt energy --json` prints it, its sources' checks included.
  Send(req, res, energy::EnergyReportJson(outcome->report, &outcome->checks));
}

bool Dashboard::ParseQuery(const http::Request& req, http::Response& res, Query* q) {
  q->site = SiteOr404(req.matches[1], res);
  if (!q->site) return false;
  q->now = c_.now();
  for (const char* key : {"nodes", "devices"}) {
    for (std::string& item : ListParam(req, key)) {
      item = item.substr(0, item.find('.'));
      if (std::find(q->devices.begin(), q->devices.end(), item) == q->devices.end()) {
        q->devices.push_back(std::move(item));
      }
    }
  }
  q->metrics = ListParam(req, "metrics");
  std::optional<UnixNanos> start, end;
  for (auto [key, slot] : {std::pair{"start", &start}, std::pair{"end", &end}}) {
    if (!req.has_param(key)) continue;
    Result<UnixNanos> t = ParseKwollectTimeParameter(req.get_param_value(key));
    if (!t.ok()) {
      Error(res, 400, std::string(key) + ": " + t.status().message());
      return false;
    }
    *slot = *t;
  }
  if (req.has_param("job_id")) {
    std::optional<jobs::Job> job = JobOr404(*q->site, req.get_param_value("job_id"), res);
    if (!job) return false;
    JobWindow w = WindowOf(*job, q->now);
    if (q->devices.empty()) q->devices = job->nodes;
    if (!start) start = w.start;
    if (!end) end = w.end;
  }
  if (q->devices.empty()) {
    Error(res, 400, "give nodes (or devices) or job_id");
    return false;
  }
  if (!end) end = q->now;
  if (!start) start = *end - 300 * kNanosPerSecond;
  if (*end < *start) {
    Error(res, 400, "the end is before the start");
    return false;
  }
  q->start = *start;
  q->end = *end;
  return true;
}

void Dashboard::SeriesAnswer(const http::Request& req, http::Response& res) {
  Query q;
  if (!ParseQuery(req, res, &q)) return;
  Downsampler::Options options;
  options.start = q.start;
  options.counter_rates = IsTrue(req, "rates");
  int64_t span = q.end - q.start + 1;
  if (req.has_param("step")) {
    std::string text = req.get_param_value("step");
    std::optional<double> step = ParseNumber(text);
    if (!step || !(*step > 0)) {
      return Error(res, 400, "step must be a positive number of seconds, not '" + text + "'");
    }
    options.step = std::max<int64_t>(1, int64_t(std::llround(*step * double(kNanosPerSecond))));
  } else {
    std::string text = req.has_param("width") ? req.get_param_value("width") : "1000";
    std::optional<int64_t> width = ParseInteger(text);
    if (!width || *width < 1 || uint64_t(*width) > kMaxBuckets) {
      return Error(res, 400,
                   "width must be a whole number of buckets from 1 to " +
                       std::to_string(kMaxBuckets) + ", not '" + text + "'");
    }
    options.step = BucketStepFor(q.start, q.end, size_t(*width));
  }
  int64_t buckets = (span + options.step - 1) / options.step;
  if (buckets > int64_t(kMaxBuckets)) {
    return Error(res, 400,
                 "more than " + std::to_string(kMaxBuckets) + " buckets: give a larger step");
  }
  options.buckets = size_t(std::max<int64_t>(buckets, 1));
  Result<std::shared_ptr<MetricsAnswer>> answer =
      c_.open_rows(*q.site, q.devices, q.metrics, q.start, q.end, q.now);
  if (!answer.ok()) return ErrorOf(res, answer.status());
  Downsampler downsampler(options);
  Status read = ReadAll(**answer, [&](const RowBatch& batch, const StringInterner& interner) {
    downsampler.Add(batch, interner);
    int64_t cells = int64_t(downsampler.series_count()) * int64_t(options.buckets);
    if (cells > kMaxSeriesCells) {
      return Status::InvalidArgument(
          "this answer has more than " + std::to_string(kMaxSeriesCells) +
          " points (series x buckets: " + std::to_string(downsampler.series_count()) +
          " series so far, of " + std::to_string(options.buckets) +
          " buckets), the most one series answer holds: ask for fewer nodes or metrics, or a "
          "smaller width");
    }
    return Status::OK();
  });
  if (!read.ok()) return ErrorOf(res, read);
  Send(req, res, downsampler.Json());
}

void Dashboard::Rows(const http::Request& req, http::Response& res) {
  Query q;
  if (!ParseQuery(req, res, &q)) return;
  std::string format = req.has_param("format") ? req.get_param_value("format") : "jsonl";
  if (format != "jsonl" && format != "csv") {
    return Error(res, 400, "format must be jsonl or csv");
  }
  Result<std::shared_ptr<MetricsAnswer>> answer =
      c_.open_rows(*q.site, q.devices, q.metrics, q.start, q.end, q.now);
  if (!answer.ok()) return ErrorOf(res, answer.status());
  std::string name =
      "kwatt-" + q.site->uid +
      (req.has_param("job_id") ? "-job" + req.get_param_value("job_id") : std::string()) + "." +
      format;
  res.set_header("Content-Disposition", "attachment; filename=\"" + name + "\"");
  // The text sinks of `kwatt fetch -o` (rows/text_sinks.h), writing into a memory stream
  // whose bytes are sent chunk after chunk.
  struct Writer {
    char* buffer = nullptr;
    size_t size = 0;
    FILE* file = nullptr;
    std::unique_ptr<rows::TextSink> sink;
    ~Writer() {
      if (file) std::fclose(file);
      std::free(buffer);
    }
  };
  auto writer = std::make_shared<Writer>();
  writer->file = open_memstream(&writer->buffer, &writer->size);
  if (!writer->file) return Error(res, 500, "cannot open a memory stream");
  if (format == "csv") {
    writer->sink = std::make_unique<rows::CsvSink>(writer->file, "the answer");
  } else {
    writer->sink = std::make_unique<rows::JsonlSink>(writer->file, "the answer");
  }
  std::shared_ptr<MetricsAnswer> rows = *answer;
  std::string site = q.site->uid;
  res.set_chunked_content_provider(
      format == "csv" ? "text/csv; charset=utf-8" : "application/x-ndjson; charset=utf-8",
      [rows, writer, site](size_t, http::DataSink& sink) {
        RowBatch batch;
        const StringInterner* interner = nullptr;
        bool more = rows->NextRows(&batch, &interner, kBatchRows);
        if (!rows->status().ok()) return false;  // cut: never taken for a whole answer
        if (more) {
          if (!writer->sink->Write(site, batch, *interner).ok()) return false;
        }
        if (!writer->sink->Flush().ok() || std::fflush(writer->file) != 0) return false;
        if (writer->size > 0 && !sink.write(writer->buffer, writer->size)) return false;
        std::rewind(writer->file);
        if (!more) sink.done();
        return true;
      });
}

void Dashboard::NodeMetrics(const http::Request& req, http::Response& res) {
  const simulate::Site* site = SiteOr404(req.matches[1], res);
  if (!site) return;
  std::string uid = req.matches[2];
  const simulate::Node* node = c_.testbed->FindNode(*site, uid);
  if (!node) return Error(res, 404, "Node '" + uid + "' does not exist on site " + site->uid);
  ordered_json out;
  out["uid"] = node->uid;
  out["site"] = site->uid;
  out["cluster"] = node->cluster->uid;
  out["metrics"] = MetricsOfNode(*node);
  UnixNanos now = c_.now();
  out["now"] = Seconds(now);
  Result<std::map<std::string, ordered_json>> latest = LatestPower(*site, {node->uid}, now);
  if (!latest.ok()) return ErrorOf(res, latest.status());
  auto power = latest->find(node->uid);
  out["power"] = power == latest->end() ? ordered_json(nullptr) : power->second;
  // The jobs that ran on it, newest first: the page offers their windows, where a store of past
  // experiments has the node's rows.
  Result<std::vector<jobs::Job>> jobs = c_.jobs_of(site->uid);
  if (!jobs.ok()) return ErrorOf(res, jobs.status());
  std::vector<const jobs::Job*> its;
  for (const jobs::Job& job : *jobs) {
    if (std::find(job.nodes.begin(), job.nodes.end(), node->uid) != job.nodes.end()) {
      its.push_back(&job);
    }
  }
  std::sort(its.begin(), its.end(), [](const jobs::Job* a, const jobs::Job* b) {
    return a->started_at != b->started_at ? a->started_at > b->started_at : a->uid > b->uid;
  });
  if (its.size() > kNodeJobs) its.resize(kNodeJobs);
  ordered_json items = ordered_json::array();
  for (const jobs::Job* job : its) {
    ordered_json item = JobSummary(*job, now);
    item.erase("nodes");
    JobWindow w = WindowOf(*job, now);
    item["window"] = {{"start", Seconds(w.start)}, {"end", Seconds(w.end)}};
    items.push_back(std::move(item));
  }
  out["jobs"] = items;
  Send(req, res, Dump(out));
}

void Dashboard::Register(std::shared_ptr<Dashboard> dashboard, http::HardenedServer* http) {
  auto bind = [dashboard](void (Dashboard::*method)(const http::Request&, http::Response&)) {
    return [dashboard, method](const http::Request& req, http::Response& res) {
      ((*dashboard).*method)(req, res);
    };
  };
  http->Get("/dashboard",
            [](const http::Request&, http::Response& res) { res.set_redirect("/dashboard/"); });
  http->Get(R"(/dashboard/([A-Za-z0-9._-]*))", [](const http::Request& req, http::Response& res) {
    std::string name = req.matches[1];
    if (name.empty()) name = "index.html";
    const DashboardFile* file = FindDashboardFile(name);
    if (!file) {
      Error(res, 404, "No such file: /dashboard/" + name);
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    Send(req, res, std::string(file->content), std::string(file->content_type));
  });
  const std::string api = "/dashboard/api";
  http->Get(api + "/sites/?", bind(&Dashboard::SiteList));
  http->Get(api + R"(/sites/([^/]+)/?)", bind(&Dashboard::SitePage));
  http->Get(api + R"(/sites/([^/]+)/jobs/?)", bind(&Dashboard::JobList));
  http->Get(api + R"(/sites/([^/]+)/jobs/([^/]+)/?)", bind(&Dashboard::JobPage));
  http->Get(api + R"(/sites/([^/]+)/jobs/([^/]+)/energy/?)", bind(&Dashboard::Energy));
  http->Get(api + R"(/sites/([^/]+)/series/?)", bind(&Dashboard::SeriesAnswer));
  http->Get(api + R"(/sites/([^/]+)/rows/?)", bind(&Dashboard::Rows));
  http->Get(api + R"(/sites/([^/]+)/nodes/([^/]+)/?)", bind(&Dashboard::NodeMetrics));
}

}  // namespace

void AddDashboardRoutes(http::HardenedServer* http, DashboardContext context) {
  Dashboard::Register(std::make_shared<Dashboard>(std::move(context)), http);
}

}  // namespace kwatt::server::internal
