// `kwatt simulate hwpc`: hwpc-sensor's reports for a simulated machine and set of cgroups, from a
// known power model (kwatt/simulate/hwpc_simulation.h), with the true power of every target beside
// them: CSV files as hwpc-sensor's CSV output writes them, JSON lines as its socket output sends
// them, or a live stream to HOST:PORT (kwatt meter smartwatts --input listen:, or PowerAPI's
// socket input) at real time.
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "apps/kwatt/commands.h"
#include "apps/kwatt/stop_signals.h"
#include "kwatt/core/json_text.h"
#include "kwatt/core/time.h"
#include "kwatt/meter/powerapi/hwpc.h"
#include "kwatt/simulate/hwpc_simulation.h"

namespace kwatt::cli {

namespace {

struct HwpcArgs {
  std::string scenario, csv, json, connect, truth, start;
  std::optional<std::string> sensor;
  std::optional<int> sockets, cpus_per_socket, base_frequency;
  std::optional<int64_t> period_ms;
  std::optional<double> duration, noise, multiplexing;
  std::optional<uint64_t> seed;
  bool fast = false;
};

// Connects to HOST:PORT (IPv4, or a name), as hwpc-sensor's socket output does.
Result<int> Connect(const std::string& target) {
  size_t colon = target.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Status::InvalidArgument("--connect: HOST:PORT, not \"" + target + "\"");
  }
  std::string host = target.substr(0, colon), port = target.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0 || !found) {
    return Status::InvalidArgument("--connect: cannot resolve " + target + ": " +
                                   ::gai_strerror(rc));
  }
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
    std::string why = std::strerror(errno);
    ::freeaddrinfo(found);
    if (fd >= 0) ::close(fd);
    return Status::Unavailable("--connect: cannot connect to " + target + ": " + why);
  }
  ::freeaddrinfo(found);
  return fd;
}

Status SendAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return Status::Unavailable(std::string("the stream's reader went away: ") +
                                 std::strerror(errno));
    done += size_t(n);
  }
  return Status::OK();
}

int RunHwpcSimulation(const HwpcArgs& args) {
  const char* kName = "kwatt simulate hwpc";
  auto fail = [&](const Status& status) {
    std::fprintf(stderr, "%s: %s\n", kName, status.message().c_str());
    return ExitCodeOf(status);
  };
  if (args.csv.empty() && args.json.empty() && args.connect.empty()) {
    return fail(
        Status::InvalidArgument("nothing to write: give --csv DIR, --json FILE and/or "
                                "--connect HOST:PORT"));
  }
  simulate::HwpcSimulation simulation = simulate::DefaultHwpcSimulation();
  if (!args.scenario.empty()) {
    std::ifstream in(args.scenario);
    if (!in) return fail(Status::NotFound(args.scenario + ": cannot be read"));
    std::stringstream text;
    text << in.rdbuf();
    Result<simulate::HwpcSimulation> parsed = simulate::ParseHwpcSimulation(text.str());
    if (!parsed.ok()) return fail(parsed.status().WithContext(args.scenario));
    simulation = *parsed;
  }
  if (args.sensor) simulation.sensor = *args.sensor;
  if (args.sockets) simulation.sockets = *args.sockets;
  if (args.cpus_per_socket) simulation.cpus_per_socket = *args.cpus_per_socket;
  if (args.base_frequency) simulation.base_frequency_mhz = *args.base_frequency;
  if (args.period_ms) simulation.period_ms = *args.period_ms;
  if (args.duration) simulation.duration_seconds = *args.duration;
  if (args.noise) simulation.noise_watts = *args.noise;
  if (args.multiplexing) simulation.multiplexing = *args.multiplexing;
  if (args.seed) simulation.seed = *args.seed;
  const bool real_time = !args.connect.empty() && !args.fast;
  if (!args.start.empty() || real_time) {
    Result<UnixNanos> start =
        ParseUserTime(args.start.empty() ? "now" : args.start, WallClockNow());
    if (!start.ok()) return fail(start.status().WithContext("--start"));
    simulation.start_ms = FloorDiv(*start, 1000000);
  }
  Result<std::unique_ptr<simulate::HwpcSimulator>> simulator =
      simulate::HwpcSimulator::Create(simulation);
  if (!simulator.ok()) return fail(simulator.status());

  std::unique_ptr<meter::HwpcCsvWriter> csv;
  if (!args.csv.empty()) {
    auto opened = meter::HwpcCsvWriter::Open(args.csv);
    if (!opened.ok()) return fail(opened.status());
    csv = std::move(*opened);
  }
  std::FILE* json = nullptr;
  if (!args.json.empty()) {
    json = args.json == "-" ? stdout : std::fopen(args.json.c_str(), "wb");
    if (!json) return fail(Status::IOError(args.json + ": " + std::strerror(errno)));
  }
  std::FILE* truth = nullptr;
  if (!args.truth.empty()) {
    truth = std::fopen(args.truth.c_str(), "wb");
    if (!truth) return fail(Status::IOError(args.truth + ": " + std::strerror(errno)));
    std::fputs("timestamp,socket,target,watts,dynamic_watts,frequency_mhz\n", truth);
  }
  int stream = -1;
  if (!args.connect.empty()) {
    Result<int> fd = Connect(args.connect);
    if (!fd.ok()) return fail(fd.status());
    stream = *fd;
  }
  StopSignals stop(StopSignals::How::kCatch);

  Status status;
  std::vector<meter::HwpcReport> reports;
  std::vector<simulate::HwpcTruth> truths;
  std::string text, line;
  int64_t ticks = 0;
  while (status.ok() && !stop.requested() && (*simulator)->Next(&reports, &truths)) {
    if (real_time) {
      // Sent once measured: at the tick's end, by the wall clock.
      int64_t end_ms = reports.front().timestamp_ms;
      timespec until{time_t(end_ms / 1000), long(end_ms % 1000) * 1000000};
      while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &until, nullptr) == EINTR) {
        if (stop.requested()) break;
      }
      if (stop.requested()) break;
    }
    text.clear();
    for (const meter::HwpcReport& r : reports) {
      if (csv) status = csv->Write(r);
      if (!status.ok()) break;
      if (json || stream >= 0) {
        text += meter::FormatHwpcJson(r);
        text += '\n';
      }
    }
    if (!status.ok()) break;
    if (json && std::fwrite(text.data(), 1, text.size(), json) != text.size()) {
      status = Status::IOError(args.json + ": write failed");
    }
    if (status.ok() && stream >= 0) status = SendAll(stream, text);
    if (truth) {
      for (const simulate::HwpcTruth& t : truths) {
        line =
            std::to_string(t.timestamp_ms) + "," + std::to_string(t.socket) + "," + t.target + ",";
        AppendJsonNumber(&line, t.watts);
        line += ',';
        AppendJsonNumber(&line, t.dynamic_watts);
        line += "," + std::to_string(t.frequency_mhz) + "\n";
        std::fputs(line.c_str(), truth);
      }
    }
    ++ticks;
  }
  if (csv) {
    Status closed = csv->Close();
    if (status.ok()) status = closed;
  }
  if (json && json != stdout && std::fclose(json) != 0 && status.ok()) {
    status = Status::IOError(args.json + ": write failed");
  }
  if (json == stdout) std::fflush(stdout);
  if (truth && std::fclose(truth) != 0 && status.ok()) {
    status = Status::IOError(args.truth + ": write failed");
  }
  if (stream >= 0) ::close(stream);
  if (!status.ok()) return fail(status);
  std::fprintf(stderr, "%s: %" PRId64 " ticks of %" PRId64 " ms, sensor %s\n", kName, ticks,
               simulation.period_ms, simulation.sensor.c_str());
  return kExitOk;
}

}  // namespace

