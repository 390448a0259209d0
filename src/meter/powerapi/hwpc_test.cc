#include "kwatt/meter/powerapi/hwpc.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "kwatt/simulate/hwpc_simulation.h"
#include "src/testing/temp_dir.h"

namespace kwatt::meter::hwpc_test {
namespace {

void Write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::vector<HwpcReport> ReadAll(HwpcReader* reader, Status* status = nullptr) {
  std::vector<HwpcReport> out;
  HwpcReport r;
  while (true) {
    Result<bool> more = reader->Next(&r);
    if (!more.ok()) {
      if (status) *status = more.status();
      break;
    }
    if (!*more) break;
    out.push_back(r);
  }
  return out;
}

// hwpc-sensor's CSV output for two ticks of targets all, /system and /kwatt/web on a machine of
// one socket and two CPUs, as its storage_csv module lays it out (header sorted by event name).
void WriteSensorCsv(const std::filesystem::path& dir, bool extensions = true) {
  std::string x = extensions ? ".csv" : "";
  Write(dir / ("rapl" + x),
        "timestamp,sensor,target,socket,cpu,RAPL_ENERGY_PKG,time_enabled,time_running\n"
        "1700000001000,node-1,all,0,0,171798691840,1000000000,1000000000\n"
        "1700000002000,node-1,all,0,0,176093659136,1000000000,1000000000\n");
  Write(dir / ("msr" + x),
        "timestamp,sensor,target,socket,cpu,APERF,MPERF,TSC,time_enabled,time_running\n"
        "1700000001000,node-1,all,0,0,1800000000,1500000000,2100000000,1000000000,1000000000\n"
        "1700000001000,node-1,all,0,1,900000000,750000000,2100000000,1000000000,1000000000\n"
        "1700000002000,node-1,all,0,0,1800000000,1500000000,2100000000,1000000000,1000000000\n"
        "1700000002000,node-1,all,0,1,900000000,750000000,2100000000,1000000000,1000000000\n");
  Write(dir / ("core" + x),
        "timestamp,sensor,target,socket,cpu,CPU_CLK_THREAD_UNHALTED:THREAD_P,"
        "INSTRUCTIONS_RETIRED,LLC_MISSES,time_enabled,time_running\n"
        "1700000001000,node-1,all,0,0,2000000000,3000000000,100000,1000000000,500000000\n"
        "1700000001000,node-1,all,0,1,1000000000,1000000000,200000,1000000000,500000000\n"
        "1700000001000,node-1,/system,0,0,10,20,1,1000000000,500000000\n"
        "1700000001000,node-1,/system,0,1,10,20,1,1000000000,500000000\n"
        "1700000001000,node-1,/kwatt/web,0,0,1900000000,2900000000,90000,1000000000,500000000\n"
        "1700000001000,node-1,/kwatt/web,0,1,900000000,900000000,150000,1000000000,500000000\n"
        "1700000002000,node-1,all,0,0,2000000000,3000000000,100000,1000000000,1000000000\n"
        "1700000002000,node-1,all,0,1,1000000000,1000000000,200000,1000000000,1000000000\n"
        "1700000002000,node-1,/kwatt/web,0,0,1900000000,2900000000,90000,1000000000,1000000000\n"
        "1700000002000,node-1,/kwatt/web,0,1,900000000,900000000,150000,1000000000,1000000000\n");
}

TEST(HwpcCsv, GroupsTheLinesOfEveryFileByTickAndTarget) {
  for (bool extensions : {true, false}) {
    kwatt::testing::TempDir dir;
    WriteSensorCsv(dir.root(), extensions);
    Write(dir.root() / "README.txt", "not a group file");
    auto reader = OpenHwpcCsvDirectory(dir.root());
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    Status status;
    std::vector<HwpcReport> reports = ReadAll(reader->get(), &status);
    ASSERT_TRUE(status.ok()) << status.ToString();
    // Tick 1: all, /system, /kwatt/web; tick 2: all, /kwatt/web.
    ASSERT_EQ(reports.size(), 5u);
    EXPECT_EQ(reports[0].timestamp_ms, 1700000001000);
    EXPECT_EQ(reports[0].target, "all");
    EXPECT_EQ(reports[0].sensor, "node-1");
    // all: core x2 CPUs, msr x2, rapl x1, sorted by (group, socket, cpu).
    ASSERT_EQ(reports[0].counters.size(), 5u);
    EXPECT_EQ(reports[0].counters[0].group, "core");
    EXPECT_EQ(reports[0].counters[2].group, "msr");
    EXPECT_EQ(reports[0].counters[3].cpu, 1);
    EXPECT_EQ(reports[0].counters[4].group, "rapl");
    EXPECT_EQ(reports[0].counters[4].Get("RAPL_ENERGY_PKG"), 171798691840);
    EXPECT_EQ(reports[0].counters[0].Get("LLC_MISSES"), 100000);
    EXPECT_EQ(reports[0].counters[0].Get("time_running"), 500000000);
    EXPECT_EQ(reports[0].counters[0].Get("NOPE"), -1);
    std::vector<std::string> targets;
    for (const auto& r : reports) targets.push_back(std::to_string(r.timestamp_ms) + r.target);
    EXPECT_EQ(targets, (std::vector<std::string>{"1700000001000all", "1700000001000/system",
                                                 "1700000001000/kwatt/web", "1700000002000all",
                                                 "1700000002000/kwatt/web"}));
    EXPECT_EQ(reports[4].counters.size(), 2u);
    EXPECT_EQ(reports[4].counters[1].Get("INSTRUCTIONS_RETIRED"), 900000000);
  }
}

struct Hostile {
  const char* name;
  const char* core_csv;
  const char* expected;  // in the message
};

TEST(HwpcCsv, HostileFilesGetErrorsNamingFileLineAndWhat) {
  const std::string header = "timestamp,sensor,target,socket,cpu,INSTRUCTIONS_RETIRED\n";
  const Hostile cases[] = {
      {"empty field", "1700000001000,n,all,0,0,\n",
       "core.csv:2: field INSTRUCTIONS_RETIRED is empty"},
      {"empty sensor", "1700000001000,,all,0,0,5\n", "core.csv:2: field sensor is empty"},
      {"too few fields", "1700000001000,n,all,0,0\n",
       "core.csv:2: 5 fields where the header has 6"},
      {"too many fields", "1700000001000,n,all,0,0,1,2\n", "7 fields"},
      {"negative count", "1700000001000,n,all,0,0,-5\n",
       "INSTRUCTIONS_RETIRED \"-5\" is not a count"},
      {"fraction", "1700000001000,n,all,0,0,1.5\n", "is not a count"},
      {"text count", "1700000001000,n,all,0,0,many\n", "is not a count"},
      {"huge count", "1700000001000,n,all,0,0,99999999999999999999999\n", "is not a count"},
      {"socket", "1700000001000,n,all,zero,0,1\n", "socket \"zero\" is not a socket number"},
      {"cpu", "1700000001000,n,all,0,-1,1\n", "cpu \"-1\" is not a CPU number"},
      {"timestamp", "yesterday,n,all,0,0,1\n", "neither milliseconds"},
      {"goes back", "1700000002000,n,all,0,0,1\n1700000001000,n,all,0,0,1\n",
       "core.csv:3: timestamp 1700000001000 goes back"},
      {"quote", "1700000001000,\"n,all,0,0,1\n", "unterminated quote"},
      {"same cpu twice", "1700000001000,n,all,0,0,1\n1700000001000,n,all,0,0,2\n", "given twice"},
  };
  for (const Hostile& c : cases) {
    kwatt::testing::TempDir dir;
    Write(dir.root() / "core.csv", header + c.core_csv);
    auto reader = OpenHwpcCsvDirectory(dir.root());
    Status status = reader.status();
    if (reader.ok()) ReadAll(reader->get(), &status);
    EXPECT_EQ(status.code(), Status::Code::kCorruption) << c.name << ": " << status.ToString();
    EXPECT_NE(status.message().find(c.expected), std::string::npos)
        << c.name << ": " << status.message();
  }
  // Headers.
  kwatt::testing::TempDir dir;
  Write(dir.root() / "core.csv", "timestamp,sensor,target,cpu,X\n");
  EXPECT_NE(OpenHwpcCsvDirectory(dir.root()).status().message().find("no column socket"),
            std::string::npos);
  Write(dir.root() / "core.csv", "timestamp,sensor,target,socket,cpu,X,X\n");
  EXPECT_NE(OpenHwpcCsvDirectory(dir.root()).status().message().find("column X given twice"),
            std::string::npos);
  Write(dir.root() / "core.csv", "");
  EXPECT_NE(OpenHwpcCsvDirectory(dir.root()).status().message().find("empty file"),
            std::string::npos);
  // Lines of one report that disagree on the sensor.
  Write(dir.root() / "core.csv", header + "1700000001000,a,all,0,0,1\n");
  Write(dir.root() / "rapl.csv", header + "1700000001000,b,all,0,0,1\n");
  auto reader = OpenHwpcCsvDirectory(dir.root());
  ASSERT_TRUE(reader.ok());
  Status status;
  ReadAll(reader->get(), &status);
  EXPECT_NE(status.message().find("sensor b where"), std::string::npos) << status.message();
  // Nothing to read.
  kwatt::testing::TempDir empty;
  EXPECT_EQ(OpenHwpcCsvDirectory(empty.root()).status().code(), Status::Code::kNotFound);
  EXPECT_EQ(OpenHwpcCsvDirectory(empty.root() / "missing").status().code(),
            Status::Code::kNotFound);
}

TEST(HwpcJson, ReadsTheSocketDocumentForms) {
  // POWERAPI.md's example, then hwpc-sensor's BSON rendering (doubles, spaces, ISO time with an
  // offset), run together on one line as its socket output sends them.
  const std::string a =
      R"({"timestamp": 1700000000123, "sensor": "node-1", "target": "all", "groups": {"rapl": {"0": {"0": {"RAPL_ENERGY_PKG": 5709496320, "time_enabled": 500000000, "time_running": 500000000}}}, "msr": {"0": {"0": {"TSC": 1100000000, "APERF": 900000000, "MPERF": 1000000000}}}}})";
  const std::string b =
      R"({ "timestamp" : "2023-11-14T22:13:20.500+00:00", "sensor" : "node-1", "target" : "/docker/x", "groups" : { "core" : { "1" : { "7" : { "LLC_MISSES" : 120000.0, "time_enabled" : 5.0E8 } } } }, "metadata": {"k": 1} })";
  kwatt::testing::TempDir dir;
  Write(dir.root() / "r.json", a + "\n" + a + b + "\n\n");
  auto reader = OpenHwpcJsonFile((dir.root() / "r.json").string());
  ASSERT_TRUE(reader.ok());
  Status status;
  std::vector<HwpcReport> reports = ReadAll(reader->get(), &status);
  ASSERT_TRUE(status.ok()) << status.ToString();
  ASSERT_EQ(reports.size(), 3u);
  EXPECT_EQ(reports[0].timestamp_ms, 1700000000123);
  EXPECT_EQ(reports[0].counters.size(), 2u);
  EXPECT_EQ(reports[0].counters[1].Get("RAPL_ENERGY_PKG"), 5709496320);
  EXPECT_EQ(reports[2].timestamp_ms, 1700000000500);
  EXPECT_EQ(reports[2].target, "/docker/x");
  EXPECT_EQ(reports[2].counters[0].socket, 1);
  EXPECT_EQ(reports[2].counters[0].cpu, 7);
  EXPECT_EQ(reports[2].counters[0].Get("LLC_MISSES"), 120000);
  EXPECT_EQ(reports[2].counters[0].Get("time_enabled"), 500000000);
}

TEST(HwpcJson, HostileDocumentsAreCorruptionNamingTheLine) {
  struct Case {
    std::string text, expected;
  };
  const std::string ok_head = R"({"timestamp":1,"sensor":"s","target":"t","groups":)";
  const Case cases[] = {
      {"[1,2]", "r.json:2: text outside a JSON object"},
      {R"({"sensor":"s","target":"t","groups":{}})", "no \"timestamp\""},
      {R"({"timestamp":true,"sensor":"s","target":"t","groups":{}})", "\"timestamp\" is a boolean"},
      {R"({"timestamp":1,"target":"t","groups":{}})", "no \"sensor\""},
      {R"({"timestamp":1,"sensor":5,"target":"t","groups":{}})", "\"sensor\" is a number"},
      {R"({"timestamp":1,"sensor":"s","target":"t"})", "no \"groups\""},
      {ok_head + "[]}", "\"groups\" is a list"},
      {ok_head + R"({"core":{"x":{}}}})", "socket \"x\" is not a socket number"},
      {ok_head + R"({"core":{"0":{"1":{"E":-1}}}}})", "E is -1, not a count"},
      {ok_head + R"({"core":{"0":{"1":{"E":1.5}}}}})", "E is 1.5, not a count"},
      {ok_head + R"({"core":{"0":{"1":{"E":"7"}}}}})", "E is a string, not a count"},
      {ok_head + R"({"core":{"0":{"1":{"E":1e300}}}}})", "not a count"},
      {ok_head + R"({"core":{"0":{"1":{"E":1,"E":2}}}}})", ""},  // nlohmann keeps the last
      {R"({"timestamp":1,"sensor":"s","target":"t","groups":{}} {"truncated": )",
       "r.json:2: the input ends inside a document"},
      {R"({"timestamp":1,"sensor":"s","target":"t","groups":{}} x)", "text outside a JSON object"},
  };
  for (const Case& c : cases) {
    kwatt::testing::TempDir dir;
    Write(dir.root() / "r.json", "\n" + c.text);
    auto reader = OpenHwpcJsonFile((dir.root() / "r.json").string());
    ASSERT_TRUE(reader.ok());
    Status status;
    ReadAll(reader->get(), &status);
    if (c.expected.empty()) {
      EXPECT_TRUE(status.ok()) << c.text << ": " << status.ToString();
      continue;
    }
    EXPECT_EQ(status.code(), Status::Code::kCorruption) << c.text;
    EXPECT_NE(status.message().find(c.expected), std::string::npos)
        << c.text << " -> " << status.message();
    if (c.expected.find("r.json:") == std::string::npos) {
      EXPECT_NE(status.message().find("r.json:2: "), std::string::npos) << status.message();
    }
  }
  EXPECT_EQ(OpenHwpcJsonFile("/nonexistent/r.json").status().code(), Status::Code::kNotFound);
}

TEST(JsonDocumentSplitter, ByteByByteEqualsWhole) {
  const std::string text =
      "junk{\"a\":\"}{\\\"\",\"b\":[{},{}]}\n\n{\"c\":1}{\"d\":\n2}  \n{\"e\":";
  std::vector<std::pair<std::string, int64_t>> whole, pieces;
  JsonDocumentSplitter one, two;
  one.Feed(text, &whole);
  for (char c : text) two.Feed(std::string_view(&c, 1), &pieces);
  EXPECT_EQ(whole, pieces);
  ASSERT_EQ(whole.size(), 3u);
  EXPECT_EQ(whole[0].first, "{\"a\":\"}{\\\"\",\"b\":[{},{}]}");
  EXPECT_EQ(whole[0].second, 1);
  EXPECT_EQ(whole[2].first, "{\"d\":\n2}");
  EXPECT_EQ(whole[2].second, 3);
  EXPECT_EQ(one.Pending(), "{\"e\":");
  EXPECT_EQ(one.pending_line(), 5);
  EXPECT_EQ(one.stray_runs(), 1);  // "junk"
  EXPECT_EQ(one.stray_line(), 1);
  // An oversized document is dropped and counted; the next one is read.
  JsonDocumentSplitter small(8);
  std::vector<std::pair<std::string, int64_t>> docs;
  small.Feed("{\"long\":123456}{\"s\":1}", &docs);
  EXPECT_EQ(small.oversized(), 1);
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0].first, "{\"s\":1}");
}

