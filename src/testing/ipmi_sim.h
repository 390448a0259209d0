// A throwaway BMC for tests: OpenIPMI's simulator (`ipmi_sim`, Debian's package openipmi; `make
// deps` installs it) in the foreground of nothing, listening for IPMI over LAN (1.5 and 2.0) on
// 127.0.0.1 and a free UDP port, from a configuration written in a temporary directory, stopped
// (by its pid) and removed with the object.
//
// Its BMC has an SDR repository with two threshold sensors, each read by the simulator from a file
// of the directory (the emulator's `sensor_add ... poll RATE file`) that the test rewrites:
//   record 1, sensor 1 "CPU Temp"   (Temperature, degrees C, 1 per raw unit)
//   record 2, sensor 2 "PSU1 Power" (Other Units Based Sensor, Watts, 1 per raw unit)
// Values are whole numbers 0..255 (the raw byte). One user: kwatt / the password below (admin).
//
// FreeIPMI needs the workaround flag opensesspriv with this simulator (without it: "privilege
// level cannot be obtained for this user"); Url() carries it as the driver's URL option.
//
// A machine where `make deps` ran has ipmi_sim: a test that needs it fails there, never skips.
#ifndef KWATT_SRC_TESTING_IPMI_SIM_H_
#define KWATT_SRC_TESTING_IPMI_SIM_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kwatt/core/process.h"
#include "kwatt/core/status.h"

namespace kwatt::testing {

class TestIpmiSim {
 public:
  static constexpr int kTemperatureSensor = 1;
  static constexpr int kPowerSensor = 2;
  static constexpr const char* kTemperatureName = "CPU Temp";
  static constexpr const char* kPowerName = "PSU1 Power";
  static constexpr const char* kUser = "kwatt";
  // Holds characters FreeIPMI's configuration file must escape ('#' and '"'); ipmi_sim's own
  // configuration cannot hold a blank in a password.
  static constexpr const char* kPassword = "pw#9\"Xq";
  // How often the simulator reads the sensor files.
  static constexpr int kPollMs = 50;

