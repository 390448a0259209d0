#include "kwatt/server/jobs.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "src/core/json_words.h"

namespace kwatt::server {

using nlohmann::json;

// Assigns the value of a Result, or returns its status.
#define KWATT_ASSIGN_OR_RETURN_JOBS(lhs, expr)  \
  do {                                          \
    auto result_ = (expr);                      \
    if (!result_.ok()) return result_.status(); \
    lhs = std::move(*result_);                  \
  } while (false)

UnixNanos Job::EffectiveEnd() const {
  if (stopped_at) return *stopped_at;
  return started_at + walltime_s * kNanosPerSecond;
}

bool Job::HasNode(std::string_view uid) const {
  return std::find(nodes.begin(), nodes.end(), uid) != nodes.end();
}

namespace {

// The JSON type of a value, as a user reads it in a message.
std::string TypeName(const json& value) {
  return internal::JsonTypeName(value, internal::FileSyntax::kJson);
}

// Reads one jobs file, naming the file and the field (as a JSON path: jobs[2].started_at) in
// every error: "jobs file F: jobs[2].started_at should be epoch seconds or an ISO 8601 text, not
// a list" (InvalidArgument).
class Reader {
 public:
  explicit Reader(std::string_view origin) : origin_(origin) {}

  Status Bad(const std::string& where, const std::string& what) const {
    return Status::InvalidArgument("jobs file " + origin_ + ": " + where + " " + what);
  }
  Status Expected(const std::string& where, const std::string& what, const json& value) const {
    return Bad(where, "should be " + what + ", not " + TypeName(value));
  }

  Result<std::string> String(const json& object, const char* key, const std::string& where,
                             std::optional<std::string> fallback) const {
    if (!object.contains(key)) {
      if (fallback) return *fallback;
      return Bad(where + "." + key, "is required (a string)");
    }
    const json& value = object[key];
    if (!value.is_string()) return Expected(where + "." + key, "a string", value);
    return value.get<std::string>();
  }

  // A time: epoch seconds (number) or an ISO 8601 text (Europe/Paris when no offset), within the
  // times kwatt handles.
  Result<UnixNanos> Time(const json& value, const std::string& where) const {
    if (value.is_number()) {
      double seconds = value.get<double>();
      Result<UnixNanos> t = EpochSecondsToNanos(seconds, value.dump());
      if (!t.ok()) return Bad(where, "= " + t.status().message());
      return t;
    }
    if (value.is_string()) {
      Result<UnixNanos> t = ParseKwollectTimeParameter(value.get<std::string>());
      if (!t.ok()) return Bad(where, "= " + t.status().message());
      return t;
    }
    return Expected(where, "epoch seconds or an ISO 8601 text", value);
  }

  Result<double> Level(const json& phase, const char* key, const std::string& where) const {
    if (!phase.contains(key)) return 0.0;
    const json& value = phase[key];
    std::string path = where + "." + key;
    if (!value.is_number()) return Expected(path, "a number between 0 and 1", value);
    double level = value.get<double>();
    if (!(level >= 0 && level <= 1)) {
      return Bad(path, "= " + value.dump() + ": " + key + " must be between 0 and 1");
    }
    return level;
  }

