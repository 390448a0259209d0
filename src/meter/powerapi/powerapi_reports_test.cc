#include "kwatt/meter/powerapi/powerapi_reports.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "src/testing/temp_dir.h"

namespace kwatt::meter::powerapi_reports_test {
namespace {

std::string Slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

MeterHeader Header() {
  MeterHeader h;
  h.sensor = "node-1";
  h.formula = "smartwatts";
  h.domains = {{"rapl", "package-0", "package", 0, ""}, {"rapl", "dram-0", "dram", 0, ""}};
  return h;
}

// One second, 2 targets: /kwatt/web (a cgroup path: subdirectories) and a process.
IntervalReport Report(int64_t end_ms) {
  IntervalReport r;
  r.start = (end_ms - 1000) * 1000000;
  r.end = end_ms * 1000000;
  ReportTarget web, process;
  web.target = {TargetKind::kCgroup, "cgroup:/kwatt/web", "/kwatt/web", 0};
  process.target = {TargetKind::kProcess, "pid:42:777", "python3", 42};
  r.targets = {web, process};
  DomainEnergy package;
  package.measured_microjoules = 50000000;  // 50 W
  package.idle_microjoules = 20000000;
  package.target_microjoules = {22500000, 7500000};
  DomainEnergy dram;
  dram.flags = kUnreadable;  // a gap: left out
  dram.target_microjoules = {0, 0};
  r.domains = {package, dram};
  ModelInfo m;
  m.domain = 0;
  m.socket = 0;
  m.layer_frequency_mhz = 2100;
  m.package_frequency_mhz = 2134;
  m.id = "socket0-2100MHz-#1";
  m.samples = 60;
  m.error_watts = 0.5;
  m.intercept_watts = 20;
  m.coefficients = {{"INSTRUCTIONS_RETIRED", 1e-9}, {"LLC_MISSES", 2.5e-7}};
  r.models = {m};
  return r;
}

TEST(PowerApiCsv, WritesPowerApisLayoutAndColumns) {
  kwatt::testing::TempDir dir;
  auto sink = OpenPowerApiCsvSink((dir.root() / "out").string());
  ASSERT_TRUE(sink.ok());
  ASSERT_TRUE((*sink)->Begin(Header()).ok());
  ASSERT_TRUE((*sink)->Write(Report(1700000001000)).ok());
  ASSERT_TRUE((*sink)->Write(Report(1700000002000)).ok());
  ASSERT_TRUE((*sink)->Finish().ok());
  const std::string header = "timestamp,sensor,target,power,socket,formula,ratio,scope\n";
  EXPECT_EQ(Slurp(dir.root() / "out/node-1-rapl/PowerReport.csv"),
            header + "1700000001000,node-1,rapl,50,0,RAPL_ENERGY_PKG,1,cpu\n" +
                "1700000002000,node-1,rapl,50,0,RAPL_ENERGY_PKG,1,cpu\n");
  // PowerAPI's directory for a cgroup path: SENSOR-/kwatt/web.
  EXPECT_EQ(Slurp(dir.root() / "out/node-1-/kwatt/web/PowerReport.csv"),
            header + "1700000001000,node-1,/kwatt/web,22.5,0,socket0-2100MHz-#1,0.75,cpu\n" +
                "1700000002000,node-1,/kwatt/web,22.5,0,socket0-2100MHz-#1,0.75,cpu\n");
  EXPECT_EQ(Slurp(dir.root() / "out/node-1-pid:42:777/PowerReport.csv"),
            header + "1700000001000,node-1,pid:42:777,7.5,0,socket0-2100MHz-#1,0.25,cpu\n" +
                "1700000002000,node-1,pid:42:777,7.5,0,socket0-2100MHz-#1,0.25,cpu\n");
  std::string formula = Slurp(dir.root() / "out/node-1-socket0-2100MHz-#1/FormulaReport.csv");
  EXPECT_EQ(formula.substr(0, formula.find('\n')), "timestamp,sensor,target,metadata");
  std::string first = formula.substr(formula.find('\n') + 1);
  first = first.substr(0, first.find('\n'));
  EXPECT_EQ(first,
            "1700000001000,node-1,socket0-2100MHz-#1,\"{\"\"scope\"\":\"\"cpu\"\",\"\"socket\"\":0,"
            "\"\"layer_frequency\"\":2100,\"\"pkg_frequency\"\":2134,\"\"samples\"\":60,"
            "\"\"id\"\":\"\"socket0-2100MHz-#1\"\",\"\"error\"\":0.5,\"\"intercept\"\":20,"
            "\"\"coef\"\":{\"\"INSTRUCTIONS_RETIRED\"\":1e-09,\"\"LLC_MISSES\"\":2.5e-07}}\"");

  // A second run appends to files of the same header, as PowerAPI does...
  auto again = OpenPowerApiCsvSink((dir.root() / "out").string());
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE((*again)->Begin(Header()).ok());
  ASSERT_TRUE((*again)->Write(Report(1700000003000)).ok());
  ASSERT_TRUE((*again)->Finish().ok());
  std::string rapl = Slurp(dir.root() / "out/node-1-rapl/PowerReport.csv");
  EXPECT_EQ(std::count(rapl.begin(), rapl.end(), '\n'), 4);
  // ...and refuses one of another header.
  std::ofstream(dir.root() / "out/node-1-rapl/PowerReport.csv")
      << "timestamp,sensor,target,power\n";
  auto other = OpenPowerApiCsvSink((dir.root() / "out").string());
  ASSERT_TRUE((*other)->Begin(Header()).ok());
  Status refused = (*other)->Write(Report(1700000004000));
  EXPECT_EQ(refused.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(refused.message().find("exists with another header"), std::string::npos);
  (void)(*other)->Finish();
}

TEST(PowerApiCsv, TargetsCannotWriteOutsideTheDirectory) {
  kwatt::testing::TempDir dir;
  auto sink = OpenPowerApiCsvSink((dir.root() / "out").string(), {false, 2});
  ASSERT_TRUE(sink.ok());
  MeterHeader h = Header();
  h.sensor = "..";
  ASSERT_TRUE((*sink)->Begin(h).ok());
  IntervalReport r = Report(1700000001000);
  r.targets[0].target.name = "/../../../escape";
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*sink)->Write(r).ok());  // 2 open files at most
  ASSERT_TRUE((*sink)->Finish().ok());
  EXPECT_TRUE(std::filesystem::exists(dir.root() / "out/..-/_/_/_/escape/PowerReport.csv"));
  EXPECT_FALSE(std::filesystem::exists(dir.root() / "escape"));
  std::string rapl = Slurp(dir.root() / "out/..-rapl/PowerReport.csv");
  EXPECT_EQ(std::count(rapl.begin(), rapl.end(), '\n'), 4);  // reopened, one header
}

TEST(PowerApiJson, PowerAndFormulaDocuments) {
  kwatt::testing::TempDir dir;
  const std::string power = (dir.root() / "power.jsonl").string();
  const std::string formula = (dir.root() / "formula.jsonl").string();
  auto p = OpenPowerApiJsonSink(power, PowerApiReportType::kPower);
  auto f = OpenPowerApiJsonSink(formula, PowerApiReportType::kFormula);
  ASSERT_TRUE(p.ok() && f.ok());
  for (ReportSink* sink : {p->get(), f->get()}) {
    ASSERT_TRUE(sink->Begin(Header()).ok());
    ASSERT_TRUE(sink->Write(Report(1700000001000)).ok());
    ASSERT_TRUE(sink->Finish().ok());
  }
  std::istringstream lines(Slurp(power));
  std::vector<nlohmann::json> docs;
  for (std::string line; std::getline(lines, line);) docs.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0].dump(),
            R"({"metadata":{"formula":"RAPL_ENERGY_PKG","ratio":1,"scope":"cpu","socket":0},)"
            R"("power":50,"sensor":"node-1","target":"rapl","timestamp":1700000001000})");
  EXPECT_EQ(docs[1]["target"], "/kwatt/web");
  EXPECT_EQ(docs[1]["power"], 22.5);
  EXPECT_EQ(docs[1]["metadata"]["ratio"], 0.75);
  nlohmann::json model = nlohmann::json::parse(Slurp(formula));
  EXPECT_EQ(model["target"], "socket0-2100MHz-#1");
  EXPECT_EQ(model["metadata"]["pkg_frequency"], 2134);
  EXPECT_EQ(model["metadata"]["coef"]["LLC_MISSES"], 2.5e-7);
  EXPECT_FALSE(model.contains("power"));
}

}  // namespace
}  // namespace kwatt::meter::powerapi_reports_test
