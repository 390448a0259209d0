#include "kwatt/kwollect/fetch.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "kwatt/core/catalogue.h"
#include "kwatt/core/row_parser.h"
#include "kwatt/core/row_rates.h"
#include "kwatt/core/text.h"
#include "kwatt/http/transport.h"
#include "kwatt/kwollect/http.h"
#include "src/kwollect/fetcher.h"
#include "src/kwollect/planner.h"

namespace kwatt::kwollect {

using nlohmann::json;

namespace {

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string Join(const std::vector<std::string>& items, char separator = ',') {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out.push_back(separator);
    out += item;
  }
  return out;
}

// ---- resolving the query against the reference and jobs APIs ---------------------------------

using internal::SitePlanInput;

bool IsBlank(const std::string& text) {
  return text.find_first_not_of(" \t\r\n") == std::string::npos;
}

Result<json> GetJson(const ClientOptions& options, const std::string& url) {
  Result<http::ClientResponse> response = http::GetSmall(HttpSettings(options), url);
  if (!response.ok()) return response.status();
  if (response->status != 200) return HttpError(*response, url, options);
  if (IsBlank(response->body)) {
    return Status::Corruption("empty answer (HTTP 200 without a body) from " + http::Redact(url) +
                              ": is " + http::Redact(options.api_url) +
                              " a Grid'5000 API? (e.g. https://api.grid5000.fr/stable)");
  }
  json doc = json::parse(response->body, nullptr, false);
  if (doc.is_discarded()) {
    return Status::Corruption("malformed JSON from " + http::Redact(url));
  }
  return doc;
}

bool EndsWith(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The sites the API lists. When it lists none (its /sites is not found or not a list of sites),
// the API URL itself is wrong, and the error says so.
Result<std::vector<std::string>> ListSites(const ClientOptions& options) {
  std::string url = options.api_url + "/sites";
  Result<json> sites = GetJson(options, url);
  Status problem = sites.status();
  if (sites.ok()) {
    const json* items =
        sites->is_object() && sites->contains("items") ? &(*sites)["items"] : nullptr;
    if (items && items->is_array()) {
      std::vector<std::string> uids;
      for (const json& site : *items) {
        if (site.is_object() && site.contains("uid") && site["uid"].is_string()) {
          uids.push_back(site["uid"].get<std::string>());
        }
      }
      if (!uids.empty()) return uids;
    }
    problem = Status::NotFound("GET " + http::Redact(url) + " lists no site");
  }
  if (problem.code() != Status::Code::kNotFound && problem.code() != Status::Code::kCorruption) {
    return problem;
  }
  bool api_like = EndsWith(options.api_url, "/stable") || EndsWith(options.api_url, "/sid");
  return Status::NotFound("the API URL " + http::Redact(options.api_url) +
                          " looks wrong: " + problem.message() +
                          (api_like ? std::string("")
                                    : "; it should end with /stable (e.g. "
                                      "https://api.grid5000.fr/stable)"));
}

Status ResolveJob(const ClientOptions& options, const FetchQuery& query, RowsReport* report) {
  const JobRef& job = *query.job;
  // Both go into the URL's path: a site that is not a name (lyon/../../sid) would reach outside
  // the API's jobs.
  bool site_is_name = !job.site.empty() && job.site.size() <= 64 &&
                      std::islower(static_cast<unsigned char>(job.site[0])) &&
                      std::all_of(job.site.begin(), job.site.end(), [](char c) {
                        return std::islower(static_cast<unsigned char>(c)) ||
                               std::isdigit(static_cast<unsigned char>(c)) || c == '-';
                      });
  if (!site_is_name) {
    return Status::InvalidArgument("job site \"" + job.site +
                                   "\" is not a site name (lowercase letters, digits and -, as "
                                   "lyon or nancy): give the job as SITE:ID, e.g. lyon:1234567");
  }
  if (job.id <= 0) {
    return Status::InvalidArgument("job id " + std::to_string(job.id) +
                                   " is not an OAR job id (a positive number): give the job as "
                                   "SITE:ID, e.g. lyon:1234567");
  }
  std::string url = options.api_url + "/sites/" + job.site + "/jobs/" + std::to_string(job.id);
  Result<json> doc = GetJson(options, url);
  if (!doc.ok()) {
    if (doc.status().code() == Status::Code::kNotFound) {
      // An unknown job, an unknown site, or not an API at all.
      Result<std::vector<std::string>> sites = ListSites(options);
      if (!sites.ok()) return sites.status();
      if (std::find(sites->begin(), sites->end(), job.site) == sites->end()) {
        return Status::NotFound("job " + job.site + ":" + std::to_string(job.id) +
                                ": unknown site \"" + job.site + "\" (sites: " + Join(*sites, ' ') +
                                ")");
      }
      return Status::NotFound("job " + std::to_string(job.id) + " not found on site " + job.site);
    }
    return doc.status();
  }
  if (!doc->contains("started_at") || !(*doc)["started_at"].is_number()) {
    return Status::InvalidArgument("job " + job.site + ":" + std::to_string(job.id) +
                                   " has not started (state " + doc->value("state", "?") +
                                   "): nothing to fetch yet");
  }
  UnixNanos started = (*doc)["started_at"].get<int64_t>() * kNanosPerSecond;
  bool running = !(doc->contains("stopped_at") && (*doc)["stopped_at"].is_number());
  UnixNanos stopped =
      running ? WallClockNow() : (*doc)["stopped_at"].get<int64_t>() * kNanosPerSecond;
  // The query's bounds narrow the job's window, never widen it: clipped to it, and a window
  // that does not meet the job's at all is refused.
  std::string name = "job " + job.site + ":" + std::to_string(job.id);
  std::string window = " (" + FormatUtcTimestamp(started) + " .. " + FormatUtcTimestamp(stopped) +
                       (running ? ", running)" : ")");
  if (query.start && *query.start > stopped) {
    return Status::InvalidArgument("the start " + FormatUtcTimestamp(*query.start) +
                                   " is after the end of " + name + window +
                                   ": a start and end narrow the job's window");
  }
  if (query.end && *query.end < started) {
    return Status::InvalidArgument("the end " + FormatUtcTimestamp(*query.end) +
                                   " is before the start of " + name + window +
                                   ": a start and end narrow the job's window");
  }
  report->start = std::max(query.start.value_or(started), started);
  report->end = std::min(query.end.value_or(stopped), stopped);
  for (const json& type : doc->value("types", json::array())) {
    if (type.is_string()) report->job_types.push_back(type.get<std::string>());
  }
  if (doc->contains("user") && (*doc)["user"].is_string()) report->job_user = (*doc)["user"];
  report->job_started = started;
  if (!running) report->job_stopped = stopped;
  std::vector<NodeName> job_nodes;
  for (const json& fqdn : doc->value("assigned_nodes", json::array())) {
    Result<NodeName> node = ParseNodeName(fqdn.get<std::string>());
    if (node.ok()) job_nodes.push_back(*node);
  }
  if (query.nodes.empty()) {
    report->nodes = job_nodes;
  } else {
    for (const NodeName& node : query.nodes) {
      if (std::find(job_nodes.begin(), job_nodes.end(), node) == job_nodes.end()) {
        return Status::InvalidArgument("node " + node.Fqdn() + " is not a node of job " + job.site +
                                       ":" + std::to_string(job.id));
      }
    }
    report->nodes = query.nodes;
  }
  if (report->nodes.empty()) {
    return Status::InvalidArgument("job " + job.site + ":" + std::to_string(job.id) +
                                   " has no assigned node");
  }
  return Status::OK();
}

// An answer of the API whose JSON has fields of unexpected types: Corruption, never an exception
// out of the library.
Status UnexpectedAnswer(const ClientOptions& options, const json::exception& e) {
  return Status::Corruption("unexpected answer from the API at " + http::Redact(options.api_url) +
                            ": " + e.what());
}

// A PDU outlet's metrics, as Kwollect reads every outlet of a PDU the reference describes.
constexpr const char* kPduOutletMetric = "pdu_outlet_power_watt";

// Completes a cluster's reference document (`cluster`, its `metrics`) with the PDU outlet metric
// for the nodes whose reference `pdu` list names an outlet (an entry not of kind
// "wattmetre-only") when its catalogue does not list it: Kwollect reads every outlet of the PDUs
// the reference describes, and some clusters' lists omit it (nantes/ecotype, lille/chifflot),
// which made kwatt refuse a metric whose rows are there.
void AddPduOutletMetrics(const json& nodes, json* cluster) {
  if (!cluster->is_object() || !cluster->contains("metrics") || !(*cluster)["metrics"].is_array()) {
    return;
  }
  for (const json& metric : (*cluster)["metrics"]) {
    if (metric.is_object() && metric.contains("name") && metric["name"] == kPduOutletMetric) return;
  }
  json fed = json::array();
  for (const json& node : nodes) {
    if (!node.is_object() || !node.contains("pdu") || !node["pdu"].is_array()) continue;
    for (const json& entry : node["pdu"]) {
      const bool wattmeter = entry.is_object() && entry.contains("kind") &&
                             entry["kind"].is_string() && entry["kind"] == "wattmetre-only";
      if (entry.is_object() && !wattmeter) {
        if (node.contains("uid") && node["uid"].is_string()) fed.push_back(node["uid"]);
        break;
      }
    }
  }
  if (fed.empty()) return;
  (*cluster)["metrics"].push_back(
      {{"name", kPduOutletMetric},
       {"description",
        "Power consumption of node reported by PDU outlet, in watt (added by kwatt "
        "from the nodes' pdu lists: the cluster's catalogue does not list it)"},
       {"period", 1000},
       {"optional_period", 1000},
       {"source", {{"protocol", "pdu"}}},
       {"only_for", fed}});
}

Result<NodeLookup> LookUpNodesOrThrow(const ClientOptions& options,
                                      const std::vector<NodeName>& nodes) {
  NodeLookup lookup;
  for (const NodeName& node : nodes) lookup.nodes.push_back({node, node.Cluster(), ""});
  std::vector<std::string> sites;
  for (const NodeName& node : nodes) {
    if (std::find(sites.begin(), sites.end(), node.site) == sites.end()) sites.push_back(node.site);
  }
  for (const std::string& site : sites) {
    std::string site_url = options.api_url + "/sites/" + site;
    Result<json> site_doc = GetJson(options, site_url);
    std::string site_problem;
    bool site_unavailable = false;
    if (!site_doc.ok() && site_doc.status().code() == Status::Code::kUnavailable) {
      // One site down (its API answers 503, a proxy's page): its nodes stay unchecked, and the
      // other sites' are looked up.
      site_problem =
          "the API of site " + site + " could not be read: " + site_doc.status().message();
      site_unavailable = true;
    } else if (!site_doc.ok()) {
      if (site_doc.status().code() != Status::Code::kNotFound) return site_doc.status();
      // An unknown site, or not an API at all (then no site is known: that is the error).
      Result<std::vector<std::string>> sites = ListSites(options);
      if (!sites.ok()) return sites.status();
      site_problem = "unknown site \"" + site + "\" (sites: " + Join(*sites, ' ') + ")";
    }
    // cluster -> its nodes' uids, or why it cannot be used
    std::map<std::string, std::pair<std::vector<std::string>, std::string>> clusters;
    std::vector<std::string> unavailable_clusters;  // whose documents could not be read
    for (NodeInfo& info : lookup.nodes) {
      if (info.node.site != site) continue;
      if (!site_problem.empty()) {
        info.problem = site_problem;
        info.unknown_site = !site_unavailable;
        info.unavailable = site_unavailable;
        continue;
      }
      if (!clusters.count(info.cluster)) {
        std::string url = site_url + "/clusters/" + info.cluster;
        auto& [uids, problem] = clusters[info.cluster];
        Result<json> doc = GetJson(options, url);
        Result<json> node_docs = doc.ok() ? GetJson(options, url + "/nodes") : doc.status();
        for (const Result<json>* answer : {&doc, &node_docs}) {
          if (!answer->ok() && answer->status().code() == Status::Code::kUnavailable &&
              problem.empty()) {
            problem =
                "the API of site " + site + " could not be read: " + answer->status().message();
            unavailable_clusters.push_back(info.cluster);
          }
        }
        if (!problem.empty()) {
          // as for a site that is down: unchecked, not wrong
        } else if (!doc.ok()) {
          if (doc.status().code() != Status::Code::kNotFound) return doc.status();
          problem = "site " + site + " has no cluster \"" + info.cluster + "\"";
        } else {
          if (!node_docs.ok()) return node_docs.status();
          const json& items = node_docs->contains("items") ? (*node_docs)["items"] : *node_docs;
          for (const json& item : items) {
            if (item.is_object()) uids.push_back(item.value("uid", ""));
          }
          AddPduOutletMetrics(items, &*doc);
          Result<Catalogue> catalogue = Catalogue::FromJson(doc->dump());
          if (!catalogue.ok()) return catalogue.status().WithContext(http::Redact(url));
          lookup.catalogues.push_back({site + "/" + info.cluster, std::move(*catalogue)});
        }
      }
      const auto& [uids, problem] = clusters.at(info.cluster);
      if (!problem.empty()) {
        info.problem = problem;
        info.unavailable = std::find(unavailable_clusters.begin(), unavailable_clusters.end(),
                                     info.cluster) != unavailable_clusters.end();
      } else if (std::find(uids.begin(), uids.end(), info.node.uid) == uids.end()) {
        info.problem = "cluster " + info.cluster + " has " + std::to_string(uids.size()) +
                       " nodes (" + (uids.empty() ? "" : uids.front() + " ... " + uids.back()) +
                       ")";
      }
    }
  }
  return lookup;
}

}  // namespace

Result<NodeLookup> LookUpNodes(const ClientOptions& options, const std::vector<NodeName>& nodes) {
  KWATT_RETURN_IF_ERROR(ValidateClientOptions(options));
  try {
    return LookUpNodesOrThrow(options, nodes);
  } catch (const json::exception& e) {
    return UnexpectedAnswer(options, e);
  }
}

const Catalogue* NodeLookup::CatalogueOf(const NodeName& node) const {
  return FindCatalogue(catalogues, node.site + "/" + node.Cluster());
}

namespace {

// Every metric of `query` must be one that some node of the query reports according to its
// cluster's catalogue (`only_for` honoured); metrics of a prometheus group the catalogue does not
// list (prom_all_metrics) are taken on trust. NotFound naming the unknown ones otherwise.
Status CheckMetrics(const FetchQuery& query, const std::vector<NodeName>& nodes,
                    const ClusterCatalogues& catalogues) {
  if (query.metrics.empty() || !query.check_metrics) return Status::OK();
  std::vector<std::string> known;  // every metric id of the query's nodes, in catalogue order
  bool any_prometheus = false;     // a node has an unexpandable prometheus group
  std::vector<std::string> clusters;
  for (const NodeName& node : nodes) {
    const Catalogue& catalogue = *FindCatalogue(catalogues, node.site + "/" + node.Cluster());
    std::string cluster = node.Cluster() + " (" + node.site + ")";
    if (std::find(clusters.begin(), clusters.end(), cluster) == clusters.end()) {
      clusters.push_back(cluster);
    }
    for (const CatalogueMetric& metric : catalogue.MetricsOf(node.uid)) {
      if (std::find(known.begin(), known.end(), metric.metric_id) == known.end()) {
        known.push_back(metric.metric_id);
      }
    }
    for (const CatalogueEntry& entry : catalogue.entries()) {
      if (entry.AppliesTo(node.uid) && !entry.IsExpandable()) any_prometheus = true;
    }
  }
  std::vector<std::string> unknown;
  for (const std::string& metric : query.metrics) {
    if (std::find(known.begin(), known.end(), metric) != known.end()) continue;
    if (any_prometheus && metric.rfind("prom_", 0) == 0) continue;
    unknown.push_back(metric);
  }
  if (unknown.empty()) return Status::OK();
  std::string message = std::string(unknown.size() == 1 ? "unknown metric " : "unknown metrics ") +
                        Join(unknown, ' ') + " for cluster" + (clusters.size() == 1 ? " " : "s ") +
                        Join(clusters, ' ');
  // The nearest known id to the first unknown one, when it is a plausible typo.
  std::string nearest;
  size_t best = std::string::npos;
  for (const std::string& id : known) {
    size_t distance = EditDistance(unknown.front(), id);
    if (distance < best) {
      best = distance;
      nearest = id;
    }
  }
  if (!nearest.empty() && best <= std::max<size_t>(2, unknown.front().size() / 4)) {
    message += " (did you mean " + nearest + "?)";
  }
  std::vector<std::string> some(known.begin(), known.begin() + std::min<size_t>(known.size(), 12));
  message += known.empty() ? ": their catalogues list no metric"
                           : ": known metrics include " + Join(some, ' ') +
                                 (known.size() > some.size()
                                      ? " (" + std::to_string(known.size()) + " in all)"
                                      : "");
  message +=
      "; for custom metrics (pushed with POST, listed in no catalogue), add "
      "--custom-metrics (custom_metrics=True in Python's get_metrics and to_pandas)";
  return Status::NotFound(message);
}

Result<std::vector<SitePlanInput>> PlanSites(const FetchQuery& query, const RowsReport& report);

// Checks every site and node against the reference API and computes the nodes' expected rates.
Result<std::vector<SitePlanInput>> ResolveNodes(const ClientOptions& options,
                                                const FetchQuery& query, RowsReport& report) {
  Result<NodeLookup> lookup = LookUpNodes(options, report.nodes);
  if (!lookup.ok()) return lookup.status();
  // The nodes of sites whose API could not be read: not fetched, reported as such, while the
  // other sites' are (a partial result, not none).
  std::vector<MissingPiece> down;
  size_t checked = 0;
  for (const NodeInfo& info : lookup->nodes) {
    if (info.unavailable) {
      auto same = std::find_if(down.begin(), down.end(),
                               [&](const MissingPiece& p) { return p.site == info.node.site; });
      if (same == down.end()) {
        down.push_back({info.node.site,
                        {},
                        report.start,
                        report.end,
                        query.metrics,
                        Status::Unavailable(info.problem)});
        same = down.end() - 1;
      }
      same->nodes.push_back(info.node.uid);
      continue;
    }
    if (!info.problem.empty()) {
      return Status::NotFound(info.unknown_site ? info.problem
                                                : "unknown node " + info.node.uid + "." +
                                                      info.node.site + ": " + info.problem);
    }
    ++checked;
  }
  if (checked == 0 && !down.empty()) return down.front().error;
  for (MissingPiece& piece : down) report.failures.push_back(std::move(piece));
  report.catalogues = std::move(lookup->catalogues);
  return PlanSites(query, report);
}

// Whether `node`'s site could not be looked up (ResolveNodes): no catalogue, nothing planned.
bool SiteDown(const RowsReport& report, const NodeName& node) {
  return std::any_of(report.failures.begin(), report.failures.end(), [&](const MissingPiece& p) {
    return p.site == node.site && p.error.code() == Status::Code::kUnavailable &&
           std::find(p.nodes.begin(), p.nodes.end(), node.uid) != p.nodes.end() &&
           !FindCatalogue(report.catalogues, node.site + "/" + node.Cluster());
  });
}

// Each site's nodes and their expected rates, from the catalogues of `report` (every node's
// cluster must have one).
Result<std::vector<SitePlanInput>> PlanSites(const FetchQuery& query, const RowsReport& report) {
  std::vector<NodeName> nodes;  // those to fetch: every one but those of a site that is down
  for (const NodeName& node : report.nodes) {
    if (!SiteDown(report, node)) nodes.push_back(node);
  }
  KWATT_RETURN_IF_ERROR(CheckMetrics(query, nodes, report.catalogues));
  std::vector<SitePlanInput> sites;
  for (const NodeName& node : nodes) {
    auto it = std::find_if(sites.begin(), sites.end(),
                           [&](const SitePlanInput& s) { return s.site == node.site; });
    if (it == sites.end()) {
      sites.push_back({node.site, {}, {}});
      it = sites.end() - 1;
    }
    it->uids.push_back(node.uid);
    // Every node's cluster has a catalogue (checked by the callers).
    const Catalogue& catalogue =
        *FindCatalogue(report.catalogues, node.site + "/" + node.Cluster());
    std::vector<std::string>& ids = it->metric_ids[node.uid];
    for (const CatalogueMetric& metric : catalogue.MetricsOf(node.uid)) {
      if (std::find(ids.begin(), ids.end(), metric.metric_id) == ids.end()) {
        ids.push_back(metric.metric_id);
      }
    }
    // The most the node can report: every on-demand metric switched on (a monitor job the
    // query may not know of). Answers then tell how dense the data really is.
    it->rates.push_back(
        {node.uid, internal::ExpectedRowsPerSecond(catalogue, node.uid, query.metrics, {"monitor"},
                                                   true, query.summary)});
  }
  return sites;
}

// ---- the transfer loop -------------------------------------------------------------------------

struct Request {
  internal::PlannedRequest plan;
  enum class State { kPending, kRunning, kDone, kFailed } state = State::kPending;
  int attempts = 0;
  double not_before = 0;
  RowBatch batch;
  Status error;
};

struct SiteQueue {
  std::string site;
  std::list<Request> queue;  // in output order; the front is the next to deliver
  int running = 0;
  std::map<std::string, std::vector<std::string>> metric_ids;  // SitePlanInput::metric_ids
  // Rows per second and node in the latest finished answer. The plan assumes the most a node can
  // report (every on-demand metric on); answers tell what the data holds, and the requests not
  // yet sent are merged (sparse data) or cut again (denser than the catalogue says, e.g. a
  // series per CPU) to stay near the budget.
  double observed_density = 0;
  // In-order batches waiting while an earlier site is delivered: in memory up to a bound shared
  // by all sites, then (for this site, from then on) in a temporary file.
  std::deque<RowBatch> held;
  FILE* spool = nullptr;
  ~SiteQueue() {
    if (spool) std::fclose(spool);
  }
};

// A request in flight: where its answer goes.
struct Transfer {
  SiteQueue* site = nullptr;
  std::list<Request>::iterator request;
  std::unique_ptr<kwatt::internal::RowStreamParser> parser;
  RowBatch batch;
  Status parse_error;
};

// Rows of later sites kept in memory before spilling to a temporary file.
constexpr size_t kHeldBytesLimit = 256u << 20;

class Fetcher {
 public:
  Fetcher(const ClientOptions& options, const FetchQuery& query, http::Transport* transport,
          RowSink* sink, const ProgressCallback& progress, RowsReport* report)
      : options_(options),
        query_(query),
        sink_(sink),
        progress_(progress),
        report_(report),
        transport_(transport) {}

