#include "kwatt/server/jobs.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace kwatt::server {

using nlohmann::json;

UnixNanos Job::EffectiveEnd() const {
  if (stopped_at) return *stopped_at;
  return started_at + walltime_s * kNanosPerSecond;
}

bool Job::HasNode(std::string_view uid) const {
  return std::find(nodes.begin(), nodes.end(), uid) != nodes.end();
}

namespace {

Status Bad(std::string_view origin, const std::string& where, const std::string& what) {
  return Status::InvalidArgument(std::string(origin) + ": " + where + ": " + what);
}

// A time in a jobs file: epoch seconds (number) or an ISO 8601 text (Europe/Paris when no offset).
Result<UnixNanos> ReadTime(const json& value) {
  if (value.is_number()) {
    return UnixNanos(std::llround(value.get<double>() * 1e6)) * kNanosPerMicro;
  }
  if (value.is_string()) return ParseKwollectTimeParameter(value.get<std::string>());
  return Status::InvalidArgument("a time must be epoch seconds or an ISO 8601 text");
}

Result<double> ReadLevel(const json& phase, const char* key) {
  if (!phase.contains(key)) return 0.0;
  if (!phase[key].is_number()) return Status::InvalidArgument(std::string(key) + " is not a number");
  double level = phase[key].get<double>();
  if (level < 0 || level > 1) {
    return Status::InvalidArgument(std::string(key) + " must be between 0 and 1");
  }
  return level;
}

}  // namespace

