// A simulated RAPL machine: the powercap tree and perf's power PMU files under a root directory
// (a fake sysfs), and a PerfEvents over the same energy, driven by a known power trace, so that
// the RAPL sources (rapl.h), the meter's tests and benchmarks, and `kwatt simulate rapl` run on a
// machine without RAPL (doc/meter/sources.md "Simulated RAPL").
//
// What it reproduces of the kernel and the hardware:
// - each domain's hardware counter counts the true energy in its unit, floor(energy / unit),
//   modulo its range (2^32, or a small range that forces many wraps); energy_uj is
//   floor(count * reported unit), the reported unit being the kernel's truncated nanojoule unit
//   (61035 nJ for 2^-14 J) or, on request, the exact one; max_energy_range_uj is
//   floor((range - 1) * reported unit);
// - perf's counts are the hardware counts since the counter was opened, shifted to 2^-32 J
//   (count << (32 - n) for a 2^-n J unit; a fixed unit such as Xeon DRAM's 15.3 uJ is shifted as
//   2^-16 J, as the kernel's perf driver does), in 64 bits;
// - faults: a counter reset to 0; a package unplugged (its zones' directories removed) and
//   plugged back; malformed content; an unreadable energy_uj; perf refusing to open counters.
//
// One difference from sysfs, on purpose: energy_uj is written in place, zero-padded to the width
// of max_energy_range_uj, so that a reader in another process never sees a half-rewritten value
// (sysfs formats a fresh value at each read; a rewritten file could be caught shorter or longer).
// A removed or replaced energy_uj is first emptied, so that a reader holding it open reads
// nothing, as a removed sysfs attribute fails on the handles open to it. An unreadable energy_uj
// is a directory in its place: open(2) works as root too (so it is honest under the tests' root),
// and read(2) fails with EISDIR.
//
// Energy is kept exactly: the trace's power (watts, rounded to the microwatt) is taken at the
// start of each AdvanceTo step and held over it; the true energy is that integral in femtojoules.
//
// Thread safety: a SimulatedRapl and its PerfEvents are used by one thread at a time.
#ifndef KWATT_SIMULATE_SIMULATED_RAPL_H_
#define KWATT_SIMULATE_SIMULATED_RAPL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/meter/environment/environment.h"
#include "kwatt/meter/sources/rapl_counter.h"

namespace kwatt::simulate {

// A domain's counter unit.
struct SimulatedRaplUnit {
  meter::rapl_internal::Microjoules hardware{15625, 256};   // the true energy of a count (2^-14 J)
  meter::rapl_internal::Microjoules reported{61035, 1000};  // what energy_uj multiplies counts by
  int perf_shift = 18;  // perf's counts are hardware counts << perf_shift (2^-32 J units)

  // A 2^-exponent J unit (0..19), reported as the kernel does (its unit in whole nanojoules,
  // truncated) or exactly.
  static SimulatedRaplUnit PowerOfTwo(int exponent, bool kernel_truncated = true);
  // A fixed unit in nanojoules (Xeon DRAM: 15300), reported as is; perf shifts it as 2^-16 J.
  static SimulatedRaplUnit FixedNanojoules(uint32_t nanojoules);
};

// One RAPL domain of the simulated machine.
struct SimulatedRaplZone {
  std::string kind = "package";  // package, core, uncore, dram, psys
  int socket = 0;                // its package (ignored for psys)
  SimulatedRaplUnit unit;
  uint64_t counter_range = uint64_t(1) << 32;  // hardware counts before the counter wraps
  // constraint_0_max_power_uw; 0: the zone has no such file (as a core zone).
  double max_power_watts = 0;
  // The hardware counter's energy when the simulation starts (a machine up for a while).
  double initial_joules = 0;
};

struct SimulatedRaplLayout {
  int sockets = 1;
  int cpus_per_socket = 2;
  // The domains; package zones are intel-rapl:SOCKET, the others of a socket intel-rapl:SOCKET:I
  // in this order, psys intel-rapl:SOCKETS.
  std::vector<SimulatedRaplZone> zones;
  // intel-rapl-mmio:0, a second zone on package-0's counter (client parts since Tiger Lake).
  bool mmio_duplicate = false;
  // The power PMU's files (bus/event_source/devices/power) and CPU topology.
  bool perf_pmu = true;
  std::vector<std::string> perf_kinds;  // kinds with a perf event; empty: every kind of `zones`
  // A type no real PMU has, so that the kernel refuses it if a real perf_event_open is tried.
  uint32_t perf_type = 0x7ffff001;
  // energy_uj mode 0400 as Linux 5.10+ has it (others 0444).
  bool root_only_energy = false;

