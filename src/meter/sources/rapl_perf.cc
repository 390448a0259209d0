// RAPL through perf's power PMU (rapl.h): one 64-bit counter per package and event.
#include <dirent.h>

#include <algorithm>
#include <limits>
#include <map>

#include "src/meter/sources/rapl_internal.h"

namespace kwatt::meter::rapl_internal {

namespace {

// The kind of a power PMU event: energy-pkg -> package...; "" for one kwatt does not know.
std::string EventKind(const std::string& event) {
  if (event == "energy-pkg") return "package";
  if (event == "energy-cores") return "core";
  if (event == "energy-gpu") return "uncore";
  if (event == "energy-ram") return "dram";
  if (event == "energy-psys") return "psys";
  return "";
}

class PerfSource : public EnergySource {
 public:
  struct Counter {
    PerfDomain info;
    int handle = -1;
    bool baseline = false;
    uint64_t last = 0;
    uint64_t total = 0;  // counts of the scale since open
  };

  PerfSource(std::shared_ptr<PerfEvents> perf, std::vector<Counter> counters,
             std::vector<std::string> notes)
      : perf_(std::move(perf)), counters_(std::move(counters)), notes_(std::move(notes)) {
    for (const Counter& c : counters_) domains_.push_back(c.info.domain);
  }

  ~PerfSource() override {
    for (Counter& c : counters_) perf_->Close(c.handle);
  }

  const std::vector<Domain>& domains() const override { return domains_; }

  Status Read(std::vector<DomainReading>* out) override {
    out->resize(counters_.size());
    for (size_t i = 0; i < counters_.size(); ++i) {
      Counter& c = counters_[i];
      DomainReading& reading = (*out)[i];
      reading.flags = 0;
      Result<PerfCount> count = perf_->Read(c.handle);
      if (!count.ok()) {
        reading.flags = kUnreadable;
        c.baseline = false;
      } else if (!c.baseline) {
        // After a failed read the interval is a gap, as powercap's: counting from here.
        reading.flags = kReset;
        c.baseline = true;
        c.last = count->value;
      } else {
        c.total += count->value - c.last;  // 64-bit counts: modular arithmetic is exact
        c.last = count->value;
      }
      reading.microjoules = PerfCountToMicrojoules(c.total, c.info.scale);
    }
    return Status::OK();
  }

  std::chrono::nanoseconds MaxReadPeriod() const override {
    return std::chrono::nanoseconds::max();
  }

  std::vector<std::string> Notes() const override { return notes_; }

  Status ResumeCounters(std::string_view saved, std::chrono::nanoseconds elapsed) override {
    return Status::InvalidArgument(
        "perf's power PMU counts from when its counters are opened: the energy between the last "
        "read and this restart cannot be recovered (the powercap path, --rapl-path powercap, "
        "resumes its counters)");
  }

