#include "src/collect/ipmi_device.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "src/testing/ipmi_sim.h"
#include "src/testing/temp_dir.h"

namespace kwatt::collect::ipmi_device_test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using testing::TestIpmiSim;

MetricDescription Metric(int port, const std::string& sensor, const std::string& name,
                         const std::string& password = TestIpmiSim::kPassword) {
  MetricDescription metric;
  metric.name = name;
  metric.device_id = "node-1";
  metric.url.scheme = "ipmisensor";
  metric.url.user = TestIpmiSim::kUser;
  metric.url.password = password;
  metric.url.host = "127.0.0.1";
  metric.url.port = port;
  metric.url.path = sensor;
  metric.url.query = "workaround-flags=opensesspriv";
  metric.origin = "ipmi.yaml, " + name;
  return metric;
}

PollRequest Request(size_t metrics, milliseconds limit = milliseconds(5000)) {
  PollRequest request;
  request.sent_at = 1700000000000000000;
  request.deadline = Clock::now() + limit;
  request.active.assign(metrics, true);
  return request;
}

std::unique_ptr<TestIpmiSim> StartSim(int temperature = 42, int power = 180) {
  Result<std::unique_ptr<TestIpmiSim>> sim = TestIpmiSim::Start(temperature, power);
  EXPECT_TRUE(sim.ok()) << sim.status().ToString();
  return sim.ok() ? std::move(sim).value() : nullptr;
}