  // Xeon-like: per socket package (2^-14 J, 125 W TDP) and dram (2^-16 J, 40 W), no psys.
  static SimulatedRaplLayout IntelServer(int sockets = 2);
  // Laptop-like: package, core, uncore (2^-14 J, 28 W), psys (2^-14 J); optional MMIO duplicate.
  static SimulatedRaplLayout IntelClient(bool mmio_duplicate = false);
  // AMD Zen: per socket package and core (2^-16 J), no dram; perf has energy-pkg only.
  static SimulatedRaplLayout Amd(int sockets = 1);
  // Every zone's counter range (small ranges force wraps).
  void SetCounterRange(uint64_t range);
  // Every zone's constraint max power.
  void SetMaxPower(double watts);
};

// Watts of a domain (named as the meter names it: "package-0", "dram-1", "psys") at a time
// (nanoseconds since the simulation's start).
using SimulatedPowerTrace = std::function<double(const std::string& domain, int64_t nanos)>;

class SimulatedRapl {
 public:
  // Lays the machine out under `root` (created if needed; must not hold a previous tree), with
  // the counters at their initial energy. InvalidArgument for a layout that is wrong.
  static Result<std::unique_ptr<SimulatedRapl>> Create(const std::string& root,
                                                       SimulatedRaplLayout layout,
                                                       SimulatedPowerTrace trace);
  ~SimulatedRapl();
  SimulatedRapl(const SimulatedRapl&) = delete;
  SimulatedRapl& operator=(const SimulatedRapl&) = delete;

  const std::string& root() const;
  // The domains, in zone order ("package-0", "dram-0", ..., "psys").
  std::vector<std::string> domains() const;
  // "ROOT/class/powercap/intel-rapl:0:1" of a domain ("" when unknown).
  std::string ZoneDir(const std::string& domain) const;

  // Integrates every domain's power from the current time to `nanos` (the power taken at the
  // step's start) and rewrites the counters. InvalidArgument when `nanos` is before now.
  Status AdvanceTo(int64_t nanos);
  int64_t now() const;

  // The exact true energy of a domain since the start, in microjoules (femtojoule precision in a
  // long double) and rounded down.
  long double TrueMicrojoules(const std::string& domain) const;
  int64_t TrueMicrojoulesFloor(const std::string& domain) const;

  // Keeps ROOT/kwatt_truth up to date at each AdvanceTo: "kwatt-simulated-rapl-truth 1", then
  // "update N NANOS", then "DOMAIN MICROJOULES" (rounded down) per domain.
  Status EnableTruthFile();

  // Faults.
  // The domain's hardware counter back to 0 (energy counted from now).
  Status Reset(const std::string& domain);
  // The package's zones (and their children, and the MMIO duplicate of package 0) removed, and
  // put back; the hardware keeps counting meanwhile.
  Status Unplug(int socket);
  Status Replug(int socket);
  // energy_uj holds `text` instead of the value (until cleared with nullopt).
  Status SetMalformed(const std::string& domain, std::optional<std::string> text);
  // energy_uj replaced by a directory (read fails with EISDIR), or back.
  Status SetUnreadable(const std::string& domain, bool unreadable);

  // perf_event_open(2) over the same energy, for MeterEnvironment::perf.
  std::shared_ptr<meter::PerfEvents> perf_events();
  // Makes Open refuse every counter with this errno (EACCES, EPERM: PermissionDenied naming
  // kernel.perf_event_paranoid; ENOENT: NotFound); 0: opens again.
  void SetPerfOpenError(int error);

  struct State;

 private:
  explicit SimulatedRapl(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

}  // namespace kwatt::simulate

#endif  // KWATT_SIMULATE_SIMULATED_RAPL_H_