Result<JobSet> JobSet::Parse(std::string_view json_text, std::string_view origin) {
  json doc = json::parse(json_text, nullptr, false);
  if (doc.is_discarded()) return Bad(origin, "file", "not valid JSON");
  if (!doc.is_object()) return Bad(origin, "file", "expected an object with a \"jobs\" array");
  JobSet set;
  const json& jobs = doc.contains("jobs") ? doc["jobs"] : json::array();
  if (!jobs.is_array()) return Bad(origin, "jobs", "not an array");
  for (size_t i = 0; i < jobs.size(); ++i) {
    const json& item = jobs[i];
    std::string where = "jobs[" + std::to_string(i) + "]";
    if (!item.is_object()) return Bad(origin, where, "not an object");
    Job job;
    if (!item.contains("site") || !item["site"].is_string()) {
      return Bad(origin, where, "\"site\" (a string such as \"lyon\") is required");
    }
    job.site = item["site"].get<std::string>();
    if (!item.contains("uid") || !item["uid"].is_number_integer()) {
      return Bad(origin, where, "\"uid\" (an integer job id) is required");
    }
    job.uid = item["uid"].get<int64_t>();
    where = "job " + job.site + ":" + std::to_string(job.uid);
    job.user = item.value("user", job.user);
    job.name = item.value("name", job.name);
    job.project = item.value("project", job.project);
    job.queue = item.value("queue", job.queue);
    if (!item.contains("nodes") || !item["nodes"].is_array() || item["nodes"].empty()) {
      return Bad(origin, where, "\"nodes\" (a non-empty list of node names) is required");
    }
    for (const json& node : item["nodes"]) {
      if (!node.is_string()) return Bad(origin, where, "a node name is not a string");
      std::string uid = node.get<std::string>();
      job.nodes.push_back(uid.substr(0, uid.find('.')));
    }
    if (!item.contains("started_at")) return Bad(origin, where, "\"started_at\" is required");
    Result<UnixNanos> started = ReadTime(item["started_at"]);
    if (!started.ok()) return Bad(origin, where + " started_at", started.status().message());
    job.started_at = *started;
    if (item.contains("stopped_at") && !item["stopped_at"].is_null()) {
      Result<UnixNanos> stopped = ReadTime(item["stopped_at"]);
      if (!stopped.ok()) return Bad(origin, where + " stopped_at", stopped.status().message());
      if (*stopped < job.started_at) return Bad(origin, where, "stopped_at is before started_at");
      job.stopped_at = *stopped;
    }
    job.submitted_at = job.started_at - 30 * kNanosPerSecond;
    if (item.contains("walltime")) {
      if (!item["walltime"].is_number()) return Bad(origin, where, "walltime is not seconds");
      job.walltime_s = item["walltime"].get<int64_t>();
    } else if (job.stopped_at) {
      job.walltime_s = (*job.stopped_at - job.started_at + kNanosPerSecond - 1) / kNanosPerSecond;
    } else {
      job.walltime_s = 3600;
    }
    if (item.contains("types")) {
      if (!item["types"].is_array()) return Bad(origin, where, "\"types\" is not a list");
      for (const json& type : item["types"]) {
        if (!type.is_string()) return Bad(origin, where, "a job type is not a string");
        job.types.push_back(type.get<std::string>());
      }
    }
    if (item.contains("phases")) {
      if (!item["phases"].is_array()) return Bad(origin, where, "\"phases\" is not a list");
      for (size_t p = 0; p < item["phases"].size(); ++p) {
        const json& phase = item["phases"][p];
        std::string pwhere = where + " phases[" + std::to_string(p) + "]";
        if (!phase.is_object()) return Bad(origin, pwhere, "not an object");
        LoadPhase load;
        load.name = phase.value("name", "phase" + std::to_string(p + 1));
        if (!phase.contains("duration") || !phase["duration"].is_number() ||
            phase["duration"].get<double>() <= 0) {
          return Bad(origin, pwhere, "\"duration\" (seconds, > 0) is required");
        }
        load.duration_ns = int64_t(std::llround(phase["duration"].get<double>() * 1e9));
        for (auto [key, field] : {std::pair{"cpu", &load.cpu}, std::pair{"network", &load.network},
                                  std::pair{"gpu", &load.gpu}}) {
          Result<double> level = ReadLevel(phase, key);
          if (!level.ok()) return Bad(origin, pwhere, level.status().message());
          *field = *level;
        }
        job.phases.push_back(std::move(load));
      }
    }
    if (job.phases.empty()) {
      job.phases.push_back(LoadPhase{"run", job.EffectiveEnd() - job.started_at, 0.5, 0.05, 0.0});
    }
    job.repeat_phases = item.value("repeat_phases", false);
    if (set.Find(job.site, job.uid)) return Bad(origin, where, "job defined twice");
    set.jobs.push_back(std::move(job));
  }
  if (doc.contains("outages")) {
    const json& outages = doc["outages"];
    if (!outages.is_array()) return Bad(origin, "outages", "not an array");
    for (size_t i = 0; i < outages.size(); ++i) {
      const json& item = outages[i];
      std::string where = "outages[" + std::to_string(i) + "]";
      if (!item.is_object() || !item.contains("site") || !item.contains("device") ||
          !item.contains("start") || !item.contains("end")) {
        return Bad(origin, where, "needs \"site\", \"device\", \"start\" and \"end\"");
      }
      Outage outage;
      outage.site = item["site"].get<std::string>();
      outage.device = item["device"].get<std::string>();
      outage.device = outage.device.substr(0, outage.device.find('.'));
      outage.metric = item.value("metric", "");
      Result<UnixNanos> start = ReadTime(item["start"]);
      Result<UnixNanos> end = ReadTime(item["end"]);
      if (!start.ok() || !end.ok() || *end <= *start) {
        return Bad(origin, where, "start and end must be times with start < end");
      }
      outage.start = *start;
      outage.end = *end;
      std::string report = item.value("report", "nothing");
      if (report != "nothing" && report != "NaN") {
        return Bad(origin, where + ".report", "\"nothing\" (no row) or \"NaN\" (rows with NaN values)");
      }
      outage.nan = report == "NaN";
      set.outages.push_back(std::move(outage));
    }
  }
  return set;
}

Result<JobSet> JobSet::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open jobs file " + path);
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), path);
}

const Job* JobSet::Find(std::string_view site, int64_t uid) const {
  for (const Job& job : jobs) {
    if (job.site == site && job.uid == uid) return &job;
  }
  return nullptr;
}

}  // namespace kwatt::server
