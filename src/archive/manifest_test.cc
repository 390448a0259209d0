// The one parser of manifests and journals, on texts: every field checked, the parts checked
// against each other, nothing thrown.
#include "kwatt/archive/manifest.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace kwatt::archive::manifest_test {
namespace {

using Json = nlohmann::ordered_json;

const char kNova1[] = "nova-1.lyon.grid5000.fr";
const char kNova2[] = "nova-2.lyon.grid5000.fr";

Json FileEntry(const std::string& fqdn, int rows, const std::string& first,
               const std::string& last) {
  return {{"path", "data/" + fqdn + ".jsonl.zst"},
          {"node", fqdn},
          {"rows", rows},
          {"bytes", 100},
          {"frames", 1},
          {"xxh64", "0123456789abcdef"},
          {"first", first},
          {"last", last},
          {"metrics", {{"wattmetre_power_watt", rows}}}};
}

Json NodeEntry(const std::string& fqdn) {
  std::string uid = fqdn.substr(0, fqdn.find('.'));
  return {{"node", fqdn},
          {"uid", uid},
          {"site", "lyon"},
          {"cluster", "nova"},
          {"file", "data/" + fqdn + ".jsonl.zst"}};
}

// A complete manifest of two nodes, as the writer writes it.
Json Complete() {
  Json m;
  m["format"] = "kwatt-archive";
  m["format_version"] = 1;
  m["kwatt_version"] = "0.1.0";
  m["state"] = "complete";
  m["created_at"] = "2026-11-29T21:00:00Z";
  m["completed_at"] = "2026-11-29T21:00:07Z";
  m["query"] = {{"api", "https://api.grid5000.fr/stable"},
                {"nodes", {kNova1, kNova2}},
                {"job", nullptr},
                {"start", "1744977600.000000"},
                {"end", "1744979400.000000"},
                {"metrics", Json::array()},
                {"summary", false}};
  m["window"] = {{"start", "2025-04-18T12:00:00Z"},
                 {"end", "2025-04-18T12:30:00Z"},
                 {"start_ns", 1744977600000000000LL},
                 {"end_ns", 1744979400000000000LL}};
  m["sites"] = {"lyon"};
  m["job_types"] = Json::array();
  m["nodes"] = {NodeEntry(kNova1), NodeEntry(kNova2)};
  m["catalogue"] = {{"lyon/nova", Json::array({{{"name", "wattmetre_power_watt"}}})}};
  m["files"] = {FileEntry(kNova1, 3, "2025-04-18T14:00:00+02:00", "2025-04-18T14:29:59+02:00"),
                FileEntry(kNova2, 0, "", "")};
  m["files"][1]["first"] = nullptr;
  m["files"][1]["last"] = nullptr;
  m["files"][1]["metrics"] = Json::object();
  m["fetch"] = {{"requests", 8}, {"retries", 1}, {"splits", 0}, {"seconds", 1.25}};
  return m;
}

Result<Manifest> Parse(const std::string& text, const std::string* journal = nullptr) {
  return ParseManifest("/archive", text, journal);
}

// Corruption, naming `what`.
void ExpectCorruption(const std::string& text, const std::string& what) {
  Result<Manifest> m = Parse(text);
  ASSERT_FALSE(m.ok()) << "accepted: " << text.substr(0, 200);
  EXPECT_EQ(m.status().code(), Status::Code::kCorruption) << m.status().ToString();
  EXPECT_NE(m.status().message().find(what), std::string::npos)
      << "'" << what << "' not in: " << m.status().ToString();
  EXPECT_NE(m.status().message().find("manifest.json"), std::string::npos);
}

TEST(ManifestTest, ACompleteManifestParses) {
  Result<Manifest> m = Parse(Complete().dump(2));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->complete);
  EXPECT_EQ(m->window_start, 1744977600000000000LL);
  EXPECT_EQ(m->window_end, 1744979400000000000LL);
  ASSERT_EQ(m->files.size(), 2u);
  EXPECT_EQ(m->files[0].site, "lyon");
  EXPECT_EQ(m->rows(), 3);
}

