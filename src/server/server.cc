#include "kwatt/server/server.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "kwatt/core/text.h"
#include "kwatt/http/access_log.h"
#include "kwatt/http/hardened_server.h"
#include "kwatt/simulate/series.h"
#include "kwatt/simulate/testbed.h"
#include "src/server/dashboard.h"
#include "src/server/pushed.h"
#include "src/server/row_stream.h"
#include "src/server/store_rows.h"

namespace kwatt::server {

using nlohmann::ordered_json;

namespace {

// What PostgREST sends.
constexpr const char* kJson = "application/json; charset=utf-8";
constexpr size_t kChunkBytes = 128 * 1024;

// A JSON body. Texts from the request (a path, a parameter) are quoted in error messages and may
// not be UTF-8: bytes that are not are replaced (U+FFFD) instead of failing the whole answer
// (nlohmann's default throws, which took the server down: fuzz/regressions/server_query).
std::string Dump(const ordered_json& body) {
  return body.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

std::string PostgrestError(std::string_view code, std::string_view message,
                           std::string_view details = {}) {
  ordered_json body;
  body["hint"] = nullptr;
  body["details"] = details.empty() ? ordered_json(nullptr) : ordered_json(details);
  body["code"] = code;
  body["message"] = message;
  return Dump(body);
}

std::string ApiError(int code, std::string_view title, std::string_view message) {
  ordered_json body;
  body["code"] = code;
  body["message"] = message;
  body["title"] = title;
  return Dump(body);
}

// PostgreSQL's boolean input.
std::optional<bool> ParseBoolean(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), ::tolower);
  for (const char* yes : {"true", "t", "yes", "y", "on", "1"}) {
    if (text == yes) return true;
  }
  for (const char* no : {"false", "f", "no", "n", "off", "0"}) {
    if (text == no) return false;
  }
  return std::nullopt;
}

ordered_json Link(const std::string& rel, const std::string& href, bool collection) {
  return {{"rel", rel},
          {"href", href},
          {"type", collection ? "application/vnd.grid5000.collection+json"
                              : "application/vnd.grid5000.item+json"}};
}

ordered_json Collection(ordered_json items, const std::string& self, const std::string& parent,
                        int64_t total = -1, int64_t offset = 0) {
  ordered_json out;
  out["total"] = total >= 0 ? total : int64_t(items.size());
  out["offset"] = offset;
  out["items"] = std::move(items);
  out["links"] = {Link("self", self, true), Link("parent", parent, false)};
  return out;
}

// A store's job as the OAR API shows it: submitted when it started; the store keeps no walltime,
// so a running job's is the time it has run so far, plus a second (so that it shows as running).
jobs::Job FromStoredJob(jobs::Job job, UnixNanos now) {
  job.submitted_at = job.started_at;
  UnixNanos end = job.stopped_at ? *job.stopped_at : std::max(now, job.started_at);
  job.walltime_s = CeilDiv(end - job.started_at, kNanosPerSecond) + (job.stopped_at ? 0 : 1);
  return job;
}

// Sleeps until `until`, in slices; false as soon as the request was given up (its client left, or
// the server stops), so that --latency-ms and --rows-per-second never hold a shutdown back.
bool SleepUnlessAbandoned(std::chrono::steady_clock::time_point until) {
  while (std::chrono::steady_clock::now() < until) {
    if (http::HardenedServer::RequestAbandoned()) return false;
    std::this_thread::sleep_until(
        std::min(until, std::chrono::steady_clock::now() + std::chrono::milliseconds(50)));
  }
  return true;
}

// The transport's limits (kwatt/http/server_limits.h) of a server with these options.
http::ServerLimits LimitsOf(const ServerOptions& options) {
  http::ServerLimits limits;
  limits.threads = options.threads;
  limits.max_connections = options.max_connections;
  limits.max_connections_per_client = options.max_connections_per_client;
  return limits;
}

}  // namespace

struct Server::Impl {
  explicit Impl(const ServerOptions& o) : options(o), http(LimitsOf(o)) {}

  ServerOptions options;
  std::unique_ptr<simulate::Testbed> testbed;
  internal::PushedMetrics pushed;              // custom metrics (POST), kept in memory
  std::unique_ptr<internal::StorePool> store;  // --store: rows, jobs, catalogues and pushes
  kwatt::http::HardenedServer http;
  int port = 0;
  std::string prefix = "/stable";
  int64_t clock_shift_ns = 0;  // simulated now = real now + shift
  std::mutex random_mutex;
  std::mt19937_64 random;
  std::mutex stop_mutex;
  std::condition_variable stopped_cv;
  bool stopped = false;

  UnixNanos Now() const { return WallClockNow() + clock_shift_ns; }

  static std::string Prefix(const http::Request& req) { return "/" + req.matches[1].str(); }

  void SendJson(http::Response& res, const ordered_json& body, int status = 200) {
    res.status = status;
    res.set_content(Dump(body), kJson);
  }
  void NotFound(http::Response& res, const std::string& message) {
    res.status = 404;
    res.set_content(ApiError(404, "Not Found", message), kJson);
  }

