#include "src/server/pushed.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "src/server/row_stream.h"

namespace kwatt::server::internal::pushed_test {
namespace {

constexpr UnixNanos kNow = 1713441600LL * kNanosPerSecond;  // 2024-04-18T14:00:00+02:00

std::string Answer(const PushedMetrics& pushed, const std::string& device,
                   const std::vector<std::string>& metrics, UnixNanos start, UnixNanos end,
                   bool summary = false, UnixNanos now = kNow + 3600 * kNanosPerSecond) {
  RowStream stream(pushed.SeriesOf("lyon", device, metrics), start, end, now, summary);
  std::string out;
  while (stream.Next(&out, 1 << 16)) {
  }
  return out;
}

std::string ErrorOf(std::string_view body) {
  Result<std::vector<PushedRow>> rows = ParsePushedRows(body, kNow);
  EXPECT_FALSE(rows.ok()) << body;
  EXPECT_EQ(rows.status().code(), Status::Code::kInvalidArgument);
  return rows.status().message();
}

TEST(ParsePushedRows, ReadsRowsAsGrid5000AcceptsThem) {
  auto rows = ParsePushedRows(
      R"([{"timestamp": 1713441601.25, "device_id": "nova-1", "metric_id": "my_power",
           "value": 42, "labels": {"phase": "b", "id": 3, "x": {"kk": 1, "a": [1, "é"]}}},
          {"device_id": "nova-2", "metric_id": "my_power", "value": null},
          {"timestamp": "2024-04-18T14:00:02+02:00", "device_id": "nova-1",
           "metric_id": "my_power", "value": 1.5e3, "labels": null}])",
      kNow);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[0].t, kNow + 1'250'000'000);
  EXPECT_EQ((*rows)[0].device_id, "nova-1");
  EXPECT_EQ((*rows)[0].value, 42);
  // jsonb's key order: by length, then bytes, at every depth.
  EXPECT_EQ((*rows)[0].labels_json, R"({"x":{"a":[1,"é"],"kk":1},"id":3,"phase":"b"})");
  EXPECT_EQ((*rows)[1].t, kNow);  // no timestamp: now
  EXPECT_TRUE(std::isnan((*rows)[1].value));
  EXPECT_EQ((*rows)[1].labels_json, "{}");
  EXPECT_EQ((*rows)[2].t, kNow + 2 * kNanosPerSecond);
  EXPECT_EQ((*rows)[2].value, 1500);
  EXPECT_TRUE(ParsePushedRows("[]", kNow).ok());
}

// A label's number is written as PostgreSQL's jsonb writes it (plain decimal, the digits a double
// keeps), so that both stores, and Kwollect, give the same text back.
TEST(ParsePushedRows, LabelNumbersAreWrittenAsJsonbWritesThem) {
  auto rows = ParsePushedRows(
      R"([{"device_id": "a", "metric_id": "m", "value": 1, "labels": {"big":
           12345678901234567890123, "e": 1e22, "f": 1.5e-7, "g": -2.5E+3, "h": -0.0, "i": 7,
           "j": 0.1, "k": 123.456, "l": -1e-300}}])",
      kNow);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ((*rows)[0].labels_json,
            R"({"e":10000000000000000000000,"f":0.00000015,"g":-2500,"h":0,"i":7,"j":0.1,)"
            R"("k":123.456,"l":-0.)" +
                std::string(299, '0') + R"(1,"big":12345678901234568000000})");
}