// Defect 16: nlohmann throws out_of_range (not parse_error) on such a number.
TEST(ManifestTest, AHugeNumberIsCorruptionNotAnException) {
  std::string text = Complete().dump(2);
  text.replace(text.find("\"requests\": 8"), 13, "\"requests\": 1e400");
  ExpectCorruption(text, "is not valid JSON");
  text = Complete().dump(2);
  text.replace(text.find("\"catalogue\": {"), 14, "\"catalogue\": {\"x\": -1e999, ");
  ExpectCorruption(text, "is not valid JSON");
}

// The catalogues are parsed where the manifest is read: a damaged one is named there (it used to be
// skipped by energy and called OK by verify).
TEST(ManifestTest, ADamagedCatalogueIsCorruptionNamingTheCluster) {
  Json m = Complete();
  m["catalogue"]["lyon/nova"][0]["description"] = 7;
  ExpectCorruption(m.dump(),
                   "catalogue lyon/nova: catalogue entry \"wattmetre_power_watt\": field "
                   "\"description\" is a number");
  m = Complete();
  m["catalogue"]["lyon/nova"][0]["period"] = 1e30;
  ExpectCorruption(m.dump(), "field \"period\" = 1e+30");
}

// Each cluster's hardware, as the reference named it at backup time, comes back with its catalogue
// (what a report's provenance names); an archive written before the field has none.
TEST(ManifestTest, TheHardwareOfEachClusterIsKeptWithItsCatalogue) {
  Json m = Complete();
  Result<Manifest> before = Parse(m.dump());
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_EQ(before->catalogue[0].catalogue.model(), "");
  m["hardware"] = {{"lyon/nova", {{"model", "Dell PowerEdge R430"}}}};
  Result<Manifest> parsed = Parse(m.dump());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->catalogue[0].catalogue.model(), "Dell PowerEdge R430");
  EXPECT_EQ(parsed->Resolved().catalogues[0].catalogue.model(), "Dell PowerEdge R430");
  EXPECT_EQ(parsed->catalogue[0].catalogue.json(), before->catalogue[0].catalogue.json());

  m["hardware"] = {{"lyon/taurus", {{"model", "Dell PowerEdge R720"}}}};
  ExpectCorruption(m.dump(), "hardware lyon/taurus names a cluster that \"catalogue\" lacks");
  m["hardware"] = {{"lyon/nova", {{"model", 430}}}};
  ExpectCorruption(m.dump(), "hardware lyon/nova.model should be a string");
  m["hardware"] = {{"lyon/nova", "Dell"}};
  ExpectCorruption(m.dump(), "hardware lyon/nova should be an object");
  m["hardware"] = Json::array();
  ExpectCorruption(m.dump(), "\"hardware\" should be an object");
}

TEST(ManifestTest, CataloguesAreParsedAndTheResolvedQueryRebuilt) {
  Result<Manifest> m = Parse(Complete().dump());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  RowsReport resolved = m->Resolved();
  ASSERT_EQ(resolved.catalogues.size(), 1u);
  EXPECT_EQ(resolved.catalogues[0].cluster, "lyon/nova");
  EXPECT_EQ(resolved.catalogues[0].catalogue.entries()[0].name, "wattmetre_power_watt");
  EXPECT_EQ(resolved.nodes.size(), m->nodes.size());
  EXPECT_EQ(resolved.start, m->window_start);
  EXPECT_EQ(resolved.end, m->window_end);
  EXPECT_EQ(resolved.job_types, m->job_types);
}

