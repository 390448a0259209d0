// `kwatt simulate wattmetre`: the line stream of a simulated Omegawatt wattmeter, as
// `wattmetre-read` prints it, for `kwatt collect`'s wattmetre:// source (src/collect/wattmetre.h)
// and its tests.
//
// Sample k covers [t_k, t_k + period], t_k = start + k * period (start rounded up to a multiple of
// the period, so that at 50 Hz a second holds 50 whole samples); its line carries t_k and each
// port's true mean power over the interval (the node's energy over it from the simulator's
// closed-form model, divided by the period, times the port's share: a node given twice is two
// PSUs, half each). So the mean of a second's values is the true mean power of that second, and
// --truth gives the exact energies to compare against.
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/kwatt/commands.h"
#include "apps/kwatt/stop_signals.h"
#include "kwatt/kwollect/node_name.h"
#include "kwatt/server/node_model.h"
#include "kwatt/server/testbed.h"

namespace kwatt::cli {

using nlohmann::ordered_json;

namespace {

// Writes `value` with 3 decimals, rounded half away from zero (as printf, but without its
// locale and cost). Returns the characters written (at most 24).
size_t FormatMilli(double value, char* out) {
  if (!std::isfinite(value) || std::fabs(value) >= 9e15) {
    return size_t(std::snprintf(out, 32, "%.3f", value));
  }
  char* p = out;
  int64_t milli = std::llround(value * 1000);
  if (milli < 0) {
    *p++ = '-';
    milli = -milli;
  }
  char digits[24];
  int n = 0;
  int64_t whole = milli / 1000;
  do {
    digits[n++] = char('0' + whole % 10);
    whole /= 10;
  } while (whole);
  while (n) *p++ = digits[--n];
  int64_t fraction = milli % 1000;
  *p++ = '.';
  *p++ = char('0' + fraction / 100);
  *p++ = char('0' + fraction / 10 % 10);
  *p++ = char('0' + fraction % 10);
  return size_t(p - out);
}

// "1700000000.020000" (6 decimals when the period is whole microseconds, else 9).
size_t FormatEpoch(UnixNanos t, bool micro, char* out) {
  int64_t seconds = FloorDiv(t, kNanosPerSecond);
  int64_t nanos = NanosOfSecond(t);
  if (micro) {
    return size_t(std::snprintf(out, 40, "%" PRId64 ".%06" PRId64, seconds, nanos / 1000));
  }
  return size_t(std::snprintf(out, 40, "%" PRId64 ".%09" PRId64, seconds, nanos));
}

struct SimulatedNode {
  std::string uid;                 // the mapping's node name
  const server::NodeModel* model;  // the testbed's, or owned below
  std::unique_ptr<server::NodeModel> own;
  std::vector<size_t> ports;
};

struct Port {
  size_t node;   // index in the nodes
  double share;  // 1 / the node's port count
};

// Finds `name` ("nova-1", "nova-1.lyon", an FQDN) in the testbed; a node it does not have gets
// a model of its own from its cluster's hardware (the uid up to its last '-').
Result<std::unique_ptr<SimulatedNode>> ResolveNode(const std::string& name,
                                                   const server::Testbed& testbed,
                                                   const server::JobSet& jobs, uint64_t seed) {
  std::string uid = name, site;
  if (name.find('.') != std::string::npos) {
    KWATT_ASSIGN_OR_RETURN(kwollect::NodeName parsed, kwollect::ParseNodeName(name));
    uid = parsed.uid;
    site = parsed.site;
  }
  if (uid.empty()) return Status::InvalidArgument("--nodes: an empty node name");
  auto node = std::make_unique<SimulatedNode>();
  node->uid = uid;
  for (const auto& s : testbed.sites()) {
    if (!site.empty() && s->uid != site) continue;
    if (const server::Node* found = testbed.FindNode(*s, uid)) {
      node->model = found->model.get();
      return node;
    }
  }
  size_t dash = uid.rfind('-');
  std::string cluster = dash == std::string::npos ? uid : uid.substr(0, dash);
  node->own = std::make_unique<server::NodeModel>(
      uid, server::HardwareOfCluster(cluster), server::LoadProfile::ForNode(site, uid, jobs), seed);
  node->model = node->own.get();
  return node;
}

struct Args {
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

std::string TimeJson(UnixNanos t) { return FormatUtcTimestamp(t); }

int Run(const Args& args) {
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

  server::JobSet jobs;
  if (!args.jobs.empty()) {
    Result<server::JobSet> loaded = server::JobSet::Load(args.jobs);
    if (!loaded.ok()) return fail(loaded.status());
    jobs = std::move(*loaded);
  }
  server::Testbed::Options options;
  options.seed = args.seed;
  server::JobSet jobs_copy = jobs;
  auto testbed = server::Testbed::Build(options, std::move(jobs_copy));
  if (!testbed.ok()) return fail(testbed.status());

  // The ports, and the nodes they measure (in first-appearance order).
  std::vector<std::unique_ptr<SimulatedNode>> nodes;
  std::map<std::string, size_t> node_index;
  std::vector<Port> ports;
  size_t from = 0;
  while (from <= args.nodes.size()) {
    size_t comma = args.nodes.find(',', from);
    std::string name =
        args.nodes.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    from = comma == std::string::npos ? args.nodes.size() + 1 : comma + 1;
    while (!name.empty() && name.front() == ' ') name.erase(0, 1);
    while (!name.empty() && name.back() == ' ') name.pop_back();
    if (name.empty()) return usage("--nodes: an empty node name in " + args.nodes);
    auto [it, inserted] = node_index.emplace(name, nodes.size());
    if (inserted) {
      auto node = ResolveNode(name, **testbed, jobs, args.seed);
      if (!node.ok()) return usage("--nodes: " + node.status().message());
      nodes.push_back(std::move(*node));
    }
    nodes[it->second]->ports.push_back(ports.size());
    ports.push_back(Port{it->second, 0});
  }
  for (Port& port : ports) port.share = 1.0 / double(nodes[port.node]->ports.size());
  auto port_name = [&](size_t i) { return args.id + "-port" + std::to_string(i); };

  if (!args.mapping_out.empty()) {
    std::string text = "# " + args.id + "'s ports (kwatt simulate wattmetre)\n";
    for (const auto& node : nodes) {
      text += node->uid + ": [";
      for (size_t i = 0; i < node->ports.size(); ++i) {
        text += (i ? ", " : "") + port_name(node->ports[i]);
      }
      text += "]\n";
    }
    Status written = WriteText(args.mapping_out, text);
    if (!written.ok()) return fail(written);
  }

  const auto period = int64_t(std::llround(1e9 / args.rate));
  const double period_s = double(period) / 1e9;
  const UnixNanos first = CeilDiv(*start, period) * period;
  int64_t samples_wanted = -1;  // until stopped
  if (args.duration) samples_wanted = int64_t(std::floor(*args.duration * 1e9 / double(period)));
  const bool micro = period % kNanosPerMicro == 0;

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

  std::vector<double> node_watts(nodes.size());
  std::string line;
  line.reserve(64 + ports.size() * 24);
  char text[48];
  for (int64_t k = 0; samples_wanted < 0 || k < samples_wanted; ++k) {
    if (stop.requested()) break;
    UnixNanos t = first + k * period;
    UnixNanos end = t + period;
    if (!args.fast) {
      // Printed once measured: at the interval's end, by the wall clock.
      timespec until{time_t(FloorDiv(end, kNanosPerSecond)), long(NanosOfSecond(end))};
      int slept;
      while ((slept = clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &until, nullptr)) == EINTR) {
        if (stop.requested()) break;
      }
      if (stop.requested()) break;
    }
    for (size_t n = 0; n < nodes.size(); ++n) {
      node_watts[n] = nodes[n]->model->EnergyJoules(t, end) / period_s;
    }
    line.clear();
    size_t length = FormatEpoch(t, micro, text);
    if (args.version == 2) {
      line += "#activepow0,";
      line += std::to_string(k % 1000000);
      line += ',';
      line.append(text, length);
      line += ",OK";
      for (const Port& port : ports) {
        line += ',';
        line.append(text, FormatMilli(node_watts[port.node] * port.share, text));
      }
    } else {
      line.append(text, length);
      line += ",true,230.000,50.000,";
      line += std::to_string(k % 1000000);
      line += ",0";
      for (const Port& port : ports) {
        double watts = node_watts[port.node] * port.share;
        line += ',';
        line.append(text, FormatMilli(watts, text));
        line += ',';
        line.append(text, FormatMilli(watts / 230.0, text));  // the current, amperes
      }
      line += ",0,0,0,0,0";
    }
    line += '\n';
    out += line;
    line_ends.push_back(out.size());
    if (out.size() >= flush_at) drain();
    if (broken_pipe) break;
  }
  if (!broken_pipe) drain();

