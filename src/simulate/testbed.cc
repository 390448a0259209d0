#include "kwatt/simulate/testbed.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "kwatt/core/text.h"
#include "kwatt/core/yaml_json.h"
#include "src/simulate/embedded_reference.h"

namespace kwatt::simulate {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// Reference files by relative path.
using FileMap = std::map<std::string, std::string>;

Result<FileMap> ReadReference(const std::string& dir) {
  FileMap files;
  if (dir.empty()) {
    for (const auto& [path, content] : internal::EmbeddedReferenceFiles()) {
      files.emplace(std::string(path), std::string(content));
    }
    return files;
  }
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(dir, error)) {
    return Status::NotFound("reference directory " + dir + " does not exist");
  }
  auto read = [&](const fs::path& path, const std::string& name) -> Status {
    std::ifstream in(path, std::ios::binary);
    if (!in) return Status::IOError("cannot read " + path.string());
    std::stringstream text;
    text << in.rdbuf();
    files.emplace(name, text.str());
    return Status::OK();
  };
  for (const char* name : {"sites.json", "wattmetre-mapping.json", "network-mapping.json"}) {
    KWATT_RETURN_IF_ERROR(read(fs::path(dir) / name, name));
  }
  for (const auto& entry : fs::directory_iterator(fs::path(dir) / "clusters", error)) {
    if (entry.path().extension() == ".json") {
      KWATT_RETURN_IF_ERROR(read(entry.path(), "clusters/" + entry.path().filename().string()));
    }
  }
  if (error) return Status::IOError("cannot list " + dir + "/clusters: " + error.message());
  return files;
}

// A node uid as kwatt's clients read it back from a name ("rack-12" in cluster "rack"): the
// cluster's uid, '-' and a number.
bool IsNodeOf(const std::string& cluster, const std::string& uid) {
  if (uid.size() <= cluster.size() + 1 || uid.compare(0, cluster.size(), cluster) != 0 ||
      uid[cluster.size()] != '-') {
    return false;
  }
  return uid.find_first_not_of("0123456789", cluster.size() + 1) == std::string::npos;
}

// A uid of a site or cluster: lowercase letters and digits, starting with a letter (what the
// node names, "uid.site.grid5000.fr", can carry).
bool IsPlainUid(const std::string& uid) {
  return !uid.empty() && uid[0] >= 'a' && uid[0] <= 'z' &&
         uid.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789") == std::string::npos;
}