TEST(ManifestTest, TheJobOfAJobBackupIsReadAndChecked) {
  Json m = Complete();
  EXPECT_FALSE(Parse(m.dump())->has_job);  // a backup of nodes and a window, or an older kwatt
  m["query"]["job"] = {{"site", "lyon"}, {"id", 1001}};
  EXPECT_FALSE(Parse(m.dump())->has_job);
  m["job"] = {{"user", "alice"}, {"started_at", "2025-04-18T12:00:00Z"}, {"stopped_at", nullptr}};
  Result<Manifest> running = Parse(m.dump());
  ASSERT_TRUE(running.ok()) << running.status().ToString();
  EXPECT_TRUE(running->has_job);
  EXPECT_EQ(running->job_user, "alice");
  EXPECT_EQ(running->job_started, 1744977600 * kNanosPerSecond);
  EXPECT_FALSE(running->job_stopped.has_value());
  m["job"]["stopped_at"] = "2025-04-18T12:30:00Z";
  Result<Manifest> ended = Parse(m.dump());
  ASSERT_TRUE(ended.ok());
  EXPECT_EQ(ended->job_stopped, 1744979400 * kNanosPerSecond);
  EXPECT_EQ(ended->Resolved().job_user, "alice");
  EXPECT_EQ(ended->Resolved().job_stopped, ended->job_stopped);
  for (Json bad : {Json("alice"), Json{{"user", "alice"}},
                   Json{{"user", 7}, {"started_at", "2025-04-18T12:00:00Z"}},
                   Json{{"started_at", "yesterday"}}}) {
    m["job"] = bad;
    Result<Manifest> refused = Parse(m.dump());
    EXPECT_EQ(refused.status().code(), Status::Code::kCorruption) << bad.dump();
  }
  m["job"] = {{"started_at", "2025-04-18T12:00:00Z"}};
  m["query"]["job"] = nullptr;
  EXPECT_NE(Parse(m.dump()).status().message().find("query.job is not"), std::string::npos);
}

// Defect 18: an empty timestamp is not a window.
TEST(ManifestTest, AnEmptyWindowBoundIsCorruption) {
  for (const char* key : {"start", "end"}) {
    Json m = Complete();
    m["window"][key] = "";
    ExpectCorruption(m.dump(), std::string("window.") + key);
    m["window"][key] = 17;
    ExpectCorruption(m.dump(), std::string("window.") + key);
  }
}

