// The throwaway peers of the Python tests and the benchmarks, started exactly as the C++ tests
// start them (src/testing/: postgres.h, influxd.h, snmpd.h, ipmi_sim.h, node_exporter.h), so that
// how each is configured and started is written once:
//
//   kwatt_test_peers postgres [--durable]
//   kwatt_test_peers influxd [--auth]
//   kwatt_test_peers snmpd [--ports N] [--override OID TYPE VALUE]...
//   kwatt_test_peers ipmi_sim
//   kwatt_test_peers node_exporter TEXTFILE_DIR
//
// Each starts its peer, prints one JSON line saying where it is, then reads commands on its
// standard input, answering one line to each ("ok", the answer, or "error: ..."), and stops the
// peer and removes its directory at the end of its input or on SIGTERM or SIGINT.
//
// postgres: Debian's PostgreSQL in a directory of its own, on a Unix socket there (as `nobody`
// when root, through setpriv); fsync off unless --durable (benchmarks). Its line:
// {"dir": ..., "uri": "postgresql:///postgres?host=DIR&user=postgres", "bin": ..., "pid": ...}.
//   database                a new empty database: answers its URI
//   stop [MODE]             stops the server (pg_ctl's MODE: fast, immediate...)
//   start                   starts it again on the same directory
//
// influxd: Debian's influxd 1.x on a free 127.0.0.1 port. Its line: {"url": ..., "dir": ...}.
//   stop, start             stops it, starts it again on the same port and data
//
// snmpd: {"url": "snmp://public@127.0.0.1:PORT", "pass_oid": ..., "ports": [...], "pids": [...]}.
//   set SUFFIX TYPE VALUE   serves PASS_OID.SUFFIX as snmpd's pass TYPE, e.g. gauge 181
// With --ports N (bench/collect_bench.py: 500 simulated PDUs), the agent listens on N free UDP
// ports of 127.0.0.1 (each a device to a collector); `url` names the first, `set` changes the
// first process's values. snmpd binds only what fits in 2,560 characters of its `agentAddress`
// list (the rest is ignored without a word: 128 `udp:127.0.0.1:PORT` entries), so the ports are
// shared among as many snmpd processes as needed, kPortsPerAgent each; `pids` are theirs (a caller
// measures their CPU). --override serves a fixed value as snmpd.conf's `override` does
// (TestSnmpd::Options::overrides), e.g. --override 1.3.6.1.4.1.318.1.1.26.9.4.3.1.7.1 integer
// 181: the cheapest answer snmpd gives. The agents do not log each request
// (dontLogTCPWrappersConnects).
//
// ipmi_sim: {"power_url": ..., "temperature_url": ..., "power_sensor": ...,
// "temperature_sensor": ...}.
//   set SENSOR VALUE        sensor 1 (CPU Temp) or 2 (PSU1 Power), raw 0..255
//
// node_exporter: Debian's prometheus-node-exporter on a free 127.0.0.1 port, its default
// collectors and the *.prom files of TEXTFILE_DIR. Its line: {"port": ..., "url": ...}.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "src/testing/influxd.h"
#include "src/testing/ipmi_sim.h"
#include "src/testing/node_exporter.h"
#include "src/testing/postgres.h"
#include "src/testing/snmpd.h"