 private:
  std::string origin_;
};

// Seconds (a JSON number, whole or not) to nanoseconds, > 0 and at most ~292 years.
Result<int64_t> Duration(const Reader& reader, const json& value, const std::string& where,
                         const char* what) {
  if (!value.is_number()) return reader.Expected(where, what, value);
  double seconds = value.get<double>();
  if (!(seconds > 0 && seconds < 9.2e9)) {
    return reader.Bad(where, "= " + value.dump() + ": should be " + what);
  }
  return int64_t(std::llround(seconds * 1e9));
}

}  // namespace

Result<JobSet> JobSet::Parse(std::string_view json_text, std::string_view origin) {
  Reader r(origin);
  json doc = json::parse(json_text, nullptr, false);
  if (doc.is_discarded()) return r.Bad("file", "is not valid JSON");
  if (!doc.is_object()) return r.Expected("file", "an object with a \"jobs\" list", doc);
  JobSet set;
  const json& jobs = doc.contains("jobs") ? doc["jobs"] : json::array();
  if (!jobs.is_array()) return r.Expected("jobs", "a list", jobs);
  for (size_t i = 0; i < jobs.size(); ++i) {
    const json& item = jobs[i];
    std::string where = "jobs[" + std::to_string(i) + "]";
    if (!item.is_object()) return r.Expected(where, "an object", item);
    Job job;
    if (!item.contains("site"))
      return r.Bad(where + ".site", "is required (a site such as \"lyon\")");
    KWATT_ASSIGN_OR_RETURN_JOBS(job.site, r.String(item, "site", where, std::nullopt));
    if (!item.contains("uid")) return r.Bad(where + ".uid", "is required (an integer job id)");
    if (!item["uid"].is_number_integer()) {
      return r.Expected(where + ".uid", "an integer job id", item["uid"]);
    }
    if (item["uid"].is_number_unsigned() && item["uid"].get<uint64_t>() > uint64_t(INT64_MAX)) {
      return r.Bad(where + ".uid", "is too large");
    }
    job.uid = item["uid"].get<int64_t>();
    KWATT_ASSIGN_OR_RETURN_JOBS(job.user, r.String(item, "user", where, job.user));
    KWATT_ASSIGN_OR_RETURN_JOBS(job.name, r.String(item, "name", where, job.name));
    KWATT_ASSIGN_OR_RETURN_JOBS(job.project, r.String(item, "project", where, job.project));
    KWATT_ASSIGN_OR_RETURN_JOBS(job.queue, r.String(item, "queue", where, job.queue));
    if (!item.contains("nodes"))
      return r.Bad(where + ".nodes", "is required (a list of node names)");
    const json& nodes = item["nodes"];
    if (!nodes.is_array()) return r.Expected(where + ".nodes", "a list of node names", nodes);
    if (nodes.empty()) return r.Bad(where + ".nodes", "is empty: a job has at least one node");
    for (size_t n = 0; n < nodes.size(); ++n) {
      if (!nodes[n].is_string()) {
        return r.Expected(where + ".nodes[" + std::to_string(n) + "]", "a node name (a string)",
                          nodes[n]);
      }
      std::string uid = nodes[n].get<std::string>();
      job.nodes.push_back(uid.substr(0, uid.find('.')));
    }
    if (!item.contains("started_at")) return r.Bad(where + ".started_at", "is required (a time)");
    KWATT_ASSIGN_OR_RETURN_JOBS(job.started_at, r.Time(item["started_at"], where + ".started_at"));
    if (item.contains("stopped_at") && !item["stopped_at"].is_null()) {
      UnixNanos stopped;
      KWATT_ASSIGN_OR_RETURN_JOBS(stopped, r.Time(item["stopped_at"], where + ".stopped_at"));
      if (stopped < job.started_at) return r.Bad(where + ".stopped_at", "is before started_at");
      job.stopped_at = stopped;
    }
    // submitted_at is 30 s before the start: keep it in range.
    if (job.started_at < std::numeric_limits<int64_t>::min() + 30 * kNanosPerSecond) {
      return r.Bad(where + ".started_at", "is too early");
    }
    job.submitted_at = job.started_at - 30 * kNanosPerSecond;
    if (item.contains("walltime")) {
      int64_t walltime_ns;
      KWATT_ASSIGN_OR_RETURN_JOBS(walltime_ns, Duration(r, item["walltime"], where + ".walltime",
                                                        "seconds (a number > 0)"));
      job.walltime_s = (walltime_ns + kNanosPerSecond - 1) / kNanosPerSecond;
    } else if (job.stopped_at) {
      job.walltime_s = (*job.stopped_at - job.started_at + kNanosPerSecond - 1) / kNanosPerSecond;
    } else {
      job.walltime_s = 3600;
    }
    UnixNanos end;
    if (__builtin_mul_overflow(job.walltime_s, kNanosPerSecond, &end) ||
        __builtin_add_overflow(job.started_at, end, &end)) {
      return r.Bad(where + ".walltime",
                   "ends the job after 2262-04-11, outside the times kwatt handles");
    }
    if (item.contains("types")) {
      const json& types = item["types"];
      if (!types.is_array()) return r.Expected(where + ".types", "a list of strings", types);
      for (size_t t = 0; t < types.size(); ++t) {
        if (!types[t].is_string()) {
          return r.Expected(where + ".types[" + std::to_string(t) + "]", "a string", types[t]);
        }
        job.types.push_back(types[t].get<std::string>());
      }
    }
    if (item.contains("phases")) {
      const json& phases = item["phases"];
      if (!phases.is_array()) return r.Expected(where + ".phases", "a list of phases", phases);
      for (size_t p = 0; p < phases.size(); ++p) {
        const json& phase = phases[p];
        std::string pwhere = where + ".phases[" + std::to_string(p) + "]";
        if (!phase.is_object()) return r.Expected(pwhere, "an object", phase);
        LoadPhase load;
        KWATT_ASSIGN_OR_RETURN_JOBS(
            load.name, r.String(phase, "name", pwhere, "phase" + std::to_string(p + 1)));
        if (!phase.contains("duration")) {
          return r.Bad(pwhere + ".duration", "is required (seconds, > 0)");
        }
        KWATT_ASSIGN_OR_RETURN_JOBS(
            load.duration_ns,
            Duration(r, phase["duration"], pwhere + ".duration", "seconds (a number > 0)"));
        for (auto [key, field] : {std::pair{"cpu", &load.cpu}, std::pair{"network", &load.network},
                                  std::pair{"gpu", &load.gpu}}) {
          KWATT_ASSIGN_OR_RETURN_JOBS(*field, r.Level(phase, key, pwhere));
        }
        job.phases.push_back(std::move(load));
      }
    }
    if (job.phases.empty()) {
      job.phases.push_back(LoadPhase{"run", job.EffectiveEnd() - job.started_at, 0.5, 0.05, 0.0});
    }
    if (item.contains("repeat_phases")) {
      if (!item["repeat_phases"].is_boolean()) {
        return r.Expected(where + ".repeat_phases", "true or false", item["repeat_phases"]);
      }
      job.repeat_phases = item["repeat_phases"].get<bool>();
    }
    if (set.Find(job.site, job.uid)) {
      return r.Bad(where, "defines job " + job.site + ":" + std::to_string(job.uid) + " twice");
    }
    set.jobs.push_back(std::move(job));
  }
  if (doc.contains("outages")) {
    const json& outages = doc["outages"];
    if (!outages.is_array()) return r.Expected("outages", "a list", outages);
    for (size_t i = 0; i < outages.size(); ++i) {
      const json& item = outages[i];
      std::string where = "outages[" + std::to_string(i) + "]";
      if (!item.is_object()) return r.Expected(where, "an object", item);
      for (const char* key : {"site", "device", "start", "end"}) {
        if (!item.contains(key)) {
          return r.Bad(where + "." + key,
                       "is required (an outage needs \"site\", \"device\", \"start\" and \"end\")");
        }
      }
      Outage outage;
      KWATT_ASSIGN_OR_RETURN_JOBS(outage.site, r.String(item, "site", where, std::nullopt));
      KWATT_ASSIGN_OR_RETURN_JOBS(outage.device, r.String(item, "device", where, std::nullopt));
      outage.device = outage.device.substr(0, outage.device.find('.'));
      KWATT_ASSIGN_OR_RETURN_JOBS(outage.metric, r.String(item, "metric", where, std::string()));
      KWATT_ASSIGN_OR_RETURN_JOBS(outage.start, r.Time(item["start"], where + ".start"));
      KWATT_ASSIGN_OR_RETURN_JOBS(outage.end, r.Time(item["end"], where + ".end"));
      if (outage.end <= outage.start) return r.Bad(where + ".end", "is not after its start");
      std::string report;
      KWATT_ASSIGN_OR_RETURN_JOBS(report, r.String(item, "report", where, std::string("nothing")));
      if (report != "nothing" && report != "NaN") {
        return r.Bad(where + ".report",
                     "should be \"nothing\" (no row) or \"NaN\" (rows with NaN values)");
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