// Defect 6: the parts of a manifest must agree.
TEST(ManifestTest, PartsThatDisagreeAreCorruption) {
  struct Case {
    const char* what;
    void (*damage)(Json&);
  };
  const Case cases[] = {
      {"has no entry in \"files\"", [](Json& m) { m["files"].erase(0); }},
      {"which \"nodes\" does not list", [](Json& m) { m["nodes"].erase(1); }},
      {"is after window.end",
       [](Json& m) {
         m["window"]["start"] = "2025-04-18T13:00:00Z";
         m["window"].erase("start_ns");
       }},
      {"window.start_ns", [](Json& m) { m["window"]["start_ns"] = 1744977600000000001LL; }},
      {"window.end_ns", [](Json& m) { m["window"]["end_ns"] = "soon"; }},
      {"outside the window",
       [](Json& m) { m["files"][0]["last"] = "2025-04-18T14:30:00.000000001+02:00"; }},
      {"outside the window", [](Json& m) { m["files"][0]["first"] = "2025-04-18T13:59:59+02:00"; }},
      {"after its last",
       [](Json& m) {
         m["files"][0]["first"] = "2025-04-18T14:10:00+02:00";
         m["files"][0]["last"] = "2025-04-18T14:05:00+02:00";
       }},
      {"counts 3 rows in its metrics but 4", [](Json& m) { m["files"][0]["rows"] = 4; }},
      {"lacks the timestamp", [](Json& m) { m["files"][0]["first"] = nullptr; }},
      {"has no rows, but", [](Json& m) { m["files"][1]["first"] = "2025-04-18T14:00:00+02:00"; }},
      {"whose file is", [](Json& m) { m["nodes"][0]["file"] = "data/elsewhere.jsonl.zst"; }},
      {"repeats a node", [](Json& m) { m["nodes"][1] = m["nodes"][0]; }},
      {"has no node and is not a file of other devices",
       [](Json& m) { m["files"][1]["node"] = nullptr; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Json m = Complete();
    c.damage(m);
    ExpectCorruption(m.dump(2), c.what);
  }
}

TEST(ManifestTest, SummaryRowsMayStartAtTheBucketBeforeTheWindow) {
  Json m = Complete();
  m["query"]["summary"] = true;
  m["window"] = {{"start", "2025-04-18T12:02:00Z"}, {"end", "2025-04-18T12:30:00Z"}};
  m["files"][0]["first"] = "2025-04-18T14:00:00+02:00";  // the bucket of 12:02Z
  Result<Manifest> parsed = Parse(m.dump());
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  m["files"][0]["first"] = "2025-04-18T13:55:00+02:00";
  ExpectCorruption(m.dump(), "outside the window");
}

TEST(ManifestTest, AnIncompleteManifestReadsTheJournal) {
  Json m = Complete();
  m["state"] = "incomplete";
  m.erase("files");
  m.erase("fetch");
  std::string journal =
      R"({"file":"data/nova-1.lyon.grid5000.fr.jsonl.zst","bytes":10,"rows":2,"frames":1,)"
      R"("next":1744977660000000000,"first":"2025-04-18T14:00:00+02:00",)"
      R"("last":"2025-04-18T14:00:30+02:00","metrics":{"wattmetre_power_watt":2}})"
      "\n"
      R"({"file":"data/../../etc/x.jsonl.zst","bytes":10,"rows":2,"frames":1,"next":0})"
      "\n"
      R"({"file":"data/nova-2.lyon.grid5000.fr.jsonl.zst","bytes":"10"})"
      "\n"
      R"({"file":"data/nova-2.lyon.grid5000.fr.jsonl.zst","bytes":5,"rows":1,"frames":1,)";
  Result<Manifest> parsed = Parse(m.dump(), &journal);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_FALSE(parsed->complete);
  ASSERT_EQ(parsed->files.size(), 2u);  // the nodes' files only
  EXPECT_EQ(parsed->files[0].bytes, 10);
  EXPECT_EQ(parsed->files[0].rows, 2);
  EXPECT_EQ(parsed->files[1].bytes, 0);
}

// Defect 3: journal records are validated like the manifest's entries.
TEST(ManifestTest, JournalRecordsAreValidated) {
  std::string good = R"({"file":"data/a.jsonl.zst","bytes":10,"rows":2,"frames":1,"next":60,)"
                     R"("first":"2025-04-18T14:00:00+02:00","last":"2025-04-18T14:00:30+02:00",)"
                     R"("metrics":{"m":2}})";
  std::string later = R"({"file":"data/a.jsonl.zst","bytes":20,"rows":4,"frames":2,"next":120})";
  const char* bad[] = {
      R"({"file":"data/../x.jsonl.zst","bytes":1,"rows":1,"frames":1,"next":0})",
      R"({"file":"../x.jsonl.zst","bytes":1,"rows":1,"frames":1,"next":0})",
      R"({"file":"data/x.txt","bytes":1,"rows":1,"frames":1,"next":0})",
      R"({"file":"data/a.jsonl.zst","bytes":"1","rows":1,"frames":1,"next":0})",
      R"({"file":"data/a.jsonl.zst","bytes":1,"rows":-1,"frames":1,"next":0})",
      R"({"file":"data/a.jsonl.zst","bytes":1,"rows":1,"frames":1})",
      R"({"file":"data/a.jsonl.zst","bytes":1,"rows":1,"frames":1,"next":1.5})",
      R"({"file":"data/a.jsonl.zst","bytes":1,"rows":1,"frames":1,"next":0,"first":3})",
      R"({"file":"data/a.jsonl.zst","bytes":1,"rows":1,"frames":1,"next":0,"metrics":[]})",
      R"({"file":"data/a.jsonl.zst","bytes":1e400,"rows":1,"frames":1,"next":0})",
      R"({"bytes":1,"rows":1,"frames":1,"next":0})",
      R"("data/a.jsonl.zst")",
      R"(not json)",
  };
  for (const char* line : bad) {
    SCOPED_TRACE(line);
    int skipped = 0;
    std::vector<JournalRecord> records =
        ParseJournal(good + "\n" + line + "\n" + R"({"file":"data/a.jsonl.zst")", &skipped);
    EXPECT_EQ(skipped, 1);
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0].bytes, 10);
    EXPECT_EQ(records[0].next, 60);
    EXPECT_EQ(records[0].first, "2025-04-18T14:00:00+02:00");
  }
  std::vector<JournalRecord> records = ParseJournal(good + "\n" + later + "\n");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].bytes, 20);
  EXPECT_EQ(records[0].next, 120);
}