  Status Run(std::vector<internal::SitePlanInput> inputs) {
    for (internal::SitePlanInput& input : inputs) {
      auto site = std::make_unique<SiteQueue>();
      site->site = input.site;
      site->metric_ids = std::move(input.metric_ids);
      const int64_t margin = std::max<int64_t>(0, query_.margin);
      std::vector<internal::PlannedRequest> plan =
          internal::PlanSite(input.rates, query_.metrics, report_->start - margin,
                             report_->end + margin, options_.max_rows_per_request);
      for (internal::PlannedRequest& request : plan) {
        site->queue.push_back(Request{std::move(request)});
        ++total_requests_;
      }
      sites_.push_back(std::move(site));
    }
    started_ = SteadySeconds();
    std::vector<http::TransferOutcome> done;
    while (true) {
      StartReady();
      int timeout_ms = 100;
      if (transfers_.empty()) {
        double wait = NextWakeUp() - SteadySeconds();
        timeout_ms = int(std::clamp(wait * 1000, 1.0, 1000.0));
      }
      done.clear();
      transport_->Poll(timeout_ms, &done);
      for (http::TransferOutcome& outcome : done) {
        auto node = transfers_.extract(outcome.id);
        if (node.empty()) continue;
        Complete(*node.mapped(), outcome);
        RecycleBatch(std::move(node.mapped()->batch));
      }
      KWATT_RETURN_IF_ERROR(Deliver());
      KWATT_RETURN_IF_ERROR(Report(false));
      if (current_ >= sites_.size()) break;
    }
    KWATT_RETURN_IF_ERROR(Report(true));
    report_->seconds = SteadySeconds() - started_;
    return Status::OK();
  }

