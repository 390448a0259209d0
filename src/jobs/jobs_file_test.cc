#include "kwatt/jobs/jobs_file.h"

#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <string>

namespace kwatt::jobs::jobs_file_test {
namespace {

// A jobs file whose jobs[1] has `field` set to `value` (JSON text).
std::string WithField(const std::string& field, const std::string& value) {
  std::string second = R"({"site":"lyon","uid":2,"nodes":["nova-2"],"started_at":1744977600)";
  if (field == "phases[0].duration" || field == "phases[0].cpu" || field == "phases[0].name") {
    std::string key = field.substr(10);
    second += R"(,"phases":[{"duration":60,)" + std::string("\"") + key + "\":" + value + "}]";
    if (key == "duration") second = second.replace(second.find("\"duration\":60,"), 14, "");
  } else {
    second += ",\"" + field + "\":" + value;
  }
  second += "}";
  return R"({"jobs":[{"site":"lyon","uid":1,"nodes":["nova-1"],"started_at":1744977600},)" +
         second + "]}";
}

std::string ErrorOf(const std::string& text) {
  Result<JobSet> parsed = JobSet::Parse(text, "f.json");
  if (parsed.ok()) return "OK";
  EXPECT_EQ(parsed.status().code(), Status::Code::kInvalidArgument) << text;
  return parsed.status().message();
}

TEST(JobsFile, ReadsAWellFormedFile) {
  Result<JobSet> parsed = JobSet::Parse(WithField("walltime", "1800.5"), "f.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->jobs.size(), 2u);
  EXPECT_EQ(parsed->jobs[1].walltime_s, 1801);
  EXPECT_EQ(parsed->jobs[1].EffectiveEnd(), (1744977600LL + 1801) * kNanosPerSecond);
}

// Each field of the wrong JSON type is named, with its path; none aborts (nlohmann's
// type_error was uncaught: exit 134).
TEST(JobsFile, WrongTypesAreNamedNotThrown) {
  struct Case {
    std::string field, value, expected;
  } cases[] = {
      {"started_at", "[1]",
       "jobs file f.json: jobs[1].started_at should be epoch seconds or an ISO 8601 text, not a "
       "list"},
      {"stopped_at", "{}",
       "jobs file f.json: jobs[1].stopped_at should be epoch seconds or an ISO 8601 text, not an "
       "object"},
      {"user", "3", "jobs file f.json: jobs[1].user should be a string, not a number"},
      {"name", "[]", "jobs file f.json: jobs[1].name should be a string, not a list"},
      {"project", "true", "jobs file f.json: jobs[1].project should be a string, not a boolean"},
      {"queue", "null", "jobs file f.json: jobs[1].queue should be a string, not null"},
      {"walltime", "\"1h\"",
       "jobs file f.json: jobs[1].walltime should be seconds (a number > 0), not a string"},
      {"repeat_phases", "\"yes\"",
       "jobs file f.json: jobs[1].repeat_phases should be true or false, not a string"},
      {"types", "\"monitor\"",
       "jobs file f.json: jobs[1].types should be a list of strings, not a string"},
      {"types", "[1]", "jobs file f.json: jobs[1].types[0] should be a string, not a number"},
      {"phases", "{}",
       "jobs file f.json: jobs[1].phases should be a list of phases, not an object"},
      {"phases[0].name", "7",
       "jobs file f.json: jobs[1].phases[0].name should be a string, not a number"},
      {"phases[0].duration", "\"60\"",
       "jobs file f.json: jobs[1].phases[0].duration should be seconds (a number > 0), not a "
       "string"},
      {"phases[0].cpu", "\"high\"",
       "jobs file f.json: jobs[1].phases[0].cpu should be a number between 0 and 1, not a string"},
      {"uid", "\"2\"", "jobs file f.json: jobs[1].uid should be an integer job id, not a string"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ErrorOf(WithField(c.field, c.value)), c.expected) << c.field;
  }
  EXPECT_EQ(ErrorOf(R"({"jobs":[{"site":"lyon","uid":1,"nodes":"nova-1","started_at":1}]})"),
            "jobs file f.json: jobs[0].nodes should be a list of node names, not a string");
  EXPECT_EQ(ErrorOf(R"({"jobs":{}})"), "jobs file f.json: jobs should be a list, not an object");
  EXPECT_EQ(ErrorOf(R"({"outages":[{"site":"lyon","device":5,"start":1,"end":2}]})"),
            "jobs file f.json: outages[0].device should be a string, not a number");
  EXPECT_EQ(ErrorOf(R"({"outages":[{"site":"lyon","device":"d","start":1,"end":2,"metric":[]}]})"),
            "jobs file f.json: outages[0].metric should be a string, not a list");
  EXPECT_EQ(ErrorOf(R"({"outages":[{"site":"lyon","device":"d","start":1,"end":2,"report":0}]})"),
            "jobs file f.json: outages[0].report should be a string, not a number");
}

// Times and durations outside what int64 nanoseconds hold are refused, not wrapped.
TEST(JobsFile, TimesOutOfRangeAreRefused) {
  std::string far = R"({"jobs":[{"site":"lyon","uid":1,"nodes":["nova-1"],"started_at":1e30}]})";
  EXPECT_EQ(ErrorOf(far),
            "jobs file f.json: jobs[0].started_at = 1e+30 is outside the times kwatt handles "
            "(1677-09-21 .. 2262-04-11)");
  std::string year3000 =
      R"({"jobs":[{"site":"lyon","uid":1,"nodes":["nova-1"],"started_at":"3000-01-01T00:00:00Z"}]})";
  EXPECT_EQ(ErrorOf(year3000),
            "jobs file f.json: jobs[0].started_at = 3000-01-01T00:00:00Z is outside the times "
            "kwatt handles (1677-09-21 .. 2262-04-11)");
  std::string stopped =
      R"({"jobs":[{"site":"lyon","uid":1,"nodes":["nova-1"],"started_at":1,"stopped_at":-1e300}]})";
  EXPECT_NE(ErrorOf(stopped).find("jobs[0].stopped_at = "), std::string::npos);
  std::string walltime =
      R"({"jobs":[{"site":"lyon","uid":1,"nodes":["nova-1"],"started_at":9000000000,"walltime":1e9}]})";
  EXPECT_EQ(ErrorOf(walltime),
            "jobs file f.json: jobs[0].walltime ends the job after 2262-04-11, outside the times "
            "kwatt handles");
  std::string huge =
      R"({"jobs":[{"site":"lyon","uid":1,"nodes":["nova-1"],"started_at":1,"walltime":1e300}]})";
  EXPECT_NE(ErrorOf(huge).find("jobs[0].walltime = 1e+300: should be seconds"), std::string::npos);
  std::string duration = R"({"jobs":[{"site":"lyon","uid":1,"nodes":["nova-1"],"started_at":1,
      "phases":[{"duration":1e300}]}]})";
  EXPECT_NE(ErrorOf(duration).find("jobs[0].phases[0].duration = 1e+300"), std::string::npos);
  std::string ambiguous =
      R"({"jobs":[{"site":"lyon","uid":1,"nodes":["nova-1"],"started_at":"2025-10-26T02:30"}]})";
  EXPECT_NE(ErrorOf(ambiguous).find("is ambiguous in Europe/Paris"), std::string::npos);
}

