// The collector's real peers for the Python integration tests and the benchmarks: Debian's snmpd
// and OpenIPMI's ipmi_sim, started on free 127.0.0.1 ports exactly as the C++ tests start them
// (src/testing/snmpd.h, src/testing/ipmi_sim.h), so that their configuration is written
// once.
//
//   kwatt_collect_peers snmpd [--ports N] [--override OID TYPE VALUE]...
//   kwatt_collect_peers ipmi_sim
// prints one JSON line saying where the peer is, then reads commands on its standard input:
//   set SUFFIX TYPE VALUE   (snmpd: serve PASS_OID.SUFFIX as snmpd's pass TYPE, e.g. gauge 181)
//   set SENSOR VALUE        (ipmi_sim: sensor 1 (CPU Temp) or 2 (PSU1 Power), raw 0..255)
// answering "ok" or "error: ..." to each, and stops the peer at the end of its input.
//
// snmpd's JSON line: {"url": "snmp://public@127.0.0.1:PORT", "pass_oid": ..., "ports": [...],
// "pids": [...]}. With --ports N (bench/collect_bench.py: 500 simulated PDUs), the agent listens
// on N free UDP ports of 127.0.0.1 (each a device to a collector); `url` names the first, `set`
// changes the first process's values. snmpd binds only what fits in 2,560 characters of its
// `agentAddress` list (the rest is ignored without a word: 128 `udp:127.0.0.1:PORT` entries), so
// the ports are shared among as many snmpd processes as needed, kPortsPerAgent each; `pids` are
// theirs (a caller measures their CPU). --override serves a fixed value as snmpd.conf's
// `override` does (TestSnmpd::Options::overrides), e.g.
// --override 1.3.6.1.4.1.318.1.1.26.9.4.3.1.7.1 integer 181: the cheapest answer snmpd gives.
// The agents do not log each request (dontLogTCPWrappersConnects).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "src/testing/ipmi_sim.h"
#include "src/testing/snmpd.h"

namespace {

int Fail(const kwatt::Status& status) {
  std::fprintf(stderr, "kwatt_collect_peers: %s\n", status.message().c_str());
  return 1;
}

using kwatt::testing::TestSnmpd;

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
                   "usage: kwatt_collect_peers snmpd [--ports N] [--override OID TYPE VALUE]...\n");
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
  std::cout << where.dump() << std::endl;
  for (std::string line; std::getline(std::cin, line);) {
    std::istringstream words(line);
    std::string command, suffix, type, value;
    words >> command >> suffix >> type >> value;
    kwatt::Status status = command == "set" ? agents[0]->SetValue(suffix, type, value)
                                            : kwatt::Status::InvalidArgument("unknown command");
    std::cout << (status.ok() ? "ok" : "error: " + status.message()) << std::endl;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string peer = argc >= 2 ? argv[1] : "";
  if (peer == "snmpd") return Snmpd(argc, argv);
  if (argc == 2 && peer == "ipmi_sim") {
    using kwatt::testing::TestIpmiSim;
    auto bmc = TestIpmiSim::Start();
    if (!bmc.ok()) return Fail(bmc.status());
    nlohmann::json where = {{"power_url", (*bmc)->Url(TestIpmiSim::kPowerName)},
                            {"temperature_url", (*bmc)->Url(TestIpmiSim::kTemperatureName)},
                            {"power_sensor", TestIpmiSim::kPowerSensor},
                            {"temperature_sensor", TestIpmiSim::kTemperatureSensor}};
    std::cout << where.dump() << std::endl;
    for (std::string line; std::getline(std::cin, line);) {
      std::istringstream words(line);
      std::string command;
      int sensor = 0, value = 0;
      words >> command >> sensor >> value;
      kwatt::Status status = command == "set" && words
                                 ? (*bmc)->SetValue(sensor, value)
                                 : kwatt::Status::InvalidArgument("usage: set SENSOR VALUE");
      std::cout << (status.ok() ? "ok" : "error: " + status.message()) << std::endl;
    }
    return 0;
  }
  std::fprintf(stderr,
               "usage: kwatt_collect_peers snmpd [--ports N] [--override OID TYPE VALUE]... | "
               "ipmi_sim\n");
  return 2;
}
