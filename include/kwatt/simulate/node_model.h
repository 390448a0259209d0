// The simulated physics of one node: its load over time (from its jobs) and the true power it
// draws, in closed form so that any window's exact energy is known (the ground truth the energy
// code is tested against).
//
// Load levels (cpu, network, gpu, each 0..1) are piecewise linear in time: constant during a
// phase, with a linear ramp of `kRampNs` at each change. True power is
//   P(t) = idle + cpu_watts * cpu(t) + gpu_watts * gpu(t) + ripple(t),
// ripple being two small sinusoids with node-specific phases; its integral is exact.
//
// Immutable after construction; thread-safe.
#ifndef KWATT_SIMULATE_NODE_MODEL_H_
#define KWATT_SIMULATE_NODE_MODEL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kwatt/core/time.h"
#include "kwatt/jobs/jobs_file.h"

namespace kwatt::simulate {

inline constexpr int64_t kRampNs = 1 * kNanosPerSecond;

struct Levels {
  double cpu = 0;
  double network = 0;
  double gpu = 0;
};

class LoadProfile {
 public:
  LoadProfile() = default;  // idle forever
  // The load of node `uid` of `site` under `jobs`.
  static LoadProfile ForNode(std::string_view site, std::string_view uid, const jobs::JobSet& jobs);

  Levels At(UnixNanos t) const;
  // Integral of each level over [a, b], in level-seconds. REQUIRES: a <= b.
  Levels Integral(UnixNanos a, UnixNanos b) const;
  // Integral from -infinity... not finite; from `kModelEpoch` (2020-01-01 UTC) to t instead.
  Levels IntegralSinceEpoch(UnixNanos t) const;

 private:
  struct Point {
    UnixNanos t;
    Levels levels;
    Levels cumulative;  // integral from the first point to t
  };
  Levels CumulativeAt(UnixNanos t) const;  // integral from the first point (or t) to t
  std::vector<Point> points_;
};

// What a simulated node is made of, by cluster (see node_model.cc for the figures and sources).
struct NodeHardware {
  double idle_watts = 100;  // AC power at rest
  double cpu_watts = 150;   // extra AC power with every CPU busy
  int gpu_count = 0;
  double gpu_watts = 0;  // extra AC power per busy GPU
  int threads = 32;      // hardware threads (node exporter "cpu" labels)
  double memory_bytes = 64e9;
  double link_bps = 10e9;  // first network link rate, bits per second
  double cpu_base_hz = 2.1e9;
  int psu_count = 1;
};

NodeHardware HardwareOfCluster(std::string_view cluster);

// 2020-01-01T00:00:00Z, origin of the simulation's counters.
inline constexpr UnixNanos kModelEpoch = 1577836800LL * kNanosPerSecond;

class NodeModel {
 public:
  NodeModel(std::string uid, NodeHardware hardware, LoadProfile profile, uint64_t seed);

  const std::string& uid() const { return uid_; }
  const NodeHardware& hardware() const { return hardware_; }
  const LoadProfile& profile() const { return profile_; }

  Levels LoadAt(UnixNanos t) const { return profile_.At(t); }
  // True AC power, watts.
  double PowerWatts(UnixNanos t) const;
  // Exact energy over [a, b], joules. REQUIRES: a <= b.
  double EnergyJoules(UnixNanos a, UnixNanos b) const;
  // Energy from kModelEpoch to t, joules (for energy counters).
  double EnergySinceEpochJoules(UnixNanos t) const;
  // When the node last booted before t (node_boot_time_seconds), unix seconds.
  int64_t BootTimeSeconds() const { return boot_time_s_; }

 private:
  double RippleIntegral(UnixNanos a, UnixNanos b) const;

  std::string uid_;
  NodeHardware hardware_;
  LoadProfile profile_;
  double phase1_, phase2_;
  int64_t boot_time_s_;
};

// Deterministic hashing used for every pseudo-random choice of the simulation.
uint64_t HashMix(uint64_t x);
uint64_t HashText(std::string_view text, uint64_t seed);
// A uniform double in [0, 1) from a key.
inline double UnitFromHash(uint64_t h) { return double(h >> 11) * 0x1.0p-53; }

}  // namespace kwatt::simulate

#endif  // KWATT_SIMULATE_NODE_MODEL_H_
