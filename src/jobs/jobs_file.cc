#include "kwatt/jobs/jobs_file.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>

#include "kwatt/core/json_words.h"
#include "kwatt/core/text.h"

namespace kwatt::jobs {

using nlohmann::json;

namespace {

// The JSON type of a value, as a user reads it in a message.
std::string TypeName(const json& value) {
  return kwatt::internal::JsonTypeName(value, kwatt::internal::FileSyntax::kJson);
}

// The fields of each object of the file, in the order the documentation gives them.
constexpr std::string_view kFileKeys[] = {"format_version", "jobs", "outages", "faults"};
constexpr std::string_view kJobKeys[] = {
    "site", "uid",  "nodes",   "started_at", "stopped_at", "walltime",     "types",
    "user", "name", "project", "queue",      "phases",     "repeat_phases"};
constexpr std::string_view kPhaseKeys[] = {"name", "duration", "cpu", "network", "gpu"};
constexpr std::string_view kOutageKeys[] = {"site", "device", "metric", "start", "end", "report"};
constexpr std::string_view kFaultKeys[] = {"site", "device", "metric", "start", "end",
                                           "bias", "scale",  "stuck",  "late"};
// The most a fault may shift a device's clock: a day.
constexpr double kMaxLateSeconds = 86400;

// The path of `key` in the object at `where` (empty: the file): jobs[0].nodes, or
// jobs[0]["energy budget"] for a key that is not a plain word.
std::string PathOf(const std::string& where, const std::string& key) {
  bool plain = !key.empty() && !std::isdigit(uint8_t(key[0])) &&
               std::all_of(key.begin(), key.end(),
                           [](char c) { return std::isalnum(uint8_t(c)) || c == '_'; });
  if (!plain) return where + "[" + json(key).dump() + "]";
  return where.empty() ? key : where + "." + key;
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

  // A key the format does not have is a mistake (a misspelling would otherwise be ignored and the
  // file simulate something else): refused, with the nearest known key and the known ones.
  // `what` names the object: "a job".
  Status OnlyKnownKeys(const json& object, const std::string& where, const std::string& what,
                       std::span<const std::string_view> known) const {
    for (const auto& [key, value] : object.items()) {
      if (std::find(known.begin(), known.end(), key) != known.end()) continue;
      std::string nearest = NearestSpelling(key, known);
      std::string list;
      for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      return Bad(PathOf(where, key),
                 "is not a field of " + what +
                     (nearest.empty() ? "" : " (did you mean " + nearest + "?)") + "; " + what +
                     " has " + list);
    }
    return Status::OK();
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

  // A node (or device) as the file names it: its uid ("nova-1"), or with its site
  // ("nova-1.lyon", "nova-1.lyon.grid5000.fr"), which must be `site`. Returns the uid.
  // `owner` is the place of the job (`is_job`), outage or fault (`kind`: "an outage", "a fault")
  // that names it.
  Result<std::string> NodeUid(const json& value, const std::string& where, const std::string& owner,
                              const std::string& site, bool is_job,
                              const std::string& kind = "an outage") const {
    std::optional<JobNodeName> name = SplitJobNodeName(value.get<std::string>());
    std::string rest = name ? name->site : "";
    std::string quoted = value.dump();
    if (!name) {
      return Bad(where, "= " + quoted +
                            (is_job ? " is not a node name: give a node uid (nova-1) or FQDN "
                                      "(nova-1.lyon.grid5000.fr)"
                                    : " is not a device id: give a node uid (nova-1), its FQDN "
                                      "(nova-1.lyon.grid5000.fr) or a device id "
                                      "(wattmetre1-port13)"));
    }
    if (!rest.empty() && rest != site) {
      if (is_job) {
        return Bad(where, "= " + quoted + " is a node of site " + rest + ", but " + owner +
                              " is a job of site " + site +
                              ": an OAR job lives on one site (give the node in a job of site " +
                              rest + ", or fix the site)");
      }
      return Bad(where, "= " + quoted + " is a device of site " + rest + ", but " + owner + " is " +
                            kind + " of site " + site + " (give the " +
                            kind.substr(kind.find(' ') + 1) + " site " + rest + ")");
    }
    return name->uid;
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

int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<int64_t>::max() : sum;
}
int64_t SaturatingMultiply(int64_t a, int64_t b) {
  int64_t product;
  return __builtin_mul_overflow(a, b, &product) ? std::numeric_limits<int64_t>::max() : product;
}

// How many times a job's phases start while it runs: each start is a change of its nodes' load,
// which the simulator keeps (LoadProfile: a point and a ramp per change and node).
int64_t PhaseStarts(const Job& job) {
  int64_t span = job.EffectiveEnd() - job.started_at;
  // The phases starting within the first `span` of one pass through them.
  auto starts_within = [&job](int64_t span) {
    int64_t starts = 0, offset = 0;
    for (const LoadPhase& phase : job.phases) {
      if (offset >= span) break;
      ++starts;
      offset = SaturatingAdd(offset, phase.duration_ns);
    }
    return starts;
  };
  if (!job.repeat_phases) return starts_within(span);
  int64_t cycle = 0;
  for (const LoadPhase& phase : job.phases) cycle = SaturatingAdd(cycle, phase.duration_ns);
  if (cycle <= 0 || cycle >= span) return starts_within(span);
  int64_t full = SaturatingMultiply(span / cycle, int64_t(job.phases.size()));
  return SaturatingAdd(full, starts_within(span % cycle));
}

// The file's text as JSON, or InvalidArgument with the parser's place and reason.
Result<json> ParseJson(const Reader& r, std::string_view json_text) {
  try {
    return json::parse(json_text);
  } catch (const json::exception& error) {
    // "[json.exception.parse_error.101] parse error at line 3, column 5: syntax error ...", or
    // "[json.exception.out_of_range.406] number overflow parsing '1e400'": the place (when the
    // parser gives it) and the reason.
    std::string what = error.what();
    size_t at = what.find("parse error at line ");
    if (at != std::string::npos) {
      at += 15;
    } else if ((at = what.find("] ")) != std::string::npos) {
      at += 2;
    }
    return r.Bad("file",
                 "is not valid JSON" + (at == std::string::npos ? "" : ": " + what.substr(at)));
  }
}

// The file's top level: an object of known keys, of a format_version this kwatt reads.
Status CheckTopLevel(const Reader& r, const json& doc) {
  if (!doc.is_object()) return r.Expected("file", "an object with a \"jobs\" list", doc);
  if (Status known = r.OnlyKnownKeys(doc, "", "a jobs file", kFileKeys); !known.ok()) {
    return known;
  }
  if (doc.contains("format_version")) {
    const json& version = doc["format_version"];
    if (!version.is_number_integer()) return r.Expected("format_version", "1", version);
    if (version != kJobsFileFormatVersion) {
      return r.Bad("format_version",
                   "= " + version.dump() +
                       " is not a version this kwatt reads: it reads format_version " +
                       std::to_string(kJobsFileFormatVersion) + " (write it, or leave it out)");
    }
  }
  return Status::OK();
}

// A job's site, uid (a positive OAR job id) and its user, name, project and queue.
Status ReadJobIdentity(const Reader& r, const json& item, const std::string& where, Job* job) {
  if (!item.contains("site"))
    return r.Bad(where + ".site", "is required (a site such as \"lyon\")");
  KWATT_ASSIGN_OR_RETURN(job->site, r.String(item, "site", where, std::nullopt));
  if (!item.contains("uid")) return r.Bad(where + ".uid", "is required (an integer job id)");
  const json& uid = item["uid"];
  if (!uid.is_number_integer()) return r.Expected(where + ".uid", "an integer job id", uid);
  if (uid.is_number_unsigned() && uid.get<uint64_t>() > uint64_t(INT64_MAX)) {
    return r.Bad(where + ".uid",
                 "= " + uid.dump() + ": an OAR job id is a positive integer below 2^63");
  }
  job->uid = uid.get<int64_t>();
  if (job->uid <= 0) {
    return r.Bad(where + ".uid", "= " + uid.dump() + ": an OAR job id is a positive integer");
  }
  KWATT_ASSIGN_OR_RETURN(job->user, r.String(item, "user", where, job->user));
  KWATT_ASSIGN_OR_RETURN(job->name, r.String(item, "name", where, job->name));
  KWATT_ASSIGN_OR_RETURN(job->project, r.String(item, "project", where, job->project));
  KWATT_ASSIGN_OR_RETURN(job->queue, r.String(item, "queue", where, job->queue));
  return Status::OK();
}

// A job's nodes: at least one, each of the job's site and listed once.
Status ReadJobNodes(const Reader& r, const json& item, const std::string& where, Job* job) {
  if (!item.contains("nodes")) return r.Bad(where + ".nodes", "is required (a list of node names)");
  const json& nodes = item["nodes"];
  if (!nodes.is_array()) return r.Expected(where + ".nodes", "a list of node names", nodes);
  if (nodes.empty()) return r.Bad(where + ".nodes", "is empty: a job has at least one node");
  for (size_t n = 0; n < nodes.size(); ++n) {
    std::string nwhere = where + ".nodes[" + std::to_string(n) + "]";
    if (!nodes[n].is_string()) return r.Expected(nwhere, "a node name (a string)", nodes[n]);
    std::string node;
    KWATT_ASSIGN_OR_RETURN(node, r.NodeUid(nodes[n], nwhere, where, job->site, true));
    // Twice in a job (nova-1 and nova-1.lyon.grid5000.fr), a node's energy would count twice.
    auto same = std::find(job->nodes.begin(), job->nodes.end(), node);
    if (same != job->nodes.end()) {
      return r.Bad(nwhere, "= " + nodes[n].dump() + " is " + node + " again (" + where + ".nodes[" +
                               std::to_string(same - job->nodes.begin()) +
                               "]): list each node of a job once");
    }
    job->nodes.push_back(std::move(node));
  }
  return Status::OK();
}

// A job's times: started_at, stopped_at (optional, not before the start), submitted_at (30 s
// before the start) and walltime (given, else the job's length when it stopped, else an hour),
// with its end within the times kwatt handles.
Status ReadJobTimes(const Reader& r, const json& item, const std::string& where, Job* job) {
  if (!item.contains("started_at")) return r.Bad(where + ".started_at", "is required (a time)");
  KWATT_ASSIGN_OR_RETURN(job->started_at, r.Time(item["started_at"], where + ".started_at"));
  if (item.contains("stopped_at") && !item["stopped_at"].is_null()) {
    UnixNanos stopped;
    KWATT_ASSIGN_OR_RETURN(stopped, r.Time(item["stopped_at"], where + ".stopped_at"));
    if (stopped < job->started_at) return r.Bad(where + ".stopped_at", "is before started_at");
    job->stopped_at = stopped;
  }
  // submitted_at is 30 s before the start: keep it in range.
  if (job->started_at < std::numeric_limits<int64_t>::min() + 30 * kNanosPerSecond) {
    return r.Bad(where + ".started_at", "is too early");
  }
  job->submitted_at = job->started_at - 30 * kNanosPerSecond;
  if (item.contains("walltime")) {
    int64_t walltime_ns;
    KWATT_ASSIGN_OR_RETURN(
        walltime_ns, Duration(r, item["walltime"], where + ".walltime", "seconds (a number > 0)"));
    job->walltime_s = (walltime_ns + kNanosPerSecond - 1) / kNanosPerSecond;
  } else if (job->stopped_at) {
    job->walltime_s = (*job->stopped_at - job->started_at + kNanosPerSecond - 1) / kNanosPerSecond;
  } else {
    job->walltime_s = 3600;
  }
  UnixNanos end;
  if (__builtin_mul_overflow(job->walltime_s, kNanosPerSecond, &end) ||
      __builtin_add_overflow(job->started_at, end, &end)) {
    return r.Bad(where + ".walltime",
                 "ends the job after 2262-04-11, outside the times kwatt handles");
  }
  return Status::OK();
}

// A job's OAR types, when given: a list of strings.
Status ReadJobTypes(const Reader& r, const json& item, const std::string& where, Job* job) {
  if (!item.contains("types")) return Status::OK();
  const json& types = item["types"];
  if (!types.is_array()) return r.Expected(where + ".types", "a list of strings", types);
  for (size_t t = 0; t < types.size(); ++t) {
    if (!types[t].is_string()) {
      return r.Expected(where + ".types[" + std::to_string(t) + "]", "a string", types[t]);
    }
    job->types.push_back(types[t].get<std::string>());
  }
  return Status::OK();
}

// The phase at `pwhere`, the job's phases[p]: its name (default "phase<p+1>"), its duration (at
// least kMinPhaseNanos) and its levels (default 0).
Result<LoadPhase> ReadPhase(const Reader& r, const json& phase, const std::string& pwhere,
                            size_t p) {
  if (!phase.is_object()) return r.Expected(pwhere, "an object", phase);
  if (Status known = r.OnlyKnownKeys(phase, pwhere, "a phase", kPhaseKeys); !known.ok()) {
    return known;
  }
  LoadPhase load;
  KWATT_ASSIGN_OR_RETURN(load.name,
                         r.String(phase, "name", pwhere, "phase" + std::to_string(p + 1)));
  if (!phase.contains("duration")) {
    return r.Bad(pwhere + ".duration", "is required (seconds, > 0)");
  }
  KWATT_ASSIGN_OR_RETURN(load.duration_ns, Duration(r, phase["duration"], pwhere + ".duration",
                                                    "seconds (a number > 0)"));
  if (load.duration_ns < kMinPhaseNanos) {
    return r.Bad(pwhere + ".duration", "= " + phase["duration"].dump() +
                                           ": a phase lasts at least 0.001 s (1 ms; the finest "
                                           "metric, wattmetre_power_watt, is sampled every 20 ms)");
  }
  for (auto [key, field] : {std::pair{"cpu", &load.cpu}, std::pair{"network", &load.network},
                            std::pair{"gpu", &load.gpu}}) {
    KWATT_ASSIGN_OR_RETURN(*field, r.Level(phase, key, pwhere));
  }
  return load;
}

// A job's load: its phases (default: one phase "run" at cpu 0.5 for the whole job) and whether
// they repeat.
Status ReadJobPhases(const Reader& r, const json& item, const std::string& where, Job* job) {
  if (item.contains("phases")) {
    const json& phases = item["phases"];
    if (!phases.is_array()) return r.Expected(where + ".phases", "a list of phases", phases);
    for (size_t p = 0; p < phases.size(); ++p) {
      std::string pwhere = where + ".phases[" + std::to_string(p) + "]";
      KWATT_ASSIGN_OR_RETURN(LoadPhase load, ReadPhase(r, phases[p], pwhere, p));
      job->phases.push_back(std::move(load));
    }
  }
  if (job->phases.empty()) {
    job->phases.push_back(LoadPhase{"run", job->EffectiveEnd() - job->started_at, 0.5, 0.05, 0.0});
  }
  if (item.contains("repeat_phases")) {
    if (!item["repeat_phases"].is_boolean()) {
      return r.Expected(where + ".repeat_phases", "true or false", item["repeat_phases"]);
    }
    job->repeat_phases = item["repeat_phases"].get<bool>();
  }
  return Status::OK();
}

// The job at `where` (jobs[i]), every field checked.
Result<Job> ReadJob(const Reader& r, const json& item, const std::string& where) {
  if (!item.is_object()) return r.Expected(where, "an object", item);
  if (Status known = r.OnlyKnownKeys(item, where, "a job", kJobKeys); !known.ok()) return known;
  Job job;
  KWATT_RETURN_IF_ERROR(ReadJobIdentity(r, item, where, &job));
  KWATT_RETURN_IF_ERROR(ReadJobNodes(r, item, where, &job));
  KWATT_RETURN_IF_ERROR(ReadJobTimes(r, item, where, &job));
  KWATT_RETURN_IF_ERROR(ReadJobTypes(r, item, where, &job));
  KWATT_RETURN_IF_ERROR(ReadJobPhases(r, item, where, &job));
  return job;
}

// Adds `job`'s load changes (its phase starts times its nodes) to `load_changes`, the file's so
// far; refused beyond kMaxLoadChanges.
Status CountLoadChanges(const Reader& r, const Job& job, const std::string& where,
                        int64_t* load_changes) {
  int64_t changes = SaturatingMultiply(PhaseStarts(job), int64_t(job.nodes.size()));
  *load_changes = SaturatingAdd(*load_changes, changes);
  if (*load_changes > kMaxLoadChanges) {
    return r.Bad(where + ".phases",
                 "change the load of its " + std::to_string(job.nodes.size()) +
                     (job.nodes.size() == 1 ? " node " : " nodes ") + std::to_string(changes) +
                     " times, " + std::to_string(*load_changes) +
                     " load changes in the file so far: the simulator holds at most " +
                     std::to_string(kMaxLoadChanges) +
                     " (phase starts times nodes, all jobs together); lengthen the phases, "
                     "shorten the job or give it fewer nodes");
  }
  return Status::OK();
}

// The outage at `where` (outages[i]): its site, device, metric (optional), start and end, and
// what the device reports meanwhile.
Result<Outage> ReadOutage(const Reader& r, const json& item, const std::string& where) {
  if (!item.is_object()) return r.Expected(where, "an object", item);
  if (Status known = r.OnlyKnownKeys(item, where, "an outage", kOutageKeys); !known.ok()) {
    return known;
  }
  for (const char* key : {"site", "device", "start", "end"}) {
    if (!item.contains(key)) {
      return r.Bad(where + "." + key,
                   "is required (an outage needs \"site\", \"device\", \"start\" and \"end\")");
    }
  }
  Outage outage;
  KWATT_ASSIGN_OR_RETURN(outage.site, r.String(item, "site", where, std::nullopt));
  KWATT_ASSIGN_OR_RETURN(outage.device, r.String(item, "device", where, std::nullopt));
  // A node's FQDN is its uid (of the outage's site).
  KWATT_ASSIGN_OR_RETURN(outage.device,
                         r.NodeUid(item["device"], where + ".device", where, outage.site, false));
  KWATT_ASSIGN_OR_RETURN(outage.metric, r.String(item, "metric", where, std::string()));
  KWATT_ASSIGN_OR_RETURN(outage.start, r.Time(item["start"], where + ".start"));
  KWATT_ASSIGN_OR_RETURN(outage.end, r.Time(item["end"], where + ".end"));
  if (outage.end <= outage.start) return r.Bad(where + ".end", "is not after its start");
  std::string report;
  KWATT_ASSIGN_OR_RETURN(report, r.String(item, "report", where, std::string("nothing")));
  if (report != "nothing" && report != "NaN") {
    return r.Bad(where + ".report",
                 "should be \"nothing\" (no row) or \"NaN\" (rows with NaN values)");
  }
  outage.nan = report == "NaN";
  return outage;
}

// faults[i]: a device that lies over [start, end) (doc/jobs_file.md, "Faults").
Result<Fault> ReadFault(const Reader& r, const json& item, const std::string& where) {
  if (!item.is_object()) return r.Expected(where, "an object", item);
  if (Status known = r.OnlyKnownKeys(item, where, "a fault", kFaultKeys); !known.ok()) {
    return known;
  }
  for (const char* key : {"site", "device"}) {
    if (!item.contains(key)) {
      return r.Bad(where + "." + key, "is required (a fault needs \"site\" and \"device\")");
    }
  }
  Fault fault;
  KWATT_ASSIGN_OR_RETURN(fault.site, r.String(item, "site", where, std::nullopt));
  KWATT_ASSIGN_OR_RETURN(fault.device, r.String(item, "device", where, std::nullopt));
  KWATT_ASSIGN_OR_RETURN(fault.device, r.NodeUid(item["device"], where + ".device", where,
                                                 fault.site, false, "a fault"));
  KWATT_ASSIGN_OR_RETURN(fault.metric, r.String(item, "metric", where, std::string()));
  if (item.contains("start")) {
    KWATT_ASSIGN_OR_RETURN(fault.start, r.Time(item["start"], where + ".start"));
  }
  if (item.contains("end")) {
    KWATT_ASSIGN_OR_RETURN(fault.end, r.Time(item["end"], where + ".end"));
  }
  if (fault.end <= fault.start) return r.Bad(where + ".end", "is not after its start");
  // A number within [low, high]; `what` says what it is.
  auto number = [&](const char* key, double low, double high, const char* what,
                    double* out) -> Status {
    if (!item.contains(key)) return Status::OK();
    const json& value = item[key];
    std::string path = where + "." + key;
    if (!value.is_number()) return r.Expected(path, what, value);
    double x = value.get<double>();
    if (!(x >= low && x <= high)) return r.Bad(path, "= " + value.dump() + ": should be " + what);
    *out = x;
    return Status::OK();
  };
  KWATT_RETURN_IF_ERROR(
      number("bias", -1e6, 1e6, "a number of watts from -1e6 to 1e6", &fault.bias));
  KWATT_RETURN_IF_ERROR(number("scale", 0, 1e3, "a factor from 0 to 1000", &fault.scale));
  double late = 0;
  KWATT_RETURN_IF_ERROR(
      number("late", -kMaxLateSeconds, kMaxLateSeconds, "seconds from -86400 to 86400", &late));
  fault.late = int64_t(std::llround(late * 1e9));
  if (item.contains("stuck")) {
    if (!item["stuck"].is_boolean())
      return r.Expected(where + ".stuck", "true or false", item["stuck"]);
    fault.stuck = item["stuck"].get<bool>();
    if (fault.stuck && !item.contains("start")) {
      return r.Bad(where + ".stuck",
                   "needs a \"start\": the instant whose value the device repeats");
    }
  }
  if (fault.bias == 0 && fault.scale == 1 && !fault.stuck && fault.late == 0) {
    return r.Bad(where,
                 "changes nothing: give it a \"bias\", a \"scale\" other than 1, "
                 "\"stuck\": true or a \"late\" clock");
  }
  return fault;
}

}  // namespace

Status JobSet::Refuse(const std::string& what) const {
  return Status::InvalidArgument("jobs file " + origin + ": " + what);
}

Result<JobSet> JobSet::Parse(std::string_view json_text, std::string_view origin) {
  Reader r(origin);
  KWATT_ASSIGN_OR_RETURN(json doc, ParseJson(r, json_text));
  KWATT_RETURN_IF_ERROR(CheckTopLevel(r, doc));
  JobSet set;
  set.origin = std::string(origin);
  int64_t load_changes = 0;  // phase starts times nodes, all jobs so far
  const json& jobs = doc.contains("jobs") ? doc["jobs"] : json::array();
  if (!jobs.is_array()) return r.Expected("jobs", "a list", jobs);
  for (size_t i = 0; i < jobs.size(); ++i) {
    std::string where = "jobs[" + std::to_string(i) + "]";
    KWATT_ASSIGN_OR_RETURN(Job job, ReadJob(r, jobs[i], where));
    KWATT_RETURN_IF_ERROR(CountLoadChanges(r, job, where, &load_changes));
    if (const Job* first = set.Find(job.site, job.uid)) {
      return r.Bad(where, "is job " + job.site + ":" + std::to_string(job.uid) + " again (jobs[" +
                              std::to_string(first - set.jobs.data()) +
                              "]): give each job of a site its own uid");
    }
    set.jobs.push_back(std::move(job));
  }
  if (doc.contains("outages")) {
    const json& outages = doc["outages"];
    if (!outages.is_array()) return r.Expected("outages", "a list", outages);
    for (size_t i = 0; i < outages.size(); ++i) {
      KWATT_ASSIGN_OR_RETURN(Outage outage,
                             ReadOutage(r, outages[i], "outages[" + std::to_string(i) + "]"));
      set.outages.push_back(std::move(outage));
    }
  }
  if (doc.contains("faults")) {
    const json& faults = doc["faults"];
    if (!faults.is_array()) return r.Expected("faults", "a list", faults);
    for (size_t i = 0; i < faults.size(); ++i) {
      KWATT_ASSIGN_OR_RETURN(Fault fault,
                             ReadFault(r, faults[i], "faults[" + std::to_string(i) + "]"));
      set.faults.push_back(std::move(fault));
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

}  // namespace kwatt::jobs