 private:
  double NextWakeUp() const {
    double next = SteadySeconds() + 1;
    for (const auto& site : sites_) {
      for (const Request& r : site->queue) {
        if (r.state == Request::State::kPending) next = std::min(next, r.not_before);
      }
    }
    return next;
  }

  void StartReady() {
    double now = SteadySeconds();
    for (auto& site : sites_) {
      // Bounds what waits in memory per site; the front's merge group is delivered whole, so all
      // of it may run.
      int window = std::max(2 * options_.max_per_site + 2, int(FrontRun(*site)) + 2);
      int position = 0;
      for (auto it = site->queue.begin(); it != site->queue.end() && position < window;
           ++it, ++position) {
        if (int(transfers_.size()) >= options_.max_concurrency) return;
        if (site->running >= options_.max_per_site) break;
        if (it->state == Request::State::kPending && it->not_before <= now) Start(*site, it);
      }
    }
  }

  std::string UrlOf(const SiteQueue& site, const internal::PlannedRequest& plan) const {
    std::string url = options_.api_url + "/sites/" + site.site +
                      "/metrics?nodes=" + http::UrlEncode(Join(plan.uids)) +
                      "&start_time=" + FormatEpochSeconds(plan.start) +
                      "&end_time=" + FormatEpochSeconds(plan.end);
    if (!plan.metrics.empty()) url += "&metrics=" + http::UrlEncode(Join(plan.metrics));
    if (query_.summary) url += "&summary=true";
    return url;
  }

