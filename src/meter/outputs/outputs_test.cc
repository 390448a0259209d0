// The outputs' specs and factory, the series they share, and kwatt's CSV and JSON Lines.
#include "kwatt/meter/outputs/outputs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "src/collect/subprocess.h"
#include "src/meter/outputs/output_series.h"
#include "src/meter/outputs/output_spec.h"
#include "src/testing/archive_files.h"
#include "src/testing/meter_reports.h"
#include "src/testing/temp_dir.h"
#include "src/testing/unprivileged.h"

namespace kwatt::meter::outputs_test {
namespace {

using internal::OutputKind;
using internal::OutputSeries;
using internal::ParseOutputSpec;
using internal::SeriesKind;
using internal::SeriesPoint;
using testing::Activity;
using testing::ProcessTarget;
using testing::ReportBuilder;
using testing::TestHeader;

using archive::test_files::ReadFile;

std::string ErrorOf(std::string_view spec, const OutputOptions& options = {}) {
  Result<std::unique_ptr<OutputSink>> output = OpenOutput(spec, options);
  return output.ok() ? "(opened)" : output.status().ToString();
}

// -- Specs ------------------------------------------------------------------------------------

TEST(OutputSpec, ReadsEveryKind) {
  Result<internal::OutputSpec> csv = ParseOutputSpec("csv:/tmp/a,b.csv");
  ASSERT_TRUE(csv.ok()) << csv.status().ToString();
  EXPECT_EQ(csv->kind, OutputKind::kCsv);
  EXPECT_EQ(csv->path, "/tmp/a,b.csv");
  EXPECT_EQ(ParseOutputSpec("jsonl:-")->path, "-");
  EXPECT_EQ(ParseOutputSpec("textfile:/var/lib/prometheus/node-exporter")->kind,
            OutputKind::kTextfile);
  EXPECT_EQ(ParseOutputSpec("archive:run-1")->kind, OutputKind::kArchive);

  Result<internal::OutputSpec> influx =
      ParseOutputSpec("influxdb:http://us%40r:p%3Ass@db.lab:8086/power/");
  ASSERT_TRUE(influx.ok()) << influx.status().ToString();
  EXPECT_EQ(influx->url.username, "us@r");
  EXPECT_EQ(influx->url.password, "p:ss");
  EXPECT_EQ(influx->url.host, "db.lab");
  EXPECT_EQ(influx->url.port, 8086);
  EXPECT_EQ(influx->database, "power");
  EXPECT_EQ(influx->shown, "influxdb:http://db.lab:8086/power/");

  Result<internal::OutputSpec> g5k =
      ParseOutputSpec("kwollect:https://alice:pw@api.grid5000.fr/stable/sites/lyon");
  ASSERT_TRUE(g5k.ok());
  EXPECT_EQ(g5k->url.Shown(), "https://api.grid5000.fr/stable");
  EXPECT_EQ(g5k->site, "lyon");
  EXPECT_EQ(g5k->url.username, "alice");
  Result<internal::OutputSpec> metrics =
      ParseOutputSpec("kwollect:http://[::1]:8080/stable/sites/nancy/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  EXPECT_EQ(metrics->url.Shown(), "http://[::1]:8080/stable");
  EXPECT_EQ(metrics->site, "nancy");
  Result<internal::OutputSpec> base = ParseOutputSpec("kwollect:http://127.0.0.1:9/stable");
  EXPECT_EQ(base->site, "");
  EXPECT_EQ(base->url.Shown(), "http://127.0.0.1:9/stable");
  Result<internal::OutputSpec> bare = ParseOutputSpec("kwollect:");
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE(bare->has_url);
  EXPECT_EQ(ParseOutputSpec("powerapi-csv:out")->kind, OutputKind::kPowerApiCsv);
  EXPECT_EQ(ParseOutputSpec("powerapi-json:-")->kind, OutputKind::kPowerApiJson);
  EXPECT_EQ(ParseOutputSpec("powerapi-formula-json:f.jsonl")->kind,
            OutputKind::kPowerApiFormulaJson);
  EXPECT_NE(ParseOutputSpec("powerapi-csv:-").status().message().find("give a directory"),
            std::string::npos);
}

TEST(OpenOutput, PowerApisFormatsAreOutputsLikeTheOthersMadeWhenTheMeterBegins) {
  kwatt::testing::TempDir dir("kwatt_powerapi_output");
  const std::string csv_dir = (dir.root() / "powerapi").string();
  const std::string json = (dir.root() / "power.jsonl").string();
  Result<std::unique_ptr<OutputSink>> csv = OpenOutput("powerapi-csv:" + csv_dir, {});
  Result<std::unique_ptr<OutputSink>> lines = OpenOutput("powerapi-json:" + json, {});
  ASSERT_TRUE(csv.ok() && lines.ok()) << csv.status().ToString() << lines.status().ToString();
  EXPECT_EQ((*lines)->Name(), "powerapi-json:" + json);
  EXPECT_FALSE(std::filesystem::exists(csv_dir));  // nothing made before Begin
  EXPECT_FALSE(std::filesystem::exists(json));
  MeterHeader header = TestHeader();
  ReportBuilder build(header);
  for (auto* sink : {csv->get(), lines->get()}) ASSERT_TRUE(sink->Begin(header).ok());
  IntervalReport report = build.Next({40, 4}, {{ProcessTarget(7, "worker"), 500'000}});
  for (auto* sink : {csv->get(), lines->get()}) {
    ASSERT_TRUE(sink->Write(report).ok());
    ASSERT_TRUE(sink->Finish().ok());
    EXPECT_EQ(sink->Stats().reports, 1);
  }
  std::ifstream in(json);
  std::string first;
  ASSERT_TRUE(std::getline(in, first));
  nlohmann::json document = nlohmann::json::parse(first);
  EXPECT_EQ(document["sensor"], "nova-1");
  EXPECT_GT(document["power"].get<double>(), 0);
  EXPECT_TRUE(std::filesystem::is_directory(csv_dir));
  // A file whose directory does not exist is refused before anything runs.
  Result<std::unique_ptr<OutputSink>> nowhere =
      OpenOutput("powerapi-json:" + (dir.root() / "no" / "x").string(), {});
  EXPECT_EQ(nowhere.status().code(), Status::Code::kInvalidArgument);
}

TEST(OutputSpec, RefusesWhatIsMalformedSayingWhatToWriteWithoutThePassword) {
  auto error = [](std::string_view spec) { return ParseOutputSpec(spec).status().message(); };
  EXPECT_NE(error("out.csv").find("write csv:out.csv"), std::string::npos) << error("out.csv");
  EXPECT_NE(error("parquet:x").find("unknown kind 'parquet'"), std::string::npos);
  EXPECT_NE(error("prometheus:9100").find("--listen"), std::string::npos);
  EXPECT_NE(error("csv:").find("has no path"), std::string::npos);
  EXPECT_NE(error("archive:-").find("cannot be the standard output"), std::string::npos);
  EXPECT_NE(error("influxdb:db.lab:8086/power").find("is not a URL"), std::string::npos);
  EXPECT_NE(error("influxdb:ftp://db.lab/power").find("scheme 'ftp'"), std::string::npos);
  EXPECT_NE(error("influxdb:http://db.lab:8086").find("one database"), std::string::npos);
  EXPECT_NE(error("influxdb:http://db.lab:8086/a/b").find("one database"), std::string::npos);
  EXPECT_NE(error("influxdb:http://db.lab:99999/power").find("port '99999'"), std::string::npos);
  EXPECT_NE(error("influxdb:http://db.lab:/power").find("port ''"), std::string::npos);
  EXPECT_NE(error("influxdb:http://:8086/power").find("no host"), std::string::npos);
  EXPECT_NE(error("kwollect:https://api/stable/sites").find("without a site"), std::string::npos);
  EXPECT_NE(error("kwollect:https://api/stable?x=1").find("query"), std::string::npos);
  EXPECT_NE(error("").find("empty"), std::string::npos);
  std::string secret = error("influxdb:http://u:hunter2@db.lab:99999/power");
  EXPECT_EQ(secret.find("hunter2"), std::string::npos) << secret;
  EXPECT_NE(secret.find("influxdb:http://db.lab:99999/power"), std::string::npos) << secret;
}

// -- The factory's checks, before anything runs ------------------------------------------------

TEST(OpenOutput, RefusesAPathItCannotWriteBeforeWritingAnything) {
  kwatt::testing::TempDir dir;
  std::string missing = (dir.root() / "nowhere" / "out.csv").string();
  EXPECT_NE(ErrorOf("csv:" + missing).find("does not exist: create it first"), std::string::npos)
      << ErrorOf("csv:" + missing);
  EXPECT_NE(ErrorOf("jsonl:" + dir.root().string()).find("is a directory"), std::string::npos);
  EXPECT_NE(ErrorOf("textfile:" + missing).find("does not exist"), std::string::npos);
  std::filesystem::create_directories(dir.root() / "full");
  std::ofstream(dir.root() / "full" / "x") << "not an archive";
  std::string full = "archive:" + (dir.root() / "full").string();
  EXPECT_NE(ErrorOf(full).find("not empty and holds no archive"), std::string::npos)
      << ErrorOf(full);
  // Nothing was created by the checks.
  EXPECT_FALSE(std::filesystem::exists(dir.root() / "nowhere"));
  EXPECT_EQ(ErrorOf("csv:" + (dir.root() / "ok.csv").string()), "(opened)");
  EXPECT_FALSE(std::filesystem::exists(dir.root() / "ok.csv"));  // created at Begin only
}

TEST(OpenOutput, AReadOnlyDirectoryIsAPermissionToAskFor) {
  kwatt::testing::TempDir dir;
  // Readable and searchable by everyone, writable by its owner (root) only.
  std::filesystem::permissions(
      dir.root(), std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                      std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                      std::filesystem::perms::others_exec);
  std::optional<std::string> error = kwatt::testing::RunAsNobody(
      [&] { return ErrorOf("csv:" + (dir.root() / "out.csv").string()); });
  if (!error) {
    // Not root: this user cannot write a directory made read-only for it either.
    std::filesystem::permissions(
        dir.root(), std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
    error = ErrorOf("csv:" + (dir.root() / "out.csv").string());
    std::filesystem::permissions(dir.root(), std::filesystem::perms::owner_all);
  }
  EXPECT_NE(error->find("PermissionDenied"), std::string::npos) << *error;
}

TEST(OpenOutput, RefusesANodeNameKwollectWouldRefuse) {
  kwatt::testing::TempDir dir;
  OutputOptions options;
  options.node = "nova-1.lyon.grid5000.fr";
  std::string error = ErrorOf("archive:" + (dir.root() / "a").string(), options);
  EXPECT_NE(error.find("give the node's uid"), std::string::npos) << error;
  options.node = "nova-1";
  options.site = "ly/on";
  EXPECT_NE(ErrorOf("archive:" + (dir.root() / "a").string(), options).find("site"),
            std::string::npos);
}

TEST(OpenOutput, AKwollectOutputWithoutASiteSaysHowToGiveOne) {
  OutputOptions options;
  options.node = "nova-1";
  options.site = "";
  options.credentials_file = "/nonexistent/kwatt.yaml";
  char host[256] = "";
  ::gethostname(host, sizeof host);
  if (std::string(host).find(".grid5000.fr") != std::string::npos) {
    GTEST_SKIP() << "this host is a Grid'5000 node: its name gives the site";
  }
  std::string error = ErrorOf("kwollect:http://127.0.0.1:9/stable", options);
  EXPECT_NE(error.find("end the URL with /sites/SITE, or give the site"), std::string::npos)
      << error;
}

// -- The series ---------------------------------------------------------------------------------

// Checks, for every domain, that measured = idle + unattributed + exposed targets + other in the
// interval.
void ExpectConserved(const std::vector<SeriesPoint>& points, size_t domains) {
  for (size_t d = 0; d < domains; ++d) {
    int64_t measured = -1, parts = 0;
    for (const SeriesPoint& p : points) {
      if (size_t(p.domain) != d) continue;
      if (p.kind == SeriesKind::kMeasured) {
        measured = p.microjoules;
      } else {
        parts += p.microjoules;
      }
    }
    EXPECT_EQ(measured, parts) << "domain " << d;
  }
}

TEST(OutputSeries, TheTopTargetsHaveSeriesAndCountersNeverGoDownAsTargetsMoveInAndOut) {
  MeterHeader header = TestHeader();
  ReportBuilder reports(header);
  OutputSeries series(/*max_targets=*/2, /*half_life_seconds=*/0);  // ranked on the interval
  series.Begin(header);
  Target a = ProcessTarget(1, "a"), b = ProcessTarget(2, "b"), c = ProcessTarget(3, "c");
  // CPU shares change so that each of a, b, c is in and out of the top 2.
  std::vector<std::vector<Activity>> intervals = {
      {{a, 500'000}, {b, 300'000}, {c, 100'000}},  // a, b exposed; c in other
      {{a, 100'000}, {b, 300'000}, {c, 500'000}},  // c, b; a in other
      {{a, 500'000}, {b, 100'000}, {c, 300'000}},  // a, c; b in other
      {{a, 500'000}, {b, 300'000}, {c, 100'000}},  // a, b again
  };
  std::map<std::string, int64_t> last;  // series -> its counter
  std::vector<std::set<std::string>> exposed;
  std::vector<SeriesPoint> points;
  for (const auto& activity : intervals) {
    IntervalReport report = reports.Next({40.0, 6.0}, activity);
    series.Add(report, &points);
    ExpectConserved(points, header.domains.size());
    std::set<std::string> keys;
    for (const SeriesPoint& p : points) {
      std::string id = std::to_string(p.domain) + "/" + std::to_string(int(p.kind)) + "/" +
                       (p.target >= 0 ? report.targets[size_t(p.target)].target.key : "");
      if (p.kind == SeriesKind::kTarget && p.domain == 0) {
        keys.insert(report.targets[size_t(p.target)].target.key);
      }
      // A counter goes on from where it was when its series was last shown: it never goes
      // down, and moves only by what the series had while shown.
      EXPECT_EQ(p.total_microjoules, last[id] + p.microjoules) << id;
      last[id] = p.total_microjoules;
    }
    exposed.push_back(keys);
  }
  // Over every series ever shown (hidden ones at their last value), the counters add up.
  for (size_t d = 0; d < header.domains.size(); ++d) {
    int64_t measured = 0, parts = 0;
    for (const auto& [id, total] : last) {
      if (id.rfind(std::to_string(d) + "/", 0) != 0) continue;
      (id == std::to_string(d) + "/0/" ? measured : parts) += total;
    }
    EXPECT_EQ(measured, parts) << "domain " << d;
  }
  EXPECT_EQ(exposed[0], (std::set<std::string>{a.key, b.key}));
  EXPECT_EQ(exposed[1], (std::set<std::string>{b.key, c.key}));
  EXPECT_EQ(exposed[2], (std::set<std::string>{a.key, c.key}));
  EXPECT_EQ(exposed[3], (std::set<std::string>{a.key, b.key}));
  // "other" exists and holds exactly what the unexposed targets had.
  bool other = false;
  for (const SeriesPoint& p : points) other = other || p.kind == SeriesKind::kOther;
  EXPECT_TRUE(other);
}

TEST(OutputSeries, RankingRemembersRecentEnergyWithItsHalfLife) {
  MeterHeader header = TestHeader();
  ReportBuilder reports(header);
  OutputSeries series(1, /*half_life_seconds=*/3600);
  series.Begin(header);
  Target heavy = ProcessTarget(1, "heavy"), blip = ProcessTarget(2, "blip");
  std::vector<SeriesPoint> points;
  auto exposed = [&](const IntervalReport& report) {
    for (const SeriesPoint& p : points) {
      if (p.kind == SeriesKind::kTarget) return report.targets[size_t(p.target)].target.key;
    }
    return std::string();
  };
  for (int i = 0; i < 10; ++i) {
    IntervalReport report = reports.Next({40.0, 6.0}, {{heavy, 800'000}, {blip, 1'000}});
    series.Add(report, &points);
    EXPECT_EQ(exposed(report), heavy.key);
  }
  // One interval where blip is busier does not displace a target busy for the last 10.
  IntervalReport report = reports.Next({40.0, 6.0}, {{heavy, 100'000}, {blip, 300'000}});
  series.Add(report, &points);
  EXPECT_EQ(exposed(report), heavy.key);
}

TEST(OutputSeries, EndedTargetsAreForgottenAndNoBoundExposesEveryone) {
  MeterHeader header = TestHeader();
  ReportBuilder reports(header);
  OutputSeries series(0, 60);
  series.Begin(header);
  std::vector<SeriesPoint> points;
  Target a = ProcessTarget(1, "a");
  series.Add(reports.Next({10.0, 1.0}, {{a, 100'000}}), &points);
  IntervalReport next = reports.Next({10.0, 1.0}, {{ProcessTarget(2, "b"), 100'000}});
  next.ended_targets = {a.key};
  series.Add(next, &points);
  std::string saved = series.Save();
  EXPECT_EQ(saved.find(a.key), std::string::npos) << saved;  // a ended: its counter is gone
  int targets = 0;
  for (const SeriesPoint& p : points) targets += p.kind == SeriesKind::kTarget;
  EXPECT_EQ(targets, 2);  // b in both domains, no "other"
  for (const SeriesPoint& p : points) EXPECT_NE(int(p.kind), int(SeriesKind::kOther));
}

// issue 22, item 9: a target without CPU time in one interval is absent from that report, alive
// still: its counter goes on from where it was (22.3 J -> 4.85 J was a counter restarting at 0).
TEST(OutputSeries, AnIdleIntervalDoesNotRestartATargetsCounter) {
  MeterHeader header = TestHeader();
  ReportBuilder reports(header);
  OutputSeries series(10, 60);
  series.Begin(header);
  std::vector<SeriesPoint> points;
  Target a = ProcessTarget(1, "a"), b = ProcessTarget(2, "b");
  // Domain 0's point of `target` in the last report added (null when it has none).
  auto point_of = [&](const IntervalReport& report, const Target& target) -> const SeriesPoint* {
    for (const SeriesPoint& p : points) {
      if (p.kind == SeriesKind::kTarget && p.domain == 0 &&
          report.targets[size_t(p.target)].target.key == target.key) {
        return &p;
      }
    }
    return nullptr;
  };
  auto counter_of = [&](const IntervalReport& report, const Target& target) -> int64_t {
    const SeriesPoint* p = point_of(report, target);
    return p ? p->total_microjoules : -1;
  };
  IntervalReport first = reports.Next({10.0, 1.0}, {{a, 500'000}, {b, 100'000}});
  series.Add(first, &points);
  const int64_t before = counter_of(first, a);
  ASSERT_GT(before, 0);
  series.Add(reports.Next({10.0, 1.0}, {{b, 100'000}}), &points);  // a idle: not in the report
  IntervalReport third = reports.Next({10.0, 1.0}, {{a, 500'000}, {b, 100'000}});
  series.Add(third, &points);
  ASSERT_NE(point_of(third, a), nullptr);
  const int64_t share = point_of(third, a)->microjoules;
  const int64_t after_third = counter_of(third, a);
  EXPECT_EQ(after_third, before + share);
  // Saved and restored, it still goes on.
  OutputSeries after(10, 60);
  ASSERT_TRUE(after.Restore(series.Save()).ok());
  after.Begin(header);
  after.Add(reports.Next({10.0, 1.0}, {{b, 100'000}}), &points);  // a idle again
  IntervalReport fifth = reports.Next({10.0, 1.0}, {{a, 500'000}});
  after.Add(fifth, &points);
  ASSERT_NE(point_of(fifth, a), nullptr);
  EXPECT_EQ(counter_of(fifth, a), after_third + point_of(fifth, a)->microjoules);
}

TEST(OutputSeries, CountersSurviveARestartThroughTheirSavedText) {
  MeterHeader header = TestHeader();
  ReportBuilder reports(header);
  Target a = ProcessTarget(1, "a");
  std::vector<SeriesPoint> points;
  OutputSeries before(10, 60);
  before.Begin(header);
  for (int i = 0; i < 3; ++i) before.Add(reports.Next({10.0, 2.0}, {{a, 500'000}}), &points);
  std::map<std::pair<int, int>, int64_t> totals;
  for (const SeriesPoint& p : points) totals[{p.domain, int(p.kind)}] = p.total_microjoules;
  std::string saved = before.Save();

  OutputSeries after(10, 60);
  ASSERT_TRUE(after.Restore(saved).ok());
  EXPECT_NE(after.Save().find(a.key), std::string::npos);  // kept as they were until Begin
  after.Begin(header);
  IntervalReport next = reports.Next({10.0, 2.0}, {{a, 500'000}});
  after.Add(next, &points);
  for (const SeriesPoint& p : points) {
    int64_t before_restart = totals[std::make_pair(p.domain, int(p.kind))];
    EXPECT_EQ(p.total_microjoules, before_restart + p.microjoules)
        << "domain " << p.domain << " kind " << int(p.kind);
  }
  // Another machine's domains are not this one's: they start from 0.
  OutputSeries other(10, 60);
  ASSERT_TRUE(other.Restore(saved).ok());
  other.Begin(TestHeader({testing::RaplDomain("package-1", "package", 1)}));
  ReportBuilder one(TestHeader({testing::RaplDomain("package-1", "package", 1)}));
  other.Add(one.Next({10.0}), &points);
  EXPECT_EQ(points[0].total_microjoules, points[0].microjoules);
}

TEST(OutputSeries, ADamagedStateIsRefusedNamingWhatIsWrong) {
  OutputSeries series(10, 60);
  auto error = [&](const std::string& text) { return series.Restore(text).ToString(); };
  EXPECT_EQ(error(""), "OK");  // nothing saved, nothing restored
  EXPECT_NE(error("[]").find("Corruption"), std::string::npos);
  EXPECT_NE(error("{\"format\":\"x\"}").find("\"format\""), std::string::npos);
  EXPECT_NE(
      error(R"({"format":"kwatt-meter-counters","version":9,"domains":[]})").find("version 9"),
      std::string::npos);
  std::string bad_counter =
      R"({"format":"kwatt-meter-counters","version":1,"domains":[{"source":"rapl",)"
      R"("domain":"package-0","measured":-5,"idle":0,"unattributed":0,"other":0,"targets":{}}]})";
  EXPECT_NE(error(bad_counter).find("domains[0].measured is not a non-negative integer"),
            std::string::npos)
      << error(bad_counter);
  std::string twice =
      R"({"format":"kwatt-meter-counters","version":1,"domains":[)"
      R"({"source":"rapl","domain":"d","measured":1,"idle":0,"unattributed":0,"other":0,"targets":{}},)"
      R"({"source":"rapl","domain":"d","measured":1,"idle":0,"unattributed":0,"other":0,"targets":{}}]})";
  EXPECT_NE(error(twice).find("repeats the domain"), std::string::npos);
  std::string target =
      R"({"format":"kwatt-meter-counters","version":1,"domains":[{"source":"rapl","domain":"d",)"
      R"("measured":1,"idle":0,"unattributed":0,"other":0,"targets":{"pid:1:2":"x"}}]})";
  EXPECT_NE(error(target).find("targets[pid:1:2]"), std::string::npos);
  // Every prefix of a valid state is refused, never half taken.
  MeterHeader header = TestHeader();
  ReportBuilder reports(header);
  OutputSeries source(10, 60);
  source.Begin(header);
  std::vector<SeriesPoint> points;
  source.Add(reports.Next({10.0, 2.0}, {{ProcessTarget(1, "a"), 1000}}), &points);
  std::string saved = source.Save();
  for (size_t n = 1; n < saved.size(); ++n) {
    EXPECT_FALSE(series.Restore(saved.substr(0, n)).ok()) << n;
  }
  EXPECT_TRUE(series.Restore(saved).ok());
}

// -- CSV ----------------------------------------------------------------------------------------

std::vector<IntervalReport> SomeReports(const MeterHeader& header) {
  ReportBuilder reports(header);
  Target a = ProcessTarget(11, "python3", TargetKind::kProcessTree);
  Target b = ProcessTarget(12, "my, \"odd\" name");
  Target c = testing::CgroupTarget("/system.slice/nginx.service");
  std::vector<IntervalReport> out;
  out.push_back(reports.Next({35.5, 4.25}, {{a, 600'000}, {b, 200'000}}, -1, {10.0, 1.0}));
  out.push_back(
      reports.Next({42.0, 4.5}, {{a, 700'000}, {c, 100'000}}, -1, {10.0, 1.0}, {kWrapped, 0}));
  out.push_back(reports.Next({0.0, 4.0}, {{a, 500'000}}, -1, {10.0, 1.0}, {kUnreadable, 0}));
  reports.health().dropped_reports = {{"csv:x", 2}};
  out.push_back(reports.Next({30.0, 4.0}, {}, 0, {10.0, 1.0}));
  return out;
}

// Splits an RFC 4180 line into fields.
std::vector<std::string> CsvFields(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

TEST(CsvOutput, OneRowPerIntervalDomainAndShareThatAddUp) {
  kwatt::testing::TempDir dir;
  std::string path = (dir.root() / "meter.csv").string();
  Result<std::unique_ptr<OutputSink>> output = OpenOutput("csv:" + path, {});
  ASSERT_TRUE(output.ok()) << output.status().ToString();
  MeterHeader header = TestHeader();
  std::vector<IntervalReport> reports = SomeReports(header);
  ASSERT_TRUE((*output)->Begin(header).ok());
  for (const IntervalReport& report : reports) ASSERT_TRUE((*output)->Write(report).ok());
  ASSERT_TRUE((*output)->Finish().ok());

  std::istringstream text(ReadFile(path));
  std::string line;
  std::getline(text, line);
  EXPECT_EQ(line,
            "sequence,start,end,seconds,sensor,source,domain,domain_kind,share,target,"
            "target_kind,name,pid,cpu_seconds,microjoules,joules,watts,flags");
  std::vector<std::string> columns = CsvFields(line);
  std::map<std::pair<std::string, std::string>, int64_t> measured, parts;
  int rows = 0;
  std::vector<std::vector<std::string>> all;
  while (std::getline(text, line)) {
    std::vector<std::string> f = CsvFields(line);
    ASSERT_EQ(f.size(), columns.size()) << line;
    all.push_back(f);
    ++rows;
    auto key = std::make_pair(f[0], f[6]);
    int64_t microjoules = std::stoll(f[14]);
    if (f[8] == "measured") {
      measured[key] = microjoules;
    } else {
      parts[key] += microjoules;
    }
    EXPECT_EQ(std::stod(f[15]), double(microjoules) / 1e6) << line;
  }
  EXPECT_EQ(measured, parts);  // measured = idle + unattributed + the targets, every interval
  // 2 domains x (3 + 2 targets), then 2 x (3 + 2), 2 x (3 + 1), 2 x 3.
  EXPECT_EQ(rows, 10 + 10 + 8 + 6);
  EXPECT_EQ(all[0][1], "2025-04-18T18:13:20.000000000Z");
  EXPECT_EQ(all[0][2], "2025-04-18T18:13:21.000000000Z");
  EXPECT_EQ(all[0][16], "35.5");  // watts of package-0 in the first interval
  // The target with a comma and quotes in its name reads back whole.
  bool odd = false;
  for (const auto& f : all) odd = odd || f[11] == "my, \"odd\" name";
  EXPECT_TRUE(odd);
  // The wrapped interval says so; the unreadable one is a gap: no watts.
  for (const auto& f : all) {
    if (f[0] == "1" && f[6] == "package-0") {
      EXPECT_EQ(f[17], "wrapped");
    }
    if (f[0] == "2" && f[6] == "package-0") {
      EXPECT_EQ(f[17], "unreadable");
      EXPECT_EQ(f[16], "");
    }
    if (f[8] == "target" && f[10] == "tree") {
      EXPECT_EQ(f[12], "11");
    }
  }
}

// The Python the project's virtualenv has (KWATT_PYTHON, else the source tree's .venv).
std::string ProjectPython() {
  if (const char* python = std::getenv("KWATT_PYTHON"); python && *python) return python;
  return std::string(KWATT_SOURCE_DIR) + "/.venv/bin/python";
}

TEST(CsvOutput, PandasReadsItInOneCall) {
  std::string python = ProjectPython();
  ASSERT_EQ(::access(python.c_str(), X_OK), 0)
      << python << " is missing: run make deps (or set KWATT_PYTHON to a Python with pandas)";
  kwatt::testing::TempDir dir;
  std::string path = (dir.root() / "meter.csv").string();
  Result<std::unique_ptr<OutputSink>> output = OpenOutput("csv:" + path, {});
  ASSERT_TRUE(output.ok());
  MeterHeader header = TestHeader();
  ASSERT_TRUE((*output)->Begin(header).ok());
  for (const IntervalReport& report : SomeReports(header)) {
    ASSERT_TRUE((*output)->Write(report).ok());
  }
  ASSERT_TRUE((*output)->Finish().ok());
  // One call; then the identity with pandas' own sums, and times as datetimes.
  std::string script =
      "import sys, pandas as pd\n"
      "df = pd.read_csv(sys.argv[1], parse_dates=['start', 'end'])\n"
      "m = df[df.share == 'measured'].set_index(['sequence', 'domain']).microjoules\n"
      "p = df[df.share != 'measured'].groupby(['sequence', 'domain']).microjoules.sum()\n"
      "assert (m.sort_index() == p.sort_index()).all(), (m, p)\n"
      "assert str(df.start.dtype).startswith('datetime64[ns'), df.start.dtype\n"
      "assert df.microjoules.dtype == 'int64' and df.watts.dtype == 'float64'\n"
      "assert df.watts.isna().sum() > 0\n"
      "print(len(df), df.name.dropna().unique().tolist())\n";
  Result<collect::RunResult> run =
      collect::RunProgram({python, "-c", script, path}, collect::RunOptions{});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_TRUE(run->exit.ok()) << run->err;
  EXPECT_NE(run->out.find("34 "), std::string::npos) << run->out;
  EXPECT_NE(run->out.find("my, \"odd\" name"), std::string::npos) << run->out;
}

// -- JSON Lines ---------------------------------------------------------------------------------

TEST(JsonlOutput, AHeaderLineOneLinePerIntervalAndAnEndLine) {
  kwatt::testing::TempDir dir;
  std::string path = (dir.root() / "meter.jsonl").string();
  Result<std::unique_ptr<OutputSink>> output = OpenOutput("jsonl:" + path, {});
  ASSERT_TRUE(output.ok());
  MeterHeader header = TestHeader();
  std::vector<IntervalReport> reports = SomeReports(header);
  reports[0].models.push_back({0,
                               0,
                               2400,
                               2350,
                               "socket0-2400MHz-#1",
                               120,
                               0.8,
                               12.5,
                               {{"CPU_CLK_THREAD_UNHALTED:REF_P", 1.5e-8}}});
  ASSERT_TRUE((*output)->Begin(header).ok());
  for (const IntervalReport& report : reports) ASSERT_TRUE((*output)->Write(report).ok());
  ASSERT_TRUE((*output)->Finish().ok());

  std::istringstream text(ReadFile(path));
  std::string line;
  std::vector<nlohmann::json> lines;
  while (std::getline(text, line)) {
    nlohmann::json doc = nlohmann::json::parse(line, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << line;
    lines.push_back(doc);
  }
  ASSERT_EQ(lines.size(), reports.size() + 2);
  const nlohmann::json& head = lines.front();
  EXPECT_EQ(head["format"], "kwatt-meter");
  EXPECT_EQ(head["version"], kJsonlFormatVersion);
  EXPECT_EQ(head["type"], "header");
  EXPECT_EQ(head["domains"][1]["domain"], "dram-0");
  EXPECT_EQ(head["start_ns"], testing::kTestStart);
  for (size_t i = 0; i < reports.size(); ++i) {
    const nlohmann::json& interval = lines[i + 1];
    EXPECT_EQ(interval["type"], "interval");
    EXPECT_EQ(interval["sequence"], reports[i].sequence);
    EXPECT_EQ(interval["end_ns"], reports[i].end);
    for (const auto& domain : interval["domains"]) {
      int64_t sum = domain["idle"]["microjoules"].get<int64_t>() +
                    domain["unattributed"]["microjoules"].get<int64_t>();
      ASSERT_EQ(domain["targets"].size(), interval["targets"].size());
      for (const auto& share : domain["targets"]) sum += share["microjoules"].get<int64_t>();
      EXPECT_EQ(domain["measured"]["microjoules"].get<int64_t>(), sum);
    }
  }
  EXPECT_EQ(lines[1]["domains"][0]["measured"]["watts"], 35.5);
  EXPECT_EQ(lines[1]["targets"][0]["kind"], "tree");
  EXPECT_EQ(lines[1]["models"][0]["coefficients"]["CPU_CLK_THREAD_UNHALTED:REF_P"], 1.5e-8);
  EXPECT_EQ(lines[2]["domains"][0]["flags"], nlohmann::json::array({"wrapped"}));
  EXPECT_TRUE(lines[3]["domains"][0]["measured"]["watts"].is_null());  // a gap
  EXPECT_EQ(lines[4]["health"]["dropped_reports"]["csv:x"], 2);
  EXPECT_EQ(lines.back()["type"], "end");
  EXPECT_EQ(lines.back()["reports"], 4);
}

TEST(JsonlOutput, StandardOutputIsWrittenThrough) {
  Result<std::unique_ptr<OutputSink>> output = OpenOutput("jsonl:-", {});
  ASSERT_TRUE(output.ok());
  EXPECT_EQ((*output)->Name(), "jsonl:-");
  ::testing::internal::CaptureStdout();
  MeterHeader header = TestHeader();
  ASSERT_TRUE((*output)->Begin(header).ok());
  ASSERT_TRUE((*output)->Write(ReportBuilder(header).Next({10.0, 1.0})).ok());
  ASSERT_TRUE((*output)->Finish().ok());
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3) << out;
}

}  // namespace
}  // namespace kwatt::meter::outputs_test