  // A store error as an answer: 500 naming what failed (the store's message names no secret).
  void StoreError(http::Response& res, const Status& status) {
    res.status = 500;
    res.set_content(ApiError(500, "Internal Server Error", "the store: " + status.message()),
                    kJson);
  }

  // The job `uid` of `site`: the simulated one, or the store's. NotFound when there is none.
  Result<jobs::Job> FindJob(const std::string& site, int64_t uid) {
    if (!store) {
      const jobs::Job* job = testbed->jobs().Find(site, uid);
      if (!job) return Status::NotFound("no such job");
      return *job;
    }
    KWATT_ASSIGN_OR_RETURN(internal::StorePool::Lease lease, store->Acquire());
    KWATT_ASSIGN_OR_RETURN(jobs::Job stored, lease->GetJob(site, uid));
    return FromStoredJob(stored, Now());
  }

  // Every job of `site`.
  Result<std::vector<jobs::Job>> JobsOf(const std::string& site) {
    std::vector<jobs::Job> jobs;
    if (!store) {
      for (const jobs::Job& job : testbed->jobs().jobs) {
        if (job.site == site) jobs.push_back(job);
      }
      return jobs;
    }
    KWATT_ASSIGN_OR_RETURN(internal::StorePool::Lease lease, store->Acquire());
    KWATT_ASSIGN_OR_RETURN(std::vector<jobs::Job> stored,
                           lease->Jobs(site, std::numeric_limits<UnixNanos>::min(),
                                       std::numeric_limits<UnixNanos>::max()));
    UnixNanos now = Now();
    for (const jobs::Job& job : stored) jobs.push_back(FromStoredJob(job, now));
    return jobs;
  }

  const simulate::Site* SiteOr404(const http::Request& req, http::Response& res) {
    std::string uid = req.matches[2];
    const simulate::Site* site = testbed->FindSite(uid);
    if (!site) {
      std::string known;
      for (const auto& s : testbed->sites()) known += (known.empty() ? "" : ", ") + s->uid;
      NotFound(res, "Site '" + uid + "' does not exist (sites: " + known + ")");
    } else if (std::find(options.down_sites.begin(), options.down_sites.end(), uid) !=
               options.down_sites.end()) {
      res.status = 503;
      res.set_content(
          "<html><body><h1>503 Service Unavailable</h1>\nNo server is available to handle this "
          "request.\n</body></html>\n",
          "text/html");
      return nullptr;
    }
    return site;
  }

  ordered_json SiteJson(const simulate::Site& site, const std::string& prefix) {
    std::string self = prefix + "/sites/" + site.uid;
    ordered_json out;
    out["uid"] = site.uid;
    out["name"] = site.name;
    out["type"] = "site";
    out["links"] = {Link("self", self, false), Link("clusters", self + "/clusters", true),
                    Link("jobs", self + "/jobs", true), Link("metrics", self + "/metrics", true),
                    Link("parent", prefix, false)};
    return out;
  }

  // A cluster object; with a store, its catalogue is the store's when it has one for the cluster.
  Result<ordered_json> ClusterJson(const simulate::Cluster& cluster, const std::string& prefix) {
    ordered_json out = ordered_json::parse(cluster.document_json);
    if (store) {
      KWATT_ASSIGN_OR_RETURN(internal::StorePool::Lease lease, store->Acquire());
      Result<Catalogue> stored = lease->GetCatalogue(cluster.site->uid, cluster.uid);
      if (stored.ok()) {
        out["metrics"] = ordered_json::parse(stored->json());
      } else if (stored.status().code() != Status::Code::kNotFound) {
        return stored.status();
      }
    }
    out.erase("nodes");
    out["type"] = "cluster";
    // What EnOSlib's G5kConf reads of a cluster (the reference API has it for every cluster).
    if (!out.contains("exotic")) out["exotic"] = false;
    if (!out.contains("queues")) out["queues"] = {"default", "admin"};
    std::string self = prefix + "/sites/" + cluster.site->uid + "/clusters/" + cluster.uid;
    out["links"] = {Link("self", self, false), Link("nodes", self + "/nodes", true),
                    Link("parent", prefix + "/sites/" + cluster.site->uid, false)};
    return out;
  }

  ordered_json NodeJson(const simulate::Node& node, const std::string& prefix) {
    std::string parent = prefix + "/sites/" + node.site->uid + "/clusters/" + node.cluster->uid;
    ordered_json out;
    out["uid"] = node.uid;
    out["type"] = "node";
    out["cluster"] = node.cluster->uid;
    out["network_adapters"] = ordered_json::parse(node.network_adapters_json);
    out["pdu"] = ordered_json::parse(node.pdu_json);
    out["links"] = {Link("self", parent + "/nodes/" + node.uid, false),
                    Link("parent", parent, false)};
    return out;
  }