  void Start(SiteQueue& site, std::list<Request>::iterator request) {
    auto transfer = std::make_unique<Transfer>();
    transfer->site = &site;
    transfer->request = request;
    transfer->parser = std::make_unique<kwatt::internal::RowStreamParser>(&interner_);
    transfer->batch = TakeBatch();
    Transfer* t = transfer.get();
    int64_t id = transport_->Start(UrlOf(site, request->plan), [this, t](std::string_view chunk) {
      report_->bytes += int64_t(chunk.size());
      t->parse_error = t->parser->Feed(chunk, &t->batch);
      return t->parse_error;  // a malformed body aborts the transfer
    });
    request->state = Request::State::kRunning;
    ++site.running;
    ++report_->requests;
    transfers_.emplace(id, std::move(transfer));
  }

  // The metrics URL of `site` without its query, for messages: the failure report says which
  // nodes, window and metrics, and pieces with the same error can then be merged.
  std::string MetricsUrl(const SiteQueue& site) const {
    return options_.api_url + "/sites/" + site.site + "/metrics";
  }

  // The metric ids of `uids`, in catalogue order: what "every metric" means when a request must
  // be split by metric.
  static std::vector<std::string> MetricIdsOf(const SiteQueue& site,
                                              const std::vector<std::string>& uids) {
    std::vector<std::string> ids;
    for (const std::string& uid : uids) {
      auto it = site.metric_ids.find(uid);
      if (it == site.metric_ids.end()) continue;
      for (const std::string& id : it->second) {
        if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
      }
    }
    return ids;
  }

