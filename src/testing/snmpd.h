// A throwaway SNMP agent for tests and benchmarks: Debian's snmpd (`make deps` installs it),
// started in the foreground (-f) in a temporary directory, listening on 127.0.0.1 at a free UDP
// port only, reading no configuration but its own (-C -c), and stopped by its PID with the object.
// snmpd runs as root as well as any user: no -u/-g is needed.
//
// What it serves: the agent's own MIB-II (sysUpTime, IF-MIB: the `lo` interface exists on any
// Linux machine, the SNMP group's counters such as snmpInGetRequests 1.3.6.1.2.1.11.15.0), fixed
// values given with Options::overrides, and, under Options::pass_oid, the files of
// dir()/values/ through a `pass_persist` shell script: the file SUFFIX holds two lines, snmpd's
// pass type (integer, gauge, counter, timeticks, string, ...) and the value, so a test changes a
// PDU outlet's power between polls with SetValue(). The script answers GET only (a walk of that
// subtree finds nothing).
//
// A machine where `make deps` ran has snmpd: a test that needs it fails there, never skips.
#ifndef KWATT_SRC_TESTING_SNMPD_H_
#define KWATT_SRC_TESTING_SNMPD_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kwatt/core/process.h"
#include "kwatt/core/status.h"

namespace kwatt::testing {

class TestSnmpd {
 public:
  struct Options {
    // The read-only community, accepted from 127.0.0.1.
    std::string community = "public";
    // The subtree the pass script serves from dir()/values/ (empty: none).
    std::string pass_oid = "1.3.6.1.4.1.99999";
    // Fixed values: (OID, snmpd type, value) as snmpd.conf's `override` takes them, e.g.
    // {"1.3.6.1.4.1.99998.1", "octet_str", "\"on\""} or {"...", "integer", "42"}.
    std::vector<std::vector<std::string>> overrides;
    // Lines added to snmpd.conf as they are.
    std::string extra_config;
  };

  // Starts snmpd and waits until it listens (its PID file is written after it binds).
  // InvalidArgument when snmpd is not installed; IOError when it does not start (its log named).
  static Result<std::unique_ptr<TestSnmpd>> Start(Options options) {
    const std::string snmpd = "/usr/sbin/snmpd";
    if (::access(snmpd.c_str(), X_OK) != 0) {
      return Status::InvalidArgument(snmpd + " is not installed: run make deps");
    }
    std::unique_ptr<TestSnmpd> agent(new TestSnmpd());
    agent->options_ = std::move(options);
    agent->dir_ = std::filesystem::temp_directory_path() /
                  ("kwatt_snmpd_" + std::to_string(::getpid()) + "_" + std::to_string(Counter()++));
    std::error_code error;
    std::filesystem::remove_all(agent->dir_, error);
    std::filesystem::create_directories(agent->dir_ / "values", error);
    std::filesystem::create_directories(agent->dir_ / "state", error);
    if (error) return Status::IOError("cannot create " + agent->dir_.string());
    KWATT_ASSIGN_OR_RETURN(agent->port_, FreeUdpPort());
    KWATT_RETURN_IF_ERROR(agent->WriteFiles());
    KWATT_RETURN_IF_ERROR(agent->Spawn(snmpd));
    return agent;
  }
  static Result<std::unique_ptr<TestSnmpd>> Start() { return Start(Options()); }