// A misspelt key is not ignored (the file would simulate something else): at every level it is
// named by its path, with the nearest known key and the list of known ones.
TEST(JobsFile, UnknownKeysAreRefusedAtEveryLevel) {
  EXPECT_EQ(ErrorOf(R"({"job":[]})"),
            "jobs file f.json: job is not a field of a jobs file (did you mean jobs?); a jobs "
            "file has format_version, jobs, outages, faults");
  EXPECT_EQ(ErrorOf(WithField("phasess", "[]")),
            "jobs file f.json: jobs[1].phasess is not a field of a job (did you mean phases?); a "
            "job has site, uid, nodes, started_at, stopped_at, walltime, types, user, name, "
            "project, queue, phases, repeat_phases");
  EXPECT_EQ(ErrorOf(R"({"jobs":[{"site":"lyon","uid":1,"nodes":["nova-1"],"started_at":1,
      "phases":[{"duration":5},{"duration":5,"cpus":1}]}]})"),
            "jobs file f.json: jobs[0].phases[1].cpus is not a field of a phase (did you mean "
            "cpu?); a phase has name, duration, cpu, network, gpu");
  EXPECT_EQ(ErrorOf(R"({"outages":[{"site":"lyon","device":"nova-1","start":1,"end":2,
      "metrics":"wattmetre_power_watt"}]})"),
            "jobs file f.json: outages[0].metrics is not a field of an outage (did you mean "
            "metric?); an outage has site, device, metric, start, end, report");
  // No plausible key: no guess. A key that is not a plain word is quoted in the path.
  EXPECT_EQ(ErrorOf(WithField("energy budget", "1")),
            "jobs file f.json: jobs[1][\"energy budget\"] is not a field of a job; a job has "
            "site, uid, nodes, started_at, stopped_at, walltime, types, user, name, project, "
            "queue, phases, repeat_phases");
}

