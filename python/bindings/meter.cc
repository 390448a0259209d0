// kwatt._core's meter: the engine of kwatt.measure (python/kwatt/measure.py, doc/python.md).
//
// A Meter is opened from a dict (everything checked before it starts, as `kwatt meter` does), run
// between start() and stop() with the GIL released while it stops, and its reports come back as
// columns (numpy arrays) that kwatt.measure turns into DataFrames. No formula is here: the meter
// part computes everything.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kwatt/core/version.h"
#include "kwatt/meter/kwollect/open_meter.h"
#include "python/bindings/common.h"

namespace py = pybind11;

namespace kwatt::python {
namespace {

using namespace kwatt::meter;

template <typename T>
T Get(const py::dict& d, const char* key, T fallback) {
  if (!d.contains(key) || d[key].is_none()) return fallback;
  return d[key].cast<T>();
}

// Seconds as the meter takes them: its range is the meter's to check, whose message names it
// ("the period should be from 1 ms to 1 day, not -1 s").
std::chrono::nanoseconds Seconds(const py::dict& d, const char* key, double fallback) {
  double seconds = Get<double>(d, key, fallback);
  if (!std::isfinite(seconds)) {
    Throw(Status::InvalidArgument(std::string(key) + " should be a number of seconds, not " +
                                  py::repr(d[key]).cast<std::string>()));
  }
  // Beyond any range the meter takes, and within int64 nanoseconds.
  return std::chrono::nanoseconds(int64_t(std::llround(std::clamp(seconds, -1e9, 1e9) * 1e9)));
}

// The dict kwatt.measure builds (its keyword arguments), as a MeterConfig.
MeterConfig MakeConfig(const py::dict& given) {
  static const char* known[] = {
      "sources",     "rapl_path",   "rapl_domains",  "kwollect",     "pids",        "trees",
      "cgroups",     "commands",    "all_processes", "cgroup_depth", "counters",    "attribute",
      "period",      "read_period", "idle_policy",   "idle_power",   "outputs",     "listen_host",
      "listen_port", "state_file",  "sysfs_root",    "procfs_root",  "cgroup_root", "nvml_library",
      "hostname",    "output_node", "site",          "max_targets",  "formula"};
  for (auto [key, value] : given) {
    std::string name = key.cast<std::string>();
    bool ok = false;
    for (const char* k : known) ok = ok || name == k;
    if (!ok) Throw(Status::InvalidArgument("unknown meter option '" + name + "'"));
  }
  MeterConfig config;
  MeterEnvironment& environment = config.environment;
  environment.sysfs_root = Get<std::string>(given, "sysfs_root", environment.sysfs_root);
  environment.procfs_root = Get<std::string>(given, "procfs_root", environment.procfs_root);
  environment.perf = SystemPerfEvents(environment.procfs_root);
  environment.cgroup_root = Get<std::string>(given, "cgroup_root", "");
  environment.nvml_library = Get<std::string>(given, "nvml_library", environment.nvml_library);
  environment.hostname = Get<std::string>(given, "hostname", "");
  config.sources = Get<std::vector<std::string>>(given, "sources", {});
  config.rapl.path = Unwrap(ParseRaplPath(Get<std::string>(given, "rapl_path", "auto")));
  config.rapl.domains = Get<std::vector<std::string>>(given, "rapl_domains", {});
  if (given.contains("kwollect") && !given["kwollect"].is_none()) {
    py::dict kwollect = given["kwollect"].cast<py::dict>();
    config.kwollect.node = Get<std::string>(kwollect, "node", "");
    config.kwollect.metric = Get<std::string>(kwollect, "metric", "");
    config.kwollect.client = MakeClientOptions(Get<py::dict>(kwollect, "client", py::dict()));
  }
  TargetSelection& targets = config.targets;
  targets.pids = Get<std::vector<int64_t>>(given, "pids", {});
  targets.trees = Get<bool>(given, "trees", true);
  targets.cgroups = Get<std::vector<std::string>>(given, "cgroups", {});
  targets.commands = Get<std::vector<std::string>>(given, "commands", {});
  targets.all_processes = Get<bool>(given, "all_processes", false);
  targets.cgroup_depth = Get<int>(given, "cgroup_depth", 0);
  targets.hardware_counters = Get<bool>(given, "counters", false);
  config.attribute = Get<bool>(given, "attribute", true);
  MeterOptions& options = config.options;
  options.period = Seconds(given, "period", 1.0);
  options.read_period = Seconds(given, "read_period", 0.0);
  options.formula.name = Get<std::string>(given, "formula", "cputime");
  options.formula.idle_policy =
      Unwrap(ParseIdlePolicy(Get<std::string>(given, "idle_policy", "proportional")));
  options.formula.idle_watts = Get<std::map<std::string, double>>(given, "idle_power", {});
  options.state_file = Get<std::string>(given, "state_file", "");
  config.outputs = Get<std::vector<std::string>>(given, "outputs", {});
  config.listen_host = Get<std::string>(given, "listen_host", "127.0.0.1");
  config.listen_port = Get<int>(given, "listen_port", -1);
  config.output_options.node = Get<std::string>(given, "output_node", "");
  config.output_options.site = Get<std::string>(given, "site", "");
  config.output_options.max_targets = Get<int>(given, "max_targets", 10);
  config.output_options.kwatt_version = KwattVersion();
  return config;
}

py::dict DomainDict(const Domain& d) {
  py::dict out;
  out["source"] = d.source;
  out["domain"] = d.name;
  out["kind"] = d.kind;
  out["socket"] = d.socket;
  out["origin"] = d.origin;
  return out;
}

template <typename T>
py::array_t<T> Array(const std::vector<T>& values) {
  py::array_t<T> out(values.size());
  std::copy(values.begin(), values.end(), out.mutable_data());
  return out;
}

class PyMeter {
 public:
  explicit PyMeter(const py::dict& config) {
    MeterConfig made = MakeConfig(config);
    auto buffer = std::make_unique<ReportBuffer>();
    buffer_ = buffer.get();
    std::vector<MeterOutput> more;
    more.push_back(MeterOutput{"kwatt.measure", std::move(buffer)});
    Result<OpenedMeter> opened = [&] {
      py::gil_scoped_release release;
      return OpenMeter(std::move(made), std::move(more));
    }();
    opened_ = Unwrap(std::move(opened));
  }

