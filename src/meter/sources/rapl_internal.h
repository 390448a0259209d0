// Internals of the RAPL sources (rapl.h): the counter arithmetic, the parsers of the sysfs files
// they read, and the two paths' sources. Not installed; used by rapl*.cc, their tests, the
// simulated tree and the fuzz harness.
#ifndef KWATT_SRC_METER_SOURCES_RAPL_INTERNAL_H_
#define KWATT_SRC_METER_SOURCES_RAPL_INTERNAL_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/meter/environment/environment.h"
#include "kwatt/meter/sources/rapl.h"
#include "kwatt/meter/sources/rapl_counter.h"
#include "kwatt/meter/sources/source.h"

namespace kwatt::meter::rapl_internal {

// What a powercap zone's energy_uj counts, inferred from its max_energy_range_uj.
//
// The kernel's intel_rapl driver reports energy_uj = floor(raw * unit_nJ / 1000) where raw is the
// hardware's 32-bit count and unit_nJ its unit in whole nanojoules, truncated (2^-14 J:
// 61035 nJ; 2^-16 J: 15258 nJ; the fixed 15.3 uJ of Xeon DRAM: 15300 nJ), and
// max_energy_range_uj = floor((2^32 - 1) * unit_nJ / 1000) (262143328850 for 2^-14 J). Since the
// unit is at least 1 uJ, floor(raw * unit) tells raw apart: raw = ceil(energy_uj / unit). So the
// counter is undone into raw counts, accumulated modulo the range, and turned into microjoules
// with the hardware's own unit (2^-14 J exactly when the kernel's 61035 nJ is its truncation).
struct CounterLayout {
  uint64_t range = uint64_t(1) << 32;  // raw counts before the counter wraps to 0
  Microjoules reported_unit;           // energy_uj per count (the kernel's truncated unit)
  Microjoules hardware_unit;           // the true energy of a count
  // False when max_energy_range_uj matched no known unit: the counter is then taken in whole
  // microjoules (raw = energy_uj, unit 1) with a range of max_energy_range_uj plus an estimated
  // unit, so that a wrap may be off by up to one unit (a Notes() line says so).
  bool known = true;
  std::string description;  // "2^-14 J counts (the kernel's 61035 nJ unit), 32-bit"
};

// Infers the layout: the 32-bit range with the kernel's truncated power-of-two units (2^0..2^-19
// J), the exact power-of-two units, any whole-nanojoule unit (Xeon DRAM's 15.3 uJ); then the
// smaller ranges 2^31..2^8 with power-of-two units (the simulated trees' small ranges); else
// unknown (above).
CounterLayout InferCounterLayout(uint64_t max_energy_range_uj);

// The raw count that energy_uj = `reported` stands for: ceil(reported / reported_unit).
uint64_t RawCount(uint64_t reported, const CounterLayout& layout);

// The energy of one whole range, in microjoules (the modulus of a wrap), rounded down.
int64_t RangeMicrojoules(const CounterLayout& layout);

// A sysfs number: decimal digits and an optional final '\n', nothing else. Corruption naming the
// text otherwise (or when it overflows 64 bits).
Result<uint64_t> ParseSysfsUnsigned(std::string_view text);

// A perf event's config from its events/ file: "event=0x02" (hexadecimal or decimal, an
// optional '\n'). Only the `event` term is understood; InvalidArgument otherwise.
Result<uint64_t> ParsePerfEventConfig(std::string_view text);

// A perf event's .scale in joules per count, as an exact decimal. Most RAPL PMUs give
// "2.3283064365386962890625e-10" = 2^-32.
struct PerfScale {
  // scale = 2^-shift exactly when power_of_two, else mantissa * 10^exponent.
  bool power_of_two = false;
  int shift = 0;
  uint64_t mantissa = 0;  // at most 18 significant digits (rounded)
  int exponent = 0;
};
Result<PerfScale> ParsePerfScale(std::string_view text);

// floor(count * scale) in microjoules, exact for power-of-two scales (128-bit).
int64_t PerfCountToMicrojoules(uint64_t count, const PerfScale& scale);

// A CPU list: "0", "0,28", "0-3,8-11", an optional '\n'. InvalidArgument otherwise.
Result<std::vector<int>> ParseCpuList(std::string_view text);

// The kind of a powercap zone's name ("package-0" -> "package", "core" -> "core", "psys-1" ->
// "psys", "dram" -> "dram", "uncore" -> "uncore"); "" for a name RAPL does not use.
std::string ZoneKind(std::string_view zone_name);

// The order of a source's domains: by package, then package, core, uncore, dram; psys last.
bool DomainBefore(const Domain& a, const Domain& b);

// `text` without its trailing newlines and spaces (a sysfs attribute's value).
std::string Trimmed(std::string text);

// Reads a small file whole (sysfs attributes). NotFound when it does not exist, PermissionDenied
// on EACCES, IOError otherwise.
Result<std::string> ReadSmallFile(const std::string& path);

// ---- powercap ----

// A zone found under SYSFS/class/powercap.
struct PowercapZone {
  std::string zone;  // "intel-rapl:0:1", "intel-rapl-mmio:0"
  std::string dir;   // SYSFS/class/powercap/intel-rapl:0:1
  Domain domain;     // name "core-0", kind "core", socket 0, origin = dir
  uint64_t max_energy_range_uj = 0;
  std::string zone_name;  // the name file: "core"
  double largest_watts = 0;
  std::string largest_power_origin;  // "constraint_1_max_power_uw x 2", "the default for dram"
};

struct PowercapScan {
  std::vector<PowercapZone> zones;  // sorted by domain name
  std::vector<std::string> notes;   // zones skipped (a duplicate MMIO package, a malformed file)
};

// Lists the RAPL zones: NotFound naming SYSFS/class/powercap when it has none (or does not
// exist); Corruption when zones exist but none could be understood. Reads names, ranges and
// constraints, not energy_uj.
Result<PowercapScan> ScanPowercap(const std::string& sysfs_root, const RaplOptions& options);

// Opens the zones (energy_uj kept open; PermissionDenied naming the root-only file and the fixes).
Result<std::unique_ptr<EnergySource>> OpenPowercapSource(const MeterEnvironment& environment,
                                                         PowercapScan scan);

// ---- perf ----

struct PerfDomain {
  Domain domain;  // name "package-0", origin "perf power/energy-pkg/ on CPU 0"
  PerfEventSpec spec;
  PerfScale scale;
};

struct PerfScan {
  std::vector<PerfDomain> domains;  // sorted by domain name
  std::vector<std::string> notes;
};

// Lists the power PMU's events and packages: NotFound naming SYSFS/bus/event_source/devices/power
// when it does not exist.
Result<PerfScan> ScanPerf(const std::string& sysfs_root);

// Opens one counter per domain through environment.perf: PermissionDenied (or another error) as
// is; a counter that is NotFound is left out with a note, and NotFound when none opens.
Result<std::unique_ptr<EnergySource>> OpenPerfSource(const MeterEnvironment& environment,
                                                     PerfScan scan);

// The permission message of a root-only energy_uj (`path`).
std::string PowercapPermissionMessage(const std::string& path);

}  // namespace kwatt::meter::rapl_internal

#endif  // KWATT_SRC_METER_SOURCES_RAPL_INTERNAL_H_