std::vector<HwpcReport> SimulatedReports(int ticks) {
  simulate::HwpcSimulation s = simulate::DefaultHwpcSimulation();
  s.duration_seconds = ticks;
  s.multiplexing = 0.3;
  auto sim = simulate::HwpcSimulator::Create(s);
  EXPECT_TRUE(sim.ok());
  std::vector<HwpcReport> all, reports;
  std::vector<simulate::HwpcTruth> truth;
  while ((*sim)->Next(&reports, &truth)) all.insert(all.end(), reports.begin(), reports.end());
  return all;
}

void ExpectSameReports(const std::vector<HwpcReport>& a, const std::vector<HwpcReport>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].timestamp_ms, b[i].timestamp_ms);
    EXPECT_EQ(a[i].sensor, b[i].sensor);
    EXPECT_EQ(a[i].target, b[i].target);
    ASSERT_EQ(a[i].counters.size(), b[i].counters.size()) << i;
    for (size_t c = 0; c < a[i].counters.size(); ++c) {
      EXPECT_EQ(a[i].counters[c].group, b[i].counters[c].group);
      EXPECT_EQ(a[i].counters[c].socket, b[i].counters[c].socket);
      EXPECT_EQ(a[i].counters[c].cpu, b[i].counters[c].cpu);
      EXPECT_EQ(a[i].counters[c].events, b[i].counters[c].events);
    }
  }
}