  // A job as the OAR API shows it at the simulated instant `now`.
  ordered_json JobJson(const jobs::Job& job, const std::string& prefix, UnixNanos now) {
    auto seconds = [](UnixNanos t) { return FloorDiv(t, kNanosPerSecond); };
    UnixNanos end = job.EffectiveEnd();
    std::string state = now < job.started_at ? "waiting" : now < end ? "running" : "terminated";
    ordered_json out;
    out["uid"] = job.uid;
    out["user"] = job.user;
    out["user_uid"] = job.user;
    out["name"] = job.name.empty() ? ordered_json(nullptr) : ordered_json(job.name);
    out["project"] = job.project;
    out["queue"] = job.queue;
    out["state"] = state;
    out["types"] = job.types;
    ordered_json nodes = ordered_json::array();
    for (const std::string& uid : job.nodes) {
      nodes.push_back(uid + "." + job.site + ".grid5000.fr");
    }
    out["assigned_nodes"] = nodes;
    out["submitted_at"] = seconds(job.submitted_at);
    out["scheduled_at"] = seconds(job.started_at);
    if (state != "waiting") out["started_at"] = seconds(job.started_at);
    if (state == "terminated") out["stopped_at"] = seconds(end);
    out["walltime"] = job.walltime_s;
    out["command"] = "";
    std::string self = prefix + "/sites/" + job.site + "/jobs/" + std::to_string(job.uid);
    out["links"] = {Link("self", self, false),
                    Link("parent", prefix + "/sites/" + job.site, false)};
    return out;
  }

  // The rows of `devices` x `metrics` (all when empty) over [start, end] seen at `now`: the
  // store's, or the simulated ones with the pushed ones.
  Result<std::shared_ptr<internal::MetricsAnswer>> OpenAnswer(const simulate::Site& site,
                                                              std::vector<std::string> devices,
                                                              std::vector<std::string> metrics,
                                                              UnixNanos start, UnixNanos end,
                                                              UnixNanos now, bool summary,
                                                              bool as_rate = false) {
    if (store) {
      KWATT_ASSIGN_OR_RETURN(internal::StorePool::Lease lease, store->Acquire());
      auto rows = std::make_shared<internal::StoreRowStream>(
          std::move(lease), std::move(devices), std::move(metrics), start, end, now, summary,
          internal::kStoreSliceRows, as_rate);
      KWATT_RETURN_IF_ERROR(rows->Begin());  // before the status: a failing store is a 500
      return std::shared_ptr<internal::MetricsAnswer>(std::move(rows));
    }
    std::vector<simulate::OutputSeries> series;
    for (const std::string& id : devices) {
      std::vector<simulate::OutputSeries> of_device;
      if (const simulate::DeviceRef* device = testbed->FindDevice(site, id)) {
        of_device = simulate::SeriesOfDevice(*testbed, site, *device, metrics);
      }
      for (simulate::OutputSeries& s : pushed.SeriesOf(site.uid, id, metrics)) {
        of_device.push_back(std::move(s));
      }
      for (simulate::OutputSeries& s : of_device) series.push_back(std::move(s));
    }
    return std::shared_ptr<internal::MetricsAnswer>(std::make_shared<internal::RowStream>(
        std::move(series), start, end, now, summary, as_rate));
  }

  void Routes();
  void GuardAndLogRoutes();
  void TestbedRoutes(const std::string& p, const std::string& site);
  void JobRoutes(const std::string& site);
  void DashboardRoutes();
  void Metrics(const http::Request& req, http::Response& res);
  bool InjectFailure(int64_t rows, http::Response& res, int64_t* cut_after);
  void Push(const http::Request& req, http::Response& res);
  bool PushIsFromThisOrigin(const http::Request& req, http::Response& res);
  Status PushToStore(const std::string& site, const std::vector<internal::PushedRow>& rows);
};

// Pushed rows into the store, all or none, durable when this returns OK. Their timestamps are
// written in Paris time, as Kwollect renders them.
Status Server::Impl::PushToStore(const std::string& site,
                                 const std::vector<internal::PushedRow>& rows) {
  (void)site;  // one store per site: doc/store.md
  StringInterner interner;
  RowBatch batch = internal::ToRowBatch(rows, &interner);
  KWATT_ASSIGN_OR_RETURN(internal::StorePool::Lease lease, store->Acquire());
  KWATT_RETURN_IF_ERROR(lease->Append(batch, interner));
  return lease->Flush();
}

// The API's paths: /stable or /sid (matches[1]), then a site (matches[2]).
void Server::Impl::Routes() {
  const std::string p = R"(/(stable|sid))";
  const std::string site = p + R"(/sites/([^/]+))";
  GuardAndLogRoutes();
  TestbedRoutes(p, site);
  JobRoutes(site);
  http.Get(site + "/metrics/?",
           [this](const http::Request& req, http::Response& res) { Metrics(req, res); });
  http.Post(site + "/metrics/?",
            [this](const http::Request& req, http::Response& res) { Push(req, res); });
  DashboardRoutes();
}

