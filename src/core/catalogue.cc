#include "kwatt/core/catalogue.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>

namespace kwatt {

using Json = nlohmann::json;

bool CatalogueEntry::AppliesTo(std::string_view node_uid) const {
  return only_for.empty() ||
         std::find(only_for.begin(), only_for.end(), node_uid) != only_for.end();
}

namespace {

std::string ScalarText(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  return value.dump();
}

// An optional string field of `object`: absent or null gives "", another type is Corruption
// naming the entry and the field (`label`: how the message names it, "source.protocol").
Status OptionalString(const Json& object, const char* field, const char* label,
                      const std::string& entry, std::string* out) {
  auto it = object.find(field);
  if (it == object.end() || it->is_null()) return Status::OK();
  if (!it->is_string()) {
    return Status::Corruption("catalogue entry \"" + entry + "\": field \"" + label + "\" is a " +
                              it->type_name() + ", not a string");
  }
  *out = it->get<std::string>();
  return Status::OK();
}

// The longest period a catalogue may give: a day (Kwollect's are 20 ms to a few minutes).
constexpr int64_t kMaxPeriodMs = 86'400'000;

// An optional period (ms) of `object`: absent or null gives 0; a number that is not a whole
// count of milliseconds in [0, a day], or another type, is Corruption naming the entry and field.
Status OptionalPeriod(const Json& object, const char* field, const std::string& entry,
                      int64_t* out) {
  auto it = object.find(field);
  if (it == object.end() || it->is_null()) return Status::OK();
  auto bad = [&](const std::string& why) {
    return Status::Corruption("catalogue entry \"" + entry + "\": field \"" + field +
                              "\" = " + it->dump(-1, ' ', false, Json::error_handler_t::replace) +
                              ": " + why);
  };
  if (!it->is_number()) return bad(std::string("is a ") + it->type_name() + ", not a number");
  double ms = it->get<double>();
  if (!(ms >= 0 && ms <= double(kMaxPeriodMs)) || ms != std::floor(ms)) {
    return bad("should be whole milliseconds from 0 to " + std::to_string(kMaxPeriodMs));
  }
  *out = int64_t(ms);
  return Status::OK();
}

}  // namespace

const Catalogue* FindCatalogue(const ClusterCatalogues& catalogues, std::string_view cluster) {
  for (const ClusterCatalogue& one : catalogues) {
    if (one.cluster == cluster) return &one.catalogue;
  }
  return nullptr;
}

Result<Catalogue> Catalogue::FromJson(std::string_view json_text) {
  Json doc = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::Corruption("metric catalogue is not valid JSON");
  const Json* metrics = &doc;
  if (doc.is_object()) {
    auto it = doc.find("metrics");
    if (it == doc.end()) return Status::Corruption("cluster object has no \"metrics\" array");
    metrics = &*it;
  }
  if (!metrics->is_array()) return Status::Corruption("\"metrics\" is not an array");
  Catalogue catalogue;
  for (const Json& item : *metrics) {
    if (!item.is_object() || !item.contains("name") || !item["name"].is_string()) {
      return Status::Corruption("a catalogue entry has no \"name\"");
    }
    CatalogueEntry entry;
    entry.name = item["name"].get<std::string>();
    KWATT_RETURN_IF_ERROR(
        OptionalString(item, "description", "description", entry.name, &entry.description));
    KWATT_RETURN_IF_ERROR(OptionalPeriod(item, "period", entry.name, &entry.period_ms));
    KWATT_RETURN_IF_ERROR(
        OptionalPeriod(item, "optional_period", entry.name, &entry.optional_period_ms));
    if (item.contains("scale_factor") && item["scale_factor"].is_number()) {
      entry.scale_factor = item["scale_factor"].get<double>();
    }
    if (auto source = item.find("source"); source != item.end() && source->is_object()) {
      KWATT_RETURN_IF_ERROR(
          OptionalString(*source, "protocol", "source.protocol", entry.name, &entry.protocol));
      if (auto id = source->find("id"); id != source->end() && id->is_array()) {
        for (const Json& one : *id) entry.source_ids.push_back(ScalarText(one));
      }
    }
    if (auto labels = item.find("labels"); labels != item.end() && labels->is_object()) {
      for (auto& [key, value] : labels->items()) entry.labels.emplace_back(key, ScalarText(value));
    }
    if (auto only = item.find("only_for"); only != item.end() && only->is_array()) {
      for (const Json& uid : *only) entry.only_for.push_back(ScalarText(uid));
    }
    catalogue.entries_.push_back(std::move(entry));
  }
  catalogue.json_ = metrics->dump(-1, ' ', false, Json::error_handler_t::replace);
  if (doc.is_object()) {
    if (auto model = doc.find("model"); model != doc.end() && model->is_string()) {
      catalogue.model_ = model->get<std::string>();
    }
  }
  return catalogue;
}

std::vector<CatalogueMetric> Catalogue::MetricsOf(std::string_view node_uid) const {
  std::vector<CatalogueMetric> out;
  for (const CatalogueEntry& entry : entries_) {
    if (!entry.AppliesTo(node_uid) || !entry.IsExpandable()) continue;
    if (entry.IsPrometheusGroup()) {
      for (const std::string& id : entry.source_ids) out.push_back({"prom_" + id, &entry});
    } else {
      out.push_back({entry.name, &entry});
    }
  }
  return out;
}

bool MonitorEnables(const std::vector<std::string>& job_types, std::string_view metric_name) {
  for (const std::string& type : job_types) {
    if (type == "monitor") return true;
    if (type.rfind("monitor=", 0) != 0) continue;
    try {
      std::regex pattern(type.substr(8), std::regex::ECMAScript);
      if (std::regex_search(metric_name.begin(), metric_name.end(), pattern,
                            std::regex_constants::match_continuous)) {
        return true;
      }
    } catch (const std::regex_error&) {
      // An invalid regex enables nothing, as in Kwollect.
    }
  }
  return false;
}

bool JobRunsNodeExporter(const std::vector<std::string>& job_types) {
  return std::find(job_types.begin(), job_types.end(), "deploy") == job_types.end();
}

int64_t EffectivePeriodMs(const CatalogueEntry& entry, std::string_view metric_id,
                          const std::vector<std::string>& job_types) {
  bool enabled = entry.optional_period_ms > 0 &&
                 (MonitorEnables(job_types, entry.name) || MonitorEnables(job_types, metric_id) ||
                  (entry.IsPrometheusGroup() && JobRunsNodeExporter(job_types)));
  return enabled ? entry.optional_period_ms : entry.period_ms;
}

}  // namespace kwatt
