// RAPL through the powercap tree (rapl.h): zones, exact wraps, resets, unreadable files.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <sstream>

#include "src/meter/sources/rapl_internal.h"

namespace kwatt::meter::rapl_internal {

namespace {

// What a counter may have counted beyond the time between two reads: RAPL updates its counters
// about every millisecond, and a simulated tree's updates may come tens of milliseconds late on a
// loaded machine. 50 ms at the largest power is a few joules: nothing against a 32-bit range
// (2^18 J), while a reset mid-range still needs kilojoules to pass for a wrap.
constexpr int64_t kCounterUpdateSlackNanos = 50'000'000;

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

double DefaultWatts(const std::string& kind, const RaplLargestPower& power) {
  if (kind == "package") return power.package_watts;
  if (kind == "core") return power.core_watts;
  if (kind == "uncore") return power.uncore_watts;
  if (kind == "dram") return power.dram_watts;
  return power.psys_watts;
}

std::string Watts(double watts) {
  std::ostringstream out;
  out << std::round(watts * 10) / 10 << " W";
  return out.str();
}

// The largest constraint_N_max_power_uw of a zone (0 when none is readable).
uint64_t LargestConstraintPower(const std::string& dir, int* constraint) {
  uint64_t largest = 0;
  for (int c = 0; c < 16; ++c) {
    std::string prefix = dir + "/constraint_" + std::to_string(c) + "_";
    Result<std::string> name = ReadSmallFile(prefix + "name");
    Result<std::string> power = ReadSmallFile(prefix + "max_power_uw");
    if (!name.ok() && !power.ok()) break;
    if (!power.ok()) continue;
    Result<uint64_t> uw = ParseSysfsUnsigned(*power);
    if (uw.ok() && *uw > largest) {
      largest = *uw;
      *constraint = c;
    }
  }
  return largest;
}

}  // namespace

std::string PowercapPermissionMessage(const std::string& path) {
  return path +
         " is readable by root only (Linux 5.10+ made RAPL's energy_uj root-only against "
         "CVE-2020-8694): run kwatt as root; or let this user read the counters, until the next "
         "boot with `sudo chmod o+r /sys/class/powercap/intel-rapl:*/energy_uj "
         "/sys/class/powercap/intel-rapl:*:*/energy_uj`, or for good with a udev rule "
         "(/etc/udev/rules.d/90-rapl.rules: SUBSYSTEM==\"powercap\", ACTION==\"add\", "
         "RUN+=\"/bin/chmod o+r /sys%p/energy_uj\"); or read perf's power PMU instead "
         "(--rapl-path perf) with CAP_PERFMON (`sudo setcap cap_perfmon+ep $(command -v kwatt)`) "
         "or kernel.perf_event_paranoid at 0 or less";
}

Result<PowercapScan> ScanPowercap(const std::string& sysfs_root, const RaplOptions& options) {
  const std::string base = sysfs_root + "/class/powercap";
  std::vector<std::string> entries;
  if (DIR* dir = ::opendir(base.c_str())) {
    while (dirent* entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (StartsWith(name, "intel-rapl:") || StartsWith(name, "intel-rapl-mmio:")) {
        entries.push_back(name);
      }
    }
    ::closedir(dir);
  } else {
    return Status::NotFound("no powercap tree: " + base +
                            " does not exist (no RAPL here, or the intel_rapl_msr module is not "
                            "loaded)");
  }
  if (entries.empty()) {
    return Status::NotFound("no RAPL zone in " + base + " (no intel-rapl:* or intel-rapl-mmio:*)");
  }
  std::sort(entries.begin(), entries.end());

  PowercapScan scan;
  std::map<std::string, std::string> names;  // zone -> its name file, for the children's parents
  for (const std::string& zone : entries) {
    Result<std::string> name = ReadSmallFile(base + "/" + zone + "/name");
    if (name.ok()) names[zone] = Trimmed(*name);
  }
  std::vector<std::string> problems;
  for (const std::string& zone : entries) {
    const std::string dir = base + "/" + zone;
    auto skip = [&](const std::string& why) {
      problems.push_back(zone + ": " + why);
      scan.notes.push_back("powercap zone " + zone + " is skipped: " + why);
    };
    auto name_it = names.find(zone);
    if (name_it == names.end()) {
      skip("its name file cannot be read");
      continue;
    }
    PowercapZone z;
    z.zone = zone;
    z.dir = dir;
    z.zone_name = name_it->second;
    z.domain.source = "rapl";
    z.domain.origin = dir;
    z.domain.kind = ZoneKind(z.zone_name);
    if (z.domain.kind.empty()) {
      skip("its name '" + z.zone_name + "' is not a RAPL domain");
      continue;
    }
    // intel-rapl:N is a package or psys; intel-rapl:N:M a domain of package N.
    size_t first_colon = zone.find(':');
    size_t second_colon = zone.find(':', first_colon + 1);
    std::string package_name = z.zone_name;
    if (second_colon != std::string::npos) {
      auto parent = names.find(zone.substr(0, second_colon));
      if (parent == names.end() || ZoneKind(parent->second) != "package") {
        skip("its parent zone " + zone.substr(0, second_colon) + " is not a readable package");
        continue;
      }
      package_name = parent->second;
    }
    if (z.domain.kind == "psys") {
      z.domain.name = z.zone_name;
      z.domain.socket = -1;
    } else {
      if (ZoneKind(package_name) != "package") {
        skip("a " + z.domain.kind + " zone outside a package");
        continue;
      }
      std::string suffix = package_name.substr(8);  // "0", "1-die-0"
      z.domain.name = z.domain.kind + "-" + suffix;
      z.domain.socket = std::atoi(suffix.c_str());
    }
    Result<std::string> max_text = ReadSmallFile(dir + "/max_energy_range_uj");
    Result<uint64_t> max_range =
        max_text.ok() ? ParseSysfsUnsigned(*max_text) : Result<uint64_t>(max_text.status());
    if (!max_range.ok()) {
      skip("max_energy_range_uj: " + max_range.status().message());
      continue;
    }
    if (*max_range == 0) {
      skip("max_energy_range_uj is 0");
      continue;
    }
    z.max_energy_range_uj = *max_range;
    int constraint = -1;
    uint64_t constraint_uw = LargestConstraintPower(dir, &constraint);
    if (constraint_uw > 0) {
      z.largest_watts = double(constraint_uw) / 1e6 * options.constraint_power_margin;
      std::ostringstream origin;
      origin << "constraint_" << constraint << "_max_power_uw x "
             << options.constraint_power_margin;
      z.largest_power_origin = origin.str();
    } else {
      z.largest_watts = DefaultWatts(z.domain.kind, options.largest_power);
      z.largest_power_origin = "kwatt's default for " + z.domain.kind;
    }
    scan.zones.push_back(std::move(z));
  }
  // An MMIO zone (intel-rapl-mmio:N) is the same package counter as the MSR zone of the same name
  // on the parts that have both: it is read once, through the MSR zone.
  std::vector<PowercapZone> kept;
  for (PowercapZone& z : scan.zones) {
    auto same = std::find_if(kept.begin(), kept.end(),
                             [&](const PowercapZone& k) { return k.domain.name == z.domain.name; });
    bool mmio = StartsWith(z.zone, "intel-rapl-mmio:");
    if (same == kept.end()) {
      kept.push_back(std::move(z));
      continue;
    }
    bool same_is_mmio = StartsWith(same->zone, "intel-rapl-mmio:");
    if (same_is_mmio && !mmio) std::swap(*same, z);  // keep the MSR zone
    scan.notes.push_back("powercap zone " + z.zone + " (" + z.domain.name + ") measures what " +
                         same->zone + " does: read once, through " + same->zone);
  }
  scan.zones = std::move(kept);
  if (scan.zones.empty()) {
    std::string text = "the RAPL zones in " + base + " cannot be understood:";
    for (const std::string& p : problems) text += " " + p + ";";
    text.pop_back();
    return Status::Corruption(text);
  }
  std::sort(scan.zones.begin(), scan.zones.end(), [](const PowercapZone& a, const PowercapZone& b) {
    return DomainBefore(a.domain, b.domain);
  });
  return scan;
}

namespace {

class PowercapSource : public EnergySource {
 public:
  struct Zone {
    PowercapZone info;
    CounterLayout layout;
    int64_t wrap_period_nanos = 0;
    std::string energy_path;
    int fd = -1;
    bool reopened = false;       // the file was opened again since the last good read
    bool baseline = false;       // last_raw holds a good read
    uint64_t last_reported = 0;  // energy_uj of the last good read
    uint64_t last_raw = 0;
    int64_t last_nanos = 0;
    uint64_t total_counts = 0;
  };