  // Kwollect answers rows in time order (shared/KWOLLECT.md), and every reader of what kwatt writes
  // (archives above all) relies on it: an answer that is not is malformed, never delivered.
  static Status CheckTimeOrder(const RowBatch& batch) {
    for (size_t i = 1; i < batch.size(); ++i) {
      if (batch.time[i] < batch.time[i - 1]) {
        return Status::Corruption("rows out of time order (row " + std::to_string(i + 1) + " at " +
                                  FormatUtcTimestamp(batch.time[i]) + " after one at " +
                                  FormatUtcTimestamp(batch.time[i - 1]) +
                                  "): the API must answer rows ordered by timestamp");
      }
    }
    return Status::OK();
  }

  // Decides what a finished transfer leads to: rows delivered; Kwollect's "too much data" split
  // (down to a floor: 1 s, one node, one metric); transient failures (transport, cut or malformed
  // bodies, 429 after its Retry-After, 5xx that are not Kwollect's timeout) retried with backoff,
  // at most options.max_retries times; other answers failed at once.
  void Complete(Transfer& t, http::TransferOutcome& transferred) {
    Request& r = *t.request;
    SiteQueue& site = *t.site;
    --site.running;
    enum class Action { kDone, kRetry, kSplit, kFail } action;
    bool split_by_time = true;
    Status outcome;
    http::ClientResponse& response = transferred.response;
    if (response.status != 200) report_->bytes += int64_t(response.body.size());
    std::string url = MetricsUrl(site);
    std::string where = http::Redact(url);
    bool empty = transferred.body_bytes == 0;
    if (!t.parse_error.ok()) {
      action = Action::kRetry;
      outcome =
          Status::Corruption("malformed answer from " + where + ": " + t.parse_error.message());
    } else if (!transferred.transport.ok()) {
      action = Action::kRetry;
      outcome = transferred.transport;
    } else if (response.status == 200) {
      Status finished = empty ? Status::Corruption("HTTP 200 without a body") : t.parser->Finish();
      const char* what = empty ? "empty answer from " : "incomplete answer from ";
      if (finished.ok()) {
        finished = CheckTimeOrder(t.batch);
        what = "malformed answer from ";
      }
      if (finished.ok()) {
        action = Action::kDone;
      } else {
        action = Action::kRetry;
        outcome = Status::Corruption(what + where + ": " + finished.message());
      }
    } else {
      outcome = HttpError(response, url, options_);
      if (response.status == 414) {
        action = Action::kSplit;  // the URL is too long for the server: fewer nodes or metrics
        split_by_time = false;
      } else if (IsKwollectTimeout(response.status, response.body)) {
        action = Action::kSplit;  // too much data: ask for less
      } else if (response.retry_after_s > http::kMaxRetryAfterSeconds) {
        action = Action::kFail;  // the message says how long the server asked to wait
      } else if (http::IsTransientStatus(response.status) || response.status >= 500) {
        action = Action::kRetry;  // not about the size: asking for less would not help
      } else {
        action = Action::kFail;
      }
    }
    if (action == Action::kSplit) {
      std::vector<internal::PlannedRequest> halves =
          internal::SplitRequest(r.plan, MetricIdsOf(site, r.plan.uids), split_by_time);
      if (halves.empty()) {
        action = Action::kFail;
        outcome = outcome.WithContext(
            split_by_time ? "too much data for Kwollect even in the smallest piece kwatt asks for "
                            "(about a second of one node and one metric)"
                          : "the URL is too long for the server even for one node and one metric");
      } else {
        // Halves by metric are one window of the same nodes: delivered merged in time order.
        if (halves[0].metrics != r.plan.metrics && r.plan.merge_group == 0) {
          for (internal::PlannedRequest& half : halves) half.merge_group = next_merge_group_;
          ++next_merge_group_;
        }
        for (internal::PlannedRequest& half : halves) {
          site.queue.insert(t.request, Request{std::move(half)});
        }
        site.queue.erase(t.request);
        ++report_->splits;
        total_requests_ += int64_t(halves.size()) - 1;
        return;
      }
    }
    if (action == Action::kRetry) {
      if (++r.attempts > options_.max_retries) {
        action = Action::kFail;
        outcome = outcome.WithContext("gave up after " + std::to_string(r.attempts) + " attempts");
      } else {
        ++report_->retries;
        r.state = Request::State::kPending;
        r.not_before = SteadySeconds() +
                       http::RetryDelay(HttpSettings(options_), r.attempts, response.retry_after_s);
        return;
      }
    }
    ++requests_done_;
    if (action == Action::kFail) {
      r.state = Request::State::kFailed;
      r.error = outcome;
      return;
    }
    r.state = Request::State::kDone;
    r.batch = std::move(t.batch);
    report_->rows += int64_t(r.batch.size());
    // A piece split by metric from the catalogue tells nothing of the density of all metrics.
    if (r.plan.metrics == query_.metrics) {
      double seconds = std::max(1e-3, double(r.plan.end - r.plan.start) / 1e9);
      site.observed_density = double(r.batch.size()) / seconds / double(r.plan.uids.size());
      Replan(site);
    }
  }