TEST(ParsePushedRows, TheFirstBadRowIsNamedAndNothingIsKept) {
  // Why the body cannot be read, where the parser says: a number beyond a double is one.
  EXPECT_NE(ErrorOf(R"([{"device_id":"a","metric_id":"m","value":1e400}])")
                .find("the body is not JSON (number overflow parsing '1e400'): send a JSON "
                      "array of rows"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"([{"device_id":"a","metric_id":"m","value":1,"labels":{"k":"a\u0000"}}])")
                .find("row 1 \"labels\" hold the character \\u0000, which PostgreSQL's jsonb"),
            std::string::npos);
  EXPECT_NE(ErrorOf("{").find("the body is not JSON (parse error at line 1, column 2"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"device_id":"a"})").find("the body is a object, not a JSON array"),
            std::string::npos);
  std::string ok = R"({"device_id":"nova-1","metric_id":"m","value":1})";
  EXPECT_EQ(ErrorOf("[" + ok + ",7]"), "row 2 is a number, not an object; nothing was stored");
  EXPECT_EQ(ErrorOf("[" + ok + R"(,{"metric_id":"m","value":1}])"),
            "row 2 has no \"device_id\"; nothing was stored");
  EXPECT_NE(ErrorOf(R"([{"device_id":"nova-1.lyon.grid5000.fr","metric_id":"m","value":1}])")
                .find("row 1 \"device_id\" = \"nova-1.lyon.grid5000.fr\": holds '.', where "
                      "metrics queries cut device ids"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"([{"device_id":"a","metric_id":"m,n","value":1}])").find("\"metric_id\""),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"([{"device_id":"a","metric_id":"","value":1}])")
                .find("row 1 \"metric_id\" = \"\": is empty"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(R"([{"device_id":"a","metric_id":"m"}])"),
            "row 1 has no \"value\"; nothing was stored");
  EXPECT_NE(ErrorOf(R"([{"device_id":"a","metric_id":"m","value":"12 W"}])")
                .find("\"value\" = \"12 W\": should be a number, a text of one (\"NaN\", "
                      "\"Infinity\") or null"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"([{"device_id":"a","metric_id":"m","value":"1e400"}])")
                .find("\"value\" = \"1e400\": is out of range for a double"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"([{"device_id":"a","metric_id":"m","value":true}])")
                .find("\"value\" = true: should be a number"),
            std::string::npos);
  // A text as Kwollect's double precision column reads it (PostgREST passes the text to
  // PostgreSQL's float8in): a number, Infinity or inf with a sign, any case, blanks around.
  Result<std::vector<PushedRow>> texts = ParsePushedRows(
      R"([{"device_id":"a","metric_id":"m","value":" 12 "},
          {"device_id":"a","metric_id":"m","value":"-Infinity"},
          {"device_id":"a","metric_id":"m","value":"+INF"},
          {"device_id":"a","metric_id":"m","value":"1.5e3"}])",
      kNow);
  ASSERT_TRUE(texts.ok()) << texts.status().ToString();
  EXPECT_EQ(texts->at(0).value, 12);
  EXPECT_EQ(texts->at(1).value, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(texts->at(2).value, std::numeric_limits<double>::infinity());
  EXPECT_EQ(texts->at(3).value, 1500);
  // "NaN" as Kwollect's double precision column takes it (PostgREST passes the text on).
  Result<std::vector<PushedRow>> nan =
      ParsePushedRows(R"([{"device_id":"a","metric_id":"m","value":"nan"}])", kNow);
  ASSERT_TRUE(nan.ok()) << nan.status().ToString();
  EXPECT_TRUE(std::isnan(nan->at(0).value));
  EXPECT_NE(ErrorOf(R"([{"device_id":"a","metric_id":"m","value":1,"timestamp":1e30}])")
                .find("row 1 \"timestamp\" = 1e+30: "),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"([{"device_id":"a","metric_id":"m","value":1,"timestamp":true}])")
                .find("should be epoch seconds or a timestamp text"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"([{"device_id":"a","metric_id":"m","value":1,"labels":[1]}])")
                .find("\"labels\" = [1]: should be an object"),
            std::string::npos);
}

// What the metrics query could never ask for is refused (kwatt/core/row_ids.h has the rule).
TEST(ParsePushedRows, IdsTheQueryCannotAskForAreRefused) {
  EXPECT_NE(ErrorOf(R"([{"device_id":"pdu.lab","metric_id":"m","value":1}])")
                .find("row 1 \"device_id\" = \"pdu.lab\": holds '.'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"([{"device_id":" nova-1","metric_id":"m","value":1}])")
                .find("begins or ends with a space"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"([{"device_id":"a","metric_id":"m\u0000","value":1}])")
                .find("control character (0x00)"),
            std::string::npos);
}

// Labels nested without bound crashed the server (a recursive writer, 100,000 levels) or were
// stored and then broke every fetch of their window (20,000 levels): refused, naming the row.
TEST(ParsePushedRows, LabelsNestedTooDeepOrTooLargeAreRefused) {
  auto body = [](int depth) {  // labels nested `depth` levels deep, in row 2
    std::string labels;
    for (int i = 0; i < depth; ++i) labels += R"({"a":)";
    labels += "1" + std::string(size_t(depth), '}');
    return R"([{"device_id":"a","metric_id":"m","value":1},)"
           R"({"device_id":"a","metric_id":"m","value":1,"labels":)" +
           labels + "}]";
  };
  EXPECT_TRUE(ParsePushedRows(body(kMaxLabelsDepth), kNow).ok());
  for (int depth : {kMaxLabelsDepth + 1, 20'000, 1'000'000}) {
    std::string message = ErrorOf(body(depth));
    EXPECT_EQ(message.rfind("row 2 \"labels\" nests deeper than a row may: labels may nest 32 "
                            "levels deep",
                            0),
              0u)
        << message;
  }
  // A deep value elsewhere, or a body that is not an array, is refused as well.
  EXPECT_NE(ErrorOf(std::string(100'000, '{')).find("the body nests deeper"), std::string::npos);
  EXPECT_NE(ErrorOf(R"([{"device_id":"a","metric_id":"m","value":)" + std::string(50, '['))
                .find("row 1 \"value\" nests deeper"),
            std::string::npos);
  // Quoted brackets are text, not nesting.
  EXPECT_TRUE(ParsePushedRows(R"([{"device_id":"a","metric_id":"m","value":1,"labels":{"x":")" +
                                  std::string(100, '{') + R"(\""}}])",
                              kNow)
                  .ok());
  std::string big = R"([{"device_id":"a","metric_id":"m","value":1,"labels":{"x":")" +
                    std::string(kMaxLabelsBytes, 'x') + R"("}}])";
  EXPECT_NE(ErrorOf(big).find("row 1 \"labels\" are 65544 bytes of JSON, more than the 65536"),
            std::string::npos);
}