  PowercapSource(std::shared_ptr<Clock> clock, std::vector<Zone> zones,
                 std::vector<std::string> notes)
      : clock_(std::move(clock)), zones_(std::move(zones)), notes_(std::move(notes)) {
    for (const Zone& z : zones_) domains_.push_back(z.info.domain);
  }

  ~PowercapSource() override {
    for (Zone& z : zones_) {
      if (z.fd >= 0) ::close(z.fd);
    }
  }

  const std::vector<Domain>& domains() const override { return domains_; }

  Status Read(std::vector<DomainReading>* out) override {
    out->resize(zones_.size());
    const int64_t now = clock_->MonotonicNanos();
    for (size_t i = 0; i < zones_.size(); ++i) {
      Zone& z = zones_[i];
      (*out)[i].flags = ReadZone(z, now);
      (*out)[i].microjoules = CountToMicrojoules(z.total_counts, z.layout.hardware_unit);
    }
    return Status::OK();
  }

  std::chrono::nanoseconds MaxReadPeriod() const override {
    int64_t shortest = std::numeric_limits<int64_t>::max();
    for (const Zone& z : zones_) shortest = std::min(shortest, z.wrap_period_nanos / 2);
    return std::chrono::nanoseconds(shortest);
  }

  std::vector<std::string> Notes() const override { return notes_; }