 private:
  std::shared_ptr<PerfEvents> perf_;
  std::vector<Counter> counters_;
  std::vector<Domain> domains_;
  std::vector<std::string> notes_;
};

}  // namespace

Result<PerfScan> ScanPerf(const std::string& sysfs_root) {
  const std::string pmu = sysfs_root + "/bus/event_source/devices/power";
  Result<std::string> type_text = ReadSmallFile(pmu + "/type");
  if (!type_text.ok()) {
    if (type_text.status().code() == Status::Code::kNotFound) {
      return Status::NotFound("perf's power PMU is not on this machine: " + pmu +
                              " does not exist (no RAPL here, or a kernel without its perf rapl "
                              "driver)");
    }
    return type_text.status();
  }
  Result<uint64_t> type = ParseSysfsUnsigned(*type_text);
  if (!type.ok() || *type > std::numeric_limits<uint32_t>::max()) {
    return Status::Corruption(pmu + "/type is not a PMU type: " + Trimmed(*type_text));
  }
  Result<std::string> mask_text = ReadSmallFile(pmu + "/cpumask");
  if (!mask_text.ok()) return mask_text.status();
  Result<std::vector<int>> cpus = ParseCpuList(*mask_text);
  if (!cpus.ok()) return Status::Corruption(pmu + "/cpumask: " + cpus.status().message());

  PerfScan scan;
  // Each cpumask CPU reads one package (one die of a multi-die package).
  struct Package {
    int cpu;
    int id;
    std::string suffix;  // "0", "0-die-1"
  };
  std::vector<Package> packages;
  std::map<int, int> per_id;
  for (size_t i = 0; i < cpus->size(); ++i) {
    int cpu = (*cpus)[i];
    std::string topology =
        sysfs_root + "/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology";
    Result<std::string> id_text = ReadSmallFile(topology + "/physical_package_id");
    Result<uint64_t> id =
        id_text.ok() ? ParseSysfsUnsigned(*id_text) : Result<uint64_t>(id_text.status());
    Package p{cpu, int(i), ""};
    if (id.ok() && *id < 65536) {
      p.id = int(*id);
    } else {
      scan.notes.push_back("perf: CPU " + std::to_string(cpu) +
                           "'s physical_package_id cannot be read: its package is taken as " +
                           std::to_string(i));
    }
    ++per_id[p.id];
    packages.push_back(p);
  }
  for (Package& p : packages) {
    p.suffix = std::to_string(p.id);
    if (per_id[p.id] > 1) {
      std::string topology =
          sysfs_root + "/devices/system/cpu/cpu" + std::to_string(p.cpu) + "/topology";
      Result<std::string> die = ReadSmallFile(topology + "/die_id");
      p.suffix += "-die-" + (die.ok() ? Trimmed(*die) : std::to_string(p.cpu));
    }
  }
  int lowest_package = packages.empty() ? 0 : packages.front().id;
  for (const Package& p : packages) lowest_package = std::min(lowest_package, p.id);

  std::vector<std::string> events;
  if (DIR* dir = ::opendir((pmu + "/events").c_str())) {
    while (dirent* entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (name.rfind("energy-", 0) == 0 && name.find('.') == std::string::npos) {
        events.push_back(name);
      }
    }
    ::closedir(dir);
  }
  std::sort(events.begin(), events.end());
  for (const std::string& event : events) {
    const std::string path = pmu + "/events/" + event;
    std::string kind = EventKind(event);
    if (kind.empty()) {
      scan.notes.push_back("perf's power PMU event " + event + " is not read (unknown to kwatt)");
      continue;
    }
    Result<std::string> config_text = ReadSmallFile(path);
    Result<uint64_t> config = config_text.ok() ? ParsePerfEventConfig(*config_text)
                                               : Result<uint64_t>(config_text.status());
    Result<std::string> scale_text = ReadSmallFile(path + ".scale");
    Result<PerfScale> scale =
        scale_text.ok() ? ParsePerfScale(*scale_text) : Result<PerfScale>(scale_text.status());
    Result<std::string> unit = ReadSmallFile(path + ".unit");
    if (!config.ok() || !scale.ok()) {
      scan.notes.push_back("perf's power PMU event " + event + " is not read: " +
                           (!config.ok() ? config.status() : scale.status()).message());
      continue;
    }
    if (unit.ok() && Trimmed(*unit) != "Joules") {
      scan.notes.push_back("perf's power PMU event " + event + " is not read: its unit is '" +
                           Trimmed(*unit) + "', not Joules");
      continue;
    }
    for (const Package& p : packages) {
      PerfDomain d;
      d.domain.source = "rapl";
      d.domain.kind = kind;
      if (kind == "psys") {
        d.domain.name = p.id == lowest_package ? "psys" : "psys-" + p.suffix;
        d.domain.socket = -1;
      } else {
        d.domain.name = kind + "-" + p.suffix;
        d.domain.socket = p.id;
      }
      d.spec.type = uint32_t(*type);
      d.spec.config = *config;
      d.spec.cpu = p.cpu;
      d.spec.pid = -1;
      d.spec.name = "power/" + event + "/ on CPU " + std::to_string(p.cpu);
      d.domain.origin = "perf " + d.spec.name;
      d.scale = *scale;
      scan.domains.push_back(std::move(d));
    }
  }
  if (scan.domains.empty()) {
    std::string text = "perf's power PMU (" + pmu + ") has no energy event kwatt can read";
    for (const std::string& note : scan.notes) text += "; " + note;
    return Status::NotFound(text);
  }
  std::sort(scan.domains.begin(), scan.domains.end(), [](const PerfDomain& a, const PerfDomain& b) {
    return DomainBefore(a.domain, b.domain);
  });
  return scan;
}

Result<std::unique_ptr<EnergySource>> OpenPerfSource(const MeterEnvironment& environment,
                                                     PerfScan scan) {
  std::vector<PerfSource::Counter> counters;
  auto close_all = [&] {
    for (auto& c : counters) environment.perf->Close(c.handle);
  };
  std::vector<std::string> notes = std::move(scan.notes);
  Status first_missing;
  for (PerfDomain& d : scan.domains) {
    Result<int> handle = environment.perf->Open(d.spec);
    if (!handle.ok() && handle.status().code() == Status::Code::kNotFound) {
      // An event the PMU lists but this package does not count: the others are read.
      notes.push_back("perf: " + d.domain.name + " is not read: " + handle.status().message());
      if (first_missing.ok()) first_missing = handle.status();
      continue;
    }
    if (!handle.ok()) {
      close_all();
      return handle.status();
    }
    PerfSource::Counter c;
    c.info = std::move(d);
    c.handle = *handle;
    Result<PerfCount> first = environment.perf->Read(c.handle);
    counters.push_back(std::move(c));
    if (!first.ok()) {
      close_all();
      return first.status().WithContext("reading " + counters.back().info.spec.name);
    }
    counters.back().baseline = true;
    counters.back().last = first->value;
  }
  if (counters.empty()) return first_missing;
  return std::unique_ptr<EnergySource>(
      new PerfSource(environment.perf, std::move(counters), std::move(notes)));
}

}  // namespace kwatt::meter::rapl_internal