  // Re-cuts the requests not yet sent from the density of the latest answer: merges adjacent
  // ones (same nodes and metrics) while their expected rows stay under the budget, and cuts those
  // expected over one and a half budgets.
  void Replan(SiteQueue& site) {
    double budget = double(options_.max_rows_per_request);
    auto expected = [&](const internal::PlannedRequest& plan) {
      return site.observed_density * double(plan.end - plan.start) / 1e9 * double(plan.uids.size());
    };
    auto open = [](const Request& r) {
      return r.state == Request::State::kPending && r.attempts == 0;
    };
    for (auto it = site.queue.begin(); it != site.queue.end();) {
      if (!open(*it)) {
        ++it;
        continue;
      }
      double rows = expected(it->plan);
      if (rows > 1.5 * budget) {
        std::vector<internal::PlannedRequest> parts =
            internal::SplitByTime(it->plan, int64_t(std::ceil(rows / budget)));
        if (parts.size() >= 2) {
          for (auto& part : parts) site.queue.insert(it, Request{std::move(part)});
          total_requests_ += int64_t(parts.size()) - 1;
          it = site.queue.erase(it);
          continue;
        }
      }
      // Merge the following adjacent requests while the whole stays under the budget.
      auto next = std::next(it);
      while (next != site.queue.end() && open(*next) && next->plan.uids == it->plan.uids &&
             next->plan.metrics == it->plan.metrics &&
             next->plan.merge_group == it->plan.merge_group &&
             next->plan.start == it->plan.end + kNanosPerMicro) {
        internal::PlannedRequest merged = it->plan;
        merged.end = next->plan.end;
        if (expected(merged) > budget) break;
        it->plan = std::move(merged);
        next = site.queue.erase(next);
        --total_requests_;
      }
      ++it;
    }
  }

  static bool Finished(const Request& r) {
    return r.state == Request::State::kDone || r.state == Request::State::kFailed;
  }

  // The requests at the front of `site` that are delivered together: the front one alone, or the
  // whole run of its merge group (adjacent in the queue); 0 when the queue is empty.
  static size_t FrontRun(const SiteQueue& site) {
    if (site.queue.empty()) return 0;
    uint64_t group = site.queue.front().plan.merge_group;
    if (group == 0) return 1;
    size_t n = 0;
    for (auto it = site.queue.begin(); it != site.queue.end() && it->plan.merge_group == group;
         ++it) {
      ++n;
    }
    return n;
  }

  // FrontRun(site) once every one of those requests is finished; 0 before.
  static size_t ReadyAtFront(const SiteQueue& site) {
    size_t n = FrontRun(site);
    auto it = site.queue.begin();
    for (size_t k = 0; k < n; ++k, ++it) {
      if (!Finished(*it)) return 0;
    }
    return n;
  }

  // The rows of `count` batches (each in time order) as one batch in time order; rows of equal
  // instants in the order of the batches.
  RowBatch MergeInTimeOrder(std::vector<RowBatch*> batches) {
    RowBatch merged = TakeBatch();
    std::vector<size_t> next(batches.size(), 0);
    while (true) {
      size_t best = batches.size();
      for (size_t k = 0; k < batches.size(); ++k) {
        if (next[k] >= batches[k]->size()) continue;
        if (best == batches.size() || batches[k]->time[next[k]] < batches[best]->time[next[best]]) {
          best = k;
        }
      }
      if (best == batches.size()) return merged;
      merged.AppendRow(*batches[best], next[best]++);
    }
  }

  // Hands finished requests to the sink in output order; later sites wait in their spool.
  Status Deliver() {
    while (true) {
      for (size_t i = current_; i < sites_.size(); ++i) {
        SiteQueue& site = *sites_[i];
        while (size_t n = ReadyAtFront(site)) {
          std::vector<RowBatch*> fetched;
          auto it = site.queue.begin();
          for (size_t k = 0; k < n; ++k, ++it) {
            Request& r = *it;
            if (r.state == Request::State::kFailed) {
              MissingPiece failure{site.site,  r.plan.uids,    r.plan.start,
                                   r.plan.end, r.plan.metrics, r.error};
              if (query_.as_rate) rates_.Forget(failure.nodes);
              KWATT_RETURN_IF_ERROR(sink_->Failed(failure));
              AddFailure(std::move(failure));
            } else {
              fetched.push_back(&r.batch);
            }
          }
          RowBatch merged;
          RowBatch* rows = fetched.empty() ? nullptr : fetched.front();
          if (fetched.size() > 1) {
            merged = MergeInTimeOrder(fetched);
            rows = &merged;
          }
          if (rows != nullptr) {
            if (query_.as_rate) rates_.Apply(rows, interner_);  // a site's rows, in time order
            if (i == current_) {
              KWATT_RETURN_IF_ERROR(sink_->Write(site.site, *rows, interner_));
            } else {
              KWATT_RETURN_IF_ERROR(Spool(site, *rows));
            }
          }
          if (fetched.size() > 1) RecycleBatch(std::move(merged));
          for (size_t k = 0; k < n; ++k) {
            RecycleBatch(std::move(site.queue.front().batch));
            site.queue.pop_front();
          }
        }
      }
      if (current_ >= sites_.size() || !sites_[current_]->queue.empty()) return Status::OK();
      ++current_;
      if (current_ < sites_.size()) KWATT_RETURN_IF_ERROR(Replay(*sites_[current_]));
    }
  }