  void Start() {
    py::gil_scoped_release release;
    Check(opened_.meter->Start());
    if (!opened_.server) return;
    if (Status serving = opened_.server->Serve(); !serving.ok()) {
      Status stopped = opened_.meter->Stop();  // not left running behind the error
      (void)stopped;
      Throw(serving.WithContext("listen"));
    }
  }

  // Stops (the last interval ends now) and gives everything measured.
  py::dict Stop() {
    Status stopped;
    {
      py::gil_scoped_release release;
      stopped = opened_.meter->Stop();
      if (opened_.server) opened_.server->Stop();
    }
    py::dict out = Collect();
    out["error"] = stopped.ok() ? py::object(py::none()) : py::object(py::str(stopped.message()));
    return out;
  }

  py::dict Header() const {
    const MeterHeader& h = opened_.meter->header();
    py::dict out;
    out["sensor"] = h.sensor;
    py::list domains;
    for (const auto& d : h.domains) domains.append(DomainDict(d));
    out["domains"] = domains;
    out["notes"] = opened_.notes;
    out["warnings"] = opened_.warnings;
    out["url"] =
        opened_.server ? py::object(py::str(opened_.server->url())) : py::object(py::none());
    return out;
  }

 private:
  // One row per (interval, domain): what kwatt.measure's samples DataFrame holds; and the totals.
  py::dict Collect() {
    std::vector<IntervalReport> reports = buffer_->Take();
    std::vector<int64_t> start, end, measured, idle, unattributed, attributed, busy, capacity,
        targets_cpu;
    std::vector<int32_t> domain;
    py::list flags;  // words, as m.energy's and the CSV's (DescribeDomainFlags)
    for (const IntervalReport& r : reports) {
      int64_t cpu = 0;
      for (const auto& t : r.targets) cpu += t.cpu_microseconds;
      for (size_t d = 0; d < r.domains.size(); ++d) {
        const DomainEnergy& e = r.domains[d];
        start.push_back(r.start);
        end.push_back(r.end);
        domain.push_back(int32_t(d));
        measured.push_back(e.measured_microjoules);
        idle.push_back(e.idle_microjoules);
        unattributed.push_back(e.unattributed_microjoules);
        int64_t sum = 0;
        for (int64_t share : e.target_microjoules) sum += share;
        attributed.push_back(sum);
        flags.append(DescribeDomainFlags(e.flags));
        busy.push_back(r.busy_microseconds);
        capacity.push_back(r.capacity_microseconds);
        targets_cpu.push_back(cpu);
      }
    }
    py::dict samples;
    samples["start"] = Array(start);
    samples["end"] = Array(end);
    samples["domain"] = Array(domain);
    samples["measured_uj"] = Array(measured);
    samples["idle_uj"] = Array(idle);
    samples["unattributed_uj"] = Array(unattributed);
    samples["targets_uj"] = Array(attributed);
    samples["flags"] = flags;
    samples["busy_us"] = Array(busy);
    samples["capacity_us"] = Array(capacity);
    samples["targets_cpu_us"] = Array(targets_cpu);

    MeterTotals totals = opened_.meter->Totals();
    py::dict t;
    t["start"] = totals.start;
    t["end"] = totals.end;
    t["measured_uj"] = totals.measured_microjoules;
    t["idle_uj"] = totals.idle_microjoules;
    t["unattributed_uj"] = totals.unattributed_microjoules;
    py::list flag_texts;
    for (uint32_t f : totals.flags) flag_texts.append(DescribeDomainFlags(f));
    t["flags"] = flag_texts;
    py::list targets;
    for (const auto& target : totals.targets) {
      py::dict entry;
      entry["key"] = target.target.key;
      entry["kind"] = TargetKindName(target.target.kind);
      entry["name"] = target.target.name;
      entry["pid"] = target.target.pid;
      entry["cpu_us"] = target.cpu_microseconds;
      entry["uj"] = target.microjoules;
      targets.append(entry);
    }
    t["targets"] = targets;
    t["busy_us"] = totals.busy_microseconds;
    t["capacity_us"] = totals.capacity_microseconds;

    MeterHealth health = opened_.meter->Health();
    py::dict h;
    h["ticks"] = health.ticks;
    h["late_ticks"] = health.late_ticks;
    h["missed_ticks"] = health.missed_ticks;
    h["merged_samples"] = health.merged_samples;
    h["max_lag_seconds"] = health.max_lag_seconds;
    h["reports"] = health.reports;
    h["wraps"] = health.wraps;
    h["resets"] = health.resets;
    h["dropped_reports"] = health.dropped_reports;

    py::dict out = Header();
    out["samples"] = samples;
    out["totals"] = t;
    out["health"] = h;
    return out;
  }

  OpenedMeter opened_;
  ReportBuffer* buffer_ = nullptr;
};

}  // namespace

void RegisterMeter(py::module_& m) {
  py::class_<PyMeter>(m, "Meter",
                      "The power meter (kwatt.measure): opened from a dict of options, checked "
                      "before it starts")
      .def(py::init<const py::dict&>(), py::arg("config"))
      .def("start", &PyMeter::Start, "Takes the first reading and starts the meter's threads")
      .def("stop", &PyMeter::Stop,
           "Stops (the last interval ends now) and returns the header, samples (columns), "
           "totals and health")
      .def("header", &PyMeter::Header, "Sensor, domains, notes, warnings, the metrics URL");
}

}  // namespace kwatt::python