Runner RegisterSimulateHwpc(CLI::App* simulate) {
  auto args = std::make_shared<HwpcArgs>();
  CLI::App* command = simulate->add_subcommand(
      "hwpc",
      "hwpc-sensor's reports (CSV, JSON, a live socket stream) for a simulated machine and "
      "cgroups, from a known power model, with the true power of every target");
  command
      ->add_option("--scenario", args->scenario,
                   "A scenario file (JSON, doc/meter/attribution.md); default: the built-in one")
      ->check(CLI::ExistingFile);
  command->add_option("--csv", args->csv, "Writes hwpc-sensor's CSV files (GROUP.csv) in DIR")
      ->check(NonEmptyPath());
  command->add_option("--json", args->json, "Writes the JSON documents, one per line (- : stdout)")
      ->check(NonEmptyPath());
  command->add_option("--connect", args->connect,
                      "Streams the JSON documents to HOST:PORT at real time, as hwpc-sensor's "
                      "socket output does (--fast: at once)");
  command
      ->add_option("--truth", args->truth,
                   "Writes the true power per tick, socket and target (CSV: timestamp, socket, "
                   "target, watts, dynamic_watts, frequency_mhz)")
      ->check(NonEmptyPath());
  command->add_flag("--fast", args->fast, "With --connect: no waiting for the wall clock");
  command->add_option("--start", args->start,
                      "When the first tick starts (epoch seconds, ISO 8601, now); default: the "
                      "scenario's (now with --connect)");
  command->add_option("--sensor", args->sensor, "The sensor's name");
  command->add_option("--sockets", args->sockets, "Sockets");
  command->add_option("--cpus-per-socket", args->cpus_per_socket, "CPUs per socket");
  command->add_option("--base-frequency", args->base_frequency, "Base frequency, MHz");
  command->add_option("--period-ms", args->period_ms, "The sensor's period, milliseconds");
  command->add_option("--duration", args->duration, "Seconds simulated");
  command->add_option("--noise", args->noise, "RAPL noise (standard deviation, watts)");
  command->add_option("--multiplexing", args->multiplexing,
                      "Counters run a fraction of each tick drawn in [1 - M, 1]");
  command->add_option("--seed", args->seed, "Seed");
  return [command, args]() -> int {
    if (!command->parsed()) return -1;
    return RunHwpcSimulation(*args);
  };
}

}  // namespace kwatt::cli