  if (!args.truth.empty()) {
    UnixNanos last_end = first + written * period;
    ordered_json truth;
    truth["wattmetre"] = args.id;
    truth["version"] = args.version;
    truth["rate_hz"] = args.rate;
    truth["period_ns"] = period;
    truth["samples"] = written;
    truth["start"] = TimeJson(first);
    truth["end"] = TimeJson(last_end);
    truth["start_ns"] = first;
    truth["end_ns"] = last_end;
    truth["seconds"] = double(last_end - first) / 1e9;
    ordered_json port_json = ordered_json::object();
    std::vector<double> node_joules(nodes.size());
    for (size_t n = 0; n < nodes.size(); ++n) {
      node_joules[n] = written ? nodes[n]->model->EnergyJoules(first, last_end) : 0.0;
    }
    for (size_t i = 0; i < ports.size(); ++i) {
      port_json[port_name(i)] = {{"node", nodes[ports[i].node]->uid},
                                 {"joules", node_joules[ports[i].node] * ports[i].share}};
    }
    ordered_json node_json = ordered_json::object();
    for (size_t n = 0; n < nodes.size(); ++n) {
      ordered_json names = ordered_json::array();
      for (size_t p : nodes[n]->ports) names.push_back(port_name(p));
      node_json[nodes[n]->uid] = {{"joules", node_joules[n]}, {"ports", names}};
    }
    truth["ports"] = std::move(port_json);
    truth["nodes"] = std::move(node_json);
    Status saved = WriteText(args.truth, truth.dump(2) + "\n");
    if (!saved.ok()) return fail(saved);
  }
  return kExitOk;
}

}  // namespace

Runner RegisterSimulateWattmetre(CLI::App* simulate) {
  auto args = std::make_shared<Args>();
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