TEST(HwpcWriters, JsonAndCsvRoundTrip) {
  std::vector<HwpcReport> reports = SimulatedReports(5);
  ASSERT_EQ(reports.size(), 5u * 4);  // all and three cgroups per tick
  kwatt::testing::TempDir dir;
  {
    std::ofstream json(dir.root() / "r.json");
    for (const auto& r : reports) json << FormatHwpcJson(r) << "\n";
  }
  auto json_reader = OpenHwpcJsonFile((dir.root() / "r.json").string());
  ASSERT_TRUE(json_reader.ok());
  ExpectSameReports(ReadAll(json_reader->get()), reports);

  auto writer = HwpcCsvWriter::Open((dir.root() / "csv").string());
  ASSERT_TRUE(writer.ok());
  for (const auto& r : reports) ASSERT_TRUE((*writer)->Write(r).ok());
  ASSERT_TRUE((*writer)->Close().ok());
  std::ifstream rapl(dir.root() / "csv" / "rapl.csv");
  std::string header;
  std::getline(rapl, header);
  EXPECT_EQ(header, "timestamp,sensor,target,socket,cpu,RAPL_ENERGY_PKG,time_enabled,time_running");
  auto csv_reader = OpenHwpcCsvDirectory((dir.root() / "csv").string());
  ASSERT_TRUE(csv_reader.ok());
  ExpectSameReports(ReadAll(csv_reader->get()), reports);
}