// A file that is not JSON is named with the line and column where it stops being JSON; a job
// given twice with the place of its first definition.
TEST(JobsFile, SyntaxErrorsAndRepeatedJobsAreNamedWithTheirPlace) {
  std::string syntax = ErrorOf("{\"jobs\":[\n{\"site\":\"lyon\",}]}");
  EXPECT_EQ(syntax.rfind("jobs file f.json: file is not valid JSON: line 2, column 16: ", 0), 0u)
      << syntax;
  // A number too large for a double is refused as such, not thrown (nlohmann's out_of_range).
  EXPECT_EQ(ErrorOf(R"({"jobs":[{"site":"lyon","uid":1,"nodes":["nova-1"],"started_at":1e400}]})"),
            "jobs file f.json: file is not valid JSON: number overflow parsing '1e400'");
  std::string twice = R"({"jobs":[{"site":"lyon","uid":1,"nodes":["nova-1"],"started_at":1},
      {"site":"lyon","uid":2,"nodes":["nova-2"],"started_at":1},
      {"site":"lyon","uid":1,"nodes":["nova-3"],"started_at":1}]})";
  EXPECT_EQ(ErrorOf(twice),
            "jobs file f.json: jobs[2] is job lyon:1 again (jobs[0]): give each job of a site its "
            "own uid");
}

// The file's format is versioned: a version this kwatt does not know is refused, not guessed.
TEST(JobsFile, OnlyFormatVersion1IsRead) {
  const std::string jobs = R"("jobs":[{"site":"lyon","uid":1,"nodes":["nova-1"],"started_at":1}])";
  EXPECT_EQ(ErrorOf("{\"format_version\":1," + jobs + "}"), "OK");
  EXPECT_EQ(ErrorOf("{\"format_version\":2," + jobs + "}"),
            "jobs file f.json: format_version = 2 is not a version this kwatt reads: it reads "
            "format_version 1 (write it, or leave it out)");
  EXPECT_EQ(ErrorOf("{\"format_version\":\"1\"," + jobs + "}"),
            "jobs file f.json: format_version should be 1, not a string");
}

// OAR job ids are positive integers.
TEST(JobsFile, JobIdsArePositive) {
  std::string negative = R"({"jobs":[{"site":"lyon","uid":-1,"nodes":["nova-1"],"started_at":1}]})";
  EXPECT_EQ(ErrorOf(negative),
            "jobs file f.json: jobs[0].uid = -1: an OAR job id is a positive integer");
  std::string zero = R"({"jobs":[{"site":"lyon","uid":0,"nodes":["nova-1"],"started_at":1}]})";
  EXPECT_EQ(ErrorOf(zero),
            "jobs file f.json: jobs[0].uid = 0: an OAR job id is a positive integer");
  std::string huge =
      R"({"jobs":[{"site":"lyon","uid":9223372036854775808,"nodes":["nova-1"],"started_at":1}]})";
  EXPECT_EQ(ErrorOf(huge),
            "jobs file f.json: jobs[0].uid = 9223372036854775808: an OAR job id is a positive "
            "integer below 2^63");
}

// An OAR job lives on one site: a node named with another site is refused, naming both.
TEST(JobsFile, NodesOfAnotherSiteAreRefused) {
  std::string text = R"({"jobs":[{"site":"rennes","uid":1,"started_at":1,
      "nodes":["paravance-1","nova-1.lyon.grid5000.fr"]}]})";
  EXPECT_EQ(ErrorOf(text),
            "jobs file f.json: jobs[0].nodes[1] = \"nova-1.lyon.grid5000.fr\" is a node of site "
            "lyon, but jobs[0] is a job of site rennes: an OAR job lives on one site (give the "
            "node in a job of site lyon, or fix the site)");
  std::string outage =
      R"({"outages":[{"site":"rennes","device":"nova-1.lyon","start":1,"end":2}]})";
  EXPECT_EQ(ErrorOf(outage),
            "jobs file f.json: outages[0].device = \"nova-1.lyon\" is a device of site lyon, but "
            "outages[0] is an outage of site rennes (give the outage site lyon)");
  EXPECT_EQ(
      ErrorOf(R"({"jobs":[{"site":"lyon","uid":1,"started_at":1,"nodes":["nova-1..x"]}]})"),
      "jobs file f.json: jobs[0].nodes[0] = \"nova-1..x\" is not a node name: give a node uid "
      "(nova-1) or FQDN (nova-1.lyon.grid5000.fr)");
  EXPECT_EQ(ErrorOf(R"({"jobs":[{"site":"lyon","uid":1,"started_at":1,"nodes":[""]}]})"),
            "jobs file f.json: jobs[0].nodes[0] = \"\" is not a node name: give a node uid "
            "(nova-1) or FQDN (nova-1.lyon.grid5000.fr)");
  // Both forms of a node of the job's site are the node's uid.
  Result<JobSet> parsed = JobSet::Parse(
      R"({"jobs":[{"site":"lyon","uid":1,"started_at":1,
          "nodes":["nova-1.lyon.grid5000.fr","nova-2.lyon","nova-3"]}]})",
      "f.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->jobs[0].nodes, (std::vector<std::string>{"nova-1", "nova-2", "nova-3"}));
}

