// RAPL (Running Average Power Limit): the energy counters of a machine's CPU packages, cores,
// uncore (integrated GPU), DRAM and platform (psys), as EnergySources (source.h,
// doc/meter/sources.md "Sources").
//
// Two paths read them:
// - perf's `power` PMU (SYSFS/bus/event_source/devices/power): one 64-bit counter per package and
//   event (energy-pkg, energy-cores, energy-gpu, energy-ram, energy-psys), opened on the CPU of its
//   package that the PMU's cpumask names, counting in units of its .scale (2^-32 J): exact integer
//   microjoules by 128-bit arithmetic; the kernel accumulates the hardware's 32-bit counter, so
//   nothing wraps in practice.
// - the powercap tree (SYSFS/class/powercap/intel-rapl:*, intel-rapl-mmio:*; AMD's zones use the
//   same names): each zone's energy_uj, a 32-bit hardware count times the kernel's unit, wrapping
//   at max_energy_range_uj. Wraps are undone exactly: the counter unit and range are inferred from
//   max_energy_range_uj (doc/meter/sources.md tells how), each read is turned back into the
//   hardware count, and counts are accumulated modulo the range. A counter that went back other
//   than by a wrap (the wrap would need more than the domain's largest power over the time since
//   the last read and 50 ms more, for the counter's own update steps), a zone whose name or range
//   changed, a zone that vanished and came back, are resets: that interval's energy is not counted
//   (kReset). A read of a zone that is gone or gives no number is kUnreadable (its total does not
//   move). The files stay open and are read with pread(2).
//
// Domains are named "package-N", "core-N", "uncore-N", "dram-N" (N the physical package id; on
// multi-die packages "package-N-die-M", "core-N-die-M"...), "psys" (and "psys-N" for the other
// packages of a machine with one per package), whatever the path, so that the two cross-check.
//
// Thread safety: OpenRapl may be called from any thread; a source it returns is read by one
// thread at a time (source.h).
#ifndef KWATT_METER_SOURCES_RAPL_H_
#define KWATT_METER_SOURCES_RAPL_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/meter/environment/environment.h"
#include "kwatt/meter/sources/source.h"

namespace kwatt::meter {

// Which RAPL path OpenRapl reads.
enum class RaplPath {
  kAuto,      // perf's power PMU when its counters open, else powercap (a Notes() line says why)
  kPerf,      // perf's power PMU only
  kPowercap,  // the powercap tree only
};

// "auto", "perf", "powercap".
const char* RaplPathName(RaplPath path);
// The inverse; InvalidArgument naming the three words otherwise.
Result<RaplPath> ParseRaplPath(std::string_view text);

// The largest power a domain of each kind may draw, in watts, when its powercap zone gives none
// (no constraint_N_max_power_uw, or 0). They bound the wrap period (MaxReadPeriod is half of
// range / largest power) and tell a wrap from a reset, so they err high: each is above what any
// shipping part of that kind draws, even briefly (server packages' PL2 reach ~600 W, desktop PL4
// ~400 W; a DRAM domain of 2 TiB of DDR5 stays under ~200 W; psys is a whole laptop or small
// desktop platform). Too high only shortens the read period and makes a reset near the top of the
// range look like a wrap (a few joules at most); too low could miss wraps.
struct RaplLargestPower {
  double package_watts = 1000;
  double core_watts = 1000;
  double uncore_watts = 500;
  double dram_watts = 300;
  double psys_watts = 2000;
};

struct RaplOptions {
  RaplPath path = RaplPath::kAuto;
  // The domains to read, each a name ("dram-0") or a kind ("package": every package); empty: all.
  // One that matches no domain of the chosen path is an InvalidArgument naming those it has.
  std::vector<std::string> domains;
  // Used when a zone gives no power of its own (above).
  RaplLargestPower largest_power;
  // A zone's largest power when it gives one: the largest of its constraint_N_max_power_uw times
  // this margin (2: PL2 and PL4 bursts may exceed the long-term limit the zone states).
  double constraint_power_margin = 2.0;
};

// Opens the RAPL domains of the machine `environment` describes: perf's power PMU through
// environment.perf, the powercap tree under environment.sysfs_root, topology from
// SYSFS/devices/system/cpu/cpuN/topology/physical_package_id. The source's first Read counts from
// this call.
//
// Errors:
// - NotFound when neither path exists (naming the sysfs paths looked at), or the chosen one does
//   not;
// - PermissionDenied when a path exists but the system refuses it, naming what to grant: perf's
//   message (kernel.perf_event_paranoid, CAP_PERFMON), or powercap's root-only energy_uj (Linux
//   5.10+, CVE-2020-8694: run as root, chmod o+r or a udev rule, or perf with CAP_PERFMON). With
//   kAuto, only when every path that exists refused for want of a permission;
// - InvalidArgument for an option that is wrong (a domain that matches nothing, a non-positive
//   power);
// - Corruption when the zones exist but none can be understood (their files malformed).
// With kAuto, a path that failed is named in a Notes() line of the source returned.
Result<std::unique_ptr<EnergySource>> OpenRapl(const MeterEnvironment& environment,
                                               const RaplOptions& options = {});

}  // namespace kwatt::meter

#endif  // KWATT_METER_SOURCES_RAPL_H_