std::string ReadText(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// A script standing for ipmi-sensors: appends its arguments to `dir`/calls, then runs `body`.
std::string FakeProgram(const std::filesystem::path& dir, const std::string& body) {
  std::string path = (dir / "fake-ipmi-sensors").string();
  std::ofstream(path) << "#!/bin/sh\necho \"$@\" >> " << (dir / "calls").string() << "\n"
                      << body << "\n";
  ::chmod(path.c_str(), 0700);
  return path;
}

// The real ipmi-sensors, counting its runs in `dir`/calls.
std::string CountingIpmiSensors(const std::filesystem::path& dir) {
  return FakeProgram(dir, "exec ipmi-sensors \"$@\"");
}

int Calls(const std::filesystem::path& dir) {
  std::ifstream file(dir / "calls");
  int count = 0;
  for (std::string line; std::getline(file, line);) ++count;
  return count;
}

TEST(IpmiDeviceTest, ReadsThePowerSensorAndFollowsItsValue) {
  std::unique_ptr<TestIpmiSim> sim = StartSim(42, 180);
  ASSERT_TRUE(sim);
  std::vector<MetricDescription> metrics = {
      Metric(sim->port(), TestIpmiSim::kPowerName, "bmc_power_watt")};
  Result<std::unique_ptr<Device>> device = MakeIpmiDevice(metrics, DriverEnvironment());
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  std::vector<Reading> readings;
  PollRequest request = Request(1);
  Status status = (*device)->Poll(request, &readings);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ASSERT_EQ(readings.size(), 1u);
  EXPECT_EQ(readings[0].value, 180);
  EXPECT_EQ(readings[0].time, request.sent_at);
  EXPECT_EQ(readings[0].device_id, "node-1");
  EXPECT_EQ(readings[0].metric_id, "bmc_power_watt");

  ASSERT_TRUE(sim->SetValue(TestIpmiSim::kPowerSensor, 213).ok());
  // The simulator reads the value within its poll period: polled again (each poll a run of
  // ipmi-sensors against it) until the reading follows, for 10 s at most.
  double value = 0;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (value != 213 && std::chrono::steady_clock::now() < give_up) {
    readings.clear();
    ASSERT_TRUE((*device)->Poll(Request(1), &readings).ok());
    ASSERT_EQ(readings.size(), 1u);
    value = readings[0].value;
  }
  EXPECT_EQ(value, 213);
}

TEST(IpmiDeviceTest, TwoSensorsOfOneBmcInOneRun) {
  std::unique_ptr<TestIpmiSim> sim = StartSim(37, 150);
  ASSERT_TRUE(sim);
  kwatt::testing::TempDir dir;
  DriverEnvironment environment;
  environment.ipmi_sensors = CountingIpmiSensors(dir.root());
  std::vector<MetricDescription> metrics = {
      Metric(sim->port(), TestIpmiSim::kPowerName, "bmc_power_watt"),
      Metric(sim->port(), TestIpmiSim::kTemperatureName, "bmc_temp_celsius")};
  metrics[1].scale_factor = 10;
  Result<std::unique_ptr<Device>> device = MakeIpmiDevice(metrics, environment);
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  std::vector<Reading> readings;
  Status status = (*device)->Poll(Request(2), &readings);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ASSERT_EQ(readings.size(), 2u);
  EXPECT_EQ(readings[0].metric_id, "bmc_power_watt");
  EXPECT_EQ(readings[0].value, 150);
  EXPECT_EQ(readings[1].metric_id, "bmc_temp_celsius");
  EXPECT_EQ(readings[1].value, 370);
  EXPECT_EQ(Calls(dir.root()), 1);

  // An inactive metric is not read; none active: no run at all.
  PollRequest only_temperature = Request(2);
  only_temperature.active = {false, true};
  readings.clear();
  ASSERT_TRUE((*device)->Poll(only_temperature, &readings).ok());
  ASSERT_EQ(readings.size(), 1u);
  EXPECT_EQ(readings[0].metric_id, "bmc_temp_celsius");
  PollRequest none = Request(2);
  none.active = {false, false};
  readings.clear();
  ASSERT_TRUE((*device)->Poll(none, &readings).ok());
  EXPECT_TRUE(readings.empty());
  EXPECT_EQ(Calls(dir.root()), 2);
}

TEST(IpmiDeviceTest, UnknownSensorGivesNoReadingAndARecordIdMatches) {
  std::unique_ptr<TestIpmiSim> sim = StartSim(42, 190);
  ASSERT_TRUE(sim);
  std::vector<MetricDescription> metrics = {Metric(sim->port(), "No Such Sensor", "missing"),
                                            Metric(sim->port(), "2", "by_record_id")};
  Result<std::unique_ptr<Device>> device = MakeIpmiDevice(metrics, DriverEnvironment());
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  std::vector<Reading> readings;
  Status status = (*device)->Poll(Request(2), &readings);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ASSERT_EQ(readings.size(), 1u);
  EXPECT_EQ(readings[0].metric_id, "by_record_id");
  EXPECT_EQ(readings[0].value, 190);
}

TEST(IpmiDeviceTest, WrongPasswordIsUnauthenticatedWithoutThePassword) {
  std::unique_ptr<TestIpmiSim> sim = StartSim();
  ASSERT_TRUE(sim);
  const std::string wrong = "Wr0ngPassw0rd";
  std::vector<MetricDescription> metrics = {
      Metric(sim->port(), TestIpmiSim::kPowerName, "bmc_power_watt", wrong)};
  Result<std::unique_ptr<Device>> device = MakeIpmiDevice(metrics, DriverEnvironment());
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  std::vector<Reading> readings;
  Status status = (*device)->Poll(Request(1), &readings);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), Status::Code::kUnauthenticated) << status.ToString();
  const std::string& message = status.message();
  EXPECT_NE(message.find("ipmisensor://kwatt:***@127.0.0.1:" + std::to_string(sim->port())),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("password invalid"), std::string::npos) << message;
  EXPECT_EQ(message.find(wrong), std::string::npos) << message;
  EXPECT_EQ(message.find(TestIpmiSim::kPassword), std::string::npos) << message;
  EXPECT_TRUE(readings.empty());
}