namespace {

int Fail(const kwatt::Status& status) {
  std::fprintf(stderr, "kwatt_test_peers: %s\n", status.message().c_str());
  return 1;
}

using kwatt::testing::TestSnmpd;

// The write end of the pipe that SIGTERM and SIGINT write to, so that the command loop wakes up.
int g_stop_pipe = -1;

extern "C" void OnStopSignal(int) {
  char byte = 1;
  [[maybe_unused]] ssize_t written = ::write(g_stop_pipe, &byte, 1);
}

// Prints `where`, then answers each line of standard input with `answer(line)` until its end, a
// SIGTERM or a SIGINT; the caller then stops its peer (its destructors).
void ServeCommands(const nlohmann::json& where,
                   const std::function<std::string(const std::string& line)>& answer) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0) {
    g_stop_pipe = fds[1];
    struct sigaction action {};
    action.sa_handler = OnStopSignal;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGTERM, &action, nullptr);
    ::sigaction(SIGINT, &action, nullptr);
  }
  std::cout << where.dump() << std::endl;
  std::string pending;
  char buffer[4096];
  while (true) {
    pollfd polled[2] = {{0, POLLIN, 0}, {fds[0], POLLIN, 0}};
    if (::poll(polled, g_stop_pipe >= 0 ? 2 : 1, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (g_stop_pipe >= 0 && polled[1].revents) return;
    ssize_t n = ::read(0, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    pending.append(buffer, size_t(n));
    for (size_t end; (end = pending.find('\n')) != std::string::npos;) {
      std::string line = pending.substr(0, end);
      pending.erase(0, end + 1);
      std::cout << answer(line) << std::endl;
    }
  }
}

std::string Reply(const kwatt::Status& status) {
  return status.ok() ? "ok" : "error: " + status.message();
}

int Postgres(int argc, char** argv) {
  bool durable = false;
  for (int i = 2; i < argc; ++i) {
    if (std::string(argv[i]) == "--durable") {
      durable = true;
    } else {
      std::fprintf(stderr, "usage: kwatt_test_peers postgres [--durable]\n");
      return 2;
    }
  }
  using kwatt::testing::TestPostgres;
  auto started = TestPostgres::Start(durable);
  if (!started.ok()) return Fail(started.status());
  TestPostgres& pg = **started;
  ServeCommands(
      {{"dir", pg.dir().string()}, {"uri", pg.Uri()}, {"bin", pg.bin()}, {"pid", pg.Pid()}},
      [&](const std::string& line) -> std::string {
        std::istringstream words(line);
        std::string command, mode;
        words >> command >> mode;
        if (command == "database") {
          kwatt::Result<std::string> uri = pg.NewDatabase();
          return uri.ok() ? *uri : Reply(uri.status());
        }
        if (command == "stop") return Reply(pg.StopServer(mode.empty() ? "fast" : mode));
        if (command == "start") return Reply(pg.StartServer());
        return Reply(kwatt::Status::InvalidArgument("unknown command"));
      });
  return 0;
}

int NodeExporter(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: kwatt_test_peers node_exporter TEXTFILE_DIR\n");
    return 2;
  }
  using kwatt::testing::TestNodeExporter;
  auto started = TestNodeExporter::Start({.textfile_dir = argv[2], .default_collectors = true});
  if (!started.ok()) return Fail(started.status());
  ServeCommands({{"port", (*started)->port()}, {"url", (*started)->url()}},
                [](const std::string&) -> std::string {
                  return Reply(kwatt::Status::InvalidArgument("unknown command"));
                });
  return 0;
}

int Influxd(int argc, char** argv) {
  using kwatt::testing::TestInfluxd;
  TestInfluxd::Options options;
  for (int i = 2; i < argc; ++i) {
    if (std::string(argv[i]) == "--auth") {
      options.auth = true;
    } else {
      std::fprintf(stderr, "usage: kwatt_test_peers influxd [--auth]\n");
      return 2;
    }
  }
  auto started = TestInfluxd::Start(options);
  if (!started.ok()) return Fail(started.status());
  TestInfluxd& influxd = **started;
  ServeCommands({{"url", influxd.url()}, {"dir", influxd.dir().string()}},
                [&](const std::string& line) -> std::string {
                  if (line == "stop") {
                    influxd.Stop();
                    return "ok";
                  }
                  if (line == "start") return Reply(influxd.Restart());
                  return Reply(kwatt::Status::InvalidArgument("unknown command"));
                });
  return 0;
}

// `udp:127.0.0.1:PORT,` is at most 20 characters: 125 of them fit in snmpd's 2,560.
constexpr int kPortsPerAgent = 125;

// `count` distinct free UDP ports of 127.0.0.1 (all bound at once, then closed), none in `avoid`.
kwatt::Result<std::vector<int>> FreeUdpPorts(int count, const std::set<int>& avoid) {
  std::vector<int> fds, ports;
  kwatt::Status status;
  while (int(ports.size()) < count) {
    int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      if (fd >= 0) ::close(fd);
      status = kwatt::Status::IOError(std::string("cannot bind a UDP socket to 127.0.0.1: ") +
                                      std::strerror(errno));
      break;
    }
    fds.push_back(fd);
    int port = ntohs(address.sin_port);
    if (!avoid.count(port)) ports.push_back(port);
  }
  for (int fd : fds) ::close(fd);
  if (!status.ok()) return status;
  return ports;
}

