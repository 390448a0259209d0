#include "kwatt/simulate/hwpc_simulation.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

namespace kwatt::simulate {

namespace {

constexpr const char* kThread = "CPU_CLK_THREAD_UNHALTED:THREAD_P";
constexpr const char* kRef = "CPU_CLK_THREAD_UNHALTED:REF_P";
constexpr const char* kInstructions = "INSTRUCTIONS_RETIRED";
constexpr const char* kLlc = "LLC_MISSES";

bool KnownEvent(const std::string& e) {
  return e == kThread || e == kRef || e == kInstructions || e == kLlc;
}

}  // namespace

HwpcSimulation DefaultHwpcSimulation() {
  HwpcSimulation s;
  s.frequency = {{0, 2100}, {300, 2600}};
  // Watts per event per second: 2e9 cycles/s of a busy CPU cost ~4 W, 3e9 instructions/s ~3 W,
  // 2e7 LLC misses/s ~2 W; the higher layer costs more per cycle and has more idle power.
  s.power_models = {
      {0, 0, 18.0, {{kThread, 2.0e-9}, {kInstructions, 1.0e-9}, {kLlc, 1.0e-7}}},
      {0, 2500, 22.0, {{kThread, 2.6e-9}, {kInstructions, 1.2e-9}, {kLlc, 1.1e-7}}},
  };
  s.cgroups = {
      {"/kwatt/web", {}, {{40, 1.5, 1.6, 1.0}, {20, 0.5, 1.2, 0.5}, {30, 2.5, 1.8, 2.0}}},
      {"/kwatt/batch", {0}, {{50, 3.5, 2.4, 0.2}, {25, 1.0, 2.0, 0.1}, {35, 0.0, 1.0, 0.0}}},
      {"/kwatt/db", {1}, {{30, 1.0, 0.7, 12.0}, {45, 2.0, 0.9, 8.0}, {20, 0.3, 0.6, 15.0}}},
  };
  return s;
}

Status ValidateHwpcSimulation(const HwpcSimulation& s) {
  auto bad = [](const std::string& what) { return Status::InvalidArgument(what); };
  if (s.sensor.empty()) return bad("sensor: a name");
  if (s.sockets < 1 || s.sockets > 64) return bad("sockets: 1 to 64");
  if (s.cpus_per_socket < 1 || s.cpus_per_socket > 1024) return bad("cpus_per_socket: 1 to 1024");
  if (s.base_frequency_mhz < 1 || s.base_frequency_mhz > 100000) {
    return bad("base_frequency_mhz: 1 to 100000");
  }
  if (s.period_ms < 1 || s.period_ms > 3600000) return bad("period_ms: 1 to 3600000");
  if (s.start_ms < 0 || s.start_ms > int64_t(4e15)) return bad("start_ms: epoch milliseconds");
  if (!(s.duration_seconds >= 0 && s.duration_seconds <= 1e8)) {
    return bad("duration_seconds: 0 to 1e8");
  }
  if (!(s.noise_watts >= 0 && s.noise_watts < 1e4)) return bad("noise_watts: 0 or more");
  if (!(s.multiplexing >= 0 && s.multiplexing < 1)) return bad("multiplexing: in [0, 1)");
  if (!(s.jitter >= 0 && s.jitter < 1)) return bad("jitter: in [0, 1)");
  if (s.events.empty()) return bad("events: at least one core event");
  std::set<std::string> seen;
  for (const auto& e : s.events) {
    if (!KnownEvent(e)) {
      return bad("events: \"" + e + "\" is none of " + kRef + ", " + kThread + ", " +
                 kInstructions + ", " + kLlc);
    }
    if (!seen.insert(e).second) return bad("events: " + e + " given twice");
  }
  if (s.frequency.empty()) return bad("frequency: at least one {from_seconds, mhz}");
  for (const auto& f : s.frequency) {
    if (f.mhz < 1 || f.mhz > 100000) return bad("frequency: mhz 1 to 100000");
    if (!(f.from_seconds >= 0)) return bad("frequency: from_seconds 0 or more");
  }
  if (s.power_models.empty()) return bad("power_models: at least one");
  bool from_zero = false;
  for (const auto& m : s.power_models) {
    if (!(m.idle_watts >= 0 && m.idle_watts < 1e4)) return bad("power_models: idle_watts >= 0");
    if (!(m.from_seconds >= 0)) return bad("power_models: from_seconds 0 or more");
    from_zero = from_zero || (m.from_seconds == 0 && m.min_mhz <= 0);
    for (const auto& [event, w] : m.watts_per_event) {
      if (!KnownEvent(event)) return bad("power_models: unknown event \"" + event + "\"");
      if (!(w >= 0 && std::isfinite(w))) return bad("power_models: " + event + ": watts >= 0");
    }
  }
  if (!from_zero) return bad("power_models: none applies from 0 s at every frequency");
  std::set<std::string> names;
  for (const auto& c : s.cgroups) {
    if (c.name.empty() || c.name == "all") return bad("cgroups: a name (not \"all\")");
    if (c.name.find_first_of(",\"\n\r") != std::string::npos) {
      return bad("cgroups: \"" + c.name + "\" has a comma, quote or line break");
    }
    if (!names.insert(c.name).second) return bad("cgroups: " + c.name + " given twice");
    if (c.phases.empty()) return bad("cgroups: " + c.name + " has no phase");
    for (int socket : c.sockets) {
      if (socket < 0 || socket >= s.sockets) {
        return bad("cgroups: " + c.name + ": socket " + std::to_string(socket) + " of 0.." +
                   std::to_string(s.sockets - 1));
      }
    }
    for (const auto& p : c.phases) {
      if (!(p.seconds > 0) || !(p.busy_cpus >= 0) || !(p.ipc >= 0) || !(p.llc_mpki >= 0)) {
        return bad("cgroups: " + c.name + ": a phase needs seconds > 0 and values >= 0");
      }
    }
  }
  const auto& b = s.background;
  if (!(b.busy_cpus >= 0) || !(b.ipc >= 0) || !(b.llc_mpki >= 0)) {
    return bad("background: values >= 0");
  }
  return Status::OK();
}

namespace {

using nlohmann::json;

Status Expect(bool ok, const std::string& what) {
  return ok ? Status::OK() : Status::InvalidArgument(what);
}

Status CheckKeys(const json& object, const std::string& where,
                 std::initializer_list<const char*> known) {
  if (!object.is_object()) return Status::InvalidArgument(where + ": an object");
  for (const auto& [key, value] : object.items()) {
    bool found = false;
    for (const char* k : known) found = found || key == k;
    if (!found) return Status::InvalidArgument(where + ": unknown member \"" + key + "\"");
  }
  return Status::OK();
}

template <typename T>
Status Read(const json& object, const char* key, const std::string& where, T* out) {
  auto it = object.find(key);
  if (it == object.end()) return Status::OK();
  if constexpr (std::is_same_v<T, std::string>) {
    KWATT_RETURN_IF_ERROR(Expect(it->is_string(), where + "." + key + ": a string"));
    *out = it->template get<std::string>();
  } else if constexpr (std::is_integral_v<T>) {
    KWATT_RETURN_IF_ERROR(Expect(it->is_number_integer(), where + "." + key + ": an integer"));
    *out = it->template get<T>();
  } else {
    KWATT_RETURN_IF_ERROR(Expect(it->is_number(), where + "." + key + ": a number"));
    *out = it->template get<double>();
  }
  return Status::OK();
}

Status ReadPhase(const json& j, const std::string& where, SimulatedPhase* p) {
  KWATT_RETURN_IF_ERROR(CheckKeys(j, where, {"seconds", "busy_cpus", "ipc", "llc_mpki"}));
  KWATT_RETURN_IF_ERROR(Read(j, "seconds", where, &p->seconds));
  KWATT_RETURN_IF_ERROR(Read(j, "busy_cpus", where, &p->busy_cpus));
  KWATT_RETURN_IF_ERROR(Read(j, "ipc", where, &p->ipc));
  KWATT_RETURN_IF_ERROR(Read(j, "llc_mpki", where, &p->llc_mpki));
  return Status::OK();
}

}  // namespace

Result<HwpcSimulation> ParseHwpcSimulation(std::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) return Status::InvalidArgument("the scenario is not JSON");
  HwpcSimulation s = DefaultHwpcSimulation();
  const std::string w = "scenario";
  KWATT_RETURN_IF_ERROR(
      CheckKeys(j, w,
                {"version", "sensor", "sockets", "cpus_per_socket", "base_frequency_mhz",
                 "period_ms", "start_ms", "duration_seconds", "noise_watts", "seed", "multiplexing",
                 "jitter", "events", "frequency", "power_models", "cgroups", "background"}));
  int version = 1;
  KWATT_RETURN_IF_ERROR(Read(j, "version", w, &version));
  if (version != 1) {
    return Status::InvalidArgument("scenario.version: " + std::to_string(version) +
                                   " is not a version this kwatt reads (1)");
  }
  KWATT_RETURN_IF_ERROR(Read(j, "sensor", w, &s.sensor));
  KWATT_RETURN_IF_ERROR(Read(j, "sockets", w, &s.sockets));
  KWATT_RETURN_IF_ERROR(Read(j, "cpus_per_socket", w, &s.cpus_per_socket));
  KWATT_RETURN_IF_ERROR(Read(j, "base_frequency_mhz", w, &s.base_frequency_mhz));
  KWATT_RETURN_IF_ERROR(Read(j, "period_ms", w, &s.period_ms));
  KWATT_RETURN_IF_ERROR(Read(j, "start_ms", w, &s.start_ms));
  KWATT_RETURN_IF_ERROR(Read(j, "duration_seconds", w, &s.duration_seconds));
  KWATT_RETURN_IF_ERROR(Read(j, "noise_watts", w, &s.noise_watts));
  KWATT_RETURN_IF_ERROR(Read(j, "seed", w, &s.seed));
  KWATT_RETURN_IF_ERROR(Read(j, "multiplexing", w, &s.multiplexing));
  KWATT_RETURN_IF_ERROR(Read(j, "jitter", w, &s.jitter));
  if (j.contains("events")) {
    const json& e = j["events"];
    KWATT_RETURN_IF_ERROR(Expect(e.is_array(), "scenario.events: a list of event names"));
    s.events.clear();
    for (const auto& name : e) {
      KWATT_RETURN_IF_ERROR(Expect(name.is_string(), "scenario.events: names"));
      s.events.push_back(name.get<std::string>());
    }
  }
  if (j.contains("frequency")) {
    const json& f = j["frequency"];
    KWATT_RETURN_IF_ERROR(Expect(f.is_array(), "scenario.frequency: a list"));
    s.frequency.clear();
    for (const auto& item : f) {
      SimulatedFrequency x;
      KWATT_RETURN_IF_ERROR(CheckKeys(item, "scenario.frequency[]", {"from_seconds", "mhz"}));
      KWATT_RETURN_IF_ERROR(Read(item, "from_seconds", "scenario.frequency[]", &x.from_seconds));
      KWATT_RETURN_IF_ERROR(Read(item, "mhz", "scenario.frequency[]", &x.mhz));
      s.frequency.push_back(x);
    }
  }
  if (j.contains("power_models")) {
    const json& m = j["power_models"];
    KWATT_RETURN_IF_ERROR(Expect(m.is_array(), "scenario.power_models: a list"));
    s.power_models.clear();
    const std::string where = "scenario.power_models[]";
    for (const auto& item : m) {
      SimulatedPowerModel x;
      KWATT_RETURN_IF_ERROR(
          CheckKeys(item, where, {"from_seconds", "min_mhz", "idle_watts", "watts_per_event"}));
      KWATT_RETURN_IF_ERROR(Read(item, "from_seconds", where, &x.from_seconds));
      KWATT_RETURN_IF_ERROR(Read(item, "min_mhz", where, &x.min_mhz));
      KWATT_RETURN_IF_ERROR(Read(item, "idle_watts", where, &x.idle_watts));
      if (item.contains("watts_per_event")) {
        const json& wpe = item["watts_per_event"];
        KWATT_RETURN_IF_ERROR(Expect(wpe.is_object(), where + ".watts_per_event: an object"));
        for (const auto& [event, value] : wpe.items()) {
          KWATT_RETURN_IF_ERROR(
              Expect(value.is_number(), where + ".watts_per_event." + event + ": a number"));
          x.watts_per_event.emplace_back(event, value.get<double>());
        }
      }
      s.power_models.push_back(x);
    }
  }
  if (j.contains("cgroups")) {
    const json& c = j["cgroups"];
    KWATT_RETURN_IF_ERROR(Expect(c.is_array(), "scenario.cgroups: a list"));
    s.cgroups.clear();
    for (const auto& item : c) {
      SimulatedCgroup x;
      const std::string where = "scenario.cgroups[]";
      KWATT_RETURN_IF_ERROR(CheckKeys(item, where, {"name", "sockets", "phases"}));
      KWATT_RETURN_IF_ERROR(Read(item, "name", where, &x.name));
      if (item.contains("sockets")) {
        KWATT_RETURN_IF_ERROR(Expect(item["sockets"].is_array(), where + ".sockets: a list"));
        for (const auto& socket : item["sockets"]) {
          KWATT_RETURN_IF_ERROR(
              Expect(socket.is_number_integer(), where + ".sockets: socket numbers"));
          x.sockets.push_back(socket.get<int>());
        }
      }
      if (item.contains("phases")) {
        KWATT_RETURN_IF_ERROR(Expect(item["phases"].is_array(), where + ".phases: a list"));
        for (const auto& phase : item["phases"]) {
          SimulatedPhase p;
          KWATT_RETURN_IF_ERROR(ReadPhase(phase, where + ".phases[]", &p));
          x.phases.push_back(p);
        }
      }
      s.cgroups.push_back(x);
    }
  }
  if (j.contains("background")) {
    KWATT_RETURN_IF_ERROR(ReadPhase(j["background"], "scenario.background", &s.background));
  }
  KWATT_RETURN_IF_ERROR(ValidateHwpcSimulation(s));
  return s;
}