TEST(IpmiDeviceTest, ADeadBmcTimesOutWithinTheDeadline) {
  // A port that takes the packets and never answers.
  int silent = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(silent, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::getsockname(silent, reinterpret_cast<sockaddr*>(&address), &length), 0);
  int port = ntohs(address.sin_port);

  std::vector<MetricDescription> metrics = {
      Metric(port, TestIpmiSim::kPowerName, "bmc_power_watt")};
  Result<std::unique_ptr<Device>> device = MakeIpmiDevice(metrics, DriverEnvironment());
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  std::vector<Reading> readings;
  Clock::time_point start = Clock::now();
  Status status = (*device)->Poll(Request(1, milliseconds(1500)), &readings);
  auto elapsed = Clock::now() - start;
  ::close(silent);
  EXPECT_EQ(status.code(), Status::Code::kUnavailable) << status.ToString();
  EXPECT_NE(status.message().find("timed out"), std::string::npos) << status.ToString();
  EXPECT_EQ(status.message().find(TestIpmiSim::kPassword), std::string::npos);
  EXPECT_LT(elapsed, milliseconds(1500 + 500));
}

TEST(IpmiDeviceTest, TheDeadlineKillsIpmiSensors) {
  kwatt::testing::TempDir dir;
  DriverEnvironment environment;
  environment.ipmi_sensors = FakeProgram(dir.root(), "exec sleep 30");
  std::vector<MetricDescription> metrics = {Metric(623, "PSU1 Power", "bmc_power_watt")};
  Result<std::unique_ptr<Device>> device = MakeIpmiDevice(metrics, environment);
  ASSERT_TRUE(device.ok());
  std::vector<Reading> readings;
  Clock::time_point start = Clock::now();
  Status status = (*device)->Poll(Request(1, milliseconds(300)), &readings);
  EXPECT_EQ(status.code(), Status::Code::kUnavailable) << status.ToString();
  EXPECT_NE(status.message().find("timed out"), std::string::npos) << status.ToString();
  EXPECT_NE(status.message().find("ipmisensor://kwatt:***@127.0.0.1:623"), std::string::npos)
      << status.ToString();
  EXPECT_LT(Clock::now() - start, milliseconds(1500));
}

TEST(IpmiDeviceTest, TheSdrCacheIsKeptBetweenPollsAndRemadeWhenDamaged) {
  std::unique_ptr<TestIpmiSim> sim = StartSim(42, 170);
  ASSERT_TRUE(sim);
  kwatt::testing::TempDir cache;
  DriverEnvironment environment;
  environment.ipmi_cache_dir = (cache.root() / "ipmi").string();
  std::vector<MetricDescription> metrics = {
      Metric(sim->port(), TestIpmiSim::kPowerName, "bmc_power_watt")};
  Result<std::unique_ptr<Device>> device = MakeIpmiDevice(metrics, environment);
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  std::vector<Reading> readings;
  ASSERT_TRUE((*device)->Poll(Request(1), &readings).ok());

  std::filesystem::path cache_file;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(cache.root())) {
    if (entry.is_regular_file() &&
        entry.path().filename().string().find("sdr-cache") != std::string::npos) {
      cache_file = entry.path();
    }
  }
  ASSERT_FALSE(cache_file.empty()) << "no SDR cache under " << cache.root();
  // The device's directory is private (the configuration file is made there).
  struct stat info;
  ASSERT_EQ(::stat(cache_file.parent_path().parent_path().parent_path().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0700u);
  // Dated an hour back, so that a rewrite, however soon, shows in its time.
  const auto written = std::filesystem::last_write_time(cache_file) - std::chrono::hours(1);
  std::filesystem::last_write_time(cache_file, written);
  std::string contents = ReadText(cache_file);

  readings.clear();
  ASSERT_TRUE((*device)->Poll(Request(1), &readings).ok());
  ASSERT_EQ(readings.size(), 1u);
  EXPECT_EQ(std::filesystem::last_write_time(cache_file), written);
  EXPECT_EQ(ReadText(cache_file), contents);

  // A new device of the same BMC (the collector restarted) takes the same cache.
  Result<std::unique_ptr<Device>> again = MakeIpmiDevice(metrics, environment);
  ASSERT_TRUE(again.ok());
  readings.clear();
  ASSERT_TRUE((*again)->Poll(Request(1), &readings).ok());
  EXPECT_EQ(std::filesystem::last_write_time(cache_file), written);

  // Damaged: remade, and the poll reads.
  std::ofstream(cache_file, std::ios::trunc) << "garbage\n";
  readings.clear();
  Status status = (*device)->Poll(Request(1), &readings);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ASSERT_EQ(readings.size(), 1u);
  EXPECT_EQ(readings[0].value, 170);
  EXPECT_EQ(ReadText(cache_file), contents);
  // No configuration file is left behind.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(cache.root())) {
    EXPECT_EQ(entry.path().filename().string().find("freeipmi-"), std::string::npos)
        << entry.path();
  }
}

