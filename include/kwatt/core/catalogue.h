// The metric catalogue of a Grid'5000 cluster, as the reference API publishes it (a cluster
// object's `metrics` array, doc/kwollect_api.md section 6), and the rules derived from it: which
// metric ids a node can report, at which period, and which need a `monitor` job type.
//
// Parsed once where it enters (the reference API's answer, an archive's manifest, the simulated
// testbed) and passed on as this type: the client's planner, the energy report, the archive writer
// and the server read it the same way. It keeps the JSON it was read from, which archives store.
// Values; thread-compatible.
#ifndef KWATT_CORE_CATALOGUE_H_
#define KWATT_CORE_CATALOGUE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kwatt/core/status.h"

namespace kwatt {

// One entry of a cluster's `metrics` array.
struct CatalogueEntry {
  std::string name;  // e.g. "wattmetre_power_watt", "prom_default_metrics"
  std::string description;
  int64_t period_ms = 0;                // 0: collected only on demand
  int64_t optional_period_ms = 0;       // the period in on-demand ("monitor") mode; 0 if none
  std::string protocol;                 // source.protocol: wattmetre, pdu, snmp, ipmisensor, ...
  std::vector<std::string> source_ids;  // source.id when it is a list (prometheus groups)
  std::vector<std::pair<std::string, std::string>> labels;  // in catalogue order
  double scale_factor = 1.0;
  std::vector<std::string> only_for;  // node uids that really have it; empty: all nodes

  bool AppliesTo(std::string_view node_uid) const;
  bool IsPrometheusGroup() const { return protocol == "prometheus"; }
  // Prometheus groups without `source.id` (prom_all_metrics) cannot be expanded to metric ids.
  bool IsExpandable() const { return !IsPrometheusGroup() || !source_ids.empty(); }
};

// A metric id a node can report, after expanding prometheus groups.
struct CatalogueMetric {
  std::string metric_id;                  // "wattmetre_power_watt", "prom_node_load1"
  const CatalogueEntry* entry = nullptr;  // where it comes from; owned by the Catalogue
};

class Catalogue {
 public:
  Catalogue() = default;
  // Parses a cluster object (or its bare `metrics` array) of the reference API. Corruption naming
  // the entry and the field when one has the wrong type or a period out of range.
  static Result<Catalogue> FromJson(std::string_view json_text);

  const std::vector<CatalogueEntry>& entries() const { return entries_; }
  // The `metrics` array it was read from, as compact JSON ("[]" for an empty catalogue).
  const std::string& json() const { return json_; }
  // The cluster's hardware model as the reference names it (the cluster object's "model", "Dell
  // PowerEdge R430"; an archive's manifest keeps it in "hardware"); empty when it was read from a
  // bare metrics array or the object has none.
  const std::string& model() const { return model_; }

  // The metric ids `node_uid` can report (one per expanded id and label set; prometheus groups
  // expanded, `only_for` honoured), in catalogue order.
  std::vector<CatalogueMetric> MetricsOf(std::string_view node_uid) const;

 private:
  std::vector<CatalogueEntry> entries_;
  std::string json_ = "[]";
  std::string model_;
};

// The catalogue of each cluster a query involves, keyed "site/cluster", in the order the clusters
// first appear among the query's nodes.
struct ClusterCatalogue {
  std::string cluster;  // "lyon/nova"
  Catalogue catalogue;
};
using ClusterCatalogues = std::vector<ClusterCatalogue>;

// The entry of `catalogues` for "site/cluster", or null.
const Catalogue* FindCatalogue(const ClusterCatalogues& catalogues, std::string_view cluster);

// True when a job with these OAR `types` switches on-demand collection of `metric_name` (an entry
// name or an expanded metric id): type `monitor` enables every metric, `monitor=<regex>` those
// whose name the regex matches from its first character (anchored at the start only). An invalid
// regex enables nothing.
bool MonitorEnables(const std::vector<std::string>& job_types, std::string_view metric_name);

// True when a job with these types runs the Prometheus node exporter by default (every job that is
// not of type `deploy`).
bool JobRunsNodeExporter(const std::vector<std::string>& job_types);

// The period (ms) at which a node reports `metric_id` (an id of `entry`) during a job with these
// types: the on-demand period when the types switch it on (`monitor`, or the node exporter that
// every non-deploy job runs), else the regular period. 0: not collected.
int64_t EffectivePeriodMs(const CatalogueEntry& entry, std::string_view metric_id,
                          const std::vector<std::string>& job_types);

}  // namespace kwatt

#endif  // KWATT_CORE_CATALOGUE_H_
