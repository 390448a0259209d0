// The jobs file (format: doc/jobs_file.md): the jobs and the device outages of a simulated
// testbed, as `kwatt serve --jobs`, `kwatt simulate` and `kwatt jobs add --from` read them.
// Values; thread-compatible.
#ifndef KWATT_JOBS_JOBS_FILE_H_
#define KWATT_JOBS_JOBS_FILE_H_

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/core/time.h"
#include "kwatt/jobs/job.h"

namespace kwatt::jobs {

// The format version of the jobs file this kwatt reads (its optional "format_version").
inline constexpr int kJobsFileFormatVersion = 1;
// The shortest phase, 1 ms: shorter ones are refused. The finest metric, wattmetre_power_watt, is
// sampled every 20 ms.
inline constexpr int64_t kMinPhaseNanos = 1'000'000;
// The most load changes a jobs file may ask for: each start of a phase (repetitions counted,
// phases past the job's end not) on each node of its job, all jobs together. The simulator keeps
// every change of a node's load (two points of about 56 bytes each: 2 million changes hold about
// 220 MB), so a file of tiny or endlessly repeated phases would otherwise exhaust memory.
inline constexpr int64_t kMaxLoadChanges = 2'000'000;

// A period during which a device reports nothing (a wattmeter or BMC outage).
struct Outage {
  std::string site;
  std::string device;  // a node uid (its wattmeter, PDU and BMC values all stop) or a device id
                       // (FQDNs cut at the '.')
  std::string metric;  // only this metric; empty: all
  UnixNanos start = 0;
  UnixNanos end = 0;
  // false: no row at all during the outage; true ("report": "NaN"): rows go on, with the value
  // "NaN", as Kwollect stores a reading that is not a number.
  bool nan = false;
};

// A device that reports wrong values for a while: a meter that lies, so that what checks sources
// against each other (doc/energy.md) can be tested on data whose wrong source is known. Each
// value the device's series would report at a row's instant t becomes
//   (its true value at (stuck ? start : t) + late) x scale + bias
// over [start, end) (rows outside it, and NaN values, are as they were). Where several faults
// hold for a series at an instant, the first in the file applies.
struct Fault {
  std::string site;
  std::string device;  // a node uid (every series of it) or a device id, as an outage's
  std::string metric;  // only this metric; empty: all
  UnixNanos start = std::numeric_limits<UnixNanos>::min();  // default: always
  UnixNanos end = std::numeric_limits<UnixNanos>::max();
  double bias = 0;     // added to each value (watts for a power metric)
  double scale = 1;    // each value multiplied by it
  bool stuck = false;  // the value at `start` repeated
  // Nanoseconds the device's clock is behind: a row stamped t holds the reading taken at t + late
  // (negative: ahead).
  int64_t late = 0;
};

struct JobSet {
  std::vector<Job> jobs;        // in the file's order: jobs[i] is the file's jobs[i]
  std::vector<Outage> outages;  // likewise
  std::vector<Fault> faults;    // likewise
  std::string origin;           // the file, as Parse's `origin`

  // Parses a jobs file's text; `origin` names it in error messages. InvalidArgument, naming the
  // file and the place (jobs[1].nodes[2]), when the text is not JSON, has a key the format does
  // not (a misspelling), a format_version other than 1, a field of the wrong type or out of
  // range, a job id that is not positive, a node of another site than its job's or given twice
  // in a job, a phase shorter than kMinPhaseNanos, more load changes than kMaxLoadChanges, or a
  // job id twice on a site. What needs the testbed (sites, nodes and devices that exist) is
  // checked by Testbed::Build.
  static Result<JobSet> Parse(std::string_view json_text, std::string_view origin);
  static Result<JobSet> Load(const std::string& path);

  const Job* Find(std::string_view site, int64_t uid) const;

  // InvalidArgument "jobs file ORIGIN: `what`", for what is found wrong with the file after Parse
  // (`what` starts with the place: "jobs[0].site = ...").
  Status Refuse(const std::string& what) const;
};

}  // namespace kwatt::jobs

#endif  // KWATT_JOBS_JOBS_FILE_H_