TEST(IpmiDeviceTest, ARunFailingOnTheCacheIsRunAgainOnAFlushedOne) {
  kwatt::testing::TempDir dir;
  DriverEnvironment environment;
  environment.ipmi_cache_dir = (dir.root() / "cache").string();
  environment.ipmi_sensors = FakeProgram(dir.root(), R"(
for arg; do case "$arg" in --sdr-cache-directory=*) cache="${arg#*=}";; esac; done
if [ -e "$cache/.freeipmi/bad" ]; then
  echo "SDR Cache '$cache/.freeipmi/sdr-cache/x' invalid: Please flush the cache and regenerate it" >&2
  exit 1
fi
mkdir -p "$cache/.freeipmi"
echo "2,PSU1 Power,Other Units Based Sensor,99.00,W,'OK'")");
  std::vector<MetricDescription> metrics = {Metric(623, "PSU1 Power", "bmc_power_watt")};
  Result<std::unique_ptr<Device>> device = MakeIpmiDevice(metrics, environment);
  ASSERT_TRUE(device.ok());
  std::vector<Reading> readings;
  ASSERT_TRUE((*device)->Poll(Request(1), &readings).ok());
  ASSERT_EQ(readings.size(), 1u);
  std::filesystem::path freeipmi;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir.root() / "cache")) {
    if (entry.path().filename() == ".freeipmi") freeipmi = entry.path();
  }
  ASSERT_FALSE(freeipmi.empty());
  std::ofstream(freeipmi / "bad") << "x";
  readings.clear();
  Status status = (*device)->Poll(Request(1), &readings);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ASSERT_EQ(readings.size(), 1u);
  EXPECT_EQ(readings[0].value, 99);
  EXPECT_FALSE(std::filesystem::exists(freeipmi / "bad"));
  EXPECT_EQ(Calls(dir.root()), 3);
}

TEST(IpmiDeviceTest, ThePasswordGoesInAPrivateConfigurationFileRemovedAfterwards) {
  kwatt::testing::TempDir dir;
  DriverEnvironment environment;
  std::string seen = (dir.root() / "seen").string();
  environment.ipmi_sensors = FakeProgram(dir.root(), R"(
for arg; do case "$arg" in --config-file=*) config="${arg#*=}";; esac; done
stat -c %a "$config" > )" + seen + R"(
cat "$config" >> )" + seen + R"(
echo "$config" > )" + seen + R"(.path
echo "ipmi-sensors: password invalid for pw#9\"Xq" >&2
exit 1)");
  std::vector<MetricDescription> metrics = {Metric(623, "PSU1 Power", "bmc_power_watt")};
  Result<std::unique_ptr<Device>> device = MakeIpmiDevice(metrics, environment);
  ASSERT_TRUE(device.ok());
  std::vector<Reading> readings;
  Status status = (*device)->Poll(Request(1), &readings);
  EXPECT_EQ(status.code(), Status::Code::kUnauthenticated) << status.ToString();
  // The password on stderr is scrubbed.
  EXPECT_EQ(status.message().find(TestIpmiSim::kPassword), std::string::npos) << status.ToString();
  EXPECT_NE(status.message().find("password invalid for ***"), std::string::npos)
      << status.ToString();
  std::string calls = ReadText(dir.root() / "calls");
  EXPECT_EQ(calls.find(TestIpmiSim::kPassword), std::string::npos) << calls;
  EXPECT_NE(calls.find("--driver-type=LAN_2_0"), std::string::npos) << calls;
  EXPECT_NE(calls.find("--hostname=127.0.0.1:623"), std::string::npos) << calls;
  EXPECT_NE(calls.find("--workaround-flags=opensesspriv"), std::string::npos) << calls;
  EXPECT_EQ(ReadText(seen), "600\nusername \"kwatt\"\npassword \"pw\\#9\\\"Xq\"\n");
  std::string config = ReadText(seen + ".path");
  while (!config.empty() && config.back() == '\n') config.pop_back();
  EXPECT_FALSE(config.empty());
  EXPECT_FALSE(std::filesystem::exists(config)) << config;
}

