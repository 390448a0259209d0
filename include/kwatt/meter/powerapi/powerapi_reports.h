// PowerAPI's report formats as outputs of the meter (ReportSinks), so that PowerAPI's tooling and
// dashboards read what kwatt writes (doc/meter/outputs.md, "PowerAPI's reports").
//
// Any IntervalReport is written (the cputime formula's as the smartwatts formula's). Per interval
// and domain (a gap, flagged kUnreadable, is left out as PowerAPI leaves out a tick it dropped):
// - a power report for the domain itself: target = the domain's source ("rapl"), power = its
//   measured energy over the interval, formula = the RAPL event for a package or DRAM domain
//   ("RAPL_ENERGY_PKG", "RAPL_ENERGY_DRAM", as SmartWatts writes it), else the domain's name;
//   ratio 1;
// - a power report per target of the interval: target = its name for a cgroup (hwpc-sensor's
//   target), its key for a process or tree (a command name is not unique); power = its
//   microjoules over the interval's microseconds (watts); formula = the id of the model used (the
//   smartwatts formula) or the formula's name; ratio = its share of the domain's energy above idle.
// Each carries timestamp = the interval's end in milliseconds since the epoch, sensor = the
// header's, and the tags scope ("cpu" for a package, "dram", else the domain's kind), socket (-1
// when the domain has none), formula, ratio.
// - a formula report per model used in the interval (the smartwatts formula): target = the model's
//   id, metadata {scope, socket, layer_frequency, pkg_frequency, samples, id, error, intercept,
//   coef} where coef maps each event to its coefficient (watts per event per second) and error is
//   the error aggregated over the error window (watts).
//
// Thread safety: a sink is used by one thread at a time (ReportSink's contract).
#ifndef KWATT_METER_POWERAPI_POWERAPI_REPORTS_H_
#define KWATT_METER_POWERAPI_POWERAPI_REPORTS_H_

#include <memory>
#include <string>

#include "kwatt/core/status.h"
#include "kwatt/meter/formulas/report.h"

namespace kwatt::meter {

struct PowerApiSinkOptions {
  // Flush at every report (a live meter: readers see each one at once); false flushes when the
  // buffers fill and at Finish (post-mortem runs, several times faster).
  bool flush_each_report = true;
  // At most this many files open at once (the CSV layout has one per target): the least recently
  // written is closed, and reopened for appending when needed.
  int max_open_files = 256;
};

// PowerAPI's CSV output (`--output csv --directory DIRECTORY`): power reports appended to
// DIRECTORY/SENSOR-TARGET/PowerReport.csv with the header
// `timestamp,sensor,target,power,socket,formula,ratio,scope`, formula reports to
// DIRECTORY/SENSOR-MODEL_ID/FormulaReport.csv with `timestamp,sensor,target,metadata` (the
// metadata a JSON object). As PowerAPI does, a target holding '/' (a cgroup path) makes
// subdirectories; a "." or ".." path component is written "_", so nothing lands outside
// DIRECTORY. An existing file is appended to when its header is the same, and refused
// (InvalidArgument naming it) otherwise. DIRECTORY (and its parents) is created by this call:
// IOError or InvalidArgument naming it when it cannot be.
Result<std::unique_ptr<ReportSink>> OpenPowerApiCsvSink(const std::string& directory,
                                                        const PowerApiSinkOptions& options = {});

// Which of PowerAPI's report types a JSON sink writes.
enum class PowerApiReportType { kPower, kFormula };

// PowerAPI's JSON form of its reports, one document per line, as its JSON/socket/MongoDB outputs
// render a report and PowerReport.from_json reads one:
//   {"timestamp": MS, "sensor": S, "target": T, "power": WATTS,
//    "metadata": {"scope": "cpu", "socket": 0, "formula": F, "ratio": R}}
// or for formula reports {"timestamp", "sensor", "target", "metadata": {...}}. PATH is opened
// and truncated by this call ("-": standard output): IOError naming it when it cannot be.
Result<std::unique_ptr<ReportSink>> OpenPowerApiJsonSink(const std::string& path,
                                                         PowerApiReportType type,
                                                         const PowerApiSinkOptions& options = {});

}  // namespace kwatt::meter

#endif  // KWATT_METER_POWERAPI_POWERAPI_REPORTS_H_
