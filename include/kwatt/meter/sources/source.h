// Where the power meter's energy comes from: sources of energy counters read on the meter's clock
// (RAPL, GPUs) and sources known late (a node's wattmeter through Kwollect), each made of domains
// (doc/meter/README.md).
//
// Energy is kept as exact integer microjoules from counters, never re-integrated from power
// gauges: a source turns its counter (RAPL's 2^-32 J perf counts, powercap's wrapping
// microjoules, NVML's millijoules) into a total since it was opened, and flags what a read could
// not know exactly.
//
// Thread safety: a source is read by one thread at a time.
#ifndef KWATT_METER_SOURCES_SOURCE_H_
#define KWATT_METER_SOURCES_SOURCE_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/core/time.h"

namespace kwatt::meter {

// One thing a source measures: a RAPL domain of a package, a GPU, a node's power.
struct Domain {
  std::string source;  // "rapl", "nvml", "kwollect"
  // Unique within the source, what reports and outputs name it by: "package-0", "core-0",
  // "uncore-0", "dram-0", "psys", "gpu-0", the node's FQDN for "kwollect".
  std::string name;
  // What formulas and outputs group by: "package", "core", "uncore", "dram", "psys", "gpu", "node".
  std::string kind;
  int socket = -1;  // its package (RAPL) or GPU index; -1 when it has none (psys, node)
  // Where it is read, for people: "/sys/class/powercap/intel-rapl:0", "perf power/energy-pkg/ on
  // CPU 0", "NVML GPU 0 (NVIDIA A100, GPU-5c1e...)", "wattmetre_power_watt of nova-1.lyon".
  std::string origin;
};

// Bits of DomainReading::flags: what happened to a domain's counter since the previous read.
enum DomainFlag : uint32_t {
  // The counter wrapped once and the energy was counted exactly.
  kWrapped = 1u << 0,
  // The counter went back other than by a wrap (the driver reloaded, the CPU went offline and
  // back): the energy since the previous read is unknown and not counted; the interval is a gap.
  kReset = 1u << 1,
  // The time since the previous read was long enough for the counter to wrap more than once at
  // the domain's largest power: the energy counted may miss whole wraps.
  kMaybeMissedWrap = 1u << 2,
  // The domain could not be read (a file that vanished or became unreadable, a read error): its
  // total did not move; the interval is a gap.
  kUnreadable = 1u << 3,
};

// "wrapped, reset" for people; "" for 0.
std::string DescribeDomainFlags(uint32_t flags);

// A domain's energy as read.
struct DomainReading {
  int64_t microjoules = 0;  // counted since the source was opened (or since ResumeCounters)
  uint32_t flags = 0;       // DomainFlag bits since the previous read
};

// A source of energy counters read on the meter's clock: RAPL (perf's power PMU or powercap),
// NVML GPUs.
class EnergySource {
 public:
  virtual ~EnergySource() = default;

  // Its domains; fixed once the source is open.
  virtual const std::vector<Domain>& domains() const = 0;

  // Reads every domain now: `out` is resized to domains().size(), in that order. A domain that
  // cannot be read is flagged kUnreadable (its total unchanged), not an error; an error Status
  // only when the whole source failed.
  [[nodiscard]] virtual Status Read(std::vector<DomainReading>* out) = 0;

  // The longest time between two reads that cannot miss a wrap of any domain at the largest
  // power it may draw (half the wrap period, so that a late read still cannot miss one);
  // nanoseconds::max() when its counters never wrap in practice (64-bit). The meter reads the
  // source at least this often, whatever its output period.
  virtual std::chrono::nanoseconds MaxReadPeriod() const = 0;

  // What a person should know about how it reads, one sentence each: the path chosen and why
  // ("perf's power PMU; powercap has the same 3 domains"), a difference between two paths that
  // should agree ("powercap has dram-0, perf's power PMU has no energy-ram event").
  virtual std::vector<std::string> Notes() const { return {}; }

  // The raw counters after the last Read, as text for the meter's state file (restart-safe
  // totals); "" when the source cannot resume.
  virtual std::string SaveCounters() const { return ""; }

  // After a restart in the same boot, before the first Read: the counters SaveCounters gave then,
  // and the time since. The first Read then counts the energy from those counters (a wrap in
  // between counted, flagged kMaybeMissedWrap when `elapsed` allows more than one), so that a
  // restart neither loses nor double-counts energy. InvalidArgument when `saved` is not this
  // source's (another layout): the energy since is then unknown and the first Read counts from
  // now.
  [[nodiscard]] virtual Status ResumeCounters(std::string_view saved,
                                              std::chrono::nanoseconds elapsed) {
    return Status::InvalidArgument("this source cannot resume its counters");
  }
};

// A domain's energy over an interval of a source known late.
struct IntervalEnergy {
  int64_t microjoules = 0;
  uint32_t flags = 0;  // kUnreadable: no data covers the interval (a gap): microjoules is 0
};

// A source whose energy is known some time after the fact: a node's wattmeter through Kwollect's
// API (its rows appear seconds later), or an archive read after the experiment.
class DelayedEnergySource {
 public:
  virtual ~DelayedEnergySource() = default;
  virtual const std::vector<Domain>& domains() const = 0;
  // The energy of each domain over [start, end] (domains() order), once the data covering it is
  // known; nullopt while it may still come. A stretch the data will never cover is flagged
  // kUnreadable. Errors only when the source failed as a whole (the API refused the credentials).
  [[nodiscard]] virtual Result<std::optional<std::vector<IntervalEnergy>>> EnergyBetween(
      UnixNanos start, UnixNanos end) = 0;
  // How long after an instant its data may still come: the meter holds an interval's report at
  // most that long, then reports the source's part of it as a gap.
  virtual std::chrono::nanoseconds MaxDelay() const = 0;
  virtual std::vector<std::string> Notes() const { return {}; }
};

}  // namespace kwatt::meter

#endif  // KWATT_METER_SOURCES_SOURCE_H_
