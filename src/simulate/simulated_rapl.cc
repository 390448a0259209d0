// The simulated RAPL machine (simulated_rapl.h).
#include "kwatt/simulate/simulated_rapl.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "kwatt/core/output_file.h"

namespace kwatt::simulate {

namespace fs = std::filesystem;
using meter::rapl_internal::Microjoules;
using i128 = __int128;

namespace {

constexpr i128 kFemtojoulesPerMicrojoule = 1'000'000'000;

// A file of the tree, whole, with sysfs's mode.
Status WriteTreeFile(const std::string& path, const std::string& text, mode_t mode = 0444) {
  KWATT_RETURN_IF_ERROR(WriteWholeFile(path, text));
  if (::chmod(path.c_str(), mode) != 0) return Status::IOError(path + ": " + std::strerror(errno));
  return Status::OK();
}

std::string Uw(double watts) { return std::to_string(int64_t(std::llround(watts * 1e6))); }

const char* PerfEvent(const std::string& kind) {
  if (kind == "package") return "energy-pkg";
  if (kind == "core") return "energy-cores";
  if (kind == "uncore") return "energy-gpu";
  if (kind == "dram") return "energy-ram";
  if (kind == "psys") return "energy-psys";
  return nullptr;
}

uint64_t PerfConfig(const std::string& kind) {
  if (kind == "core") return 1;
  if (kind == "package") return 2;
  if (kind == "dram") return 3;
  if (kind == "uncore") return 4;
  return 5;  // psys
}

}  // namespace

SimulatedRaplUnit SimulatedRaplUnit::PowerOfTwo(int exponent, bool kernel_truncated) {
  SimulatedRaplUnit unit;
  unit.hardware = {1'000'000, uint64_t(1) << exponent};
  unit.reported =
      kernel_truncated ? Microjoules{1'000'000'000ull >> exponent, 1000} : unit.hardware;
  unit.perf_shift = 32 - exponent;
  return unit;
}

SimulatedRaplUnit SimulatedRaplUnit::FixedNanojoules(uint32_t nanojoules) {
  SimulatedRaplUnit unit;
  unit.hardware = unit.reported = {nanojoules, 1000};
  unit.perf_shift = 16;
  return unit;
}

SimulatedRaplLayout SimulatedRaplLayout::IntelServer(int sockets) {
  SimulatedRaplLayout layout;
  layout.sockets = sockets;
  layout.cpus_per_socket = 4;
  for (int s = 0; s < sockets; ++s) {
    SimulatedRaplZone package;
    package.kind = "package";
    package.socket = s;
    package.unit = SimulatedRaplUnit::PowerOfTwo(14);
    package.max_power_watts = 125;
    package.initial_joules = 100000.0 + 37000.0 * s;
    SimulatedRaplZone dram = package;
    dram.kind = "dram";
    dram.unit = SimulatedRaplUnit::PowerOfTwo(16);
    dram.max_power_watts = 40;
    dram.initial_joules = 20000.0 + 9000.0 * s;
    layout.zones.push_back(package);
    layout.zones.push_back(dram);
  }
  return layout;
}

SimulatedRaplLayout SimulatedRaplLayout::IntelClient(bool mmio_duplicate) {
  SimulatedRaplLayout layout;
  layout.sockets = 1;
  layout.cpus_per_socket = 8;
  layout.mmio_duplicate = mmio_duplicate;
  for (const char* kind : {"package", "core", "uncore", "psys"}) {
    SimulatedRaplZone zone;
    zone.kind = kind;
    zone.socket = 0;
    zone.unit = SimulatedRaplUnit::PowerOfTwo(14);
    zone.max_power_watts = zone.kind == "package" ? 28 : zone.kind == "psys" ? 65 : 0;
    zone.initial_joules = 5000;
    layout.zones.push_back(zone);
  }
  return layout;
}

SimulatedRaplLayout SimulatedRaplLayout::Amd(int sockets) {
  SimulatedRaplLayout layout;
  layout.sockets = sockets;
  layout.cpus_per_socket = 8;
  layout.perf_kinds = {"package"};
  for (int s = 0; s < sockets; ++s) {
    for (const char* kind : {"package", "core"}) {
      SimulatedRaplZone zone;
      zone.kind = kind;
      zone.socket = s;
      zone.unit = SimulatedRaplUnit::PowerOfTwo(16);
      zone.max_power_watts = zone.kind == "package" ? 280 : 0;
      zone.initial_joules = 30000;
      layout.zones.push_back(zone);
    }
  }
  return layout;
}

void SimulatedRaplLayout::SetCounterRange(uint64_t range) {
  for (SimulatedRaplZone& zone : zones) zone.counter_range = range;
}

void SimulatedRaplLayout::SetMaxPower(double watts) {
  for (SimulatedRaplZone& zone : zones) zone.max_power_watts = watts;
}

struct SimulatedRapl::State {
  struct Zone {
    SimulatedRaplZone spec;
    std::string domain;  // package-0
    std::string id;      // intel-rapl:0:1
    std::string name;    // the name file: package-0, core, psys
    std::string dir;     // the real directory
    std::string link;    // ROOT/class/powercap/ID
    uint64_t max_range = 0;
    int width = 0;        // digits of max_range
    i128 true_fj = 0;     // since the start
    i128 initial_fj = 0;  // the counter's energy at the start
    i128 reset_fj = 0;    // the counter's energy at its last reset (counts restart there)
    int fd = -1;          // energy_uj, open for writing
    size_t written = 0;   // the length of what it holds
    bool present = true;
    bool unreadable = false;
    std::optional<std::string> malformed;
    const Zone* mirror_of = nullptr;  // the MMIO duplicate shows this zone's counter
  };
  struct Counter {
    size_t zone;
    uint64_t start_count;
    int64_t opened_at;
    bool open;
  };

  std::string root;
  SimulatedRaplLayout layout;
  SimulatedPowerTrace trace;
  std::vector<Zone> zones;  // the MMIO duplicate last
  int64_t now = 0;
  int64_t updates = 0;
  int perf_open_error = 0;
  std::vector<Counter> counters;
  int truth_fd = -1;

  ~State() {
    for (Zone& z : zones) {
      if (z.fd >= 0) ::close(z.fd);
    }
    if (truth_fd >= 0) ::close(truth_fd);
  }

  const Zone* Find(const std::string& domain) const {
    for (const Zone& z : zones) {
      if (z.domain == domain && !z.mirror_of) return &z;
    }
    return nullptr;
  }
  Zone* Find(const std::string& domain) {
    return const_cast<Zone*>(static_cast<const State*>(this)->Find(domain));
  }

  static i128 UnitFemtojoules(const Microjoules& unit, i128 energy_fj) {
    // floor(energy / unit) with unit = numerator / denominator microjoules.
    return energy_fj * i128(unit.denominator) / (i128(unit.numerator) * kFemtojoulesPerMicrojoule);
  }

  // The hardware count since its last reset (not wrapped), and since the start (for perf).
  static uint64_t CountSinceReset(const Zone& z) {
    return uint64_t(UnitFemtojoules(z.spec.unit.hardware, z.true_fj + z.initial_fj - z.reset_fj));
  }
  static uint64_t CountSinceStart(const Zone& z) {
    return uint64_t(UnitFemtojoules(z.spec.unit.hardware, z.true_fj + z.initial_fj));
  }

  std::string EnergyText(const Zone& z) const {
    const Zone& counter = z.mirror_of ? *z.mirror_of : z;
    if (z.malformed) return *z.malformed;
    uint64_t raw = CountSinceReset(counter) % counter.spec.counter_range;
    uint64_t reported = meter::rapl_internal::CountToMicrojoules(raw, counter.spec.unit.reported);
    std::string digits = std::to_string(reported);
    if (int(digits.size()) < z.width) digits.insert(0, size_t(z.width) - digits.size(), '0');
    return digits + "\n";
  }

  Status WriteEnergy(Zone& z) {
    if (!z.present || z.unreadable || z.fd < 0) return Status::OK();
    std::string text = EnergyText(z);
    if (::pwrite(z.fd, text.data(), text.size(), 0) != ssize_t(text.size())) {
      return Status::IOError(z.dir + "/energy_uj: " + std::strerror(errno));
    }
    if (text.size() != z.written) {
      if (::ftruncate(z.fd, off_t(text.size())) != 0) {
        return Status::IOError(z.dir + "/energy_uj: " + std::strerror(errno));
      }
      z.written = text.size();
    }
    return Status::OK();
  }

  Status OpenEnergy(Zone& z) {
    std::string path = z.dir + "/energy_uj";
    z.fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (z.fd < 0) return Status::IOError(path + ": " + std::strerror(errno));
    z.written = 0;
    ::fchmod(z.fd, layout.root_only_energy ? 0400 : 0444);
    return WriteEnergy(z);
  }

  // Empties energy_uj (a reader holding it open then reads nothing) and forgets it.
  void EmptyEnergy(Zone& z) {
    if (z.fd < 0) return;
    if (::ftruncate(z.fd, 0) != 0) {
      // Nothing to do: the file is removed next.
    }
    ::close(z.fd);
    z.fd = -1;
  }

  Status LayOutZone(Zone& z) {
    std::error_code error;
    fs::create_directories(z.dir, error);
    if (error) return Status::IOError(z.dir + ": " + error.message());
    KWATT_RETURN_IF_ERROR(WriteTreeFile(z.dir + "/name", z.name + "\n"));
    KWATT_RETURN_IF_ERROR(
        WriteTreeFile(z.dir + "/max_energy_range_uj", std::to_string(z.max_range) + "\n"));
    KWATT_RETURN_IF_ERROR(WriteTreeFile(z.dir + "/enabled", "1\n", 0644));
    KWATT_RETURN_IF_ERROR(WriteTreeFile(z.dir + "/constraint_0_name", "long_term\n"));
    KWATT_RETURN_IF_ERROR(WriteTreeFile(z.dir + "/constraint_0_time_window_us", "999424\n"));
    const Zone& counter = z.mirror_of ? *z.mirror_of : z;
    double max_power = counter.spec.max_power_watts;
    KWATT_RETURN_IF_ERROR(WriteTreeFile(z.dir + "/constraint_0_power_limit_uw",
                                        Uw(max_power > 0 ? max_power : 0) + "\n", 0644));
    if (max_power > 0) {
      KWATT_RETURN_IF_ERROR(
          WriteTreeFile(z.dir + "/constraint_0_max_power_uw", Uw(max_power) + "\n"));
    }
    KWATT_RETURN_IF_ERROR(WriteTreeFile(z.dir + "/constraint_1_name", "short_term\n"));
    fs::remove(z.link, error);
    fs::create_directory_symlink(fs::relative(z.dir, fs::path(z.link).parent_path()), z.link,
                                 error);
    if (error) return Status::IOError(z.link + ": " + error.message());
    if (z.unreadable) {
      fs::create_directory(z.dir + "/energy_uj", error);
      return Status::OK();
    }
    return OpenEnergy(z);
  }

  Status WriteTruth() {
    if (truth_fd < 0) return Status::OK();
    std::string text = "kwatt-simulated-rapl-truth 1\nupdate " + std::to_string(updates) + " " +
                       std::to_string(now) + "\n";
    for (const Zone& z : zones) {
      if (z.mirror_of) continue;
      text +=
          z.domain + " " + std::to_string(int64_t(z.true_fj / kFemtojoulesPerMicrojoule)) + "\n";
    }
    if (::pwrite(truth_fd, text.data(), text.size(), 0) != ssize_t(text.size()) ||
        ::ftruncate(truth_fd, off_t(text.size())) != 0) {
      return Status::IOError(root + "/kwatt_truth: " + std::strerror(errno));
    }
    return Status::OK();
  }
};

namespace {

class SimulatedPerfEvents : public meter::PerfEvents {
 public:
  explicit SimulatedPerfEvents(std::weak_ptr<SimulatedRapl::State> state)
      : state_(std::move(state)) {}

  Result<int> Open(const meter::PerfEventSpec& spec) override {
    auto state = state_.lock();
    if (!state) return Status::NotFound("the simulated machine is gone");
    const std::string what = "perf_event_open of " + spec.name + " (simulated)";
    int error = state->perf_open_error;
    if (error == EACCES || error == EPERM) {
      return Status::PermissionDenied(
          what + " was refused (" + std::strerror(error) +
          "): kernel.perf_event_paranoid is 2; run as root, give the program CAP_PERFMON (Linux "
          "5.8+; CAP_SYS_ADMIN before), or lower it");
    }
    if (error != 0) {
      return Status::NotFound(what + " is not available on this machine (" + std::strerror(error) +
                              ")");
    }
    const SimulatedRaplLayout& layout = state->layout;
    if (!layout.perf_pmu || spec.type != layout.perf_type || spec.pid != -1 || spec.cpu < 0 ||
        spec.cpu % layout.cpus_per_socket != 0 ||
        spec.cpu / layout.cpus_per_socket >= layout.sockets) {
      return Status::NotFound(what + " is not available on this machine (" + std::strerror(EINVAL) +
                              ")");
    }
    int socket = spec.cpu / layout.cpus_per_socket;
    for (size_t i = 0; i < state->zones.size(); ++i) {
      const auto& z = state->zones[i];
      if (z.mirror_of || PerfConfig(z.spec.kind) != spec.config) continue;
      // psys has one counter per package in perf's PMU; the simulation has one for the machine,
      // read on package 0.
      if (z.spec.kind != "psys" && z.spec.socket != socket) continue;
      if (z.spec.kind == "psys" && socket != 0) continue;
      state->counters.push_back(SimulatedRapl::State::Counter{
          i, SimulatedRapl::State::CountSinceStart(z), state->now, true});
      return int(state->counters.size() - 1);
    }
    return Status::NotFound(what + " is not available on this machine (" + std::strerror(ENOENT) +
                            ")");
  }

  Result<meter::PerfCount> Read(int handle) override {
    auto state = state_.lock();
    if (!state || handle < 0 || size_t(handle) >= state->counters.size() ||
        !state->counters[size_t(handle)].open) {
      return Status::IOError("reading a perf counter failed: Bad file descriptor");
    }
    const auto& c = state->counters[size_t(handle)];
    const auto& z = state->zones[c.zone];
    uint64_t counts = SimulatedRapl::State::CountSinceStart(z) - c.start_count;
    uint64_t enabled = uint64_t(state->now - c.opened_at);
    return meter::PerfCount{counts << z.spec.unit.perf_shift, enabled, enabled};
  }

  void Close(int handle) override {
    auto state = state_.lock();
    if (state && handle >= 0 && size_t(handle) < state->counters.size()) {
      state->counters[size_t(handle)].open = false;
    }
  }

 private:
  std::weak_ptr<SimulatedRapl::State> state_;
};

}  // namespace

SimulatedRapl::SimulatedRapl(std::shared_ptr<State> state) : state_(std::move(state)) {}
SimulatedRapl::~SimulatedRapl() = default;

Result<std::unique_ptr<SimulatedRapl>> SimulatedRapl::Create(const std::string& root,
                                                             SimulatedRaplLayout layout,
                                                             SimulatedPowerTrace trace) {
  if (layout.sockets < 1 || layout.sockets > 64 || layout.cpus_per_socket < 1 ||
      layout.cpus_per_socket > 256) {
    return Status::InvalidArgument("a simulated RAPL machine needs 1-64 sockets of 1-256 CPUs");
  }
  if (!trace) return Status::InvalidArgument("a simulated RAPL machine needs a power trace");
  auto state = std::make_shared<State>();
  state->root = root;
  state->trace = std::move(trace);
  const std::string devices = root + "/devices/virtual/powercap";
  const std::string classes = root + "/class/powercap";
  std::map<int, int> children;  // socket -> subzones so far
  int psys_count = 0;
  for (const SimulatedRaplZone& spec : layout.zones) {
    State::Zone z;
    z.spec = spec;
    if (spec.counter_range < 256 || spec.counter_range > (uint64_t(1) << 32)) {
      return Status::InvalidArgument("a simulated counter range is 2^8 .. 2^32 counts");
    }
    if (spec.unit.hardware.numerator == 0 || spec.unit.hardware.denominator == 0 ||
        spec.unit.reported.numerator == 0 || spec.unit.reported.denominator == 0) {
      return Status::InvalidArgument("a simulated counter unit of zero");
    }
    if (spec.kind == "psys") {
      if (psys_count++) return Status::InvalidArgument("a simulated machine has one psys zone");
      z.domain = "psys";
      z.name = "psys";
      z.id = "intel-rapl:" + std::to_string(layout.sockets);
      z.dir = devices + "/intel-rapl/" + z.id;
    } else {
      if (spec.socket < 0 || spec.socket >= layout.sockets) {
        return Status::InvalidArgument("a simulated zone's socket is outside the machine");
      }
      std::string s = std::to_string(spec.socket);
      z.domain = spec.kind + "-" + s;
      std::string package_dir = devices + "/intel-rapl/intel-rapl:" + s;
      if (spec.kind == "package") {
        z.name = "package-" + s;
        z.id = "intel-rapl:" + s;
        z.dir = package_dir;
      } else if (spec.kind == "core" || spec.kind == "uncore" || spec.kind == "dram") {
        z.name = spec.kind;
        z.id = "intel-rapl:" + s + ":" + std::to_string(children[spec.socket]++);
        z.dir = package_dir + "/" + z.id;
      } else {
        return Status::InvalidArgument("'" + spec.kind + "' is not a RAPL domain kind");
      }
    }
    if (state->Find(z.domain)) {
      return Status::InvalidArgument("two simulated zones are " + z.domain);
    }
    z.link = classes + "/" + z.id;
    z.max_range = meter::rapl_internal::MaxEnergyRange(spec.counter_range, spec.unit.reported);
    z.width = int(std::to_string(z.max_range).size());
    z.initial_fj = i128(std::llround(spec.initial_joules * 1e6)) * kFemtojoulesPerMicrojoule;
    state->zones.push_back(std::move(z));
  }
  for (int s = 0; s < layout.sockets; ++s) {
    if (children.count(s) && !state->Find("package-" + std::to_string(s))) {
      return Status::InvalidArgument("socket " + std::to_string(s) +
                                     " has domains but no package zone");
    }
  }
  if (layout.mmio_duplicate) {
    const State::Zone* package = state->Find("package-0");
    if (!package) return Status::InvalidArgument("an MMIO duplicate needs package-0");
    State::Zone mmio = *package;
    mmio.id = "intel-rapl-mmio:0";
    mmio.dir = devices + "/intel-rapl-mmio/" + mmio.id;
    mmio.link = classes + "/" + mmio.id;
    mmio.fd = -1;
    state->zones.push_back(std::move(mmio));
    state->zones.back().mirror_of = state->Find("package-0");
  }
  state->layout = std::move(layout);

  std::error_code error;
  if (fs::exists(root + "/class/powercap", error)) {
    return Status::InvalidArgument(
        root + " already holds a powercap tree: remove it, or give another directory");
  }
  fs::create_directories(classes, error);
  fs::create_directories(devices + "/intel-rapl", error);
  if (error) return Status::IOError(classes + ": " + error.message());
  KWATT_RETURN_IF_ERROR(WriteTreeFile(devices + "/intel-rapl/enabled", "1\n", 0644));
  fs::create_directory_symlink("../../devices/virtual/powercap/intel-rapl", classes + "/intel-rapl",
                               error);
  for (State::Zone& z : state->zones) KWATT_RETURN_IF_ERROR(state->LayOutZone(z));

  const SimulatedRaplLayout& l = state->layout;
  const int cpus = l.sockets * l.cpus_per_socket;
  for (int cpu = 0; cpu < cpus; ++cpu) {
    std::string topology = root + "/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology";
    fs::create_directories(topology, error);
    if (error) return Status::IOError(topology + ": " + error.message());
    KWATT_RETURN_IF_ERROR(WriteTreeFile(topology + "/physical_package_id",
                                        std::to_string(cpu / l.cpus_per_socket) + "\n"));
    KWATT_RETURN_IF_ERROR(WriteTreeFile(topology + "/die_id", "0\n"));
  }
  KWATT_RETURN_IF_ERROR(
      WriteTreeFile(root + "/devices/system/cpu/online", "0-" + std::to_string(cpus - 1) + "\n"));
  if (l.perf_pmu) {
    const std::string pmu = root + "/bus/event_source/devices/power";
    fs::create_directories(pmu + "/events", error);
    if (error) return Status::IOError(pmu + ": " + error.message());
    KWATT_RETURN_IF_ERROR(WriteTreeFile(pmu + "/type", std::to_string(l.perf_type) + "\n"));
    std::string mask;
    for (int s = 0; s < l.sockets; ++s) {
      mask += (s ? "," : "") + std::to_string(s * l.cpus_per_socket);
    }
    KWATT_RETURN_IF_ERROR(WriteTreeFile(pmu + "/cpumask", mask + "\n"));
    for (const State::Zone& z : state->zones) {
      if (z.mirror_of) continue;
      if (!l.perf_kinds.empty() &&
          std::find(l.perf_kinds.begin(), l.perf_kinds.end(), z.spec.kind) == l.perf_kinds.end()) {
        continue;
      }
      const std::string event = pmu + "/events/" + PerfEvent(z.spec.kind);
      char config[32];
      std::snprintf(config, sizeof config, "event=0x%02x\n", unsigned(PerfConfig(z.spec.kind)));
      KWATT_RETURN_IF_ERROR(WriteTreeFile(event, config));
      KWATT_RETURN_IF_ERROR(WriteTreeFile(event + ".scale", "2.3283064365386962890625e-10\n"));
      KWATT_RETURN_IF_ERROR(WriteTreeFile(event + ".unit", "Joules\n"));
    }
  }
  return std::unique_ptr<SimulatedRapl>(new SimulatedRapl(std::move(state)));
}

const std::string& SimulatedRapl::root() const { return state_->root; }

std::vector<std::string> SimulatedRapl::domains() const {
  std::vector<std::string> out;
  for (const auto& z : state_->zones) {
    if (!z.mirror_of) out.push_back(z.domain);
  }
  return out;
}

std::string SimulatedRapl::ZoneDir(const std::string& domain) const {
  const State::Zone* z = state_->Find(domain);
  return z ? z->link : "";
}

int64_t SimulatedRapl::now() const { return state_->now; }

Status SimulatedRapl::AdvanceTo(int64_t nanos) {
  State& s = *state_;
  if (nanos < s.now) return Status::InvalidArgument("the simulated time cannot go back");
  const i128 step = nanos - s.now;
  for (State::Zone& z : s.zones) {
    if (z.mirror_of) continue;
    double watts = s.trace(z.domain, s.now);
    if (!(watts >= 0) || !std::isfinite(watts)) {
      return Status::InvalidArgument("the power trace gave " + std::to_string(watts) + " W for " +
                                     z.domain);
    }
    z.true_fj += i128(std::llround(watts * 1e6)) * step;  // uW x ns = fJ
  }
  s.now = nanos;
  ++s.updates;
  for (State::Zone& z : s.zones) KWATT_RETURN_IF_ERROR(s.WriteEnergy(z));
  return s.WriteTruth();
}

long double SimulatedRapl::TrueMicrojoules(const std::string& domain) const {
  const State::Zone* z = state_->Find(domain);
  if (!z) return 0;
  return (long double)(z->true_fj / kFemtojoulesPerMicrojoule) +
         (long double)(z->true_fj % kFemtojoulesPerMicrojoule) / 1e9L;
}

int64_t SimulatedRapl::TrueMicrojoulesFloor(const std::string& domain) const {
  const State::Zone* z = state_->Find(domain);
  return z ? int64_t(z->true_fj / kFemtojoulesPerMicrojoule) : 0;
}

Status SimulatedRapl::EnableTruthFile() {
  std::string path = state_->root + "/kwatt_truth";
  if (state_->truth_fd < 0) {
    state_->truth_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (state_->truth_fd < 0) return Status::IOError(path + ": " + std::strerror(errno));
  }
  return state_->WriteTruth();
}

Status SimulatedRapl::Reset(const std::string& domain) {
  State::Zone* z = state_->Find(domain);
  if (!z) return Status::NotFound("no simulated domain " + domain);
  z->reset_fj = z->true_fj + z->initial_fj;
  for (State::Zone& each : state_->zones) KWATT_RETURN_IF_ERROR(state_->WriteEnergy(each));
  return Status::OK();
}

Status SimulatedRapl::Unplug(int socket) {
  bool any = false;
  for (State::Zone& z : state_->zones) {
    const State::Zone& counter = z.mirror_of ? *z.mirror_of : z;
    if (counter.spec.kind == "psys" || counter.spec.socket != socket || !z.present) continue;
    any = true;
    state_->EmptyEnergy(z);
    z.present = false;
    std::error_code error;
    fs::remove(z.link, error);
    fs::remove_all(z.dir, error);
    if (error) return Status::IOError(z.dir + ": " + error.message());
  }
  if (!any) return Status::NotFound("no plugged package " + std::to_string(socket));
  return Status::OK();
}

Status SimulatedRapl::Replug(int socket) {
  bool any = false;
  // Packages first: their directories hold the children's.
  for (int pass = 0; pass < 2; ++pass) {
    for (State::Zone& z : state_->zones) {
      const State::Zone& counter = z.mirror_of ? *z.mirror_of : z;
      if (counter.spec.kind == "psys" || counter.spec.socket != socket || z.present) continue;
      if ((pass == 0) != (counter.spec.kind == "package")) continue;
      any = true;
      z.present = true;
      KWATT_RETURN_IF_ERROR(state_->LayOutZone(z));
    }
  }
  if (!any) return Status::NotFound("no unplugged package " + std::to_string(socket));
  return Status::OK();
}

Status SimulatedRapl::SetMalformed(const std::string& domain, std::optional<std::string> text) {
  State::Zone* z = state_->Find(domain);
  if (!z) return Status::NotFound("no simulated domain " + domain);
  z->malformed = std::move(text);
  return state_->WriteEnergy(*z);
}

Status SimulatedRapl::SetUnreadable(const std::string& domain, bool unreadable) {
  State::Zone* z = state_->Find(domain);
  if (!z) return Status::NotFound("no simulated domain " + domain);
  if (z->unreadable == unreadable) return Status::OK();
  z->unreadable = unreadable;
  if (!z->present) return Status::OK();
  std::string path = z->dir + "/energy_uj";
  std::error_code error;
  if (unreadable) {
    state_->EmptyEnergy(*z);
    fs::remove(path, error);
    fs::create_directory(path, error);
    if (error) return Status::IOError(path + ": " + error.message());
    return Status::OK();
  }
  fs::remove(path, error);
  if (error) return Status::IOError(path + ": " + error.message());
  return state_->OpenEnergy(*z);
}

std::shared_ptr<meter::PerfEvents> SimulatedRapl::perf_events() {
  return std::make_shared<SimulatedPerfEvents>(state_);
}

void SimulatedRapl::SetPerfOpenError(int error) { state_->perf_open_error = error; }

}  // namespace kwatt::simulate