  // Starts a simulator with the two sensors at `temperature` and `power`. InvalidArgument when
  // ipmi_sim is not installed; IOError when it does not start listening within a few seconds.
  static Result<std::unique_ptr<TestIpmiSim>> Start(int temperature = 42, int power = 180) {
    std::string program = FindProgram();
    if (program.empty()) {
      return Status::InvalidArgument("OpenIPMI's ipmi_sim is not installed: run make deps");
    }
    std::unique_ptr<TestIpmiSim> sim(new TestIpmiSim());
    sim->dir_ =
        std::filesystem::temp_directory_path() /
        ("kwatt_ipmi_sim_" + std::to_string(::getpid()) + "_" + std::to_string(Counter()++));
    std::filesystem::remove_all(sim->dir_);
    std::filesystem::create_directories(sim->dir_ / "state");
    KWATT_RETURN_IF_ERROR(sim->SetValue(kTemperatureSensor, temperature));
    KWATT_RETURN_IF_ERROR(sim->SetValue(kPowerSensor, power));
    KWATT_ASSIGN_OR_RETURN(sim->port_, FreeUdpPort());
    KWATT_RETURN_IF_ERROR(sim->WriteFiles());

    std::vector<std::string> argv = {program,
                                     "-c",
                                     (sim->dir_ / "lan.conf").string(),
                                     "-f",
                                     (sim->dir_ / "sim.emu").string(),
                                     "-s",
                                     (sim->dir_ / "state").string(),
                                     "-n"};
    std::string log = (sim->dir_ / "ipmi_sim.log").string();
    SpawnOptions spawn;
    spawn.output_file = log;
    KWATT_ASSIGN_OR_RETURN(Process process, Process::Spawn(argv, spawn));
    sim->process_.emplace(std::move(process));
    // Listening once the port is taken (a socket without SO_REUSEADDR cannot bind it then).
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!PortTaken(sim->port_)) {
      if (Result<std::optional<ProcessExit>> ended = sim->process_->TryWait();
          !ended.ok() || *ended) {
        sim->process_.reset();
        return Status::IOError("ipmi_sim ended at start: see " + log + ": " + sim->Log());
      }
      if (std::chrono::steady_clock::now() > give_up) {
        return Status::IOError("ipmi_sim does not listen on port " + std::to_string(sim->port_) +
                               ": see " + log);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // The sensors have a value once the simulator read their files.
    std::this_thread::sleep_for(std::chrono::milliseconds(3 * kPollMs));
    return sim;
  }

  ~TestIpmiSim() {
    Stop();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // Stops the simulator (its port then gets no answer: a dead BMC).
  void Stop() {
    if (process_) {
      process_->KillAndReap();
      process_.reset();
    }
  }

  // Sets a sensor's raw value (0..255), read by the simulator within kPollMs.
  Status SetValue(int sensor, int value) {
    std::string path = ValueFile(sensor);
    std::string temporary = path + ".new";
    {
      std::ofstream file(temporary, std::ios::trunc);
      file << value << "\n";
      if (!file) return Status::IOError("cannot write " + temporary);
    }
    std::error_code error;
    std::filesystem::rename(temporary, path, error);  // the simulator never reads half a file
    if (error) return Status::IOError("cannot rename " + temporary + ": " + error.message());
    return Status::OK();
  }

  // The driver's URL of `sensor` (its name or record id) on this BMC, with `password`.
  std::string Url(std::string_view sensor, std::string_view password = kPassword) const {
    std::string url = "ipmisensor://" + std::string(kUser) + ":" + PercentEncode(password) +
                      "@127.0.0.1:" + std::to_string(port_) + "/" + PercentEncode(sensor) +
                      "?workaround-flags=opensesspriv";
    return url;
  }

  int port() const { return port_; }
  const std::filesystem::path& dir() const { return dir_; }

  // What the simulator wrote (its log).
  std::string Log() const {
    std::ifstream file(dir_ / "ipmi_sim.log");
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
  }

  // A free UDP port of 127.0.0.1 (bound to port 0, read back, closed).
  static Result<int> FreeUdpPort() {
    int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Status::IOError("socket: " + std::string(std::strerror(errno)));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    socklen_t length = sizeof address;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ::close(fd);
      return Status::IOError("cannot bind a UDP port: " + std::string(std::strerror(errno)));
    }
    ::close(fd);
    return static_cast<int>(ntohs(address.sin_port));
  }

 private:
  TestIpmiSim() = default;

  static std::atomic<int>& Counter() {
    static std::atomic<int> counter{0};
    return counter;
  }

  static std::string FindProgram() {
    std::error_code error;
    for (const char* path :
         {"/usr/bin/ipmi_sim", "/usr/local/bin/ipmi_sim", "/usr/sbin/ipmi_sim"}) {
      if (std::filesystem::exists(path, error)) return path;
    }
    return "";
  }

  static bool PortTaken(int port) {
    int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    bool taken = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 &&
                 errno == EADDRINUSE;
    ::close(fd);
    return taken;
  }

  static std::string PercentEncode(std::string_view text) {
    static const char kDigits[] = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : text) {
      bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '-' || c == '.' || c == '_' || c == '~';
      if (plain) {
        out += static_cast<char>(c);
      } else {
        out += '%';
        out += kDigits[c >> 4];
        out += kDigits[c & 15];
      }
    }
    return out;
  }

  std::string ValueFile(int sensor) const {
    return (dir_ / ("sensor" + std::to_string(sensor) + ".value")).string();
  }