// Before every route: the simulated latency and the HTTP Basic check; after: the API's error
// body for 404. The access log is the server's (--log).
void Server::Impl::GuardAndLogRoutes() {
  http.set_pre_routing_handler([this](const http::Request& req, http::Response& res) {
    if (options.latency_ms > 0 &&
        !SleepUnlessAbandoned(std::chrono::steady_clock::now() +
                              std::chrono::milliseconds(options.latency_ms))) {
      res.status = 503;
      return true;
    }
    if (!options.auth.empty()) {
      size_t colon = options.auth.find(':');
      if (!req.basic_credentials_are(
              options.auth.substr(0, colon),
              colon == std::string::npos ? std::string() : options.auth.substr(colon + 1))) {
        res.status = 401;
        res.set_header("WWW-Authenticate", "Basic realm=\"Grid'5000 API\"");
        res.set_content(
            ApiError(401, "Unauthorized", "Authentication required: send HTTP Basic credentials"),
            kJson);
        return true;
      }
    }
    return false;
  });
  // The server's own refusals (413, 414, 431...) come with a body already.
  http.set_error_handler([](const http::Request& req, http::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      res.set_content(ApiError(404, "Not Found", "No such resource: " + req.path), kJson);
    }
  });
}

// The reference API's testbed: the grid, sites, clusters, nodes.
void Server::Impl::TestbedRoutes(const std::string& p, const std::string& site) {
  http.Get(p + "/?", [this](const http::Request& req, http::Response& res) {
    std::string prefix = Prefix(req);
    ordered_json out;
    out["uid"] = prefix.substr(1);
    out["type"] = "grid";
    out["links"] = {Link("self", prefix, false), Link("sites", prefix + "/sites", true)};
    SendJson(res, out);
  });
  http.Get(p + "/sites/?", [this](const http::Request& req, http::Response& res) {
    std::string prefix = Prefix(req);
    ordered_json items = ordered_json::array();
    for (const auto& site : testbed->sites()) items.push_back(SiteJson(*site, prefix));
    SendJson(res, Collection(items, prefix + "/sites", prefix));
  });
  http.Get(site + "/?", [this](const http::Request& req, http::Response& res) {
    if (const simulate::Site* s = SiteOr404(req, res)) SendJson(res, SiteJson(*s, Prefix(req)));
  });
  http.Get(site + "/clusters/?", [this](const http::Request& req, http::Response& res) {
    const simulate::Site* s = SiteOr404(req, res);
    if (!s) return;
    std::string prefix = Prefix(req);
    ordered_json items = ordered_json::array();
    for (const simulate::Cluster* cluster : s->clusters) {
      Result<ordered_json> item = ClusterJson(*cluster, prefix);
      if (!item.ok()) return StoreError(res, item.status());
      items.push_back(std::move(*item));
    }
    SendJson(res, Collection(items, prefix + "/sites/" + s->uid + "/clusters",
                             prefix + "/sites/" + s->uid));
  });
  auto cluster_or_404 = [this](const http::Request& req, http::Response& res,
                               const simulate::Site& s) -> const simulate::Cluster* {
    std::string uid = req.matches[3];
    const simulate::Cluster* cluster = testbed->FindCluster(s, uid);
    if (!cluster) {
      std::string known;
      for (const simulate::Cluster* c : s.clusters) known += (known.empty() ? "" : ", ") + c->uid;
      NotFound(res, "Cluster '" + uid + "' does not exist on site " + s.uid +
                        " (simulated clusters: " + known + ")");
    }
    return cluster;
  };
  http.Get(site + "/clusters/([^/]+)/?",
           [this, cluster_or_404](const http::Request& req, http::Response& res) {
             const simulate::Site* s = SiteOr404(req, res);
             if (!s) return;
             if (const simulate::Cluster* c = cluster_or_404(req, res, *s)) {
               Result<ordered_json> cluster = ClusterJson(*c, Prefix(req));
               if (!cluster.ok()) return StoreError(res, cluster.status());
               SendJson(res, *cluster);
             }
           });
  http.Get(site + "/clusters/([^/]+)/nodes/?",
           [this, cluster_or_404](const http::Request& req, http::Response& res) {
             const simulate::Site* s = SiteOr404(req, res);
             if (!s) return;
             const simulate::Cluster* c = cluster_or_404(req, res, *s);
             if (!c) return;
             std::string prefix = Prefix(req);
             ordered_json items = ordered_json::array();
             for (const simulate::Node* node : c->nodes) items.push_back(NodeJson(*node, prefix));
             std::string self = prefix + "/sites/" + s->uid + "/clusters/" + c->uid;
             SendJson(res, Collection(items, self + "/nodes", self));
           });
  http.Get(site + "/clusters/([^/]+)/nodes/([^/]+)/?",
           [this, cluster_or_404](const http::Request& req, http::Response& res) {
             const simulate::Site* s = SiteOr404(req, res);
             if (!s) return;
             const simulate::Cluster* c = cluster_or_404(req, res, *s);
             if (!c) return;
             std::string uid = req.matches[4];
             const simulate::Node* node = testbed->FindNode(*s, uid);
             if (!node || node->cluster != c) {
               NotFound(res,
                        "Node '" + uid + "' does not exist in cluster " + c->uid + " of " + s->uid);
               return;
             }
             SendJson(res, NodeJson(*node, Prefix(req)));
           });
}