// Without a timestamp a row is the server's now, to the microsecond a store keeps.
TEST(ParsePushedRows, NowIsRoundedToTheMicrosecond) {
  auto rows = ParsePushedRows(R"([{"device_id":"a","metric_id":"m","value":1}])", kNow + 1'234'567);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ((*rows)[0].t, kNow + 1'234'000);
}

TEST(PushedMetrics, ServedInTimeOrderWithLateRowsInPlace) {
  PushedMetrics pushed;
  auto rows = ParsePushedRows(R"([
      {"timestamp": 1713441603, "device_id": "nova-1", "metric_id": "m", "value": 3},
      {"timestamp": 1713441601, "device_id": "nova-1", "metric_id": "m", "value": 1.5},
      {"timestamp": 1713441602, "device_id": "nova-1", "metric_id": "other", "value": 7},
      {"timestamp": 1713441601, "device_id": "nova-2", "metric_id": "m", "value": 9}])",
                              kNow);
  ASSERT_TRUE(rows.ok());
  ASSERT_TRUE(pushed.Add("lyon", *rows).ok());
  // A late row, between two already stored.
  auto late = ParsePushedRows(
      R"([{"timestamp": 1713441602, "device_id": "nova-1", "metric_id": "m", "value": 2}])", kNow);
  ASSERT_TRUE(pushed.Add("lyon", *late).ok());
  EXPECT_EQ(pushed.rows(), 5);
  EXPECT_EQ(Answer(pushed, "nova-1", {"m"}, kNow, kNow + 10 * kNanosPerSecond),
            "[{\"timestamp\":\"2024-04-18T14:00:01+02:00\",\"device_id\":\"nova-1\","
            "\"metric_id\":\"m\",\"value\":1.5,\"labels\":{}},\n"
            "{\"timestamp\":\"2024-04-18T14:00:02+02:00\",\"device_id\":\"nova-1\","
            "\"metric_id\":\"m\",\"value\":2,\"labels\":{}},\n"
            "{\"timestamp\":\"2024-04-18T14:00:03+02:00\",\"device_id\":\"nova-1\","
            "\"metric_id\":\"m\",\"value\":3,\"labels\":{}}]");
  // Bounds are inclusive; other metrics and devices come when asked; other sites never.
  std::string all =
      Answer(pushed, "nova-1", {}, kNow + kNanosPerSecond, kNow + 2 * kNanosPerSecond);
  EXPECT_NE(all.find("\"metric_id\":\"other\",\"value\":7"), std::string::npos);
  EXPECT_EQ(all.find("\"value\":3,"), std::string::npos);
  EXPECT_EQ(Answer(pushed, "nova-3", {}, kNow, kNow + 10 * kNanosPerSecond), "[]");
  EXPECT_TRUE(pushed.SeriesOf("nancy", "nova-1", {}).empty());
}