TEST(HwpcWriters, CsvNamesThatNeedQuotingReadBackAndLineBreaksAreRefused) {
  // An event name holding NUL bytes and a comma (found by fuzz/hwpc_csv_fuzzer.cc: the header was
  // written with fputs, cut at the NUL), a target with a quote.
  HwpcReport r;
  r.timestamp_ms = 5;
  r.sensor = "n";
  r.target = "t\"q";
  r.counters.push_back({"core", 0, 0, {{std::string("X\0\0,Y", 5), 7}}});
  kwatt::testing::TempDir dir;
  auto writer = HwpcCsvWriter::Open((dir.root() / "csv").string());
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Write(r).ok());
  ASSERT_TRUE((*writer)->Close().ok());
  auto reader = OpenHwpcCsvDirectory((dir.root() / "csv").string());
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ExpectSameReports(ReadAll(reader->get()), {r});
  auto again = HwpcCsvWriter::Open((dir.root() / "other").string());
  r.target = "line\nbreak";
  EXPECT_EQ((*again)->Write(r).code(), Status::Code::kInvalidArgument);
  r.target = "t";
  r.counters[0].group = std::string("co\0re", 5);
  EXPECT_EQ((*again)->Write(r).code(), Status::Code::kInvalidArgument);
}

TEST(HwpcSimulationScenario, ReadsAFileAndNamesWhatIsWrong) {
  Result<simulate::HwpcSimulation> s = simulate::ParseHwpcSimulation(
      R"({"version": 1, "sockets": 1, "period_ms": 500, "events": ["LLC_MISSES"],
          "cgroups": [{"name": "/x", "phases": [{"seconds": 5, "busy_cpus": 2}]}],
          "power_models": [{"idle_watts": 10, "watts_per_event": {"LLC_MISSES": 1e-7}}]})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->sockets, 1);
  EXPECT_EQ(s->period_ms, 500);
  EXPECT_EQ(s->cgroups.at(0).phases.at(0).busy_cpus, 2);
  EXPECT_EQ(s->cgroups.at(0).phases.at(0).ipc, 1);  // a default
  const std::pair<const char*, const char*> bad[] = {
      {"[1]", "scenario: an object"},
      {"{\"version\": 2}", "scenario.version: 2 is not a version"},
      {"{\"socket\": 1}", "unknown member \"socket\""},
      {"{\"sockets\": \"two\"}", "scenario.sockets: an integer"},
      {"{\"sockets\": 0}", "sockets: 1 to 64"},
      {"{\"events\": [\"CYCLES\"]}", "\"CYCLES\" is none of"},
      {"{\"cgroups\": [{\"name\": \"all\", \"phases\": []}]}", "not \"all\""},
      {"{\"cgroups\": [{\"name\": \"/a\", \"sockets\": [5], \"phases\": [{}]}]}",
       "socket 5 of 0..1"},
      {"{\"power_models\": [{\"from_seconds\": 10}]}", "none applies from 0 s"},
      {"{\"frequency\": [{\"mhz\": 0}]}", "mhz 1 to 100000"},
      {"not json", "not JSON"},
  };
  for (const auto& [text, expected] : bad) {
    Status status = simulate::ParseHwpcSimulation(text).status();
    EXPECT_EQ(status.code(), Status::Code::kInvalidArgument) << text;
    EXPECT_NE(status.message().find(expected), std::string::npos)
        << text << ": " << status.message();
  }
}