TEST(IpmiDeviceTest, RefusesBadDescriptions) {
  DriverEnvironment environment;
  EXPECT_EQ(MakeIpmiDevice({}, environment).status().code(), Status::Code::kInvalidArgument);
  auto refused = [&](std::vector<MetricDescription> metrics, const std::string& expected) {
    Result<std::unique_ptr<Device>> device = MakeIpmiDevice(metrics, environment);
    ASSERT_FALSE(device.ok()) << expected;
    EXPECT_EQ(device.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(device.status().message().find(expected), std::string::npos)
        << device.status().ToString();
    EXPECT_EQ(device.status().message().find(TestIpmiSim::kPassword), std::string::npos)
        << device.status().ToString();
  };
  MetricDescription good = Metric(623, "PSU1 Power", "power");
  MetricDescription empty_sensor = good;
  empty_sensor.url.path = "";
  refused({empty_sensor}, "no sensor name");
  MetricDescription other_bmc = good;
  other_bmc.url.host = "10.0.0.2";
  refused({good, other_bmc}, "not the BMC of");
  MetricDescription unknown_option = good;
  unknown_option.url.query = "retries=3";
  refused({unknown_option}, "unknown IPMI option \"retries\"");
  MetricDescription bad_cipher = good;
  bad_cipher.url.query = "cipher-suite-id=x";
  refused({bad_cipher}, "cipher-suite-id");
  MetricDescription other_options = good;
  other_options.url.query = "";
  refused({good, other_options}, "IPMI options differ");
  MetricDescription line_break = good;
  line_break.url.password = "a\nusername root";
  refused({line_break}, "line break");
  MetricDescription snmp = good;
  snmp.url.scheme = "snmp";
  refused({snmp}, "not an ipmisensor");
}

TEST(IpmiSensorsOutputTest, ParsesLinesWithNotAvailableAndCommasInNames) {
  std::vector<internal::IpmiSensorLine> lines = internal::ParseIpmiSensorsOutput(
      "1,CPU Temp,Temperature,42.00,C,'OK'\n"
      "2,PSU1 Power,Other Units Based Sensor,180.00,W,'OK'\n"
      "7,Presence,Entity Presence,N/A,N/A,'Entity Present'\n"
      "9,Fan 1, left,Fan,3000.00,RPM,'OK'\n"
      "short,line\n"
      "\n");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].record_id, "1");
  EXPECT_EQ(lines[0].name, "CPU Temp");
  EXPECT_EQ(lines[0].reading, "42.00");
  EXPECT_EQ(lines[1].name, "PSU1 Power");
  EXPECT_EQ(lines[1].reading, "180.00");
  EXPECT_EQ(lines[2].reading, "N/A");
  EXPECT_EQ(lines[3].name, "Fan 1, left");
  EXPECT_EQ(lines[3].reading, "3000.00");
}

TEST(IpmiSensorsOutputTest, ConfigArgumentEscapes) {
  EXPECT_EQ(internal::FreeIpmiConfigArgument("plain"), "\"plain\"");
  EXPECT_EQ(internal::FreeIpmiConfigArgument("a b#c\"d\\e"), "\"a b\\#c\\\"d\\\\e\"");
}

}  // namespace
}  // namespace kwatt::collect::ipmi_device_test