  std::string SaveCounters() const override {
    std::string text = "kwatt-rapl-counters 1 powercap\n";
    for (const Zone& z : zones_) {
      text += z.info.domain.name + " " + z.info.zone + " " +
              std::to_string(z.info.max_energy_range_uj) + " " +
              (z.baseline ? std::to_string(z.last_reported) : std::string("-")) + "\n";
    }
    return text;
  }

  Status ResumeCounters(std::string_view saved, std::chrono::nanoseconds elapsed) override {
    std::istringstream in{std::string(saved)};
    std::string header;
    std::getline(in, header);
    if (header != "kwatt-rapl-counters 1 powercap") {
      return Status::InvalidArgument(
          "the saved counters are not a powercap source's (first line '" + header.substr(0, 60) +
          "'): the energy since they were saved is not counted");
    }
    struct Saved {
      std::string zone;
      uint64_t max_range = 0;
      std::string value;
    };
    std::map<std::string, Saved> by_name;
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      std::istringstream fields(line);
      std::string name;
      Saved s;
      if (!(fields >> name >> s.zone >> s.max_range >> s.value)) {
        return Status::InvalidArgument("a saved counter line cannot be read: '" +
                                       line.substr(0, 80) + "'");
      }
      by_name[name] = s;
    }
    std::string mismatch;
    for (const Zone& z : zones_) {
      auto it = by_name.find(z.info.domain.name);
      if (it == by_name.end()) {
        mismatch = z.info.domain.name + " was not saved";
      } else if (it->second.zone != z.info.zone ||
                 it->second.max_range != z.info.max_energy_range_uj) {
        mismatch = z.info.domain.name + " was " + it->second.zone + " with range " +
                   std::to_string(it->second.max_range) + ", now " + z.info.zone + " with " +
                   std::to_string(z.info.max_energy_range_uj);
      } else if (it->second.value != "-" && !ParseSysfsUnsigned(it->second.value).ok()) {
        mismatch = z.info.domain.name + "'s saved value '" + it->second.value + "' is not a number";
      }
      if (!mismatch.empty()) break;
    }
    if (mismatch.empty() && by_name.size() != zones_.size()) {
      mismatch = "the saved counters have " + std::to_string(by_name.size()) + " domains, not " +
                 std::to_string(zones_.size());
    }
    if (!mismatch.empty()) {
      return Status::InvalidArgument("the saved counters are of another layout (" + mismatch +
                                     "): the energy since they were saved is not counted");
    }
    const int64_t then = clock_->MonotonicNanos() - int64_t(elapsed.count());
    for (Zone& z : zones_) {
      const Saved& s = by_name[z.info.domain.name];
      z.total_counts = 0;
      z.baseline = s.value != "-";
      if (!z.baseline) continue;
      z.last_reported = *ParseSysfsUnsigned(s.value);
      z.last_raw = RawCount(z.last_reported, z.layout) % z.layout.range;
      z.last_nanos = then;
    }
    return Status::OK();
  }

 private:
  enum class Outcome { kValue, kGone, kError };