// One snmpd listening on its own port and on `more`; retried with other ports when snmpd could
// not bind one of them (another process took it meanwhile).
kwatt::Result<std::unique_ptr<TestSnmpd>> StartAgent(const TestSnmpd::Options& base, int more,
                                                     std::set<int>* taken,
                                                     std::vector<int>* ports) {
  kwatt::Status last;
  for (int attempt = 0; attempt < 5; ++attempt) {
    KWATT_ASSIGN_OR_RETURN(std::vector<int> extra, FreeUdpPorts(more, *taken));
    TestSnmpd::Options options = base;
    // No "Connection from UDP: ..." line in its log for every request (the benchmark's 500 a
    // second): the agent's time is its answers.
    options.extra_config += "dontLogTCPWrappersConnects yes\n";
    if (!extra.empty()) {
      // A second agentAddress line adds to the first (TestSnmpd's own port).
      options.extra_config += "agentAddress ";
      for (size_t i = 0; i < extra.size(); ++i) {
        options.extra_config +=
            (i ? ",udp:127.0.0.1:" : "udp:127.0.0.1:") + std::to_string(extra[i]);
      }
      options.extra_config += "\n";
    }
    auto agent = TestSnmpd::Start(options);
    if (!agent.ok()) {
      last = agent.status();
      continue;
    }
    ports->push_back((*agent)->port());
    taken->insert((*agent)->port());
    for (int port : extra) {
      ports->push_back(port);
      taken->insert(port);
    }
    return agent;
  }
  return last;
}

int Snmpd(int argc, char** argv) {
  int count = 1;
  TestSnmpd::Options options;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--ports" && i + 1 < argc) {
      count = std::atoi(argv[++i]);
    } else if (arg == "--override" && i + 3 < argc) {
      options.overrides.push_back({argv[i + 1], argv[i + 2], argv[i + 3]});
      i += 3;
    } else {
      std::fprintf(stderr,
                   "usage: kwatt_test_peers snmpd [--ports N] [--override OID TYPE VALUE]...\n");
      return 2;
    }
  }
  if (count < 1) return Fail(kwatt::Status::InvalidArgument("--ports must be positive"));
  std::vector<std::unique_ptr<TestSnmpd>> agents;
  std::vector<int> ports;
  std::set<int> taken;
  nlohmann::json pids = nlohmann::json::array();
  for (int left = count; left > 0; left -= kPortsPerAgent) {
    auto agent = StartAgent(options, std::min(left, kPortsPerAgent) - 1, &taken, &ports);
    if (!agent.ok()) return Fail(agent.status());
    std::ifstream pid_file((*agent)->dir() / "snmpd.pid");
    long pid = 0;
    pid_file >> pid;
    pids.push_back(pid);
    agents.push_back(std::move(*agent));
  }
  nlohmann::json where = {{"url", "snmp://public@127.0.0.1:" + std::to_string(ports[0])},
                          {"pass_oid", options.pass_oid},
                          {"ports", ports},
                          {"pids", pids}};
  ServeCommands(where, [&](const std::string& line) {
    std::istringstream words(line);
    std::string command, suffix, type, value;
    words >> command >> suffix >> type >> value;
    return Reply(command == "set" ? agents[0]->SetValue(suffix, type, value)
                                  : kwatt::Status::InvalidArgument("unknown command"));
  });
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string peer = argc >= 2 ? argv[1] : "";
  if (peer == "postgres") return Postgres(argc, argv);
  if (peer == "influxd") return Influxd(argc, argv);
  if (peer == "node_exporter") return NodeExporter(argc, argv);
  if (peer == "snmpd") return Snmpd(argc, argv);
  if (argc == 2 && peer == "ipmi_sim") {
    using kwatt::testing::TestIpmiSim;
    auto bmc = TestIpmiSim::Start();
    if (!bmc.ok()) return Fail(bmc.status());
    nlohmann::json where = {{"power_url", (*bmc)->Url(TestIpmiSim::kPowerName)},
                            {"temperature_url", (*bmc)->Url(TestIpmiSim::kTemperatureName)},
                            {"power_sensor", TestIpmiSim::kPowerSensor},
                            {"temperature_sensor", TestIpmiSim::kTemperatureSensor}};
    ServeCommands(where, [&](const std::string& line) {
      std::istringstream words(line);
      std::string command;
      int sensor = 0, value = 0;
      words >> command >> sensor >> value;
      return Reply(command == "set" && words
                       ? (*bmc)->SetValue(sensor, value)
                       : kwatt::Status::InvalidArgument("usage: set SENSOR VALUE"));
    });
    return 0;
  }
  std::fprintf(
      stderr,
      "usage: kwatt_test_peers postgres [--durable] | influxd [--auth] | snmpd [--ports N] "
      "[--override OID TYPE VALUE]... | ipmi_sim | node_exporter TEXTFILE_DIR\n");
  return 2;
}
