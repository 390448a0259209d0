#include "kwatt/meter/kwollect/open_meter.h"

#include <algorithm>

#include "kwatt/meter/sources/nvml.h"

namespace kwatt::meter {

namespace {

// One local source's outcome when the sources were not named.
struct Absent {
  std::string source;
  Status why;
};

Status NoSourceFound(const std::vector<Absent>& absent) {
  std::string message = "no energy source found on this machine:";
  bool permission = false;
  for (const auto& a : absent) {
    message += " " + a.source + ": " + a.why.message() + ";";
    permission = permission || a.why.code() == Status::Code::kPermissionDenied;
  }
  message +=
      " give --source kwollect to use the node's own power through Kwollect, or "
      "--sysfs-root for a simulated machine (kwatt simulate rapl)";
  return permission ? Status::PermissionDenied(message) : Status::NotFound(message);
}

}  // namespace

Result<OpenedMeter> OpenMeter(MeterConfig config, std::vector<MeterOutput> more_outputs) {
  OpenedMeter opened;
  const MeterEnvironment& environment = config.environment;

  // Outputs first: a mistyped spec or a database that refuses should be said before any source
  // is opened.
  std::vector<MeterOutput> outputs;
  for (const std::string& spec : config.outputs) {
    KWATT_ASSIGN_OR_RETURN(std::unique_ptr<OutputSink> sink,
                           OpenOutput(spec, config.output_options));
    for (auto& note : sink->Notes()) opened.warnings.push_back(std::move(note));
    std::string name = sink->Name();
    outputs.push_back(MeterOutput{std::move(name), std::move(sink)});
  }
  PrometheusExposition* exposition = nullptr;
  if (config.listen_port >= 0) {
    auto sink = std::make_unique<PrometheusExposition>(config.output_options);
    exposition = sink.get();
    outputs.push_back(MeterOutput{sink->Name(), std::move(sink)});
  }
  for (auto& output : more_outputs) outputs.push_back(std::move(output));

  // Sources.
  std::vector<std::unique_ptr<EnergySource>> sources;
  std::vector<std::unique_ptr<DelayedEnergySource>> delayed;
  std::vector<std::string> names = config.sources;
  const bool chosen = !names.empty();
  if (!chosen) names = {"rapl", "nvml"};
  std::vector<Absent> absent;
  for (const std::string& name : names) {
    if (std::count(names.begin(), names.end(), name) > 1) {
      return Status::InvalidArgument("source " + name + " is given twice");
    }
    Status failed;
    if (name == "rapl") {
      Result<std::unique_ptr<EnergySource>> rapl = OpenRapl(environment, config.rapl);
      if (rapl.ok()) {
        sources.push_back(std::move(*rapl));
      } else {
        failed = rapl.status();
      }
    } else if (name == "nvml") {
      Result<std::unique_ptr<NvmlSource>> nvml = OpenNvml(environment);
      if (nvml.ok()) {
        sources.push_back(std::move(*nvml));
      } else {
        failed = nvml.status();
      }
    } else if (name == "kwollect") {
      KwollectPowerOptions options = config.kwollect;
      if (options.node.empty()) options.node = HostName(environment);
      options.clock = environment.clock;
      if (!options.log) options.log = config.options.log;
      Result<std::unique_ptr<KwollectPowerSource>> node = OpenKwollectPower(std::move(options));
      if (node.ok()) {
        delayed.push_back(std::move(*node));
      } else {
        failed = node.status();
      }
    } else {
      return Status::InvalidArgument("unknown source \"" + name +
                                     "\": the sources are rapl, nvml and kwollect");
    }
    if (failed.ok()) continue;
    // A source asked for by name must be there; one looked for by default may be absent.
    if (chosen) return failed.WithContext("source " + name);
    absent.push_back(Absent{name, failed});
  }
  if (sources.empty() && delayed.empty()) return NoSourceFound(absent);
  for (const auto& a : absent) {
    if (a.why.code() != Status::Code::kNotFound) {
      opened.warnings.push_back(a.source + " is not read: " + a.why.message());
    }
  }

  std::unique_ptr<ActivityReader> activity;
  KWATT_RETURN_IF_ERROR(ValidateFormulaName(config.options.formula.name));
  if (config.attribute) {
    // The formula's features (smartwatts: the targets' cycles and instructions).
    TargetSelection targets = config.targets;
    if (FormulaNeedsHardwareCounters(config.options.formula.name)) targets.hardware_counters = true;
    Result<std::unique_ptr<ActivityReader>> opened = ActivityReader::Open(environment, targets);
    if (!opened.ok() && targets.hardware_counters && !config.targets.hardware_counters) {
      return opened.status().WithContext("the " + config.options.formula.name +
                                         " formula reads the targets' hardware counters (cycles, "
                                         "instructions; the formula cputime needs none)");
    }
    KWATT_ASSIGN_OR_RETURN(activity, std::move(opened));
  }

  KWATT_ASSIGN_OR_RETURN(opened.meter,
                         Meter::Create(environment, std::move(sources), std::move(delayed),
                                       std::move(activity), std::move(outputs), config.options));
  for (const auto& note : opened.meter->header().notes) opened.notes.push_back(note);

  if (exposition) {
    KWATT_ASSIGN_OR_RETURN(opened.server,
                           BindMetricsServer(config.listen_host, config.listen_port, *exposition));
  }
  return opened;
}

}  // namespace kwatt::meter