  // Opens (again) the zone's energy_uj. kGone when the path no longer exists.
  Outcome Open(Zone& z) {
    if (z.fd >= 0) ::close(z.fd);
    z.fd = ::open(z.energy_path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    z.reopened = true;
    if (z.fd >= 0) return Outcome::kValue;
    return (errno == ENOENT || errno == ENOTDIR) ? Outcome::kGone : Outcome::kError;
  }

  // One pread of energy_uj: a number within the zone's range.
  Outcome PreadValue(Zone& z, uint64_t* value) {
    char buffer[32];
    ssize_t n;
    do {
      n = ::pread(z.fd, buffer, sizeof buffer, 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0 || size_t(n) >= sizeof buffer) return Outcome::kError;
    Result<uint64_t> parsed = ParseSysfsUnsigned(std::string_view(buffer, size_t(n)));
    if (!parsed.ok() || *parsed > z.info.max_energy_range_uj) return Outcome::kError;
    *value = *parsed;
    return Outcome::kValue;
  }

  // Reads energy_uj, opening the file again once when the handle fails (a removed sysfs
  // attribute fails on the handles kept open to it).
  Outcome ReadValue(Zone& z, uint64_t* value) {
    if (z.fd < 0) {
      Outcome opened = Open(z);
      if (opened != Outcome::kValue) return opened;
      return PreadValue(z, value);
    }
    if (PreadValue(z, value) == Outcome::kValue) return Outcome::kValue;
    Outcome opened = Open(z);
    if (opened != Outcome::kValue) return opened;
    return PreadValue(z, value);
  }

  // The zone's name and range now, as at open. When the range changed (the same domain, another
  // counter), the layout is taken again and `*changed` set.
  bool SameZone(Zone& z, bool* changed) {
    *changed = false;
    Result<std::string> name = ReadSmallFile(z.info.dir + "/name");
    if (!name.ok() || Trimmed(*name) != z.info.zone_name) return false;
    Result<std::string> max_text = ReadSmallFile(z.info.dir + "/max_energy_range_uj");
    if (!max_text.ok()) return false;
    Result<uint64_t> max_range = ParseSysfsUnsigned(*max_text);
    if (!max_range.ok() || *max_range == 0) return false;
    if (*max_range != z.info.max_energy_range_uj) {
      z.info.max_energy_range_uj = *max_range;
      z.layout = InferCounterLayout(*max_range);
      z.wrap_period_nanos = WrapPeriod(z);
      *changed = true;
    }
    return true;
  }

  uint32_t Unreadable(Zone& z) {
    z.baseline = false;
    return kUnreadable;
  }

  uint32_t Rebase(Zone& z, uint64_t reported, int64_t now, uint32_t flags) {
    z.baseline = true;
    z.reopened = false;
    z.last_reported = reported;
    z.last_raw = RawCount(reported, z.layout) % z.layout.range;
    z.last_nanos = now;
    return flags;
  }

  uint32_t ReadZone(Zone& z, int64_t now) {
    uint64_t reported = 0;
    Outcome outcome = ReadValue(z, &reported);
    if (outcome != Outcome::kValue) {
      if (outcome == Outcome::kError && z.fd >= 0) {
        // A value out of the range may be a zone whose range changed under the same name.
        bool changed = false;
        if (SameZone(z, &changed) && changed && PreadValue(z, &reported) == Outcome::kValue) {
          return Rebase(z, reported, now, kReset);
        }
      }
      return Unreadable(z);
    }
    if (z.reopened) {
      // Opened again (after a failed read or a vanished zone): the same zone?
      bool changed = false;
      if (!SameZone(z, &changed)) return Unreadable(z);
      if (changed || !z.baseline) return Rebase(z, reported, now, kReset);
      z.reopened = false;
    }
    if (!z.baseline) return Rebase(z, reported, now, kReset);
    uint64_t raw = RawCount(reported, z.layout) % z.layout.range;
    const int64_t elapsed = now - z.last_nanos;
    // The most the domain can have used since the last read, at its largest power.
    const long double possible =
        (long double)z.info.largest_watts * (elapsed + kCounterUpdateSlackNanos) / 1000.0L;
    uint32_t flags = 0;
    uint64_t counts;
    if (raw >= z.last_raw) {
      counts = raw - z.last_raw;
      if (CountToMicrojoules(counts, z.layout.hardware_unit) > possible) {
        // Forward by more than the domain can use (a counter written over, a zone swapped under
        // the same name): no energy it used. Not counted, flagged as a reset; counted on from it.
        bool changed = false;
        if (!SameZone(z, &changed)) return Unreadable(z);
        return Rebase(z, reported, now, kReset);
      }
    } else {
      // Back: a wrap or a reset. A second read first (a value caught mid-update is not trusted
      // alone), then the power a wrap would need.
      uint64_t again = 0;
      if (PreadValue(z, &again) == Outcome::kValue) {
        uint64_t raw_again = RawCount(again, z.layout) % z.layout.range;
        if (raw_again >= z.last_raw) {
          reported = again;
          raw = raw_again;
        }
      }
      if (raw >= z.last_raw) {
        counts = raw - z.last_raw;
      } else {
        counts = z.layout.range - z.last_raw + raw;
        long double needed = CountToMicrojoules(counts, z.layout.hardware_unit);
        if (needed > possible) {
          // A reset. The zone may have come back with another range (the driver reloaded):
          // its layout is taken again then. A zone that is no longer this domain is a gap.
          bool changed = false;
          if (!SameZone(z, &changed)) return Unreadable(z);
          return Rebase(z, reported, now, kReset);
        }
        flags |= kWrapped;
      }
    }
    if (elapsed >= z.wrap_period_nanos) flags |= kMaybeMissedWrap;
    z.total_counts += counts;
    z.last_reported = reported;
    z.last_raw = raw;
    z.last_nanos = now;
    return flags;
  }

 public:
  static int64_t WrapPeriod(const Zone& z) {
    long double nanos =
        (long double)RangeMicrojoules(z.layout) * 1000.0L / (long double)z.info.largest_watts;
    if (nanos >= (long double)std::numeric_limits<int64_t>::max()) {
      return std::numeric_limits<int64_t>::max();
    }
    return std::max<int64_t>(1, int64_t(nanos));
  }

 private:
  std::shared_ptr<Clock> clock_;
  std::vector<Zone> zones_;
  std::vector<Domain> domains_;
  std::vector<std::string> notes_;
};

std::string Seconds(int64_t nanos) {
  std::ostringstream out;
  double s = double(nanos) / 1e9;
  if (s >= 10) {
    out << int64_t(std::llround(s)) << " s";
  } else if (s >= 0.01) {
    out << std::round(s * 1000) / 1000 << " s";
  } else {
    out << std::round(s * 1e6) / 1000 << " ms";
  }
  return out.str();
}

}  // namespace

Result<std::unique_ptr<EnergySource>> OpenPowercapSource(const MeterEnvironment& environment,
                                                         PowercapScan scan) {
  std::vector<PowercapSource::Zone> zones;
  std::vector<std::string> notes = std::move(scan.notes);
  auto close_all = [&] {
    for (auto& z : zones) {
      if (z.fd >= 0) ::close(z.fd);
    }
  };
  const int64_t now = environment.clock->MonotonicNanos();
  for (PowercapZone& info : scan.zones) {
    PowercapSource::Zone z;
    z.info = std::move(info);
    z.energy_path = z.info.dir + "/energy_uj";
    z.layout = InferCounterLayout(z.info.max_energy_range_uj);
    z.wrap_period_nanos = PowercapSource::WrapPeriod(z);
    z.fd = ::open(z.energy_path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (z.fd < 0) {
      int error = errno;
      close_all();
      if (error == EACCES || error == EPERM) {
        return Status::PermissionDenied(PowercapPermissionMessage(z.energy_path));
      }
      return Status::IOError(z.energy_path + " cannot be opened: " + std::strerror(error));
    }
    char buffer[32];
    ssize_t n = ::pread(z.fd, buffer, sizeof buffer, 0);
    if (n < 0) {
      // Not a passing state (a value caught mid-update is read): the counter cannot be read.
      int error = errno;
      close_all();
      ::close(z.fd);
      if (error == EACCES || error == EPERM) {
        return Status::PermissionDenied(PowercapPermissionMessage(z.energy_path));
      }
      return Status::IOError("the counter of " + z.info.domain.name + ", " + z.energy_path +
                             ", cannot be read: " + std::strerror(error) + " (errno " +
                             std::to_string(error) + ")");
    }
    Result<uint64_t> value = n > 0 && size_t(n) < sizeof buffer
                                 ? ParseSysfsUnsigned(std::string_view(buffer, size_t(n)))
                                 : Result<uint64_t>(Status::Corruption("no value"));
    if (value.ok() && *value <= z.info.max_energy_range_uj) {
      z.baseline = true;
      z.last_reported = *value;
      z.last_raw = RawCount(*value, z.layout) % z.layout.range;
      z.last_nanos = now;
    } else {
      notes.push_back("powercap " + z.info.domain.name + ": " + z.energy_path +
                      " gives no value now; it counts from its first good read");
    }
    std::string note = "powercap " + z.info.domain.name + " (" + z.info.zone +
                       "): " + z.layout.description + ", wrapping after " +
                       std::to_string(RangeMicrojoules(z.layout) / 1'000'000) + " J, every " +
                       Seconds(z.wrap_period_nanos) + " or more at its largest power " +
                       Watts(z.info.largest_watts) + " (" + z.info.largest_power_origin + ")";
    notes.push_back(note);
    zones.push_back(std::move(z));
  }
  return std::unique_ptr<EnergySource>(
      new PowercapSource(environment.clock, std::move(zones), std::move(notes)));
}

}  // namespace kwatt::meter::rapl_internal