  // A full sensor record (SDR type 01) of a threshold sensor: linear, M = 1, B = 0, unsigned.
  static std::string FullSensorRecord(int number, int sensor_type, int unit,
                                      std::string_view name) {
    // clang-format off
    std::vector<int> body = {
        0x20, 0x00, number,      // owner (the BMC), LUN, sensor number
        0x07, 0x01,              // entity: system board, instance 1
        0x7f, 0x68,              // initialisation, capabilities
        sensor_type, 0x01,       // sensor type, event/reading type: threshold
        0x00, 0x00, 0x00, 0x00,  // assertion and deassertion event masks
        0x00, 0x00,              // discrete reading mask / settable-readable thresholds
        0x00, unit, 0x00,        // units: unsigned, base unit, no modifier
        0x00,                    // linearisation: linear
        0x01, 0x00, 0x00, 0x00,  // M = 1, tolerance, B = 0, accuracy
        0x00, 0x00,              // accuracy, direction; R and B exponents 0
        0x00, 0x00, 0x00, 0x00,  // analog flags, nominal, normal maximum, normal minimum
        0xff, 0x00,              // sensor maximum, minimum
        0, 0, 0, 0, 0, 0,        // thresholds
        0, 0,                    // hystereses
        0, 0, 0,                 // reserved, reserved, OEM
        0xc0 | static_cast<int>(name.size())};  // id string: 8-bit ASCII, its length
    // clang-format on
    for (unsigned char c : name) body.push_back(c);
    std::vector<int> record = {0x00, 0x00, 0x51, 0x01, static_cast<int>(body.size())};
    record.insert(record.end(), body.begin(), body.end());
    std::string line = "main_sdr_add 0x20";
    char byte[8];
    for (int b : record) {
      std::snprintf(byte, sizeof byte, " 0x%02x", b);
      line += byte;
    }
    return line + "\n";
  }

  Status WriteFiles() const {
    std::ofstream lan(dir_ / "lan.conf");
    lan << "name \"kwatt-test-bmc\"\n"
        << "set_working_mc 0x20\n"
        << "startlan 1\n"
        << "  addr 127.0.0.1 " << port_ << "\n"
        << "  priv_limit admin\n"
        << "  allowed_auths_callback none md2 md5 straight\n"
        << "  allowed_auths_user none md2 md5 straight\n"
        << "  allowed_auths_operator none md2 md5 straight\n"
        << "  allowed_auths_admin none md2 md5 straight\n"
        << "  guid a123456789abcdefa123456789abcdef\n"
        << "endlan\n"
        << "user 2 true \"" << kUser << "\" \"" << kPassword
        << "\" admin 10 none md2 md5 straight\n";
    if (!lan) return Status::IOError("cannot write " + (dir_ / "lan.conf").string());
    const std::string none = "000000000000000";
    std::ofstream emu(dir_ / "sim.emu");
    emu << "mc_setbmc 0x20\n"
        << "mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02\n"
        << "sel_enable 0x20 1000 0x0a\n"
        << "sensor_add 0x20 0 0 35 0x6f event-only\n"
        << "sensor_add 0x20 0 " << kTemperatureSensor << " 0x01 0x01 poll " << kPollMs << " file \""
        << ValueFile(kTemperatureSensor) << "\"\n"
        << FullSensorRecord(kTemperatureSensor, 0x01, 0x01, kTemperatureName)
        << "sensor_add 0x20 0 " << kPowerSensor << " 0x0b 0x01 poll " << kPollMs << " file \""
        << ValueFile(kPowerSensor) << "\"\n"
        << FullSensorRecord(kPowerSensor, 0x0b, 0x06, kPowerName);
    for (int sensor : {kTemperatureSensor, kPowerSensor}) {
      emu << "sensor_set_event_support 0x20 0 " << sensor << " enable scanning none " << none << " "
          << none << " " << none << " " << none << "\n";
    }
    emu << "mc_enable 0x20\n";
    if (!emu) return Status::IOError("cannot write " + (dir_ / "sim.emu").string());
    return Status::OK();
  }

  std::filesystem::path dir_;
  int port_ = 0;
  std::optional<Process> process_;  // while it runs
};

}  // namespace kwatt::testing

#endif  // KWATT_SRC_TESTING_IPMI_SIM_H_