// A node listed twice (short name and FQDN) would count its energy twice: refused, naming both
// places.
TEST(JobsFile, ANodeListedTwiceInAJobIsRefused) {
  std::string text = R"({"jobs":[{"site":"lyon","uid":1,"started_at":1,
      "nodes":["nova-1","nova-2","nova-1.lyon.grid5000.fr"]}]})";
  EXPECT_EQ(ErrorOf(text),
            "jobs file f.json: jobs[0].nodes[2] = \"nova-1.lyon.grid5000.fr\" is nova-1 again "
            "(jobs[0].nodes[0]): list each node of a job once");
  EXPECT_EQ(ErrorOf(R"({"jobs":[{"site":"lyon","uid":1,"started_at":1,"nodes":["a","a"]}]})"),
            "jobs file f.json: jobs[0].nodes[1] = \"a\" is a again (jobs[0].nodes[0]): list each "
            "node of a job once");
}

// A phase of 1e-6 s became one step of every node's load profile: a million of them (or one
// repeated over an hour: 3.6e9) exhausted memory while the testbed was built. Phases are at
// least 1 ms, and the load changes a file asks for are bounded; both are refused before anything
// is built, quickly.
TEST(JobsFile, TinyPhasesAreRefusedQuickly) {
  std::string text = R"({"jobs":[{"site":"lyon","uid":1,"nodes":["nova-1"],"started_at":1,)"
                     R"("walltime":3600,"phases":[)";
  for (int i = 0; i < 1000000; ++i) text += i ? ",{\"duration\":1e-6}" : "{\"duration\":1e-6}";
  text += "]}]}";
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ErrorOf(text),
            "jobs file f.json: jobs[0].phases[0].duration = 1e-06: a phase lasts at least 0.001 "
            "s (1 ms; the finest metric, wattmetre_power_watt, is sampled every 20 ms)");
  // A guard against a parser that reads every phase before refusing the first (or worse, one
  // quadratic in them: hours), not a measure of speed: loose enough for a sanitized build on a
  // loaded machine (10.9 s seen under ASan while two builds ran).
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(120));
}

TEST(JobsFile, LoadChangesAreBounded) {
  // One 1 ms phase repeated over an hour: 3.6 million load changes.
  std::string repeated = R"({"jobs":[{"site":"lyon","uid":1,"nodes":["nova-1"],"started_at":1,
      "walltime":3600,"phases":[{"duration":0.001}],"repeat_phases":true}]})";
  EXPECT_EQ(ErrorOf(repeated),
            "jobs file f.json: jobs[0].phases change the load of its 1 node 3600000 times, 3600000 "
            "load changes in the file so far: the simulator holds at most 2000000 (phase starts "
            "times nodes, all jobs together); lengthen the phases, shorten the job or give it "
            "fewer nodes");
  // 20 nodes cycling through 10 s phases for a week: 1.2 million, more than the file may hold
  // once a second such job comes.
  std::string nodes;
  for (int n = 1; n <= 20; ++n)
    nodes += (n > 1 ? ",\"nova-" : "\"nova-") + std::to_string(n) + "\"";
  std::string week = R"({"site":"lyon","uid":UID,"nodes":[)" + nodes +
                     R"(],"started_at":1,"walltime":604800,"phases":[{"duration":10}],
                     "repeat_phases":true})";
  std::string one = week, two = week;
  one.replace(one.find("UID"), 3, "1");
  two.replace(two.find("UID"), 3, "2");
  EXPECT_EQ(ErrorOf("{\"jobs\":[" + one + "]}"), "OK");
  EXPECT_EQ(ErrorOf("{\"jobs\":[" + one + "," + two + "]}"),
            "jobs file f.json: jobs[1].phases change the load of its 20 nodes 1209600 times, "
            "2419200 load changes in the file so far: the simulator holds at most 2000000 (phase "
            "starts times nodes, all jobs together); lengthen the phases, shorten the job or give "
            "it fewer nodes");
  // Phases past the job's end change nothing and are not counted.
  std::string past = R"({"jobs":[{"site":"lyon","uid":1,"nodes":["nova-1"],"started_at":1,
      "walltime":1,"phases":[)";
  for (int i = 0; i < 3000; ++i) past += i ? ",{\"duration\":1000}" : "{\"duration\":1000}";
  EXPECT_EQ(ErrorOf(past + "]}]}"), "OK");
}