// A site's jobs: the list (state, user, offset, limit) and one job.
void Server::Impl::JobRoutes(const std::string& site) {
  http.Get(site + "/jobs/?", [this](const http::Request& req, http::Response& res) {
    const simulate::Site* s = SiteOr404(req, res);
    if (!s) return;
    std::string prefix = Prefix(req);
    UnixNanos now = Now();
    std::vector<std::string> states = SplitCommaList(req.get_param_value("state"));
    std::string user = req.get_param_value("user");
    int64_t offset = 0, limit = 50;
    try {
      if (req.has_param("offset")) offset = std::stoll(req.get_param_value("offset"));
      if (req.has_param("limit")) limit = std::stoll(req.get_param_value("limit"));
    } catch (const std::exception&) {
      res.status = 400;
      res.set_content(ApiError(400, "Bad Request", "offset and limit must be integers"), kJson);
      return;
    }
    Result<std::vector<jobs::Job>> jobs = JobsOf(s->uid);
    if (!jobs.ok()) return StoreError(res, jobs.status());
    std::sort(jobs->begin(), jobs->end(),
              [](const jobs::Job& a, const jobs::Job& b) { return a.uid > b.uid; });
    ordered_json matching = ordered_json::array();
    for (const jobs::Job& job : *jobs) {
      ordered_json item = JobJson(job, prefix, now);
      if (!states.empty() && std::find(states.begin(), states.end(),
                                       item["state"].get<std::string>()) == states.end()) {
        continue;
      }
      if (!user.empty() && job.user != user) continue;
      matching.push_back(std::move(item));
    }
    ordered_json page = ordered_json::array();
    for (int64_t i = std::max<int64_t>(offset, 0);
         i < int64_t(matching.size()) && int64_t(page.size()) < limit; ++i) {
      page.push_back(matching[size_t(i)]);
    }
    SendJson(res, Collection(page, prefix + "/sites/" + s->uid + "/jobs",
                             prefix + "/sites/" + s->uid, int64_t(matching.size()), offset));
  });
  http.Get(site + "/jobs/([^/]+)/?", [this](const http::Request& req, http::Response& res) {
    const simulate::Site* s = SiteOr404(req, res);
    if (!s) return;
    std::string id = req.matches[3];
    std::optional<int64_t> uid;
    try {
      size_t used = 0;
      int64_t parsed = std::stoll(id, &used);
      if (used == id.size()) uid = parsed;
    } catch (const std::exception&) {
    }
    Result<jobs::Job> job =
        uid ? FindJob(s->uid, *uid) : Result<jobs::Job>(Status::NotFound("not a job id"));
    if (!job.ok() && job.status().code() != Status::Code::kNotFound) {
      return StoreError(res, job.status());
    }
    if (!job.ok()) {
      NotFound(res, "Job '" + id + "' does not exist on site " + s->uid);
      return;
    }
    SendJson(res, JobJson(*job, Prefix(req), Now()));
  });
}

// The dashboard, on what the API serves.
void Server::Impl::DashboardRoutes() {
  internal::DashboardContext dashboard;
  dashboard.testbed = testbed.get();
  dashboard.api_prefix = prefix;
  dashboard.now = [this] { return Now(); };
  dashboard.max_rows_read = options.dashboard_max_rows;
  dashboard.jobs_of = [this](const std::string& site) { return JobsOf(site); };
  dashboard.find_job = [this](const std::string& site, int64_t uid) { return FindJob(site, uid); };
  dashboard.open_rows = [this](const simulate::Site& site, std::vector<std::string> devices,
                               std::vector<std::string> metrics, UnixNanos start, UnixNanos end,
                               UnixNanos now) {
    return OpenAnswer(site, std::move(devices), std::move(metrics), start, end, now, false);
  };
  dashboard.catalogue = [this](const simulate::Cluster& cluster) -> Result<Catalogue> {
    if (store) {
      KWATT_ASSIGN_OR_RETURN(internal::StorePool::Lease lease, store->Acquire());
      Result<Catalogue> stored = lease->GetCatalogue(cluster.site->uid, cluster.uid);
      if (stored.ok() || stored.status().code() != Status::Code::kNotFound) return stored;
    }
    return cluster.catalogue;
  };
  internal::AddDashboardRoutes(&http, std::move(dashboard));
}

