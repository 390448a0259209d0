// The simulated testbed's OAR jobs, read from a jobs file (format: doc/jobs_file.md).
//
// Jobs give the simulation its load: during a job its nodes follow the job's load phases; outside
// jobs nodes are idle. Their `types` switch on-demand metrics (`monitor`, `monitor=<regex>`).
// Values; thread-compatible.
#ifndef KWATT_SERVER_JOBS_H_
#define KWATT_SERVER_JOBS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/core/time.h"

namespace kwatt::server {

// A stretch of a job during which its nodes run at constant levels.
struct LoadPhase {
  std::string name;
  int64_t duration_ns = 0;
  double cpu = 0;      // fraction of the CPUs busy, 0..1
  double network = 0;  // fraction of the link rate used, 0..1
  double gpu = 0;      // fraction of the GPUs busy, 0..1
};

struct Job {
  std::string site;
  int64_t uid = 0;
  std::string user = "kwatt";
  std::string name;
  std::string project = "kwatt";
  std::string queue = "default";
  std::vector<std::string> nodes;  // node uids ("nova-1"), FQDNs already cut at the first '.'
  UnixNanos started_at = 0;
  std::optional<UnixNanos> stopped_at;  // absent: still running
  UnixNanos submitted_at = 0;
  int64_t walltime_s = 0;
  std::vector<std::string> types;
  std::vector<LoadPhase> phases;  // in order from started_at; default: one phase at cpu 0.5
  bool repeat_phases = false;     // cycle through `phases` until the job ends

  // The job's end for load and on-demand metrics: stopped_at, else started_at + walltime.
  UnixNanos EffectiveEnd() const;
  bool HasNode(std::string_view uid) const;
};

// A period during which a device reports nothing (a wattmeter or BMC outage).
struct Outage {
  std::string site;
  std::string device;  // a node uid (its wattmeter, PDU and BMC values all stop) or a device id
  std::string metric;  // only this metric; empty: all
  UnixNanos start = 0;
  UnixNanos end = 0;
  // false: no row at all during the outage; true ("report": "NaN"): rows go on, with the value
  // "NaN", as Kwollect stores a reading that is not a number.
  bool nan = false;
};

struct JobSet {
  std::vector<Job> jobs;
  std::vector<Outage> outages;

  // Parses a jobs file's text; `origin` names it in error messages.
  static Result<JobSet> Parse(std::string_view json_text, std::string_view origin);
  static Result<JobSet> Load(const std::string& path);

  const Job* Find(std::string_view site, int64_t uid) const;
};

}  // namespace kwatt::server

#endif  // KWATT_SERVER_JOBS_H_