// ---------------------------------------------------------------------------------------------

struct HwpcSimulator::State {
  HwpcSimulation sim;
  std::mt19937_64 random;
  int64_t tick = 0, ticks = 0;
  std::vector<double> cycle_seconds;  // per cgroup, the length of its phase cycle

  double Uniform() { return double(random() >> 11) * 0x1.0p-53; }
  double Gaussian() {
    // Box-Muller, on the standard's mt19937_64 (so that every library draws the same).
    double u1 = Uniform(), u2 = Uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
  }

  const SimulatedPhase& PhaseAt(size_t cgroup, double seconds) const {
    const SimulatedCgroup& c = sim.cgroups[cgroup];
    double t = std::fmod(seconds, cycle_seconds[cgroup]);
    for (const SimulatedPhase& p : c.phases) {
      if (t < p.seconds) return p;
      t -= p.seconds;
    }
    return c.phases.back();
  }

  int FrequencyAt(double seconds) const {
    int mhz = sim.frequency.front().mhz;
    double latest = -1;
    for (const auto& f : sim.frequency) {
      if (f.from_seconds <= seconds && f.from_seconds >= latest) {
        latest = f.from_seconds;
        mhz = f.mhz;
      }
    }
    return mhz;
  }

  const SimulatedPowerModel& ModelAt(double seconds, int mhz) const {
    const SimulatedPowerModel* best = nullptr;
    for (const auto& m : sim.power_models) {
      if (m.from_seconds > seconds || m.min_mhz > mhz) continue;
      if (!best || m.from_seconds > best->from_seconds ||
          (m.from_seconds == best->from_seconds && m.min_mhz > best->min_mhz)) {
        best = &m;
      }
    }
    return *best;  // one applies from 0 s at every frequency (validated)
  }
};