// --fail-rate: a failed answer now and then, as a loaded API gives. True when `res` is the
// failure (an error status page); else the answer goes on, maybe cut after *cut_after rows.
bool Server::Impl::InjectFailure(int64_t rows, http::Response& res, int64_t* cut_after) {
  std::lock_guard<std::mutex> lock(random_mutex);
  std::uniform_real_distribution<double> unit(0, 1);
  if (unit(random) < options.fail_rate) {
    if (options.fail_status > 0) {
      res.status = options.fail_status;
      int code = options.fail_status;
      std::string line = std::to_string(code) + (code == 500   ? " Internal Server Error"
                                                 : code == 502 ? " Bad Gateway"
                                                 : code == 503 ? " Service Unavailable"
                                                 : code == 504 ? " Gateway Timeout"
                                                               : " Error");
      res.set_content("<html><head><title>" + line + "</title></head><body><h1>" + line +
                          "</h1>\n</body></html>\n",
                      "text/html");
      return true;
    }
    if (rows < 2 || unit(random) < 0.5) {
      res.status = 503;
      res.set_content(
          "<html><body><h1>503 Service Unavailable</h1>\nNo server is available to handle this "
          "request.\n</body></html>\n",
          "text/html");
      return true;
    }
    *cut_after = std::uniform_int_distribution<int64_t>(1, rows - 1)(random);
  }
  return false;
}

void Server::Impl::Metrics(const http::Request& req, http::Response& res) {
  const simulate::Site* site = SiteOr404(req, res);
  if (!site) return;
  UnixNanos now = Now();
  auto bad = [&](int status, std::string_view code, std::string_view message,
                 std::string_view details = {}) {
    res.status = status;
    res.set_content(PostgrestError(code, message, details), kJson);
  };
  // Each comma-separated item as it is, as Kwollect's get_metrics splits it: "nova-1, taurus-3"
  // names " taurus-3", which no device is (no rows for it, as on Grid'5000).
  auto all_values = [&](const char* key) {
    std::vector<std::string> out;
    auto range = req.params.equal_range(key);
    for (auto it = range.first; it != range.second; ++it) {
      std::string_view text = it->second;
      for (size_t begin = 0;;) {
        const size_t comma = std::min(text.find(',', begin), text.size());
        if (comma > begin) out.emplace_back(text.substr(begin, comma - begin));
        if (comma == text.size()) break;
        begin = comma + 1;
      }
    }
    return out;
  };
  std::vector<std::string> devices;
  for (const char* key : {"nodes", "devices"}) {
    for (std::string& item : all_values(key)) {
      item = item.substr(0, item.find('.'));
      if (std::find(devices.begin(), devices.end(), item) == devices.end()) {
        devices.push_back(std::move(item));
      }
    }
  }
  std::vector<std::string> metrics = all_values("metrics");
  bool summary = false, as_rate = false;
  for (auto [key, slot] : {std::pair{"summary", &summary}, std::pair{"as_rate", &as_rate}}) {
    if (!req.has_param(key)) continue;
    std::optional<bool> value = ParseBoolean(req.get_param_value(key));
    if (!value) {
      bad(400, "22P02",
          "invalid input syntax for type boolean: \"" + req.get_param_value(key) + "\"");
      return;
    }
    *slot = *value;
  }
  std::optional<UnixNanos> start, end;
  for (auto [key, slot] : {std::pair{"start_time", &start}, std::pair{"end_time", &end}}) {
    if (!req.has_param(key)) continue;
    std::string text = req.get_param_value(key);
    Result<UnixNanos> t = ParseKwollectTimeParameter(text);
    if (!t.ok()) {
      bad(400, "22007", "invalid input syntax for type timestamp with time zone: \"" + text + "\"",
          std::string(key) + ": " + t.status().message());
      return;
    }
    *slot = *t;
  }
  if (req.has_param("job_id")) {
    std::string id = req.get_param_value("job_id");
    int64_t uid = 0;
    try {
      size_t used = 0;
      uid = std::stoll(id, &used);
      if (used != id.size()) throw std::invalid_argument(id);
    } catch (const std::exception&) {
      bad(400, "22P02", "invalid input syntax for type integer: \"" + id + "\"");
      return;
    }
    Result<jobs::Job> job = FindJob(site->uid, uid);
    if (!job.ok() && job.status().code() != Status::Code::kNotFound) {
      return StoreError(res, job.status());
    }
    if (!job.ok()) {
      res.status = 404;
      res.set_content(PostgrestError("P0001", "Job " + id + " not found on site " + site->uid),
                      kJson);
      return;
    }
    if (devices.empty()) devices = job->nodes;
    if (!start) start = job->started_at;
    if (!end) end = std::min(job->EffectiveEnd(), now);
  } else if (devices.empty()) {
    // Kwollect's plpy.error: an internal error (XX000), which PostgREST answers with a 500.
    bad(500, "XX000", "plpy.Error: Missing 'devices', 'nodes' or 'job_id' argument");
    return;
  }
  constexpr int64_t kDefaultSpan = 300 * kNanosPerSecond;
  if (!start && !end) end = now;
  if (!start) start = *end - kDefaultSpan;
  if (!end) end = *start + kDefaultSpan;

  // Kwollect matches ids exactly: an unknown id just has no rows.
  Result<std::shared_ptr<internal::MetricsAnswer>> opened = OpenAnswer(
      *site, std::move(devices), std::move(metrics), *start, *end, now, summary, as_rate);
  if (!opened.ok()) return StoreError(res, opened.status());
  std::shared_ptr<internal::MetricsAnswer> stream = std::move(*opened);
  // The rows are counted only when the row limit or failures need it (a store reads them for it).
  int64_t rows = 0;
  if (options.max_rows > 0 || options.fail_rate > 0) {
    Result<int64_t> counted = stream->CountRows();
    if (!counted.ok()) return StoreError(res, counted.status());
    rows = *counted;
  }
  if (options.max_rows > 0 && rows > options.max_rows) {
    bad(500, "P0001", "Request timeout, too much data to process.");
    return;
  }
  int64_t cut_after = -1;  // rows after which the connection is cut
  if (options.fail_rate > 0 && InjectFailure(rows, res, &cut_after)) return;
  int64_t pace = options.rows_per_second;
  auto began = std::chrono::steady_clock::now();
  res.set_chunked_content_provider(kJson, [stream, cut_after, pace, began, buffer = std::string()](
                                              size_t, http::DataSink& sink) mutable {
    buffer.clear();
    bool more = stream->Next(&buffer, pace > 0 ? kChunkBytes / 16 : kChunkBytes);
    if (!stream->status().ok()) {
      // The rows cannot be read: send what was made and cut the answer, unclosed, so that no
      // client takes it for a complete one.
      std::fprintf(stderr, "kwatt serve: a metrics answer was cut after %lld rows: %s\n",
                   static_cast<long long>(stream->rows_written()),
                   stream->status().message().c_str());
      if (!buffer.empty()) sink.write(buffer.data(), buffer.size());
      return false;
    }
    if (pace > 0) {  // the rows written so far are due at rows / pace seconds
      auto due = began + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(double(stream->rows_written()) / pace));
      if (!SleepUnlessAbandoned(due)) return false;
    }
    if (cut_after >= 0 && stream->rows_written() >= cut_after) {
      // Send what was made, then drop the connection in the middle of the body.
      size_t half = buffer.size() / 2;
      if (half > 0) sink.write(buffer.data(), half);
      return false;
    }
    // Handed over whole: the provider keeps no buffer while its client reads the last piece.
    if (!buffer.empty() && !sink.write(std::move(buffer))) return false;
    if (!more || stream->finished()) sink.done();
    return true;
  });
}