  // Merges the failed piece `b` into `a` when both together are still one piece (nodes x
  // metrics x window) of one site that failed with the same error: adjacent time slices of the
  // same nodes and metrics, or the same window of other metrics (of the same nodes) or of other
  // nodes (with the same metrics).
  static bool Merge(MissingPiece& a, const MissingPiece& b) {
    if (a.site != b.site || a.error.code() != b.error.code() ||
        a.error.message() != b.error.message()) {
      return false;
    }
    bool same_window = a.start == b.start && a.end == b.end;
    if (a.nodes == b.nodes && a.metrics == b.metrics) {
      if (b.start == a.end + kNanosPerMicro) {
        a.end = b.end;
        return true;
      }
      if (a.start == b.end + kNanosPerMicro) {
        a.start = b.start;
        return true;
      }
      return false;
    }
    if (same_window && a.nodes == b.nodes && !a.metrics.empty() && !b.metrics.empty()) {
      a.metrics.insert(a.metrics.end(), b.metrics.begin(), b.metrics.end());
      return true;
    }
    if (same_window && a.metrics == b.metrics) {
      a.nodes.insert(a.nodes.end(), b.nodes.begin(), b.nodes.end());
      return true;
    }
    return false;
  }

  // Adds a failed piece to the report, merged with those it extends: a window split into many
  // pieces that all failed the same way is reported as a few failures, not thousands. (The sink
  // was told of the piece itself, where its rows would have been.)
  void AddFailure(MissingPiece failure) {
    std::vector<MissingPiece>& failures = report_->failures;
    failures.push_back(std::move(failure));
    size_t last = failures.size() - 1;
    // A merge may make the merged failure mergeable with another one: until none merges.
    for (bool merged = true; merged;) {
      merged = false;
      for (size_t i = 0; i < failures.size(); ++i) {
        if (i != last && Merge(failures[i], failures[last])) {
          failures.erase(failures.begin() + std::ptrdiff_t(last));
          last = i;
          merged = true;
          break;
        }
      }
    }
  }

  template <typename T>
  static bool WriteVector(FILE* file, const std::vector<T>& v) {
    return v.empty() || std::fwrite(v.data(), sizeof(T), v.size(), file) == v.size();
  }
  template <typename T>
  static bool ReadVector(FILE* file, std::vector<T>* v, size_t n) {
    v->resize(n);
    return n == 0 || std::fread(v->data(), sizeof(T), n, file) == n;
  }

  static size_t BatchBytes(const RowBatch& batch) {
    return batch.raw.size() +
           batch.size() * (sizeof(UnixNanos) + sizeof(int32_t) + 3 * sizeof(uint32_t) +
                           sizeof(double) + sizeof(uint32_t));
  }

  Status Spool(SiteQueue& site, RowBatch& batch) {
    size_t bytes = BatchBytes(batch);
    if (!site.spool && held_bytes_ + bytes <= kHeldBytesLimit) {
      held_bytes_ += bytes;
      site.held.push_back(std::move(batch));
      return Status::OK();
    }
    if (!site.spool && !(site.spool = std::tmpfile())) {
      return Status::IOError("cannot create a temporary file to hold site " + site.site +
                             "'s rows (TMPDIR full or not writable?)");
    }
    uint64_t header[2] = {batch.size(), batch.raw.size()};
    bool ok = std::fwrite(header, sizeof(header), 1, site.spool) == 1 &&
              WriteVector(site.spool, batch.time) && WriteVector(site.spool, batch.utc_offset) &&
              WriteVector(site.spool, batch.device) && WriteVector(site.spool, batch.metric) &&
              WriteVector(site.spool, batch.value) && WriteVector(site.spool, batch.labels) &&
              WriteVector(site.spool, batch.raw_end) &&
              std::fwrite(batch.raw.data(), 1, batch.raw.size(), site.spool) == batch.raw.size();
    if (!ok) return Status::IOError("cannot write the temporary file of site " + site.site);
    return Status::OK();
  }

  Status Replay(SiteQueue& site) {
    for (RowBatch& batch : site.held) {
      KWATT_RETURN_IF_ERROR(sink_->Write(site.site, batch, interner_));
      held_bytes_ -= BatchBytes(batch);
    }
    site.held.clear();
    if (!site.spool) return Status::OK();
    std::rewind(site.spool);
    RowBatch batch;
    uint64_t header[2];
    while (std::fread(header, sizeof(header), 1, site.spool) == 1) {
      size_t n = header[0];
      bool ok =
          ReadVector(site.spool, &batch.time, n) && ReadVector(site.spool, &batch.utc_offset, n) &&
          ReadVector(site.spool, &batch.device, n) && ReadVector(site.spool, &batch.metric, n) &&
          ReadVector(site.spool, &batch.value, n) && ReadVector(site.spool, &batch.labels, n) &&
          ReadVector(site.spool, &batch.raw_end, n);
      batch.raw.resize(header[1]);
      ok = ok && std::fread(batch.raw.data(), 1, header[1], site.spool) == header[1];
      if (!ok) return Status::IOError("cannot read back the temporary file of site " + site.site);
      KWATT_RETURN_IF_ERROR(sink_->Write(site.site, batch, interner_));
    }
    std::fclose(site.spool);
    site.spool = nullptr;
    return Status::OK();
  }

  // Batches are reused: a request's columns keep their capacity for the next one, instead of
  // being given back to the system and faulted in again (which cost more than parsing).
  RowBatch TakeBatch() {
    if (pool_.empty()) return RowBatch();
    RowBatch batch = std::move(pool_.back());
    pool_.pop_back();
    batch.Clear();
    return batch;
  }
  void RecycleBatch(RowBatch&& batch) {
    if (pool_.size() < size_t(options_.max_concurrency) + 2) pool_.push_back(std::move(batch));
  }