Result<std::unique_ptr<HwpcSimulator>> HwpcSimulator::Create(const HwpcSimulation& simulation) {
  KWATT_RETURN_IF_ERROR(ValidateHwpcSimulation(simulation));
  auto simulator = std::unique_ptr<HwpcSimulator>(new HwpcSimulator());
  simulator->state_ = std::make_unique<State>();
  State& s = *simulator->state_;
  s.sim = simulation;
  s.random.seed(simulation.seed);
  s.ticks = int64_t(std::floor(simulation.duration_seconds * 1000 / double(simulation.period_ms)));
  for (const auto& c : simulation.cgroups) {
    double total = 0;
    for (const auto& p : c.phases) total += p.seconds;
    s.cycle_seconds.push_back(total);
  }
  return simulator;
}

HwpcSimulator::~HwpcSimulator() = default;
const HwpcSimulation& HwpcSimulator::simulation() const { return state_->sim; }
int64_t HwpcSimulator::ticks() const { return state_->ticks; }

bool HwpcSimulator::Next(std::vector<meter::HwpcReport>* reports, std::vector<HwpcTruth>* truth) {
  State& s = *state_;
  const HwpcSimulation& sim = s.sim;
  reports->clear();
  truth->clear();
  if (s.tick >= s.ticks) return false;
  const double period = double(sim.period_ms) / 1000.0;
  const double at = double(s.tick) * period;  // the tick's start, seconds into the run
  const int64_t end_ms = sim.start_ms + (s.tick + 1) * sim.period_ms;
  ++s.tick;
  const int mhz = s.FrequencyAt(at);
  const double hz = double(mhz) * 1e6, base_hz = double(sim.base_frequency_mhz) * 1e6;
  const SimulatedPowerModel& model = s.ModelAt(at, mhz);
  const int cpus = sim.sockets * sim.cpus_per_socket;
  const size_t groups = sim.cgroups.size() + 1;  // the cgroups, then the background

  // Busy fraction of every CPU per workload, and its phase.
  std::vector<std::vector<double>> busy(groups, std::vector<double>(size_t(cpus), 0));
  std::vector<const SimulatedPhase*> phase(groups);
  for (size_t g = 0; g < groups; ++g) {
    const bool background = g == sim.cgroups.size();
    phase[g] = background ? &sim.background : &s.PhaseAt(g, at);
    double jitter = 1 + sim.jitter * s.Gaussian();
    double wanted = std::max(0.0, phase[g]->busy_cpus * jitter);
    std::vector<int> sockets;
    if (!background) sockets = sim.cgroups[g].sockets;
    if (sockets.empty()) {
      for (int k = 0; k < sim.sockets; ++k) sockets.push_back(k);
    }
    double per_cpu = wanted / double(sockets.size() * size_t(sim.cpus_per_socket));
    for (int socket : sockets) {
      for (int c = 0; c < sim.cpus_per_socket; ++c) {
        busy[g][size_t(socket * sim.cpus_per_socket + c)] = std::min(per_cpu, 1.0);
      }
    }
  }
  // A CPU cannot be busier than 1: every workload on it scaled down alike.
  for (int c = 0; c < cpus; ++c) {
    double total = 0;
    for (size_t g = 0; g < groups; ++g) total += busy[g][size_t(c)];
    if (total > 1) {
      for (size_t g = 0; g < groups; ++g) busy[g][size_t(c)] /= total;
    }
  }
  // True counts per workload and CPU over the tick, per event (sim.events' order).
  auto count = [&](size_t g, int c, const std::string& event) {
    double u = busy[g][size_t(c)];
    double cycles = u * hz * period;
    if (event == kThread) return cycles;
    if (event == kRef) return u * base_hz * period;
    double instructions = cycles * phase[g]->ipc;
    if (event == kInstructions) return instructions;
    return instructions * phase[g]->llc_mpki / 1000;
  };
  // Dynamic power per workload and socket.
  std::vector<std::vector<double>> dynamic(groups, std::vector<double>(size_t(sim.sockets), 0));
  for (size_t g = 0; g < groups; ++g) {
    for (int c = 0; c < cpus; ++c) {
      for (const auto& [event, w] : model.watts_per_event) {
        dynamic[g][size_t(c / sim.cpus_per_socket)] += w * count(g, c, event) / period;
      }
    }
  }

  const int64_t period_ns = sim.period_ms * 1000000;
  auto core_counters = [&](const std::vector<size_t>& workloads, int c) {
    meter::HwpcCpuCounters counters;
    counters.group = "core";
    counters.socket = c / sim.cpus_per_socket;
    counters.cpu = c;
    double running = 1 - sim.multiplexing * s.Uniform();
    for (const std::string& event : sim.events) {
      double total = 0;
      for (size_t g : workloads) total += count(g, c, event);
      counters.events.emplace_back(event, std::llround(total * running));
    }
    counters.events.emplace_back(std::string(meter::kHwpcTimeEnabled), period_ns);
    counters.events.emplace_back(std::string(meter::kHwpcTimeRunning),
                                 std::llround(double(period_ns) * running));
    std::sort(counters.events.begin(), counters.events.end());
    return counters;
  };

  // "all": rapl on each socket's first CPU, msr and core on every CPU.
  meter::HwpcReport all;
  all.timestamp_ms = end_ms;
  all.sensor = sim.sensor;
  all.target = "all";
  std::vector<size_t> everything(groups);
  for (size_t g = 0; g < groups; ++g) everything[g] = g;
  for (int socket = 0; socket < sim.sockets; ++socket) {
    double true_watts = model.idle_watts;
    for (size_t g = 0; g < groups; ++g) true_watts += dynamic[g][size_t(socket)];
    double reported = std::max(0.0, true_watts + sim.noise_watts * s.Gaussian());
    meter::HwpcCpuCounters rapl;
    rapl.group = "rapl";
    rapl.socket = socket;
    rapl.cpu = socket * sim.cpus_per_socket;
    rapl.events = {{"RAPL_ENERGY_PKG", std::llround(std::ldexp(reported * period, 32))},
                   {std::string(meter::kHwpcTimeEnabled), period_ns},
                   {std::string(meter::kHwpcTimeRunning), period_ns}};
    std::sort(rapl.events.begin(), rapl.events.end());
    all.counters.push_back(rapl);

    double dynamic_total = 0;
    for (size_t g = 0; g < groups; ++g) dynamic_total += dynamic[g][size_t(socket)];
    truth->push_back({end_ms, socket, "rapl", reported, reported - model.idle_watts, mhz});
    truth->push_back({end_ms, socket, "idle", model.idle_watts, 0, mhz});
    for (size_t g = 0; g < groups; ++g) {
      double d = dynamic[g][size_t(socket)];
      double share = dynamic_total > 0 ? model.idle_watts * d / dynamic_total : 0;
      std::string name = g < sim.cgroups.size() ? sim.cgroups[g].name : "background";
      truth->push_back({end_ms, socket, name, d + share, d, mhz});
    }
  }
  for (int c = 0; c < cpus; ++c) {
    double total_busy = 0;
    for (size_t g = 0; g < groups; ++g) total_busy += busy[g][size_t(c)];
    meter::HwpcCpuCounters msr;
    msr.group = "msr";
    msr.socket = c / sim.cpus_per_socket;
    msr.cpu = c;
    int64_t mperf = std::llround(total_busy * base_hz * period);
    msr.events = {{"APERF", std::llround(double(mperf) * hz / base_hz)},
                  {"MPERF", mperf},
                  {"TSC", std::llround(base_hz * period)},
                  {std::string(meter::kHwpcTimeEnabled), period_ns},
                  {std::string(meter::kHwpcTimeRunning), period_ns}};
    std::sort(msr.events.begin(), msr.events.end());
    all.counters.push_back(msr);
    all.counters.push_back(core_counters(everything, c));
  }
  (void)all.Normalize();
  reports->push_back(std::move(all));
  for (size_t g = 0; g < sim.cgroups.size(); ++g) {
    meter::HwpcReport r;
    r.timestamp_ms = end_ms;
    r.sensor = sim.sensor;
    r.target = sim.cgroups[g].name;
    for (int c = 0; c < cpus; ++c) r.counters.push_back(core_counters({g}, c));
    (void)r.Normalize();
    reports->push_back(std::move(r));
  }
  return true;
}

}  // namespace kwatt::simulate
