// OAR jobs: the one Job that the store keeps (store.h: its site, uid, user, nodes, times and
// types), the collector follows and the server shows, and the simulated testbed's jobs read from a
// jobs file (kwatt/jobs/jobs_file.h).
//
// Jobs give the simulation its load: during a job its nodes follow the job's load phases; outside
// jobs nodes are idle. Their `types` switch on-demand metrics (`monitor`, `monitor=<regex>`).
// Values; thread-compatible.
#ifndef KWATT_JOBS_JOB_H_
#define KWATT_JOBS_JOB_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kwatt/core/time.h"

namespace kwatt::jobs {

// A stretch of a job during which its nodes run at constant levels.
struct LoadPhase {
  std::string name;
  int64_t duration_ns = 0;
  double cpu = 0;      // fraction of the CPUs busy, 0..1
  double network = 0;  // fraction of the link rate used, 0..1
  double gpu = 0;      // fraction of the GPUs busy, 0..1

  bool operator==(const LoadPhase&) const = default;
};

// An OAR job. The first seven fields are what Kwollect knows of a job and what a store keeps; the
// others are what the simulated OAR API shows besides (a stored job has their defaults) and the
// simulated load.
struct Job {
  std::string site;  // "lyon"
  int64_t uid = 0;   // OAR's job id, per site
  std::string user = "kwatt";
  std::vector<std::string> nodes;  // distinct node uids ("nova-1"), FQDNs already cut at the '.'
  UnixNanos started_at = 0;
  std::optional<UnixNanos> stopped_at;  // absent: still running
  std::vector<std::string> types;       // OAR job types, e.g. "monitor=wattmetre_power_watt"
  std::string name;
  std::string project = "kwatt";
  std::string queue = "default";
  UnixNanos submitted_at = 0;
  int64_t walltime_s = 0;
  std::vector<LoadPhase> phases;  // in order from started_at; default: one phase at cpu 0.5
  bool repeat_phases = false;     // cycle through `phases` until the job ends

  bool operator==(const Job&) const = default;

  // The job's end for load and on-demand metrics: stopped_at, else started_at + walltime.
  UnixNanos EffectiveEnd() const;
  bool HasNode(std::string_view uid) const;
};

// A node (or device) as a job names it, split: "nova-1", "nova-1.lyon", "nova-1.lyon.grid5000.fr"
// (and "nova-1.lyon.grid5000.fr.") give the uid "nova-1" and the site named with it ("" or
// "lyon"). The jobs file's reader and `kwatt jobs add --nodes` read names with it.
struct JobNodeName {
  std::string uid;
  std::string site;  // empty when the name gives none
};
// None when `text` is not such a name (empty, ".lyon", "a.b.c").
std::optional<JobNodeName> SplitJobNodeName(std::string_view text);

}  // namespace kwatt::jobs

#endif  // KWATT_JOBS_JOB_H_