  Status Report(bool final) {
    if (!progress_) return Status::OK();
    double now = SteadySeconds();
    if (!final && now - last_progress_ < 0.2) return Status::OK();
    last_progress_ = now;
    return progress_(RowsProgress{requests_done_, total_requests_, report_->rows, report_->bytes,
                                  now - started_});
  }

  const ClientOptions& options_;
  const FetchQuery& query_;
  RowSink* sink_;
  const ProgressCallback& progress_;
  RowsReport* report_;
  http::Transport* transport_;
  StringInterner interner_;
  SeriesRates rates_;  // as_rate
  std::vector<std::unique_ptr<SiteQueue>> sites_;
  std::map<int64_t, std::unique_ptr<Transfer>> transfers_;  // by transport id
  std::vector<RowBatch> pool_;
  size_t held_bytes_ = 0;  // in SiteQueue::held, all sites
  size_t current_ = 0;     // the site being delivered to the sink
  int64_t total_requests_ = 0, requests_done_ = 0;
  // Merge groups given to halves split by metric (PlanSite numbers its own from 1).
  uint64_t next_merge_group_ = uint64_t(1) << 40;
  double started_ = 0, last_progress_ = 0;
};

}  // namespace

namespace internal {

Status RunFetcher(const ClientOptions& options, const FetchQuery& query,
                  std::vector<SitePlanInput> inputs, http::Transport* transport, RowSink* sink,
                  const ProgressCallback& progress, RowsReport* report) {
  Fetcher fetcher(options, query, transport, sink, progress, report);
  return fetcher.Run(std::move(inputs));
}

}  // namespace internal

namespace {

// Resolves the query (job, window, nodes, catalogues) and plans each site's nodes.
Result<std::vector<SitePlanInput>> ResolveAndPlanOrThrow(const ClientOptions& options,
                                                         const FetchQuery& query,
                                                         RowsReport* report) {
  if (query.job) {
    KWATT_RETURN_IF_ERROR(ResolveJob(options, query, report));
  } else {
    if (query.nodes.empty())
      return Status::InvalidArgument("no node to fetch: give nodes or a job");
    if (!query.start || !query.end) {
      return Status::InvalidArgument("a window is needed: give a start and an end, or a job");
    }
    report->nodes = query.nodes;
    report->start = *query.start;
    report->end = *query.end;
  }
  // A node named twice (nova-1.lyon and nova-1.lyon.grid5000.fr, by the user or in a job's
  // assigned nodes) is one node: fetched once, counted once.
  std::vector<NodeName> unique;
  for (const NodeName& node : report->nodes) {
    if (std::find(unique.begin(), unique.end(), node) == unique.end()) unique.push_back(node);
  }
  report->nodes = std::move(unique);
  report->summary = query.summary;
  if (report->end < report->start) {
    return Status::InvalidArgument("the window ends (" + FormatUtcTimestamp(report->end) +
                                   ") before it starts (" + FormatUtcTimestamp(report->start) +
                                   ")");
  }
  return ResolveNodes(options, query, *report);
}

Result<std::vector<SitePlanInput>> ResolveAndPlan(const ClientOptions& options,
                                                  const FetchQuery& query, RowsReport* report) {
  KWATT_RETURN_IF_ERROR(ValidateClientOptions(options));
  try {
    return ResolveAndPlanOrThrow(options, query, report);
  } catch (const json::exception& e) {
    return UnexpectedAnswer(options, e);
  }
}

}  // namespace

Result<RowsReport> Resolve(const ClientOptions& options, const FetchQuery& query) {
  RowsReport report;
  Result<std::vector<SitePlanInput>> sites = ResolveAndPlan(options, query, &report);
  if (!sites.ok()) return sites.status();
  return report;
}

namespace {

// Fetches the planned `sites` of a resolved `report` into `sink`.
Result<RowsReport> FetchPlanned(const ClientOptions& options, const FetchQuery& query,
                                Result<std::vector<SitePlanInput>> sites, RowsReport report,
                                RowSink* sink, const ProgressCallback& progress) {
  if (!sites.ok()) return sites.status();
  KWATT_RETURN_IF_ERROR(sink->Begin(report));
  // The nodes of a site that is down (ResolveNodes), as the sink hears of any piece not fetched.
  for (const MissingPiece& piece : report.failures) KWATT_RETURN_IF_ERROR(sink->Failed(piece));
  std::unique_ptr<http::Transport> transport = http::NewCurlTransport(HttpSettings(options));
  KWATT_RETURN_IF_ERROR(internal::RunFetcher(options, query, std::move(*sites), transport.get(),
                                             sink, progress, &report));
  return report;
}

}  // namespace

Result<RowsReport> Fetch(const ClientOptions& options, const FetchQuery& query, RowSink* sink,
                         const ProgressCallback& progress) {
  RowsReport report;
  Result<std::vector<SitePlanInput>> sites = ResolveAndPlan(options, query, &report);
  return FetchPlanned(options, query, std::move(sites), std::move(report), sink, progress);
}

Result<RowsReport> FetchResolved(const ClientOptions& options, const FetchQuery& query,
                                 const RowsReport& resolved, RowSink* sink,
                                 const ProgressCallback& progress) {
  KWATT_RETURN_IF_ERROR(ValidateClientOptions(options));
  if (query.job) {
    return Status::InvalidArgument("FetchResolved takes nodes and a window, not a job");
  }
  if (query.nodes.empty()) return Status::InvalidArgument("no node to fetch: give nodes");
  if (!query.start || !query.end || *query.end < *query.start) {
    return Status::InvalidArgument("FetchResolved needs a window: a start, and an end after it");
  }
  RowsReport report;
  report.nodes = query.nodes;
  report.start = *query.start;
  report.end = *query.end;
  report.catalogues = resolved.catalogues;
  report.summary = query.summary;
  for (const NodeName& node : report.nodes) {
    if (!FindCatalogue(report.catalogues, node.site + "/" + node.Cluster())) {
      return Status::InvalidArgument("node " + node.uid + "." + node.site +
                                     " was not resolved: give a RowsReport of Resolve or Fetch "
                                     "that names it");
    }
  }
  Result<std::vector<SitePlanInput>> sites = PlanSites(query, report);
  return FetchPlanned(options, query, std::move(sites), std::move(report), sink, progress);
}

}  // namespace kwatt::kwollect
