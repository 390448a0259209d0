// A simulated machine as hwpc-sensor would report it, from a known power model: the reports of
// `kwatt simulate hwpc` and the formula's tests, with the true power of every target beside them
// (doc/meter/attribution.md, "kwatt simulate hwpc").
//
// The machine has sockets of CPUs, a base frequency and a frequency that changes over time; cgroups
// run workloads made of phases (busy CPUs, instructions per cycle, LLC misses per thousand
// instructions), cycled; background activity (no cgroup) runs too. Per tick, per CPU, a cgroup
// busy a fraction u of it counts u x f cycles (CPU_CLK_THREAD_UNHALTED:THREAD_P), u x base
// reference cycles (CPU_CLK_THREAD_UNHALTED:REF_P), cycles x IPC instructions
// (INSTRUCTIONS_RETIRED) and instructions x MPKI / 1000 LLC misses (LLC_MISSES); each phase's
// busy CPUs vary by a seeded jitter tick to tick. A socket's true power is its power model's idle
// power plus, per event, watts-per-event-per-second x the rate of the event on the socket; RAPL
// reports it with seeded Gaussian noise. The model is picked by time and frequency, so that a
// scenario changes it (a new layer or a new machine). Multiplexing: each core counter runs a
// seeded fraction of the tick, its count and time_running scaled alike, as perf does.
//
// Deterministic: the same simulation (seed included) gives the same reports, byte for byte.
//
// Thread safety: a simulator is used by one thread at a time.
#ifndef KWATT_SIMULATE_HWPC_SIMULATION_H_
#define KWATT_SIMULATE_HWPC_SIMULATION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/meter/powerapi/hwpc.h"

namespace kwatt::simulate {

struct SimulatedPhase {
  double seconds = 60;   // how long it lasts
  double busy_cpus = 1;  // CPUs it keeps busy (spread over its sockets' CPUs)
  double ipc = 1;        // instructions per cycle
  double llc_mpki = 1;   // LLC misses per thousand instructions
};

struct SimulatedCgroup {
  std::string name;                    // the hwpc target: "/kwatt/web"
  std::vector<int> sockets;            // where it runs; empty: every socket
  std::vector<SimulatedPhase> phases;  // cycled
};

// A socket's power model, in force from `from_seconds` at frequencies from `min_mhz`: the one
// that applies is the one with the latest from_seconds, then the highest min_mhz, that is <= both.
struct SimulatedPowerModel {
  double from_seconds = 0;
  int min_mhz = 0;
  double idle_watts = 20;
  // Event -> watts per event per second.
  std::vector<std::pair<std::string, double>> watts_per_event;
};

struct SimulatedFrequency {
  double from_seconds = 0;
  int mhz = 2100;
};

struct HwpcSimulation {
  std::string sensor = "kwatt-sim";
  int sockets = 2;
  int cpus_per_socket = 4;
  int base_frequency_mhz = 2100;
  int64_t period_ms = 1000;
  int64_t start_ms = 1700000000000;  // the first tick ends at start_ms + period_ms
  double duration_seconds = 600;
  double noise_watts = 0.2;  // RAPL's noise, standard deviation
  uint64_t seed = 1;
  // Each core counter runs a fraction of the tick drawn in [1 - multiplexing, 1].
  double multiplexing = 0;
  double jitter = 0.05;  // the relative standard deviation of a phase's busy CPUs, tick to tick
  // The core events reported (any of the four above).
  std::vector<std::string> events = {"CPU_CLK_THREAD_UNHALTED:REF_P",
                                     "CPU_CLK_THREAD_UNHALTED:THREAD_P", "INSTRUCTIONS_RETIRED",
                                     "LLC_MISSES"};
  std::vector<SimulatedFrequency> frequency = {{0, 2100}};
  std::vector<SimulatedPowerModel> power_models;
  std::vector<SimulatedCgroup> cgroups;
  SimulatedPhase background = {60, 0.1, 0.8, 2};  // activity in no cgroup (always on)
};

// The scenario kwatt simulate hwpc runs by default: 2 sockets of 4 CPUs at 2100 MHz going to
// 2600 MHz after 300 s, three cgroups (/kwatt/web, /kwatt/batch, /kwatt/db) with phases, a model
// per frequency range.
HwpcSimulation DefaultHwpcSimulation();

// A scenario file (JSON, format version 1): an object with an optional "version": 1 and
// HwpcSimulation's members by name (sensor, sockets,
// cpus_per_socket, base_frequency_mhz, period_ms, start_ms, duration_seconds, noise_watts, seed,
// multiplexing, jitter, events, frequency [{from_seconds, mhz}], power_models [{from_seconds,
// min_mhz, idle_watts, watts_per_event {EVENT: W}}], cgroups [{name, sockets, phases [{seconds,
// busy_cpus, ipc, llc_mpki}]}], background {...}); members left out keep the defaults above (and
// DefaultHwpcSimulation's power models and cgroups when not given). InvalidArgument naming the
// member that is wrong or unknown.
Result<HwpcSimulation> ParseHwpcSimulation(std::string_view json_text);

// InvalidArgument naming what is out of range.
Status ValidateHwpcSimulation(const HwpcSimulation& simulation);

// The true power of one target on one socket over one tick.
struct HwpcTruth {
  int64_t timestamp_ms = 0;  // the tick's end, as in the reports
  int socket = 0;
  // A cgroup's name, "rapl" (the socket: watts = what RAPL reports, noise included), "idle" (the
  // model's idle power) or "background" (activity in no cgroup).
  std::string target;
  double watts = 0;          // a cgroup: its dynamic power plus its share of idle (SmartWatts')
  double dynamic_watts = 0;  // its dynamic power alone (kwatt's); for "rapl", reported - idle
  int frequency_mhz = 0;
};

class HwpcSimulator {
 public:
  // InvalidArgument when the simulation is not valid.
  static Result<std::unique_ptr<HwpcSimulator>> Create(const HwpcSimulation& simulation);
  ~HwpcSimulator();

  // The next tick: its reports ("all" first, then each cgroup) and the truth. False once the
  // duration is covered.
  bool Next(std::vector<meter::HwpcReport>* reports, std::vector<HwpcTruth>* truth);

  const HwpcSimulation& simulation() const;
  int64_t ticks() const;  // how many ticks the duration holds

 private:
  HwpcSimulator() = default;
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace kwatt::simulate

#endif  // KWATT_SIMULATE_HWPC_SIMULATION_H_