// A testbed description (doc/store.md, "Describing a testbed") as the reference files it stands
// for: sites.json, one clusters/SITE-CLUSTER.json per cluster, no wattmeter or network mapping.
Result<FileMap> ReadDescription(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read the testbed description " + path);
  std::stringstream text;
  text << in.rdbuf();
  KWATT_ASSIGN_OR_RETURN(std::string converted, kwatt::internal::YamlToJson(text.str(), path));
  ordered_json doc = ordered_json::parse(converted);
  auto bad = [&](const std::string& where, const std::string& what) {
    return Status::InvalidArgument(path + ": " + where + " " + what);
  };
  if (!doc.is_object() || !doc.contains("sites") || !doc["sites"].is_array() ||
      doc["sites"].empty()) {
    return bad("the description", "should have \"sites\": a list of sites, each with its clusters");
  }
  FileMap files;
  ordered_json sites = ordered_json::array();
  std::set<std::string> site_uids;
  for (size_t s = 0; s < doc["sites"].size(); ++s) {
    const ordered_json& site = doc["sites"][s];
    std::string where = "sites[" + std::to_string(s) + "]";
    if (!site.is_object()) return bad(where, "should be a mapping (uid, name, clusters)");
    if (!site.contains("uid") || !site["uid"].is_string() || !IsPlainUid(site["uid"])) {
      return bad(where + ".uid", "should be lowercase letters and digits, e.g. \"mylab\"");
    }
    std::string uid = site["uid"];
    if (!site_uids.insert(uid).second) return bad(where + ".uid", "\"" + uid + "\" is given twice");
    if (site.contains("name") && !site["name"].is_string()) {
      return bad(where + ".name", "should be a text");
    }
    if (!site.contains("clusters") || !site["clusters"].is_array() || site["clusters"].empty()) {
      return bad(where + ".clusters", "should be a list of clusters");
    }
    ordered_json cluster_uids = ordered_json::array();
    for (size_t c = 0; c < site["clusters"].size(); ++c) {
      const ordered_json& cluster = site["clusters"][c];
      std::string at = where + ".clusters[" + std::to_string(c) + "]";
      if (!cluster.is_object()) return bad(at, "should be a mapping (uid, model, nodes, metrics)");
      if (!cluster.contains("uid") || !cluster["uid"].is_string() || !IsPlainUid(cluster["uid"])) {
        return bad(at + ".uid", "should be lowercase letters and digits, e.g. \"rack\"");
      }
      std::string cluster_uid = cluster["uid"];
      if (std::find(cluster_uids.begin(), cluster_uids.end(), cluster_uid) != cluster_uids.end()) {
        return bad(at + ".uid", "\"" + cluster_uid + "\" is given twice");
      }
      if (cluster.contains("model") && !cluster["model"].is_string()) {
        return bad(at + ".model", "should be a text");
      }
      if (!cluster.contains("nodes") || !cluster["nodes"].is_array() || cluster["nodes"].empty()) {
        return bad(at + ".nodes", "should be a list of node names");
      }
      ordered_json nodes = ordered_json::array();
      for (size_t n = 0; n < cluster["nodes"].size(); ++n) {
        const ordered_json& node = cluster["nodes"][n];
        if (!node.is_string() || !IsNodeOf(cluster_uid, node)) {
          return bad(at + ".nodes[" + std::to_string(n) + "]",
                     "should be the cluster's uid, '-' and a number (\"" + cluster_uid +
                         "-1\"), not " + node.dump());
        }
        if (std::find(nodes.begin(), nodes.end(), node) != nodes.end()) {
          return bad(at + ".nodes[" + std::to_string(n) + "]", node.dump() + " is given twice");
        }
        nodes.push_back(node);
      }
      if (cluster.contains("metrics") && !cluster["metrics"].is_array()) {
        return bad(at + ".metrics", "should be a list of metrics (name, period, ...)");
      }
      ordered_json document;
      document["uid"] = cluster_uid;
      document["model"] = cluster.value("model", "");
      document["metrics"] =
          cluster.contains("metrics") ? cluster["metrics"] : ordered_json::array();
      document["nodes"] = nodes;
      std::string document_text = document.dump();
      Result<Catalogue> catalogue = Catalogue::FromJson(document_text);
      if (!catalogue.ok()) {
        return bad(at + ".metrics:", catalogue.status().message());
      }
      files.emplace("clusters/" + uid + "-" + cluster_uid + ".json", std::move(document_text));
      cluster_uids.push_back(cluster_uid);
    }
    sites.push_back({{"uid", uid}, {"name", site.value("name", uid)}, {"clusters", cluster_uids}});
  }
  files.emplace("sites.json", sites.dump());
  files.emplace("wattmetre-mapping.json", R"({"wattmetre":{},"pdu_outlets":{}})");
  files.emplace("network-mapping.json", "{}");
  return files;
}

Result<json> ParseFile(const FileMap& files, const std::string& name) {
  auto it = files.find(name);
  if (it == files.end()) return Status::NotFound("reference data lacks " + name);
  json doc = json::parse(it->second, nullptr, false);
  if (doc.is_discarded()) return Status::Corruption("reference file " + name + " is not JSON");
  return doc;
}

std::string SamplerOf(const std::string& device_id, const std::string& suffix) {
  size_t at = device_id.rfind(suffix);
  return at == std::string::npos ? device_id : device_id.substr(0, at);
}

// Power shares of a node's feeds: one feed carries everything; two PSUs split the load nearly
// evenly, never exactly.
void AssignShares(std::vector<Feed>* feeds, uint64_t seed, const std::string& uid) {
  if (feeds->size() <= 1) return;
  double skew = 0.04 * (UnitFromHash(HashText(uid + "/psu", seed)) - 0.5);
  double n = double(feeds->size());
  for (size_t i = 0; i < feeds->size(); ++i) {
    (*feeds)[i].share = 1.0 / n + (i % 2 == 0 ? skew : -skew) / n;
  }
}

// What every node of a testbed is built from.
struct NodeSources {
  json& power;               // wattmetre-mapping.json
  const json& network;       // network-mapping.json
  const jobs::JobSet& jobs;  // the testbed's own jobs, which its nodes point to
  uint64_t seed;
};