  ~TestSnmpd() {
    Stop();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // Stops the agent now (a dead device for the rest of the test); its port stays unused.
  void Stop() {
    if (!process_) return;
    process_->Signal(SIGTERM);
    for (int i = 0; i < 200; ++i) {
      if (Result<std::optional<ProcessExit>> ended = process_->TryWait(); !ended.ok() || *ended) {
        process_.reset();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    process_->KillAndReap();
    process_.reset();
  }

  // Serves pass_oid.SUFFIX as `type` with `value` (replaced atomically: a poll sees the old value
  // or the new one).
  Status SetValue(const std::string& suffix, const std::string& type, const std::string& value) {
    std::filesystem::path file = dir_ / "values" / suffix;
    std::filesystem::path temporary = dir_ / "values" / ("." + suffix + ".tmp");
    {
      std::ofstream out(temporary);
      out << type << "\n" << value << "\n";
      if (!out) return Status::IOError("cannot write " + temporary.string());
    }
    std::error_code error;
    std::filesystem::rename(temporary, file, error);
    if (error) return Status::IOError("cannot rename to " + file.string());
    return Status::OK();
  }

  // Stops serving pass_oid.SUFFIX (a GET then gets noSuchInstance).
  void RemoveValue(const std::string& suffix) {
    std::error_code ignored;
    std::filesystem::remove(dir_ / "values" / suffix, ignored);
  }

  int port() const { return port_; }
  const std::filesystem::path& dir() const { return dir_; }
  const std::string& community() const { return options_.community; }
  // The agent's log (what it received, the pass script's failures).
  std::string Log() const {
    std::ifstream in(dir_ / "snmpd.log");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  // A UDP port of 127.0.0.1 free now (bound to port 0, read back, closed).
  static Result<int> FreeUdpPort() {
    int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) return Status::IOError("socket() failed");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    socklen_t length = sizeof(address);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ::close(fd);
      return Status::IOError("cannot bind a UDP socket to 127.0.0.1");
    }
    ::close(fd);
    return static_cast<int>(ntohs(address.sin_port));
  }

 private:
  TestSnmpd() = default;

  static std::atomic<int>& Counter() {
    static std::atomic<int> counter{0};
    return counter;
  }

  Status WriteFiles() {
    std::string pass_oid = options_.pass_oid;
    if (!pass_oid.empty() && pass_oid.front() != '.') pass_oid = "." + pass_oid;
    {
      std::ofstream conf(dir_ / "snmpd.conf");
      // persistentDir: snmpd keeps its state here rather than in /var/lib/snmp.
      conf << "[snmp] persistentDir " << (dir_ / "state").string() << "\n"
           << "agentAddress udp:127.0.0.1:" << port_ << "\n"
           << "rocommunity " << options_.community << " 127.0.0.1\n";
      for (const auto& entry : options_.overrides) {
        conf << "override";
        for (const std::string& word : entry) conf << " " << word;
        conf << "\n";
      }
      if (!pass_oid.empty())
        conf << "pass_persist " << pass_oid << " " << (dir_ / "pass.sh").string() << "\n";
      conf << options_.extra_config << "\n";
      if (!conf) return Status::IOError("cannot write " + (dir_ / "snmpd.conf").string());
    }
    if (pass_oid.empty()) return Status::OK();
    std::ofstream script(dir_ / "pass.sh");
    // snmpd's pass_persist protocol on standard input and output: PING -> PONG; "get", OID ->
    // the OID, the type and the value, or NONE (noSuchInstance). GETNEXT is not served (NONE);
    // SET is refused. Not the plain `pass`: snmpd caches a pass command's output for 30 s when
    // the same command comes twice in a row, so a value changed between polls would not be seen.
    script
        << "#!/bin/sh\n"
        << "values='" << (dir_ / "values").string() << "'\n"
        << "while read -r command; do\n"
        << "  case \"$command\" in\n"
        << "    PING) echo PONG ;;\n"
        << "    get)\n"
        << "      read -r oid\n"
        << "      suffix=\"${oid#" << pass_oid << ".}\"\n"
        << "      type=''\n"
        << "      case \"$suffix\" in\n"
        << "        \"$oid\"|''|*[!0-9.]*) ;;\n"
        << "        *) [ -f \"$values/$suffix\" ] && "
        << "{ read -r type; read -r value; } < \"$values/$suffix\" ;;\n"
        << "      esac\n"
        << "      if [ -n \"$type\" ]; then printf '%s\\n%s\\n%s\\n' \"$oid\" \"$type\" \"$value\";"
        << " else echo NONE; fi ;;\n"
        << "    getnext) read -r oid; echo NONE ;;\n"
        << "    set) read -r oid; read -r value; echo not-writable ;;\n"
        << "    *) exit 0 ;;\n"
        << "  esac\n"
        << "done\n";
    script.close();
    if (!script || ::chmod((dir_ / "pass.sh").c_str(), 0755) != 0) {
      return Status::IOError("cannot write " + (dir_ / "pass.sh").string());
    }
    return Status::OK();
  }

  Status Spawn(const std::string& snmpd) {
    std::string log = (dir_ / "snmpd.log").string();
    std::string conf = (dir_ / "snmpd.conf").string();
    std::string pid_file = (dir_ / "snmpd.pid").string();
    // -C: no other configuration file; -I -smux: no SMUX listener; -Lf: log to a file.
    std::vector<std::string> args = {snmpd, "-f", "-C", "-I", "-smux", "-Lf",
                                     log,   "-c", conf, "-p", pid_file};
    // MIBS empty: the agent loads no MIB module (none is installed; it would only warn). env(1)
    // sets it and execs snmpd, which keeps env's process id.
    args.insert(args.begin(), {"env", "MIBS="});
    SpawnOptions spawn;
    spawn.output_file = (dir_ / "stdout.log").string();
    Result<Process> started = Process::Spawn(args, spawn);
    if (!started.ok())
      return Status::IOError("cannot start " + snmpd + ": " + started.status().message());
    process_.emplace(std::move(*started));
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      std::error_code error;
      if (std::filesystem::file_size(pid_file, error) > 0 && !error) return Status::OK();
      if (Result<std::optional<ProcessExit>> ended = process_->TryWait(); !ended.ok() || *ended) {
        process_.reset();
        return Status::IOError("snmpd exited at start: see " + log + " and " +
                               (dir_ / "stdout.log").string());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return Status::IOError("snmpd did not start within 10 s: see " + log);
  }

  Options options_;
  std::filesystem::path dir_;
  int port_ = 0;
  std::optional<Process> process_;  // while it runs
};

}  // namespace kwatt::testing

#endif  // KWATT_SRC_TESTING_SNMPD_H_