// Damaged texts, many of them: an error or a manifest, never an exception (nor, under the
// sanitizers, undefined behaviour). A small, deterministic cousin of a fuzzer.
TEST(ManifestTest, DamagedTextsNeverThrow) {
  Json incomplete = Complete();
  incomplete["state"] = "incomplete";
  const std::string journal =
      R"({"file":"data/nova-1.lyon.grid5000.fr.jsonl.zst","bytes":10,"rows":2,"frames":1,)"
      R"("next":1744977660000000000,"first":"2025-04-18T14:00:00+02:00",)"
      R"("last":"2025-04-18T14:00:30+02:00","metrics":{"wattmetre_power_watt":2}})"
      "\n";
  const std::string replacements[] = {"",      "1e400",
                                      "-1",    "\"\"",
                                      "null",  "[]",
                                      "{}",    "18446744073709551616",
                                      "\"x\"", "9223372036854775807",
                                      "true",  "\"\\u0000\""};
  uint64_t seed = 12345;
  auto next = [&seed] {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return seed >> 33;
  };
  for (const std::string& base : {Complete().dump(), incomplete.dump()}) {
    for (int i = 0; i < 3000; ++i) {
      std::string text = base;
      std::string jtext = journal;
      for (int k = 0, n = 1 + int(next() % 3); k < n; ++k) {
        std::string& target = next() % 4 == 0 ? jtext : text;
        if (target.empty()) continue;
        size_t at = next() % target.size();
        switch (next() % 3) {
          case 0:  // a byte changed
            target[at] = char(next() % 256);
            break;
          case 1: {  // a value replaced
            size_t end = target.find_first_of(",}]", at);
            if (end == std::string::npos) end = target.size();
            target.replace(at, end - at, replacements[next() % std::size(replacements)]);
            break;
          }
          default:  // cut
            target.resize(at);
        }
      }
      EXPECT_NO_THROW({
        Result<Manifest> m = ParseManifest("/archive", text, &jtext);
        if (!m.ok()) {
          EXPECT_NE(m.status().code(), Status::Code::kInternal);
        }
        ParseJournal(jtext);
      }) << text;
    }
  }
}

TEST(ManifestTest, DataPaths) {
  EXPECT_TRUE(IsDataPath("data/nova-1.lyon.grid5000.fr.jsonl.zst"));
  EXPECT_TRUE(IsDataPath("data/_other.lyon.jsonl.zst"));
  for (const char* bad : {"data/../x.jsonl.zst", "data/a/b.jsonl.zst", "x/a.jsonl.zst",
                          "data/.jsonl.zst", "data/a.jsonl", "/data/a.jsonl.zst", ""}) {
    EXPECT_FALSE(IsDataPath(bad)) << bad;
  }
  EXPECT_FALSE(IsDataPath(std::string("data/a\0b.jsonl.zst", 18)));
}

}  // namespace
}  // namespace kwatt::archive::manifest_test