TEST(JobsFile, ReadsFaults) {
  Result<JobSet> parsed = JobSet::Parse(
      R"({"faults":[{"site":"lyon","device":"nova-1.lyon.grid5000.fr","metric":"wattmetre_power_watt",
          "bias":-2.5,"scale":1.1,"stuck":true,"late":0.25,"start":10,"end":20},
         {"site":"lyon","device":"nova-2","scale":0}]})",
      "f.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->faults.size(), 2u);
  const Fault& f = parsed->faults[0];
  EXPECT_EQ(f.device, "nova-1");
  EXPECT_EQ(f.metric, "wattmetre_power_watt");
  EXPECT_EQ(f.bias, -2.5);
  EXPECT_EQ(f.scale, 1.1);
  EXPECT_TRUE(f.stuck);
  EXPECT_EQ(f.late, 250 * kNanosPerMilli);
  EXPECT_EQ(f.start, 10 * kNanosPerSecond);
  EXPECT_EQ(f.end, 20 * kNanosPerSecond);
  // No span: always.
  EXPECT_LT(parsed->faults[1].start, 0);
  EXPECT_EQ(parsed->faults[1].end, std::numeric_limits<UnixNanos>::max());
  EXPECT_EQ(parsed->faults[1].scale, 0);
}

TEST(JobsFile, AFaultThatCannotBeIsNamedWithItsPlace) {
  auto fault = [](const std::string& fields) {
    return ErrorOf(R"({"faults":[{"site":"lyon","device":"nova-1","bias":1},{"site":"lyon",)" +
                   fields + "}]}");
  };
  EXPECT_EQ(fault(R"("device":"nova-2","metric":"wattmetre_power_watt")"),
            "jobs file f.json: faults[1] changes nothing: give it a \"bias\", a \"scale\" other "
            "than 1, \"stuck\": true or a \"late\" clock");
  EXPECT_EQ(fault(R"("bias":1)"),
            "jobs file f.json: faults[1].device is required (a fault needs \"site\" and "
            "\"device\")");
  EXPECT_EQ(fault(R"("device":"nova-2","stuck":true)"),
            "jobs file f.json: faults[1].stuck needs a \"start\": the instant whose value the "
            "device repeats");
  EXPECT_EQ(fault(R"("device":"nova-2","scale":-1)"),
            "jobs file f.json: faults[1].scale = -1: should be a factor from 0 to 1000");
  EXPECT_EQ(
      fault(R"("device":"nova-2","late":"2s")"),
      "jobs file f.json: faults[1].late should be seconds from -86400 to 86400, not a string");
  EXPECT_EQ(fault(R"("device":"nova-2","bias":1,"start":20,"end":10)"),
            "jobs file f.json: faults[1].end is not after its start");
  EXPECT_EQ(fault(R"("device":"nova-2","bias":1,"stuk":true)"),
            "jobs file f.json: faults[1].stuk is not a field of a fault (did you mean stuck?); a "
            "fault has site, device, metric, start, end, bias, scale, stuck, late");
  EXPECT_EQ(fault(R"("device":"nova-2.rennes","bias":1)"),
            "jobs file f.json: faults[1].device = \"nova-2.rennes\" is a device of site rennes, "
            "but faults[1] is a fault of site lyon (give the fault site rennes)");
  EXPECT_EQ(ErrorOf(R"({"faults":{}})"),
            "jobs file f.json: faults should be a list, not an object");
}

}  // namespace
}  // namespace kwatt::jobs::jobs_file_test
