// The report part over real archives (written by the real ArchiveWriter in a temporary
// directory): the directory it writes, its figures drawn by the function given or not at all,
// its arguments checked before anything is read, and nothing left by a report that failed.
#include "kwatt/report/report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "kwatt/core/time.h"
#include "src/testing/archive_files.h"
#include "src/testing/small_archive.h"
#include "src/testing/temp_dir.h"

namespace kwatt::report {
namespace {

namespace fs = std::filesystem;
using archive::test_files::ReadFile;
using archive::test_files::WriteFile;
using testing::TempDir;

constexpr UnixNanos kT0 = 1744977600LL * kNanosPerSecond;  // 2025-04-18T12:00:00Z

// A run of nova-1 (lyon): `watts` every second for ten minutes, from its wattmeter.
std::string WriteRun(const fs::path& dir, double watts) {
  std::string rows;
  for (int s = 0; s <= 600; ++s) {
    rows += R"({"timestamp":")" + FormatParisTimestamp(kT0 + s * kNanosPerSecond) +
            R"(","device_id":"nova-1","metric_id":"wattmetre_power_watt","value":)" +
            std::to_string(watts) + R"(,"labels":{}})" + "\n";
  }
  testing_archive::WriteArchive(dir.string(), {"nova-1"}, kT0, kT0 + 600 * kNanosPerSecond, rows);
  return dir.string();
}

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    request.runs = {WriteRun(dir.root() / "a1", 100), WriteRun(dir.root() / "a2", 102)};
    request.versus = {WriteRun(dir.root() / "b1", 150), WriteRun(dir.root() / "b2", 151)};
    request.reading.phases = {"work=+120..+480"};
    request.title = "Two sets";
  }
  // Whatever the report's directory holds, with the temporary ones beside it.
  std::vector<std::string> Beside() const {
    std::vector<std::string> out;
    for (const auto& entry : fs::directory_iterator(dir.root())) {
      out.push_back(entry.path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  TempDir dir{"kwatt_report_test"};
  ReportRequest request;
};

TEST_F(ReportTest, WritesThePageTablesProvenanceAndTheFiguresDrawnByTheFunctionGiven) {
  std::vector<std::string> drawn_in;
  auto draw = [&](const std::string& work) {
    drawn_in.push_back(work);
    // The figures are drawn from report.json, which is there already.
    EXPECT_TRUE(fs::exists(fs::path(work) / "report.json"));
    for (const char* name : {"power", "energy", "runs"}) {
      WriteFile(fs::path(work) / "figures" / (std::string(name) + ".svg"),
                "<?xml version=\"1.0\"?>\n<svg id=\"drawn-" + std::string(name) + "\"></svg>\n");
    }
    return Status::OK();
  };
  const fs::path out = dir.root() / "paper";
  Result<ReportWritten> written = WriteReport(request, out.string() + "/", draw);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(written->dir, out.string());
  EXPECT_EQ(written->runs, 4u);
  EXPECT_TRUE(written->complete);
  EXPECT_TRUE(written->figures);
  ASSERT_EQ(drawn_in.size(), 1u);
  EXPECT_NE(drawn_in[0], out.string());  // drawn in the work directory, renamed once whole
  const std::string html = ReadFile(out / "report.html");
  EXPECT_NE(html.find("<svg id=\"drawn-power\">"), std::string::npos);  // inlined, no prologue
  EXPECT_EQ(html.find("<?xml"), std::string::npos);
  EXPECT_EQ(html.find("no-figures"), std::string::npos);
  // The energy table: 100 W over the 600 s window is 60 kJ; the work phase 360 s of it.
  const std::string csv = ReadFile(out / "tables" / "energy.csv");
  EXPECT_NE(csv.find("a," + (dir.root() / "a1").string() + ",window,60000,"), std::string::npos)
      << csv;
  EXPECT_NE(csv.find(",work,36000,"), std::string::npos) << csv;
  for (const char* file :
       {"report.json", "provenance.json", "tables/energy.json", "tables/energy.tex",
        "tables/runs_a.csv", "tables/comparison.csv", "tables/comparison.tex"}) {
    EXPECT_TRUE(fs::exists(out / file)) << file;
  }
  EXPECT_NE(ReadFile(out / "provenance.json").find("kwatt report " + request.runs[0]),
            std::string::npos);
  // The four runs and the report: no work directory left.
  EXPECT_EQ(Beside(), std::vector<std::string>({"a1", "a2", "b1", "b2", "paper"}));
}

TEST_F(ReportTest, WithoutADrawingFunctionThePageSaysWhereTheFiguresComeFrom) {
  const fs::path out = dir.root() / "paper";
  Result<ReportWritten> written = WriteReport(request, out.string(), DrawFigures());
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_FALSE(written->figures);
  EXPECT_TRUE(written->figures_status.ok());  // none asked for: no error
  const std::string html = ReadFile(out / "report.html");
  EXPECT_NE(html.find("id=\"no-figures\""), std::string::npos);
  EXPECT_NE(html.find("python -m kwatt report"), std::string::npos);
}

TEST_F(ReportTest, AFunctionThatCannotDrawLeavesTheReportWithoutFiguresAndSaysWhy) {
  const fs::path out = dir.root() / "paper";
  Result<ReportWritten> written = WriteReport(request, out.string(), [](const std::string&) {
    return Status::IOError("No module named 'matplotlib'");
  });
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_FALSE(written->figures);
  EXPECT_EQ(written->figures_status.message(), "No module named 'matplotlib'");
  const std::string html = ReadFile(out / "report.html");
  EXPECT_NE(html.find("No figures: the Python package did not draw them: No module named"),
            std::string::npos);
}

TEST_F(ReportTest, InterruptedWhileDrawingNothingIsLeftThatLooksFinished) {
  const fs::path out = dir.root() / "paper";
  Result<ReportWritten> written = WriteReport(
      request, out.string(), [](const std::string&) { return Status::Incomplete("interrupted"); });
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.status().code(), Status::Code::kIncomplete);
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(Beside().size(), 4u);  // the runs alone: no work directory left
}

TEST_F(ReportTest, EveryArgumentIsCheckedBeforeAnythingIsReadAndNothingIsLeft) {
  const fs::path out = dir.root() / "never";
  auto refused = [&](ReportRequest r, const std::string& expected) {
    Result<ReportWritten> written = WriteReport(r, out.string(), DrawFigures());
    ASSERT_FALSE(written.ok()) << expected;
    EXPECT_EQ(written.status().code(), Status::Code::kInvalidArgument) << expected;
    EXPECT_NE(written.status().message().find(expected), std::string::npos)
        << written.status().message();
    EXPECT_FALSE(fs::exists(out));
    EXPECT_EQ(Beside().size(), 4u);  // no work directory either
  };
  ReportRequest r = request;
  r.runs.clear();
  refused(r, "give at least one run");
  r = request;
  r.confidence = 2;
  refused(r, "--confidence");
  r = request;
  r.pue = 1.3;
  refused(r, "--carbon-intensity");
  r = request;
  r.reading.phases = {"work=+480..+120"};
  refused(r, "--phase work=+480..+120");
  r = request;
  r.reading.accuracies = {"wattmetre_power_watt=lots"};
  refused(r, "--accuracy");
  r = request;
  r.runs.push_back("nowhere");
  refused(r, "nowhere: neither an archive directory nor a job SITE:ID");
  // An existing report is never overwritten.
  fs::create_directories(dir.root() / "kept");
  WriteFile(dir.root() / "kept" / "report.html", "mine");
  Result<ReportWritten> written = WriteReport(request, (dir.root() / "kept").string(), {});
  ASSERT_FALSE(written.ok());
  EXPECT_NE(written.status().message().find("exists"), std::string::npos);
  EXPECT_EQ(ReadFile(dir.root() / "kept" / "report.html"), "mine");
}

TEST(ReportCommandTest, MakesTheReportAgainWithoutCredentials) {
  ReportRequest request;
  request.runs = {"lyon:100"};
  request.versus = {"lyon:101"};
  request.api = "https://me:secret@api.grid5000.fr/stable";
  request.reading.phases = {"work=+120..+480"};
  request.pue = 1.4;
  request.carbon_intensity = "52";
  const std::vector<std::string> argv = ReportCommand(request, "paper");
  const std::vector<std::string> expected = {
      "kwatt",    "report",          "lyon:100",
      "--versus", "lyon:101",        "-o",
      "paper",    "--api",           "https://api.grid5000.fr/stable",
      "--phase",  "work=+120..+480", "--carbon-intensity",
      "52",       "--pue",           "1.4",
      "--title",  "Energy report"};
  EXPECT_EQ(argv, expected);
}

TEST(IsJobTest, NamesASitesJobAndNothingElse) {
  EXPECT_TRUE(IsJob("lyon:1234"));
  EXPECT_TRUE(IsJob("sophia-2:1"));
  for (const char* text : {"lyon", "lyon:", ":12", "Lyon:12", "lyon:12a", "lyon:-1", "a/b:1"}) {
    EXPECT_FALSE(IsJob(text)) << text;
  }
}

}  // namespace
}  // namespace kwatt::report