// A node's wattmeter ports and PDU outlets (wattmetre-mapping.json), their power shares, and its
// reference "pdu" list: the outlets, then the wattmeter ports.
void AddPowerFeeds(const NodeSources& from, const std::string& site_uid, Node* node) {
  const json& watt = from.power["wattmetre"];
  if (watt.contains(site_uid) && watt[site_uid].contains(node->uid)) {
    for (const json& port : watt[site_uid][node->uid]) {
      std::string id = port.get<std::string>();
      node->wattmetre_ports.push_back(Feed{id, SamplerOf(id, "-port"), {}, 1.0, 0});
    }
  }
  const json& pdus = from.power["pdu_outlets"];
  json pdu_json = json::array();
  if (pdus.contains(site_uid) && pdus[site_uid].contains(node->uid)) {
    for (const json& outlet : pdus[site_uid][node->uid]) {
      Feed feed{outlet.value("device_id", ""), outlet.value("pdu", ""), {}, 1.0, 0};
      json outlet_labels = outlet.value("labels", json::object());
      for (auto& [key, value] : outlet_labels.items()) {
        if (key != "_device_alias") feed.labels.emplace_back(key, value.get<std::string>());
      }
      node->pdu_outlets.push_back(std::move(feed));
      pdu_json.push_back({{"uid", outlet.value("pdu", "")}, {"port", outlet.value("port", "")}});
    }
  }
  for (const Feed& port : node->wattmetre_ports) {
    pdu_json.push_back({{"uid", port.sampler},
                        {"port", port.device_id.substr(port.sampler.size() + 5)},
                        {"kind", "wattmetre-only"}});
  }
  node->pdu_json = pdu_json.dump();
  AssignShares(&node->wattmetre_ports, from.seed, node->uid);
  AssignShares(&node->pdu_outlets, from.seed, node->uid);
}

// A node's network adapters (network-mapping.json, under "SITE/CLUSTER"): the reference's adapter
// list without its "kwollect" part, the names of the mounted ones, and the switch ports that have
// network metrics.
void AddNetworkAdapters(const NodeSources& from, const std::string& net_key, Node* node) {
  ordered_json adapters = ordered_json::array();
  if (from.network.contains(net_key) && from.network[net_key].contains(node->uid)) {
    for (const json& adapter : from.network[net_key][node->uid]) {
      ordered_json copy;
      for (auto& [key, value] : adapter.items()) {
        if (key != "kwollect") copy[key] = value;
      }
      adapters.push_back(copy);
      if (adapter.value("mounted", false)) {
        node->interface_names.push_back(adapter.value("name", ""));
      }
      json kw = adapter.value("kwollect", json::object());
      if (!kw.value("switch_has_network_metrics", false)) continue;
      Feed feed{kw.value("device_id", ""),
                adapter.value("switch", ""),
                {},
                1.0,
                adapter.value("rate", 1e10)};
      json labels = kw.value("labels", json::object());
      if (labels.contains("interface")) {
        feed.labels.emplace_back("interface", labels["interface"].get<std::string>());
      }
      node->switch_ports.push_back(std::move(feed));
    }
  }
  node->network_adapters_json = adapters.dump();
}

// The node `uid` of `cluster`: its feeds, its adapters, its load model and its jobs (by start).
std::unique_ptr<Node> BuildNode(const NodeSources& from, const Site* site, const Cluster* cluster,
                                const NodeHardware& hardware, std::string uid) {
  auto node = std::make_unique<Node>();
  node->uid = std::move(uid);
  node->site = site;
  node->cluster = cluster;
  AddPowerFeeds(from, site->uid, node.get());
  AddNetworkAdapters(from, site->uid + "/" + cluster->uid, node.get());
  NodeHardware node_hardware = hardware;
  if (!node->switch_ports.empty()) node_hardware.link_bps = node->switch_ports[0].rate_bps;
  node->model = std::make_unique<NodeModel>(
      node->uid, node_hardware, LoadProfile::ForNode(site->uid, node->uid, from.jobs), from.seed);
  for (const jobs::Job& job : from.jobs.jobs) {
    if (job.site == site->uid && job.HasNode(node->uid)) node->jobs.push_back(&job);
  }
  std::sort(node->jobs.begin(), node->jobs.end(),
            [](const jobs::Job* a, const jobs::Job* b) { return a->started_at < b->started_at; });
  return node;
}