// A browser logged into this server (its cached Basic credentials) would send them with a POST
// that any other web page makes: a form, or a fetch() without CORS. Such a page can send neither
// `Content-Type: application/json` (that needs a CORS preflight, which this server never grants)
// nor another Origin than its own; scripts and tools send no Origin.
bool Server::Impl::PushIsFromThisOrigin(const http::Request& req, http::Response& res) {
  std::string type = req.get_header_value("Content-Type");
  type = std::string(TrimBlanks(std::string_view(type).substr(0, type.find(';'))));
  std::transform(type.begin(), type.end(), type.begin(), ::tolower);
  if (type != "application/json") {
    res.status = 415;
    res.set_content(
        ApiError(415, "Unsupported Media Type",
                 "a push is a JSON array of rows sent with Content-Type: application/json; this "
                 "one has " +
                     (type.empty() ? std::string("none") : "\"" + type + "\"") +
                     ", which any web page can send through a logged-in browser"),
        kJson);
    return false;
  }
  if (!req.has_header("Origin")) return true;
  std::string origin = req.get_header_value("Origin");
  std::string host = req.get_header_value("Host");
  auto lower = [](std::string text) {
    std::transform(text.begin(), text.end(), text.begin(), ::tolower);
    return text;
  };
  if (!host.empty() &&
      (lower(origin) == "http://" + lower(host) || lower(origin) == "https://" + lower(host))) {
    return true;
  }
  res.status = 403;
  res.set_content(ApiError(403, "Forbidden",
                           "a push from another web page (Origin: " + origin +
                               ") is refused: this server is http://" + host +
                               "; push from a script or a tool, which sends no Origin"),
                  kJson);
  return false;
}