TEST(PushedMetrics, ASeriesBeingServedKeepsItsSamples) {
  PushedMetrics pushed;
  auto one = ParsePushedRows(
      R"([{"timestamp": 1713441601, "device_id": "nova-1", "metric_id": "m", "value": 1}])", kNow);
  ASSERT_TRUE(pushed.Add("lyon", *one).ok());
  std::vector<simulate::OutputSeries> snapshot = pushed.SeriesOf("lyon", "nova-1", {});
  ASSERT_TRUE(pushed.Add("lyon", *one).ok());
  EXPECT_EQ(snapshot[0].recorded->size(), 1u);
  EXPECT_EQ(pushed.SeriesOf("lyon", "nova-1", {})[0].recorded->size(), 2u);
}

TEST(PushedMetrics, SummariesAverageOrTakeTheMaxOfCounters) {
  PushedMetrics pushed;
  auto rows = ParsePushedRows(R"([
      {"timestamp": 1713441600, "device_id": "n", "metric_id": "m", "value": 1},
      {"timestamp": 1713441700, "device_id": "n", "metric_id": "m", "value": 2},
      {"timestamp": 1713441610, "device_id": "n", "metric_id": "c_total", "value": 5},
      {"timestamp": 1713441620, "device_id": "n", "metric_id": "c_total", "value": 8},
      {"timestamp": 1713441900, "device_id": "n", "metric_id": "m", "value": 10}])",
                              kNow);
  ASSERT_TRUE(rows.ok());
  ASSERT_TRUE(pushed.Add("lyon", *rows).ok());
  std::string summary =
      Answer(pushed, "n", {}, kNow, kNow + 600 * kNanosPerSecond, /*summary=*/true);
  EXPECT_NE(summary.find("\"metric_id\":\"m\",\"value\":1.5,"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"metric_id\":\"c_total\",\"value\":8,"), std::string::npos) << summary;
  EXPECT_NE(summary.find("14:05:00+02:00\",\"device_id\":\"n\",\"metric_id\":\"m\",\"value\":10"),
            std::string::npos)
      << summary;
}

TEST(PushedMetrics, TheMemoryLimitRefusesAWholePush) {
  PushedMetrics pushed(/*max_rows=*/10);
  std::vector<PushedRow> many(6, PushedRow{"n", "m", "{}", kNow, 1});
  ASSERT_TRUE(pushed.Add("lyon", many).ok());
  Status status = pushed.Add("lyon", many);
  EXPECT_EQ(status.code(), Status::Code::kUnavailable);
  EXPECT_NE(status.message().find("nothing was stored"), std::string::npos);
  EXPECT_NE(status.message().find("at most 10 pushed rows in memory, and has 6"),
            std::string::npos);
  EXPECT_EQ(pushed.rows(), 6);
}

}  // namespace
// Rows pushed with `_device_alias` are stored as Kwollect's metrics_by_device answers them: the
// originals without the label, and the node's row summing a push's outlets of one instant.
TEST(ParsePushedRows, AliasedDevicesAreSummedUnderTheirNodeAsKwollectAnswersThem) {
  Result<std::vector<PushedRow>> rows = ParsePushedRows(
      R"([{"timestamp":1,"device_id":"pdu-b","metric_id":"p","value":2,"labels":{"outlet":"7","_device_alias":"nova-2"}},
          {"timestamp":1,"device_id":"pdu-a","metric_id":"p","value":3,"labels":{"_device_alias":"nova-2","outlet":"7"}},
          {"timestamp":2,"device_id":"pdu-a","metric_id":"p","value":5,"labels":{"_device_alias":"nova-2","outlet":"7"}},
          {"timestamp":1,"device_id":"nova-1","metric_id":"p","value":9}])",
      kNow);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 6u);
  EXPECT_EQ((*rows)[0].labels_json, R"({"outlet":"7"})");
  EXPECT_EQ((*rows)[1].labels_json, R"({"outlet":"7"})");
  EXPECT_EQ((*rows)[3].labels_json, "{}");
  EXPECT_EQ((*rows)[4].device_id, "nova-2");
  EXPECT_EQ((*rows)[4].value, 5);
  EXPECT_EQ((*rows)[4].labels_json, R"({"outlet":"7","_device_orig":["pdu-a","pdu-b"]})");
  EXPECT_EQ((*rows)[5].value, 5);
  EXPECT_EQ((*rows)[5].labels_json, R"({"outlet":"7","_device_orig":["pdu-a"]})");
  EXPECT_EQ(LabelsWithout(R"({"a":1,"_metric_scrape_time":"3.5"})", "_metric_scrape_time"),
            R"({"a":1})");
  EXPECT_EQ(LabelsWithout("{}", "_metric_scrape_time"), "{}");
}

}  // namespace kwatt::server::internal::pushed_test
