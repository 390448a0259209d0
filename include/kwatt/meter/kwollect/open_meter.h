// A meter as `kwatt meter` and Python's kwatt.measure ask for one: sources by name, targets,
// outputs by spec, the Prometheus endpoint, all checked and opened in one place before anything
// runs (doc/meter/README.md).
//
// Order: the outputs (their specs, files, peers probed), the sources, the activity, the meter
// (its options and state file), and last the --listen port: a configuration error of any kind is
// returned before a thread starts or a port opens.
//
// Thread safety: OpenMeter from any thread; what it returns belongs to its caller.
#ifndef KWATT_METER_KWOLLECT_OPEN_METER_H_
#define KWATT_METER_KWOLLECT_OPEN_METER_H_

#include <memory>
#include <string>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/meter/activity/activity.h"
#include "kwatt/meter/environment/environment.h"
#include "kwatt/meter/kwollect/kwollect_power.h"
#include "kwatt/meter/outputs/outputs.h"
#include "kwatt/meter/pipeline/meter.h"
#include "kwatt/meter/sources/rapl.h"

namespace kwatt::meter {

struct MeterConfig {
  MeterEnvironment environment;
  // The sources, by name: "rapl", "nvml", "kwollect" (the node's own power through Kwollect's API:
  // `kwollect` options below). Empty: every local source this machine has (RAPL, NVML GPUs); at
  // least one must be there.
  std::vector<std::string> sources;
  RaplOptions rapl;
  // For "kwollect": its node defaults to this machine's host name; its clock is the environment's.
  KwollectPowerOptions kwollect;
  // The targets energy is shared among (with their hardware counters when the formula needs them,
  // options.formula). `attribute` false: no activity is read, every interval's energy is
  // unattributed (or idle).
  TargetSelection targets;
  bool attribute = true;
  // Output specs (outputs.h: csv:PATH, jsonl:PATH, influxdb:URL/DB, kwollect:URL, textfile:PATH,
  // archive:DIR, powerapi-csv:DIR, powerapi-json:PATH).
  std::vector<std::string> outputs;
  OutputOptions output_options;
  // The Prometheus exposition on http://listen_host:listen_port/metrics (port 0: any free one);
  // a port below 0: none.
  std::string listen_host = "127.0.0.1";
  int listen_port = -1;
  MeterOptions options;
};

// A meter ready to start, and its HTTP endpoint bound (not yet answering).
struct OpenedMeter {
  std::unique_ptr<Meter> meter;
  // Bound when MeterConfig::listen_port was given: Serve() it once the meter started. Declared
  // after the meter so that it stops first (it reads the meter's exposition).
  std::unique_ptr<http::MetricsServer> server;
  // What a person should be told: a source looked for by default that is there but cannot be
  // read (a permission), an output's peer that does not answer yet.
  std::vector<std::string> warnings;
  // How things are read, for whoever asks (--verbose, --check): the path each source reads and
  // why, its counters' layout.
  std::vector<std::string> notes;

  OpenedMeter() = default;
  OpenedMeter(OpenedMeter&&) = default;
  OpenedMeter& operator=(OpenedMeter&&) = default;
  ~OpenedMeter() { server.reset(); }
};

// Opens everything `config` asks for; `more_outputs` are added after the configured ones (Python's
// in-memory buffer). Errors name what is wrong and what to do: an unknown source name, no source
// found (each one's reason; PermissionDenied when a permission is what is missing), the outputs'
// and the activity's errors, the meter's, a port that cannot be bound.
Result<OpenedMeter> OpenMeter(MeterConfig config, std::vector<MeterOutput> more_outputs = {});

}  // namespace kwatt::meter

#endif  // KWATT_METER_KWOLLECT_OPEN_METER_H_