int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(uint16_t(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  return fd;
}

void Send(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    ASSERT_GT(n, 0);
    done += size_t(n);
  }
}

TEST(HwpcSocket, ReadsDocumentsFromConnectionsAndSkipsMalformedOnes) {
  auto reader = HwpcSocketReader::Listen("127.0.0.1", 0);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ASSERT_GT((*reader)->port(), 0);
  std::vector<HwpcReport> reports = SimulatedReports(3);
  std::string first = FormatHwpcJson(reports[0]), second = FormatHwpcJson(reports[1]);
  // Two connections; a document split across writes; a malformed one between good ones.
  int a = Connect((*reader)->port());
  int b = Connect((*reader)->port());
  Send(a, first.substr(0, 10));
  Send(b, "{\"timestamp\": \"never\"}\n");
  Send(a, first.substr(10) + "\n");
  Send(b, second + "\n");
  ::close(a);
  ::close(b);
  std::vector<HwpcReport> got;
  HwpcReport r;
  while (got.size() < 2) {
    Result<bool> more = (*reader)->Next(&r);
    ASSERT_TRUE(more.ok() && *more);
    got.push_back(r);
  }
  std::sort(got.begin(), got.end(),
            [](const HwpcReport& x, const HwpcReport& y) { return x.target < y.target; });
  std::vector<HwpcReport> expected = {reports[0], reports[1]};
  std::sort(expected.begin(), expected.end(),
            [](const HwpcReport& x, const HwpcReport& y) { return x.target < y.target; });
  ExpectSameReports(got, expected);
  // A stop request (from another thread) ends Next once nothing is left.
  std::thread stopper([&] { (*reader)->RequestStop(); });
  Result<bool> more = (*reader)->Next(&r);
  stopper.join();
  ASSERT_TRUE(more.ok());
  EXPECT_FALSE(*more);
  EXPECT_EQ((*reader)->malformed_documents(), 1);
  EXPECT_NE((*reader)->last_error().find("\"never\""), std::string::npos)
      << (*reader)->last_error();
  EXPECT_EQ((*reader)->connections(), 2);
}

TEST(HwpcSocket, RefusesWhatCannotBeListenedOn) {
  EXPECT_EQ(HwpcSocketReader::Listen("127.0.0.1", 70000).status().code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(HwpcSocketReader::Listen("no such host.invalid", 0).status().code(),
            Status::Code::kInvalidArgument);
  auto taken = HwpcSocketReader::Listen("127.0.0.1", 0);
  ASSERT_TRUE(taken.ok());
  auto again = HwpcSocketReader::Listen("127.0.0.1", (*taken)->port());
  EXPECT_EQ(again.status().code(), Status::Code::kIOError);
  EXPECT_NE(again.status().message().find("cannot listen on 127.0.0.1:"), std::string::npos);
}

}  // namespace
}  // namespace kwatt::meter::hwpc_test