void Server::Impl::Push(const http::Request& req, http::Response& res) {
  if (options.auth.empty()) {
    // Anyone could write into an open server: pushing is for a server that checks who writes.
    res.status = 403;
    res.set_content(ApiError(403, "Forbidden",
                             "this server takes no pushed metrics: start it with --auth "
                             "USER:PASSWORD, and push with those credentials"),
                    kJson);
    return;
  }
  if (!PushIsFromThisOrigin(req, res)) return;
  const simulate::Site* site = SiteOr404(req, res);
  if (!site) return;
  Result<std::vector<internal::PushedRow>> rows = internal::ParsePushedRows(req.body, Now());
  if (!rows.ok()) {
    res.status = 400;
    res.set_content(PostgrestError("22023", rows.status().message()), kJson);
    return;
  }
  Status stored = store ? PushToStore(site->uid, *rows) : pushed.Add(site->uid, *rows);
  if (!stored.ok()) {
    if (stored.code() == Status::Code::kInvalidArgument) {
      res.status = 400;
      res.set_content(PostgrestError("22023", stored.message()), kJson);
    } else if (store) {
      StoreError(res, stored);
    } else {
      res.status = 507;
      res.set_content(ApiError(507, "Insufficient Storage", stored.message()), kJson);
    }
    return;
  }
  ordered_json body;
  body["stored"] = rows->size();
  SendJson(res, body, 201);
}

Result<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  jobs::JobSet jobs;
  if (!options.store_uri.empty() && !options.jobs_file.empty()) {
    return Status::InvalidArgument(
        "--jobs describes simulated jobs: with --store, the jobs are the store's (kwatt import "
        "puts an archive's job there)");
  }
  if (!options.jobs_file.empty()) {
    Result<jobs::JobSet> loaded = jobs::JobSet::Load(options.jobs_file);
    if (!loaded.ok()) return loaded.status();
    jobs = std::move(*loaded);
  }
  if (options.port < 0 || options.port > 65535) {
    return Status::InvalidArgument("--port " + std::to_string(options.port) +
                                   " is not a TCP port: give 1 to 65535, or 0 for any free port");
  }
  if (!(options.fail_rate >= 0 && options.fail_rate <= 1)) {
    return Status::InvalidArgument("--fail-rate must be a number from 0 to 1");
  }
  if (options.threads < 1 || options.threads > http::kMaxThreads) {
    return Status::InvalidArgument("--threads " + std::to_string(options.threads) + ": give 1 to " +
                                   std::to_string(http::kMaxThreads));
  }
  if (options.max_rows < 0 || options.latency_ms < 0 || options.rows_per_second < 0) {
    return Status::InvalidArgument(
        "--max-rows, --latency-ms and --rows-per-second must be 0 or more");
  }
  if (options.fail_status != 0 && (options.fail_status < 400 || options.fail_status > 599)) {
    return Status::InvalidArgument("--fail-status must be an HTTP error status, 400 to 599");
  }
  if (!options.auth.empty() &&
      (options.auth.find(':') == std::string::npos || options.auth.find(':') == 0)) {
    return Status::InvalidArgument("--auth must be USER:PASSWORD, with a user before the ':'");
  }
  simulate::Testbed::Options testbed_options;
  testbed_options.seed = options.seed;
  testbed_options.reference_dir = options.reference_dir;
  testbed_options.description_file = options.testbed_file;
  Result<std::unique_ptr<simulate::Testbed>> testbed =
      simulate::Testbed::Build(testbed_options, std::move(jobs));
  if (!testbed.ok()) return testbed.status();

  auto impl = std::make_unique<Impl>(options);
  impl->testbed = std::move(*testbed);
  impl->random.seed(options.seed);
  if (!options.store_uri.empty()) {
    Result<std::unique_ptr<internal::StorePool>> pool =
        internal::StorePool::Open(options.store_uri, size_t(std::max(1, options.threads)));
    if (!pool.ok()) return pool.status();
    impl->store = std::move(*pool);
  }
  if (options.start_clock_at) {
    impl->clock_shift_ns = *options.start_clock_at - WallClockNow();
  }
  impl->Routes();
  if (!options.access_log.empty()) {
    KWATT_ASSIGN_OR_RETURN(std::shared_ptr<http::AccessLog> log,
                           http::AccessLog::Open(options.access_log));
    impl->http.set_access_log(std::move(log));
  }
  Result<int> port = impl->http.Bind(options.host, options.port);
  if (!port.ok()) return port.status();
  impl->port = *port;
  KWATT_RETURN_IF_ERROR(impl->http.Serve());
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Stop(); }

int Server::port() const { return impl_->port; }

// "http://HOST:PORT", HOST as a client reaches it.
static std::string Origin(const std::string& listened_host, int port) {
  std::string host = listened_host == "0.0.0.0" ? "127.0.0.1" : listened_host;
  return "http://" + host + ":" + std::to_string(port);
}

std::string Server::base_url() const {
  return Origin(impl_->options.host, impl_->port) + "/stable";
}

std::string Server::dashboard_url() const {
  return Origin(impl_->options.host, impl_->port) + "/dashboard/";
}

void Server::Stop() {
  impl_->http.Shutdown();
  std::lock_guard<std::mutex> lock(impl_->stop_mutex);
  impl_->stopped = true;
  impl_->stopped_cv.notify_all();
}

void Server::Wait() {
  std::unique_lock<std::mutex> lock(impl_->stop_mutex);
  impl_->stopped_cv.wait(lock, [this] { return impl_->stopped; });
}

}  // namespace kwatt::server
