// `kwatt simulate wattmetre`: the line stream of a simulated Omegawatt wattmeter
// (kwatt/simulate/wattmetre.h), printed in real time or as fast as possible, until a signal, a
// closed pipe or --duration ends it; --truth then gives the exact energies of the lines printed.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "apps/kwatt/commands.h"
#include "apps/kwatt/stop_signals.h"
#include "kwatt/core/node_name.h"
#include "kwatt/simulate/wattmetre.h"

namespace kwatt::cli {

namespace {

// Adds the node `name` ("nova-1", "nova-1.lyon", an FQDN) to the wattmeter.
Result<size_t> AddNode(simulate::SimulatedWattmetre* wattmetre, const std::string& name) {
  std::string uid = name, site;
  if (name.find('.') != std::string::npos) {
    KWATT_ASSIGN_OR_RETURN(NodeName parsed, ParseNodeName(name));
    uid = parsed.uid;
    site = parsed.site;
  }
  return wattmetre->AddNode(uid, site);
}

struct WattmetreArgs {
  std::string id = "wattmetre1";
  std::string nodes;
  int version = 2;
  double rate = 50;
  std::string start = "now";
  std::optional<double> duration;
  bool fast = false;
  std::string mapping_out, truth, jobs;
  uint64_t seed = 1;
};

Status WriteText(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return Status::IOError(path + ": " + std::strerror(errno));
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok) return Status::IOError(path + ": write failed");
  return Status::OK();
}

// Adds a port per name of `nodes` (--nodes, comma-separated), port i measuring node i; a node
// named twice has two ports (2 PSUs). InvalidArgument "--nodes: ..." for an empty name or one that
// is not a node's.
Status AddPorts(const std::string& nodes, simulate::SimulatedWattmetre* wattmetre) {
  std::map<std::string, size_t> node_index;  // the nodes, in first-appearance order
  size_t from = 0;
  while (from <= nodes.size()) {
    size_t comma = nodes.find(',', from);
    std::string name =
        nodes.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    from = comma == std::string::npos ? nodes.size() + 1 : comma + 1;
    while (!name.empty() && name.front() == ' ') name.erase(0, 1);
    while (!name.empty() && name.back() == ' ') name.pop_back();
    if (name.empty()) return Status::InvalidArgument("--nodes: an empty node name in " + nodes);
    auto it = node_index.find(name);
    if (it == node_index.end()) {
      Result<size_t> node = AddNode(wattmetre, name);
      if (!node.ok()) return Status::InvalidArgument("--nodes: " + node.status().message());
      it = node_index.emplace(name, *node).first;
    }
    wattmetre->AddPort(it->second);
  }
  return Status::OK();
}

// Prints the wattmeter's lines on standard output, each once measured (at its interval's end, by
// the wall clock) or as fast as possible (--fast), until --duration's samples are printed, a
// signal (SIGINT, SIGTERM) or a closed pipe. Returns how many lines reached the reader whole.
int64_t StreamLines(simulate::SimulatedWattmetre& wattmetre, const WattmetreArgs& args) {
  const int64_t period = wattmetre.period();
  const UnixNanos first = wattmetre.first();
  int64_t samples_wanted = -1;  // until stopped
  if (args.duration) samples_wanted = int64_t(std::floor(*args.duration * 1e9 / double(period)));

  StopSignals stop(StopSignals::How::kCatch);
  // A closed pipe is seen as EPIPE on the write, which ends the stream cleanly.
  signal(SIGPIPE, SIG_IGN);
  // Our own buffer on fd 1 rather than stdio's, so that the lines counted in --truth are those
  // that reached the reader whole: written when full (--fast) or at each line (real time).
  std::string out;
  std::vector<size_t> line_ends;  // in `out`
  int64_t written = 0;            // lines fully written
  bool broken_pipe = false;
  auto drain = [&]() {
    size_t done = 0;
    while (done < out.size()) {
      ssize_t n = ::write(1, out.data() + done, out.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        broken_pipe = true;
        break;
      }
      done += size_t(n);
    }
    for (size_t e : line_ends) written += e <= done ? 1 : 0;
    out.clear();
    line_ends.clear();
  };
  const size_t flush_at = args.fast ? (1 << 16) : 0;

  for (int64_t k = 0; samples_wanted < 0 || k < samples_wanted; ++k) {
    if (stop.requested()) break;
    if (!args.fast) {
      // Printed once measured: at the interval's end, by the wall clock.
      UnixNanos end = first + (k + 1) * period;
      timespec until{time_t(FloorDiv(end, kNanosPerSecond)), long(NanosOfSecond(end))};
      int slept;
      while ((slept = clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &until, nullptr)) == EINTR) {
        if (stop.requested()) break;
      }
      if (stop.requested()) break;
    }
    wattmetre.AppendLine(k, &out);
    line_ends.push_back(out.size());
    if (out.size() >= flush_at) drain();
    if (broken_pipe) break;
  }
  if (!broken_pipe) drain();
  return written;
}

