// The simulated Grid'5000 testbed: sites, clusters with their real metric catalogues, nodes with
// their wattmeter ports, PDU outlets, switch ports and BMC, and the jobs that load them.
//
// Built once from the reference data (embedded in the binary, a directory laid out like
// data/reference/, or a testbed description file) and a JobSet; immutable afterwards, so it may be
// shared by threads.
#ifndef KWATT_SIMULATE_TESTBED_H_
#define KWATT_SIMULATE_TESTBED_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kwatt/core/catalogue.h"
#include "kwatt/core/status.h"
#include "kwatt/jobs/jobs_file.h"
#include "kwatt/simulate/node_model.h"

namespace kwatt::simulate {

using LabelList = std::vector<std::pair<std::string, std::string>>;

struct Cluster;
struct Site;

// A device that measures a node from outside: a wattmeter port, a PDU outlet or a switch port.
struct Feed {
  std::string device_id;  // "wattmetre1-port7", "gros-pdu2-port-1", "force10-port-25"
  std::string sampler;    // the physical device polled: "wattmetre1", "gros-pdu2", "force10"
  LabelList labels;       // labels of its rows, e.g. {"interface","eth0"} or {"_info",...}
  double share = 1.0;     // the node's power fraction on this feed (2 PSUs: about a half each)
  double rate_bps = 0;    // switch ports: link rate
};

struct Node {
  std::string uid;  // "nova-1"
  const Site* site = nullptr;
  const Cluster* cluster = nullptr;
  std::vector<Feed> wattmetre_ports;
  std::vector<Feed> pdu_outlets;
  std::vector<Feed> switch_ports;
  std::vector<std::string> interface_names;  // mounted adapters ("enp5s0f0"), node exporter view
  std::string network_adapters_json;         // for the reference API node object
  std::string pdu_json;
  std::unique_ptr<NodeModel> model;
  std::vector<const jobs::Job*> jobs;  // sorted by start
};

struct Cluster {
  std::string uid;
  const Site* site = nullptr;
  std::string model;
  std::string document_json;  // the reference cluster object (uid, model, created_at, metrics...)
  Catalogue catalogue;
  std::vector<Node*> nodes;  // natural order
};

// What a device id of a site designates.
struct DeviceRef {
  enum class Kind { kNode, kWattmetrePort, kPduOutlet, kSwitchPort };
  Kind kind = Kind::kNode;
  const Node* node = nullptr;
  const Feed* feed = nullptr;  // null for kNode
};

struct Site {
  std::string uid;
  std::string name;
  std::vector<Cluster*> clusters;
  std::map<std::string, DeviceRef, std::less<>> devices;
};

class Testbed {
 public:
  struct Options {
    uint64_t seed = 1;          // every simulated value depends on it
    std::string reference_dir;  // empty: the reference data embedded in the binary
    // A testbed description file (YAML or JSON: sites, clusters, nodes and their metrics;
    // doc/store.md) instead of the reference data: a lab's own machines, served as Grid'5000's.
    std::string description_file;
  };

  static Result<std::unique_ptr<Testbed>> Build(const Options& options, jobs::JobSet jobs);

  const std::vector<std::unique_ptr<Site>>& sites() const { return sites_; }
  const Site* FindSite(std::string_view uid) const;
  const Cluster* FindCluster(const Site& site, std::string_view uid) const;
  const Node* FindNode(const Site& site, std::string_view uid) const;
  // Empty when `uid` is a node of `site`; else what is wrong, with the nearest node's uid when
  // it looks like a typo: `no node "novaa-14" on site lyon (did you mean nova-14?)`.
  std::string UnknownNode(const Site& site, std::string_view uid) const;
  const DeviceRef* FindDevice(const Site& site, std::string_view device_id) const;
  const jobs::JobSet& jobs() const { return jobs_; }
  uint64_t seed() const { return seed_; }

 private:
  Testbed() = default;
  uint64_t seed_ = 1;
  jobs::JobSet jobs_;
  std::vector<std::unique_ptr<Site>> sites_;
  std::vector<std::unique_ptr<Cluster>> clusters_;
  std::vector<std::unique_ptr<Node>> nodes_;
};

}  // namespace kwatt::simulate

#endif  // KWATT_SIMULATE_TESTBED_H_