// The cluster `cluster_uid` of `site`, from its reference file `name`, with its catalogue; its
// nodes are appended to `nodes`.
Result<std::unique_ptr<Cluster>> BuildCluster(const NodeSources& from, const FileMap& files,
                                              const std::string& name,
                                              const std::string& cluster_uid, const Site* site,
                                              std::vector<std::unique_ptr<Node>>* nodes) {
  KWATT_ASSIGN_OR_RETURN(json doc, ParseFile(files, name));
  auto cluster = std::make_unique<Cluster>();
  cluster->uid = doc.value("uid", cluster_uid);
  cluster->site = site;
  cluster->model = doc.value("model", "");
  cluster->document_json = files.at(name);
  Result<Catalogue> catalogue = Catalogue::FromJson(cluster->document_json);
  if (!catalogue.ok()) return catalogue.status().WithContext(name);
  cluster->catalogue = std::move(*catalogue);
  NodeHardware hardware = HardwareOfCluster(cluster->uid);
  for (const json& node_uid : doc.value("nodes", json::array())) {
    std::unique_ptr<Node> node =
        BuildNode(from, site, cluster.get(), hardware, node_uid.get<std::string>());
    cluster->nodes.push_back(node.get());
    nodes->push_back(std::move(node));
  }
  return cluster;
}

// Each node's device ids, in its site's index: the node's uid and its feeds' device ids.
void IndexDevices(const std::vector<std::unique_ptr<Node>>& nodes) {
  for (const auto& node : nodes) {
    auto& devices = const_cast<Site*>(node->site)->devices;
    devices[node->uid] = DeviceRef{DeviceRef::Kind::kNode, node.get(), nullptr};
    for (const Feed& feed : node->wattmetre_ports) {
      devices[feed.device_id] = DeviceRef{DeviceRef::Kind::kWattmetrePort, node.get(), &feed};
    }
    for (const Feed& feed : node->pdu_outlets) {
      devices[feed.device_id] = DeviceRef{DeviceRef::Kind::kPduOutlet, node.get(), &feed};
    }
    for (const Feed& feed : node->switch_ports) {
      devices[feed.device_id] = DeviceRef{DeviceRef::Kind::kSwitchPort, node.get(), &feed};
    }
  }
}

// The site `uid` of the testbed, or the jobs file refused at `where` (its jobs[i], outages[i] or
// faults[i]).
Result<const Site*> SiteOf(const Testbed& testbed, const std::string& uid,
                           const std::string& where) {
  if (const Site* site = testbed.FindSite(uid)) return site;
  std::string sites;
  for (const auto& site : testbed.sites()) sites += (sites.empty() ? "" : ", ") + site->uid;
  return testbed.jobs().Refuse(where + ".site = \"" + uid +
                               "\" is not a site of the simulated testbed (sites: " + sites + ")");
}

// Every job must name known nodes of a known site: a typo would otherwise load nothing. Named by
// their place in the jobs file (jobs[i] is the file's jobs[i], job.nodes[n] its nodes[n]).
Status CheckJobs(const Testbed& testbed) {
  const jobs::JobSet& file = testbed.jobs();
  for (size_t i = 0; i < file.jobs.size(); ++i) {
    const jobs::Job& job = file.jobs[i];
    std::string where = "jobs[" + std::to_string(i) + "]";
    KWATT_ASSIGN_OR_RETURN(const Site* site, SiteOf(testbed, job.site, where));
    for (size_t n = 0; n < job.nodes.size(); ++n) {
      std::string unknown = testbed.UnknownNode(*site, job.nodes[n]);
      if (!unknown.empty()) {
        return file.Refuse(where + ".nodes[" + std::to_string(n) + "]: " + unknown +
                           " (clusters: see GET /sites/" + job.site + "/clusters)");
      }
    }
  }
  return Status::OK();
}

// The device an outage or fault (at `where`) names must be one of its site's.
Status CheckDevice(const Testbed& testbed, const std::string& site_uid, const std::string& device,
                   const std::string& where) {
  KWATT_ASSIGN_OR_RETURN(const Site* site, SiteOf(testbed, site_uid, where));
  if (testbed.FindDevice(*site, device)) return Status::OK();
  std::vector<std::string_view> devices;
  for (const auto& [id, ref] : site->devices) devices.push_back(id);
  std::string nearest = NearestSpelling(device, devices);
  std::string example;
  for (const Cluster* cluster : site->clusters) {
    if (!cluster->nodes.empty()) {
      example = " (" + cluster->nodes[0]->uid + ")";
      break;
    }
  }
  return testbed.jobs().Refuse(
      where + ".device = \"" + device + "\" is not a device of site " + site_uid +
      (nearest.empty() ? "" : " (did you mean " + nearest + "?)") + ": give a node uid" + example +
      " or the device_id of a wattmeter port, PDU outlet or switch port "
      "of the site");
}

