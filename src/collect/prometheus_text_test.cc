#include "kwatt/collect/prometheus_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace kwatt::collect::prometheus_text_test {
namespace {

struct Read {
  Status status;
  std::vector<PrometheusSample> samples;
};

Read ReadAll(std::string_view text) {
  Read out;
  out.status = ReadPrometheusText(text, [&](const PrometheusSample& s) {
    PrometheusSample copy = s;
    out.samples.push_back(std::move(copy));
    return Status::OK();
  });
  return out;
}

std::string ErrorOf(std::string_view text) {
  Read read = ReadAll(text);
  EXPECT_FALSE(read.status.ok()) << text;
  EXPECT_EQ(read.status.code(), Status::Code::kInvalidArgument);
  return read.status.message();
}

// What a node exporter serves, with the format's corners: escapes, NaN and infinities, a
// timestamp, a trailing comma, blanks and \r\n, histogram and summary families.
TEST(PrometheusText, ReadsAnExpositionAsTheFormatDefinesIt) {
  Read read = ReadAll(
      "# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.\n"
      "# TYPE node_cpu_seconds_total counter\n"
      "node_cpu_seconds_total{cpu=\"0\",mode=\"idle\"} 1.2345e+06\n"
      "node_cpu_seconds_total{ cpu = \"0\" , mode=\"user\", } 77\r\n"
      "\n"
      "# a comment\n"
      "node_load1 0.5 1744977600123\n"
      "weird{path=\"C:\\\\dir\\\"x\\\"\\n\"} NaN\n"
      "up +Inf\n"
      "down\t-inf\n"
      "tiny 1e-400\n"
      "# TYPE rpc histogram\n"
      "rpc_bucket{le=\"0.5\"} 3\n"
      "rpc_sum 1.5\n"
      "rpc_count 4\n"
      "# TYPE lat summary\n"
      "lat_sum 2\n"
      "lat_bucket 1\n");
  ASSERT_TRUE(read.status.ok()) << read.status.ToString();
  ASSERT_EQ(read.samples.size(), 12u);
  const PrometheusSample& idle = read.samples[0];
  EXPECT_EQ(idle.name, "node_cpu_seconds_total");
  ASSERT_EQ(idle.labels.size(), 2u);
  EXPECT_EQ(idle.labels[0], (std::pair<std::string, std::string>("cpu", "0")));
  EXPECT_EQ(idle.labels[1].second, "idle");
  EXPECT_EQ(idle.value, 1234500);
  EXPECT_EQ(idle.type, "counter");
  EXPECT_FALSE(idle.timestamp_ms.has_value());
  EXPECT_EQ(read.samples[1].labels[1].second, "user");
  EXPECT_EQ(read.samples[1].value, 77);
  EXPECT_EQ(read.samples[2].name, "node_load1");
  EXPECT_EQ(read.samples[2].type, "untyped");
  EXPECT_EQ(read.samples[2].timestamp_ms, 1744977600123);
  EXPECT_EQ(read.samples[3].labels[0].second, "C:\\dir\"x\"\n");
  EXPECT_TRUE(std::isnan(read.samples[3].value));
  EXPECT_EQ(read.samples[4].value, INFINITY);
  EXPECT_EQ(read.samples[5].value, -INFINITY);
  EXPECT_EQ(read.samples[6].value, 0);
  EXPECT_EQ(read.samples[7].type, "histogram");
  EXPECT_EQ(read.samples[8].type, "histogram");
  EXPECT_EQ(read.samples[9].type, "histogram");
  EXPECT_EQ(read.samples[10].type, "summary");
  EXPECT_EQ(read.samples[11].type, "untyped");  // a summary has no buckets
  EXPECT_TRUE(ReadAll("").status.ok());
  EXPECT_TRUE(ReadAll("\n\n# only comments\n").samples.empty());
}

TEST(PrometheusText, AMalformedLineIsNamedWithItsPlace) {
  EXPECT_EQ(ErrorOf("ok 1\n9lives 1\n"),
            "line 2, column 1: a sample should start with a metric name");
  EXPECT_EQ(ErrorOf("m{a=\"1} 2\n"), "line 1, column 10: the label value is not closed by a '\"'");
  EXPECT_EQ(ErrorOf("m{a=1} 2\n"), "line 1, column 5: a label value should be quoted");
  EXPECT_EQ(ErrorOf("m{a=\"1\",a=\"2\"} 2\n"), "line 1, column 10: the label a is given twice");
  EXPECT_EQ(ErrorOf("m{a=\"1\" b=\"2\"} 2\n"),
            "line 1, column 9: ',' or '}' was expected after a label");
  EXPECT_EQ(ErrorOf("m{a=\"\\t\"} 2\n"),
            "line 1, column 6: a label value may escape only \\\\, \\\" and \\n, not \\t");
  EXPECT_EQ(ErrorOf("m high\n"), "line 1, column 7: \"high\" is not a number");
  EXPECT_EQ(ErrorOf("m\n"), "line 1, column 2: the sample m has no value");
  EXPECT_EQ(ErrorOf("m 1 12.5\n"),
            "line 1, column 9: the timestamp \"12.5\" is not an integer of milliseconds");
  EXPECT_EQ(ErrorOf("m 1 2 3\n"), "line 1, column 7: unexpected text after the timestamp: 3");
  EXPECT_EQ(ErrorOf("# TYPE m gauge\n# TYPE m counter\n"),
            "line 2, column 17: a second # TYPE line for m");
  EXPECT_EQ(ErrorOf("# TYPE m meter\n"),
            "line 1, column 15: \"meter\" is not a metric type (counter, gauge, histogram, "
            "summary, untyped)");
  EXPECT_EQ(ErrorOf("m{a:b=\"1\"} 2\n"), "line 1, column 4: '=' was expected after the label a");
  EXPECT_EQ(ErrorOf("m --1\n"), "line 1, column 6: \"--1\" is not a number");
}

// What Debian's prometheus-node-exporter 1.5.0 served on this kind of machine (recorded with
// curl): every sample line read, each family's type applied.
TEST(PrometheusText, ReadsARecordedNodeExporter) {
  std::ifstream in(std::string(KWATT_SOURCE_DIR) +
                   "/src/collect/testdata/node_exporter_1.5.0.prom");
  ASSERT_TRUE(in) << "testdata missing";
  std::stringstream text;
  text << in.rdbuf();
  size_t sample_lines = 0;
  std::istringstream lines(text.str());
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line[0] != '#') ++sample_lines;
  }
  Read read = ReadAll(text.str());
  ASSERT_TRUE(read.status.ok()) << read.status.ToString();
  EXPECT_EQ(read.samples.size(), sample_lines);
  EXPECT_GT(sample_lines, 500u);
  std::set<std::string_view> types;
  size_t cpu_seconds = 0;
  for (const PrometheusSample& s : read.samples) {
    types.insert(s.type);
    if (s.name == "node_cpu_seconds_total") {
      ++cpu_seconds;
      EXPECT_EQ(s.type, "counter");
      EXPECT_EQ(s.labels.size(), 2u);
    }
  }
  EXPECT_GE(cpu_seconds, 8u);  // 2 CPUs x 8 modes
  EXPECT_TRUE(types.count("gauge") && types.count("counter") && types.count("summary"));
}

TEST(PrometheusText, TheCallbacksStatusStopsTheReading) {
  int seen = 0;
  Status stopped = ReadPrometheusText("a 1\nb 2\nc 3\n", [&](const PrometheusSample&) {
    return ++seen == 2 ? Status::Incomplete("enough") : Status::OK();
  });
  EXPECT_EQ(stopped.code(), Status::Code::kIncomplete);
  EXPECT_EQ(seen, 2);
}

}  // namespace
}  // namespace kwatt::collect::prometheus_text_test
