#include "kwatt/server/jobs.h"

#include <gtest/gtest.h>

#include <string>

namespace kwatt::server::jobs_test {
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

}  // namespace
}  // namespace kwatt::server::jobs_test