// Every outage and fault must name a known device of a known site: a typo would otherwise silence
// (or falsify) nothing.
Status CheckOutagesAndFaults(const Testbed& testbed) {
  const jobs::JobSet& file = testbed.jobs();
  for (size_t i = 0; i < file.outages.size(); ++i) {
    KWATT_RETURN_IF_ERROR(CheckDevice(testbed, file.outages[i].site, file.outages[i].device,
                                      "outages[" + std::to_string(i) + "]"));
  }
  for (size_t i = 0; i < file.faults.size(); ++i) {
    KWATT_RETURN_IF_ERROR(CheckDevice(testbed, file.faults[i].site, file.faults[i].device,
                                      "faults[" + std::to_string(i) + "]"));
  }
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<Testbed>> Testbed::Build(const Options& options, jobs::JobSet jobs) {
  if (!options.description_file.empty() && !options.reference_dir.empty()) {
    return Status::InvalidArgument(
        "a testbed description replaces the reference data: give one of them, not both");
  }
  Result<FileMap> files = options.description_file.empty()
                              ? ReadReference(options.reference_dir)
                              : ReadDescription(options.description_file);
  if (!files.ok()) return files.status();
  std::unique_ptr<Testbed> testbed(new Testbed());
  testbed->seed_ = options.seed;
  testbed->jobs_ = std::move(jobs);

  Result<json> sites = ParseFile(*files, "sites.json");
  if (!sites.ok()) return sites.status();
  Result<json> power = ParseFile(*files, "wattmetre-mapping.json");
  if (!power.ok()) return power.status();
  Result<json> network = ParseFile(*files, "network-mapping.json");
  if (!network.ok()) return network.status();

  NodeSources from{*power, *network, testbed->jobs_, options.seed};
  for (const json& item : *sites) {
    auto site = std::make_unique<Site>();
    site->uid = item.value("uid", "");
    site->name = item.value("name", site->uid);
    if (site->uid.empty()) return Status::Corruption("sites.json: a site has no uid");
    for (const json& cluster_uid : item.value("clusters", json::array())) {
      std::string name = "clusters/" + site->uid + "-" + cluster_uid.get<std::string>() + ".json";
      if (!files->count(name)) continue;  // only clusters with a catalogue are simulated
      KWATT_ASSIGN_OR_RETURN(std::unique_ptr<Cluster> cluster,
                             BuildCluster(from, *files, name, cluster_uid.get<std::string>(),
                                          site.get(), &testbed->nodes_));
      site->clusters.push_back(cluster.get());
      testbed->clusters_.push_back(std::move(cluster));
    }
    testbed->sites_.push_back(std::move(site));
  }
  IndexDevices(testbed->nodes_);
  KWATT_RETURN_IF_ERROR(CheckJobs(*testbed));
  KWATT_RETURN_IF_ERROR(CheckOutagesAndFaults(*testbed));
  return testbed;
}

std::string Testbed::UnknownNode(const Site& site, std::string_view uid) const {
  if (FindNode(site, uid)) return "";
  std::vector<std::string_view> known;
  for (const Cluster* cluster : site.clusters) {
    for (const Node* node : cluster->nodes) known.push_back(node->uid);
  }
  std::string nearest = NearestSpelling(uid, known);
  return "no node \"" + std::string(uid) + "\" on site " + site.uid +
         (nearest.empty() ? "" : " (did you mean " + nearest + "?)");
}

const Site* Testbed::FindSite(std::string_view uid) const {
  for (const auto& site : sites_) {
    if (site->uid == uid) return site.get();
  }
  return nullptr;
}

const Cluster* Testbed::FindCluster(const Site& site, std::string_view uid) const {
  for (const Cluster* cluster : site.clusters) {
    if (cluster->uid == uid) return cluster;
  }
  return nullptr;
}

const Node* Testbed::FindNode(const Site& site, std::string_view uid) const {
  const DeviceRef* ref = FindDevice(site, uid);
  return ref && ref->kind == DeviceRef::Kind::kNode ? ref->node : nullptr;
}

const DeviceRef* Testbed::FindDevice(const Site& site, std::string_view device_id) const {
  auto it = site.devices.find(device_id);
  return it == site.devices.end() ? nullptr : &it->second;
}

}  // namespace kwatt::simulate