int Run(const WattmetreArgs& args) {
  auto fail = [](const Status& status) {
    std::fprintf(stderr, "kwatt simulate wattmetre: %s\n", status.message().c_str());
    return ExitCodeOf(status);
  };
  auto usage = [](const std::string& message) {
    std::fprintf(stderr, "kwatt simulate wattmetre: %s\n", message.c_str());
    return kExitUsage;
  };
  if (args.version != 2 && args.version != 3) return usage("--version: 2 or 3");
  if (!(args.rate > 0 && args.rate <= 1000)) return usage("--rate: a frequency in (0, 1000] Hz");
  if (args.duration && !(*args.duration >= 0 && *args.duration <= 1e9)) {
    return usage("--duration: seconds, 0 or more");
  }
  if (args.id.empty() || args.id.find(',') != std::string::npos) return usage("--id: a name");
  UnixNanos now = WallClockNow();
  Result<UnixNanos> start = ParseUserTime(args.start, now);
  if (!start.ok()) return usage("--start: " + start.status().message());

  simulate::SimulatedWattmetreOptions options;
  options.id = args.id;
  options.version = args.version;
  options.rate = args.rate;
  options.start = *start;
  options.seed = args.seed;
  if (!args.jobs.empty()) {
    Result<jobs::JobSet> loaded = jobs::JobSet::Load(args.jobs);
    if (!loaded.ok()) return fail(loaded.status());
    options.jobs = std::move(*loaded);
  }
  auto made = simulate::SimulatedWattmetre::Create(std::move(options));
  if (!made.ok()) return fail(made.status());
  simulate::SimulatedWattmetre& wattmetre = **made;
  if (Status ports = AddPorts(args.nodes, &wattmetre); !ports.ok()) {
    return usage(ports.message());
  }

  if (!args.mapping_out.empty()) {
    Status written = WriteText(args.mapping_out, wattmetre.MappingYaml());
    if (!written.ok()) return fail(written);
  }
  int64_t written = StreamLines(wattmetre, args);
  if (!args.truth.empty()) {
    Status saved = WriteText(args.truth, wattmetre.TruthJson(written));
    if (!saved.ok()) return fail(saved);
  }
  return kExitOk;
}

}  // namespace

Runner RegisterSimulateWattmetre(CLI::App* simulate) {
  auto args = std::make_shared<WattmetreArgs>();
  CLI::App* command = simulate->add_subcommand(
      "wattmetre",
      "The line stream of a simulated Omegawatt wattmeter (wattmetre-read's), each port's value "
      "its node's true mean power over the sample");
  command->add_option("--id", args->id, "The wattmeter's id (ports are ID-portN)")
      ->capture_default_str();
  command
      ->add_option("--nodes", args->nodes,
                   "Port i measures node i (nova-1, nova-1.lyon); a node given twice has 2 PSUs, "
                   "half its power each; a node the simulated testbed lacks has its cluster's "
                   "hardware (the name up to its last '-')")
      ->required();
  command->add_option("--version", args->version, "wattmetre-read's line format: 2 or 3")
      ->capture_default_str();
  command->add_option("--rate", args->rate, "Samples a second")->capture_default_str();
  command->add_option("--start", args->start, "First sample (epoch seconds, ISO 8601, now)")
      ->capture_default_str();
  command->add_option("--duration", args->duration, "Seconds to print (default: until killed)");
  command->add_flag("--fast", args->fast, "No sleeping: as fast as possible from --start");
  command->add_option("--mapping-out", args->mapping_out, "Writes the ports' mapping (YAML)")
      ->check(NonEmptyPath());
  command
      ->add_option("--truth", args->truth,
                   "Writes on exit each port's and node's exact energy over the samples printed "
                   "(JSON)")
      ->check(NonEmptyPath());
  command->add_option("--jobs", args->jobs, "Jobs file, as given to kwatt serve")
      ->check(CLI::ExistingFile);
  command->add_option("--seed", args->seed, "Seed, as given to kwatt serve")->capture_default_str();
  return [command, args]() -> int {
    if (!command->parsed()) return -1;
    return Run(*args);
  };
}

}  // namespace kwatt::cli
