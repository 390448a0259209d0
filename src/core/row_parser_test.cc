#include "kwatt/core/row_parser.h"

#include <gtest/gtest.h>

#include <charconv>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "kwatt/core/null_value.h"

namespace kwatt::internal::row_parser_test {
namespace {

constexpr std::string_view kRow0 =
    R"({"timestamp":"2025-04-18T18:55:33.754307+02:00","device_id":"ecotype-7","metric_id":"bmc_node_power_watt","value":98,"labels":{}})";
constexpr std::string_view kRow1 =
    R"({"timestamp":"2025-04-18T18:55:34.732712+02:00","device_id":"ecotype-6","metric_id":"network_ifacein_bytes_total","value":152601965318,"labels":{"interface":"eth1","_device_orig":["ecotype-prod2-port-1_6"]}})";
constexpr std::string_view kRow2 =
    R"({"timestamp":"2025-07-22T13:05:25+02:00","device_id":"taurus-7","metric_id":"wattmetre_power_watt","value":90.18,"labels":{"_device_orig":["wattmetre1-port6"]}})";

// A row with one value of `value` and the other keys canonical.
std::string RowWithValue(std::string_view value) {
  return R"({"timestamp":"2025-04-18T18:55:33.754307+02:00","device_id":"d","metric_id":"m",)"
         R"("value":)" +
         std::string(value) + R"(,"labels":{}})";
}

// One row of a batch with its strings resolved, for comparisons across interners.
struct Row {
  UnixNanos time;
  int32_t utc_offset;
  std::string device, metric;
  double value;
  std::string labels, raw;

  bool operator==(const Row& o) const {
    bool same_value = value == o.value || (std::isnan(value) && std::isnan(o.value));
    return time == o.time && utc_offset == o.utc_offset && device == o.device &&
           metric == o.metric && same_value && labels == o.labels && raw == o.raw;
  }
  friend std::ostream& operator<<(std::ostream& os, const Row& r) {
    return os << r.time << " " << r.utc_offset << " " << r.device << " " << r.metric << " "
              << r.value << " " << r.labels << " " << r.raw;
  }
};

std::vector<Row> Rows(const RowBatch& batch, const StringInterner& interner) {
  EXPECT_EQ(batch.utc_offset.size(), batch.size());
  EXPECT_EQ(batch.device.size(), batch.size());
  EXPECT_EQ(batch.metric.size(), batch.size());
  EXPECT_EQ(batch.value.size(), batch.size());
  EXPECT_EQ(batch.labels.size(), batch.size());
  EXPECT_EQ(batch.raw_end.size(), batch.size());
  std::vector<Row> rows;
  for (size_t i = 0; i < batch.size(); ++i) {
    rows.push_back(Row{batch.time[i], batch.utc_offset[i],
                       std::string(interner.Get(batch.device[i])),
                       std::string(interner.Get(batch.metric[i])), batch.value[i],
                       std::string(interner.Get(batch.labels[i])), std::string(batch.RawRow(i))});
  }
  return rows;
}

// Parses `body` fed in pieces ending at `cuts` (ascending offsets), then Finish().
struct Parsed {
  Status feed;    // first non-OK Feed, or OK
  Status finish;  // Finish() (only called when every Feed was OK)
  std::vector<Row> rows;
  int64_t row_count = 0;
  int64_t byte_count = 0;
};

Parsed ParseInPieces(std::string_view body, const std::vector<size_t>& cuts,
                     Framing framing = Framing::kJsonArray) {
  StringInterner interner;
  RowStreamParser parser(&interner, framing);
  RowBatch batch;
  Parsed out;
  size_t begin = 0;
  std::vector<size_t> ends = cuts;
  ends.push_back(body.size());
  for (size_t end : ends) {
    // Copy each piece so that ASan catches any read beyond it.
    std::string piece(body.substr(begin, end - begin));
    out.feed = parser.Feed(piece, &batch);
    begin = end;
    if (!out.feed.ok()) break;
  }
  if (out.feed.ok()) out.finish = parser.Finish();
  out.rows = Rows(batch, interner);
  out.row_count = parser.rows();
  out.byte_count = parser.bytes();
  return out;
}

Parsed Parse(std::string_view body, Framing framing = Framing::kJsonArray) {
  return ParseInPieces(body, {}, framing);
}

Parsed ParseByteByByte(std::string_view body, Framing framing = Framing::kJsonArray) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < body.size(); ++i) cuts.push_back(i);
  return ParseInPieces(body, cuts, framing);
}

// The body fails with Corruption whose message contains every one of `parts`.
void ExpectCorruption(std::string_view body, const std::vector<std::string>& parts,
                      Framing framing = Framing::kJsonArray) {
  SCOPED_TRACE(std::string(body));
  for (const Parsed& parsed : {Parse(body, framing), ParseByteByByte(body, framing)}) {
    Status status = parsed.feed.ok() ? parsed.finish : parsed.feed;
    ASSERT_EQ(status.code(), Status::Code::kCorruption) << status.ToString();
    for (const std::string& part : parts) {
      EXPECT_NE(status.message().find(part), std::string::npos)
          << "\"" << part << "\" not in: " << status.message();
    }
  }
}

std::string Body(const std::vector<std::string_view>& rows, std::string_view separator = ",\n") {
  std::string body = "[";
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i > 0) body += separator;
    body += rows[i];
  }
  body += "]";
  return body;
}

TEST(RowStreamParser, CanonicalRows) {
  std::string body = Body({kRow0, kRow1, kRow2});
  Parsed parsed = Parse(body);
  ASSERT_TRUE(parsed.feed.ok()) << parsed.feed.ToString();
  ASSERT_TRUE(parsed.finish.ok()) << parsed.finish.ToString();
  ASSERT_EQ(parsed.rows.size(), 3u);
  EXPECT_EQ(parsed.rows[0], (Row{1744995333754307000, 7200, "ecotype-7", "bmc_node_power_watt", 98,
                                 "{}", std::string(kRow0)}));
  EXPECT_EQ(
      parsed.rows[1],
      (Row{1744995334732712000, 7200, "ecotype-6", "network_ifacein_bytes_total", 152601965318.0,
           R"({"interface":"eth1","_device_orig":["ecotype-prod2-port-1_6"]})",
           std::string(kRow1)}));
  EXPECT_EQ(parsed.rows[2],
            (Row{1753182325000000000, 7200, "taurus-7", "wattmetre_power_watt", 90.18,
                 R"({"_device_orig":["wattmetre1-port6"]})", std::string(kRow2)}));
  EXPECT_EQ(parsed.row_count, 3);
  EXPECT_EQ(parsed.byte_count, int64_t(body.size()));
}

TEST(RowStreamParser, BatchLayoutAndInterning) {
  StringInterner interner;
  RowStreamParser parser(&interner);
  RowBatch batch;
  std::string body = Body({kRow0, kRow0, kRow2});
  ASSERT_TRUE(parser.Feed(body, &batch).ok());
  ASSERT_TRUE(parser.Finish().ok());
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_EQ(batch.raw, std::string(kRow0) + std::string(kRow0) + std::string(kRow2));
  EXPECT_EQ(batch.raw_end,
            (std::vector<uint32_t>{uint32_t(kRow0.size()), uint32_t(2 * kRow0.size()),
                                   uint32_t(2 * kRow0.size() + kRow2.size())}));
  EXPECT_EQ(batch.device[0], batch.device[1]);
  EXPECT_EQ(batch.labels[0], batch.labels[1]);
  EXPECT_NE(batch.device[0], batch.device[2]);
  // ecotype-7, bmc_node_power_watt, {}, taurus-7, wattmetre_power_watt, its labels.
  EXPECT_EQ(interner.size(), 6u);
  EXPECT_EQ(batch.utc_offset, (std::vector<int32_t>{7200, 7200, 7200}));
}

TEST(RowStreamParser, WinterOffsetAndFiveFractionDigits) {
  Parsed parsed = Parse(
      R"([{"timestamp":"2022-02-25T09:02:15.40325+01:00","device_id":"d","metric_id":"m","value":1,"labels":{}}])");
  ASSERT_TRUE(parsed.finish.ok()) << parsed.finish.ToString();
  ASSERT_EQ(parsed.rows.size(), 1u);
  EXPECT_EQ(parsed.rows[0].time, 1645776135403250000);
  EXPECT_EQ(parsed.rows[0].utc_offset, 3600);
}

// A body that exercises every state: whitespace, escapes (split mid-escape and mid-\u), nested
// labels, unknown keys, other key orders, special values.
std::string TrickyBody() {
  return std::string(" \n[ ") + std::string(kRow0) + " , \n " +
         R"({"labels":{"s":"a\"b\\","e":"caf\u00e9 \ud83d\ude00","n":[["x",{"y":[]}],1.5e-3,true,false,null]},"value":"NaN","metric_id":"m\u00e9tric","extra":{"k":[1,2,{"}":"]"}]},"device_id":"dev\"ice","timestamp":"2025-10-26T02:30:00+01:00"})" +
         ",\n" + std::string(kRow1) + ",\r\n\t" +
         R"({"timestamp":"2025-04-18T18:55:33+02:00","device_id":"é-node","metric_id":"m","value":null})" +
         "," + std::string(kRow2) + "\n]\n ";
}

TEST(RowStreamParser, EverySplitPointGivesTheSameBatch) {
  std::string body = TrickyBody();
  Parsed whole = Parse(body);
  ASSERT_TRUE(whole.feed.ok()) << whole.feed.ToString();
  ASSERT_TRUE(whole.finish.ok()) << whole.finish.ToString();
  ASSERT_EQ(whole.rows.size(), 5u);

  Parsed one_by_one = ParseByteByByte(body);
  ASSERT_TRUE(one_by_one.finish.ok()) << one_by_one.finish.ToString();
  EXPECT_EQ(one_by_one.rows, whole.rows);
  EXPECT_EQ(one_by_one.byte_count, int64_t(body.size()));

  for (size_t cut = 0; cut <= body.size(); ++cut) {
    Parsed two = ParseInPieces(body, {cut});
    ASSERT_TRUE(two.feed.ok()) << "cut at " << cut << ": " << two.feed.ToString();
    ASSERT_TRUE(two.finish.ok()) << "cut at " << cut << ": " << two.finish.ToString();
    ASSERT_EQ(two.rows, whole.rows) << "cut at " << cut;
  }
  // Three pieces, every pair of cuts 7 bytes apart (a row split across three Feed calls).
  for (size_t cut = 0; cut + 7 <= body.size(); ++cut) {
    Parsed three = ParseInPieces(body, {cut, cut + 7});
    ASSERT_TRUE(three.finish.ok()) << "cuts at " << cut << ": " << three.finish.ToString();
    ASSERT_EQ(three.rows, whole.rows) << "cuts at " << cut;
  }
}

TEST(RowStreamParser, TrickyRowColumns) {
  Parsed parsed = Parse(TrickyBody());
  ASSERT_EQ(parsed.rows.size(), 5u);
  const Row& tricky = parsed.rows[1];
  EXPECT_EQ(tricky.device, "dev\"ice");
  EXPECT_EQ(tricky.metric, "m\xc3\xa9tric");
  EXPECT_TRUE(std::isnan(tricky.value));
  // Labels are kept as sent, escapes included.
  EXPECT_EQ(
      tricky.labels,
      R"({"s":"a\"b\\","e":"caf\u00e9 \ud83d\ude00","n":[["x",{"y":[]}],1.5e-3,true,false,null]})");
  EXPECT_EQ(tricky.raw.substr(0, 10), R"({"labels":)");
  EXPECT_EQ(tricky.raw.back(), '}');
  EXPECT_NE(tricky.raw.find(R"("extra":{"k":[1,2,{"}":"]"}]})"), std::string::npos);
  EXPECT_EQ(tricky.time, 1761442200LL * kNanosPerSecond);  // 2025-10-26T01:30:00Z
  EXPECT_EQ(tricky.utc_offset, 3600);

  const Row& no_labels = parsed.rows[3];
  EXPECT_EQ(no_labels.device, "\xc3\xa9-node");
  EXPECT_EQ(no_labels.labels, "{}");
  EXPECT_TRUE(std::isnan(no_labels.value));
}

TEST(RowStreamParser, WhitespaceVariants) {
  std::vector<Row> expected = Parse(Body({kRow0, kRow1, kRow2})).rows;
  ASSERT_EQ(expected.size(), 3u);
  for (std::string_view separator : {",", ",\n", ", \n ", " ,\r\n\t"}) {
    for (std::string_view outside : {"", "\n", " \n\t\r "}) {
      std::string body =
          std::string(outside) + Body({kRow0, kRow1, kRow2}, separator) + std::string(outside);
      body.insert(body.find('[') + 1, outside);
      body.insert(body.rfind(']'), outside);
      Parsed parsed = Parse(body);
      ASSERT_TRUE(parsed.finish.ok()) << body << ": " << parsed.finish.ToString();
      EXPECT_EQ(parsed.rows, expected) << body;
    }
  }
  // Whitespace inside a row is kept in its raw text.
  std::string spaced =
      "{ \"timestamp\" : \"2025-07-22T13:05:25+02:00\" ,\n \"device_id\":\"d\", \"metric_id\" :"
      "\"m\",\"value\" :\t-1.5 , \"labels\" : { \"a\" : [ 1 , 2 ] } }";
  Parsed parsed = Parse("[" + spaced + "]");
  ASSERT_TRUE(parsed.finish.ok()) << parsed.finish.ToString();
  ASSERT_EQ(parsed.rows.size(), 1u);
  EXPECT_EQ(parsed.rows[0].raw, spaced);
  EXPECT_EQ(parsed.rows[0].labels, "{ \"a\" : [ 1 , 2 ] }");
  EXPECT_EQ(parsed.rows[0].value, -1.5);
}

TEST(RowStreamParser, EmptyArray) {
  for (std::string_view body : {"[]", "[ ]", " \n[\n]\n", "[]\n\n"}) {
    Parsed parsed = Parse(body);
    EXPECT_TRUE(parsed.feed.ok()) << parsed.feed.ToString();
    EXPECT_TRUE(parsed.finish.ok()) << parsed.finish.ToString();
    EXPECT_TRUE(parsed.rows.empty());
    EXPECT_EQ(parsed.row_count, 0);
  }
}

TEST(RowStreamParser, SpecialValues) {
  const double kInf = std::numeric_limits<double>::infinity();
  struct Case {
    std::string_view text;
    double value;
  };
  for (const Case& c : std::vector<Case>{{"\"NaN\"", NAN},
                                         {"null", NAN},
                                         {"\"Infinity\"", kInf},
                                         {"\"-Infinity\"", -kInf},
                                         {"\"N\\u0061N\"", NAN},
                                         {"0", 0},
                                         {"-0", -0.0},
                                         {"-3.5", -3.5},
                                         {"1e20", 1e20},
                                         {"1E+20", 1e20},
                                         {"1.5e-07", 1.5e-7},
                                         {"0.30000000000000004", 0.1 + 0.2},
                                         {"1e-400", 0},
                                         {"-1e-400", -0.0},
                                         {"0.0001e-400", 0},
                                         {"123e-330", 0},
                                         {"1000e-326", 1e-323},
                                         {"0.001e310", 1e307},
                                         {"0.1e309", 1e308},
                                         {"5e-324", 5e-324},
                                         {"1e-99999999999999999999", 0},
                                         {"1.7976931348623157e308", 1.7976931348623157e308}}) {
    Parsed parsed = Parse("[" + RowWithValue(c.text) + "]");
    ASSERT_TRUE(parsed.finish.ok()) << c.text << ": " << parsed.finish.ToString();
    ASSERT_EQ(parsed.rows.size(), 1u);
    double v = parsed.rows[0].value;
    if (std::isnan(c.value)) {
      EXPECT_TRUE(std::isnan(v)) << c.text;
      // null is a NaN of its own, which the renderers write back as null (null_value.h).
      EXPECT_EQ(IsNullValue(v), c.text == "null") << c.text;
    } else {
      EXPECT_EQ(v, c.value) << c.text;
      EXPECT_EQ(std::signbit(v), std::signbit(c.value)) << c.text;
    }
  }
}

TEST(RowStreamParser, LargeIntegers) {
  for (auto [text, value] : std::vector<std::pair<std::string_view, double>>{
           {"2147483648", 2147483648.0},
           {"4294967296", 4294967296.0},
           {"152601965318", 152601965318.0},
           {"-152601965318", -152601965318.0},
           {"9007199254740993", 9007199254740992.0},  // rounds to nearest even
           {"123456789012345678901234567890", 1.2345678901234568e29}}) {
    Parsed parsed = Parse("[" + RowWithValue(text) + "]");
    ASSERT_TRUE(parsed.finish.ok()) << text << ": " << parsed.finish.ToString();
    EXPECT_EQ(parsed.rows[0].value, value) << text;
  }
}

TEST(RowStreamParser, LabelsNullOrMissingAreEmptyObject) {
  for (
      std::string_view row :
      {R"({"timestamp":"2025-04-18T18:55:33+02:00","device_id":"d","metric_id":"m","value":1})",
       R"({"timestamp":"2025-04-18T18:55:33+02:00","device_id":"d","metric_id":"m","value":1,"labels":null})"}) {
    Parsed parsed = Parse("[" + std::string(row) + "]");
    ASSERT_TRUE(parsed.finish.ok()) << parsed.finish.ToString();
    EXPECT_EQ(parsed.rows[0].labels, "{}");
    EXPECT_EQ(parsed.rows[0].raw, row);
  }
}

TEST(RowStreamParser, KeysInAnyOrderAndUnknownKeys) {
  std::string reordered =
      R"({"labels":{},"value":98,"metric_id":"bmc_node_power_watt","device_id":"ecotype-7","timestamp":"2025-04-18T18:55:33.754307+02:00"})";
  std::string extra =
      R"({"first":[{"a":"}"},"]"],"timestamp":"2025-04-18T18:55:33.754307+02:00","device_id":"ecotype-7","metric_id":"bmc_node_power_watt","mid":-1.5e3,"value":98,"labels":{},"last":"x\"y","t":true,"f":false,"n":null})";
  Parsed canonical = Parse(Body({kRow0}));
  for (const std::string& row : {reordered, extra}) {
    Parsed parsed = Parse("[" + row + "]");
    ASSERT_TRUE(parsed.finish.ok()) << row << ": " << parsed.finish.ToString();
    ASSERT_EQ(parsed.rows.size(), 1u);
    Row expected = canonical.rows[0];
    expected.raw = row;
    EXPECT_EQ(parsed.rows[0], expected);
  }
  // A key spelt with escapes is still that key.
  Parsed escaped_key = Parse(
      R"([{"time\u0073tamp":"2025-04-18T18:55:33.754307+02:00","device_id":"ecotype-7","metric_id":"bmc_node_power_watt","value":98}])");
  ASSERT_TRUE(escaped_key.finish.ok()) << escaped_key.finish.ToString();
  EXPECT_EQ(escaped_key.rows[0].time, canonical.rows[0].time);
}

TEST(RowStreamParser, RowsGoToTheBatchOfEachCall) {
  StringInterner interner;
  RowStreamParser parser(&interner);
  std::string body = Body({kRow0, kRow1, kRow2});
  size_t cut = body.find(kRow1) + 10;
  RowBatch first, second;
  ASSERT_TRUE(parser.Feed(body.substr(0, cut), &first).ok());
  EXPECT_EQ(first.size(), 1u);
  EXPECT_EQ(parser.rows(), 1);
  ASSERT_TRUE(parser.Feed(body.substr(cut), &second).ok());
  EXPECT_EQ(second.size(), 2u);
  EXPECT_EQ(second.RawRow(0), kRow1);
  EXPECT_EQ(second.RawRow(1), kRow2);
  EXPECT_EQ(parser.rows(), 3);
  EXPECT_EQ(parser.bytes(), int64_t(body.size()));
  EXPECT_TRUE(parser.Finish().ok());
  EXPECT_TRUE(parser.Finish().ok());
}

TEST(RowStreamParser, CutBodies) {
  std::string body = Body({kRow0, kRow1, kRow2});
  ExpectCorruption("", {"ended after 0 rows", "before the opening [", "empty body"});
  ExpectCorruption(" \n", {"ended after 0 rows", "before the opening ["});
  ExpectCorruption("[", {"ended after 0 rows", "before the closing ]"});
  ExpectCorruption("[{", {"ended after 0 rows", "in the middle of a row", "from byte 1"});
  ExpectCorruption("[" + std::string(kRow0) + ",", {"ended after 1 rows", "before the closing ]"});
  ExpectCorruption("[" + std::string(kRow0) + ",\n" + std::string(kRow1),
                   {"ended after 2 rows", "before the closing ]"});
  // Every proper prefix of a body is refused, and keeps the rows completed so far.
  for (size_t length = 0; length < body.size(); ++length) {
    Parsed parsed = Parse(body.substr(0, length));
    ASSERT_TRUE(parsed.feed.ok()) << length;
    ASSERT_EQ(parsed.finish.code(), Status::Code::kCorruption) << length;
    std::string expected = "ended after " + std::to_string(parsed.rows.size()) + " rows, ";
    EXPECT_NE(parsed.finish.message().find(expected), std::string::npos) << parsed.finish.message();
    bool mid_row = parsed.finish.message().find("in the middle of a row") != std::string::npos;
    bool before_end = parsed.finish.message().find("before the closing ]") != std::string::npos;
    EXPECT_TRUE(mid_row || before_end || length == 0) << parsed.finish.message();
  }
  // Mid-row in the middle of a string and of an escape.
  std::string tricky = TrickyBody();
  ExpectCorruption(tricky.substr(0, tricky.find("a\\\"b") + 2), {"in the middle of a row"});
}

TEST(RowStreamParser, MissingKeys) {
  const char* kFull[] = {R"("timestamp":"2025-04-18T18:55:33+02:00")", R"("device_id":"d")",
                         R"("metric_id":"m")", R"("value":1)"};
  const char* kNames[] = {"timestamp", "device_id", "metric_id", "value"};
  for (int missing = 0; missing < 4; ++missing) {
    std::string row = "{";
    for (int k = 0; k < 4; ++k) {
      if (k == missing) continue;
      if (row.size() > 1) row += ",";
      row += kFull[k];
    }
    row += "}";
    std::string body = "[" + std::string(kRow0) + ",\n" + row + "]";
    ExpectCorruption(body, {"row 2", "no \"" + std::string(kNames[missing]) + "\" key",
                            "byte " + std::to_string(body.find(row))});
  }
  ExpectCorruption("[{}]", {"row 1", "no \"timestamp\" key"});
}

TEST(RowStreamParser, BadTimestamps) {
  auto row = [](std::string_view timestamp) {
    return R"([{"timestamp":)" + std::string(timestamp) +
           R"(,"device_id":"d","metric_id":"m","value":1}])";
  };
  ExpectCorruption(row(R"("2025-04-18T18:55:33")"), {"no UTC offset", "byte 14", "row 1"});
  ExpectCorruption(row(R"("2025-02-30T18:55:33+02:00")"), {"bad \"timestamp\"", "byte 14"});
  ExpectCorruption(row(R"("yesterday")"), {"bad \"timestamp\""});
  ExpectCorruption(row("1745000000"), {"expected a string for \"timestamp\""});
}

TEST(RowStreamParser, BadValues) {
  ExpectCorruption("[" + RowWithValue("\"98\"") + "]", {"for \"value\"", "another string"});
  ExpectCorruption("[" + RowWithValue("\"nan\"") + "]", {"for \"value\""});
  ExpectCorruption("[" + RowWithValue("true") + "]", {"for \"value\""});
  ExpectCorruption("[" + RowWithValue("[1]") + "]", {"for \"value\""});
  ExpectCorruption("[" + RowWithValue("1e400") + "]", {"out of the range of a double"});
  ExpectCorruption("[" + RowWithValue("-1e400") + "]", {"out of the range of a double"});
  ExpectCorruption("[" + RowWithValue("10e308") + "]", {"out of the range of a double"});
  ExpectCorruption("[" + RowWithValue("1e99999999999999999999999") + "]", {"out of the range"});
  ExpectCorruption("[" + RowWithValue("01") + "]", {"expected ',' or '}'"});
  ExpectCorruption("[" + RowWithValue("1.") + "]", {"expected a digit after '.'"});
  ExpectCorruption("[" + RowWithValue(".5") + "]", {"for \"value\""});
  ExpectCorruption("[" + RowWithValue("+1") + "]", {"for \"value\""});
  ExpectCorruption("[" + RowWithValue("1e") + "]", {"exponent"});
  ExpectCorruption("[" + RowWithValue("nul") + "]", {"expected a JSON value"});
  ExpectCorruption("[" + RowWithValue("NaN") + "]", {"for \"value\""});
  ExpectCorruption("[" + RowWithValue("Infinity") + "]", {"for \"value\""});
}

TEST(RowStreamParser, MalformedStructure) {
  std::string good = "[" + std::string(kRow0);
  // After the closing ].
  ExpectCorruption(good + "]x", {"unexpected 'x' after the closing ]",
                                 "byte " + std::to_string(good.size() + 1)});
  ExpectCorruption(good + "]]", {"after the closing ]"});
  ExpectCorruption(good + "][]", {"after the closing ]"});
  // Not an array, or elements that are not objects.
  ExpectCorruption("{}", {"byte 0", "expected '[' at the start of the body, got '{'"});
  ExpectCorruption("x", {"expected '['"});
  ExpectCorruption("[1]", {"byte 1", "expected a row '{' or ']'", "got '1'"});
  ExpectCorruption(R"(["row"])", {"expected a row '{'"});
  ExpectCorruption("[[]]", {"expected a row '{'"});
  ExpectCorruption("[null]", {"expected a row '{'"});
  ExpectCorruption(good + ",1]", {"expected a row '{' after ','", "row 2"});
  ExpectCorruption(good + ",]", {"expected a row '{' after ','"});
  ExpectCorruption("[,]", {"expected a row '{' or ']'"});
  ExpectCorruption(good + " " + std::string(kRow0) + "]", {"expected ',' or ']' after row 1"});
  // Unbalanced braces.
  ExpectCorruption(good + "}]", {"expected ',' or ']' after row 1, got '}'",
                                 "byte " + std::to_string(good.size())});
  ExpectCorruption(R"([{"labels":{]}])", {"expected '}' to close an object", "byte 12", "row 1"});
  ExpectCorruption(R"([{"labels":[}]])", {"expected ']' to close an array", "byte 12"});
  ExpectCorruption(R"([{"labels":{"a":1}])", {"expected '}' to close an object", "byte 18"});
  ExpectCorruption(R"([{"labels":{"a":1})", {"in the middle of a row"});
  // Deep nesting is refused early.
  std::string deep = "[{\"labels\":" + std::string(100, '[');
  ExpectCorruption(deep, {"nested deeper than 64 levels"});
}

TEST(RowStreamParser, MalformedJsonInsideRows) {
  auto with_labels = [](std::string_view labels) {
    return R"([{"timestamp":"2025-04-18T18:55:33+02:00","device_id":"d","metric_id":"m",)"
           R"("value":1,"labels":)" +
           std::string(labels) + "}]";
  };
  ExpectCorruption(with_labels(R"({"a":tru})"), {"expected a JSON value"});
  ExpectCorruption(with_labels(R"({"a":1,})"), {"expected a string"});
  ExpectCorruption(with_labels(R"({"a" 1})"), {"expected ':' after a key"});
  ExpectCorruption(with_labels(R"({'a':1})"), {"expected a string"});
  ExpectCorruption(with_labels(R"({"a":[1,]})"), {"expected a JSON value"});
  ExpectCorruption(with_labels(R"({"a":[1 2]})"), {"expected ',' or ']' in an array"});
  ExpectCorruption(with_labels(R"({"a":"\x"})"), {"invalid escape"});
  ExpectCorruption(with_labels(R"({"a":"\u12g4"})"), {"4 hex digits"});
  ExpectCorruption(with_labels(R"({"a":"\ud83d"})"), {"high surrogate"});
  ExpectCorruption(with_labels(R"({"a":"\ude00"})"), {"lone low surrogate"});
  ExpectCorruption(with_labels("{\"a\":\"tab\there\"}"), {"control character"});
  ExpectCorruption(with_labels("{\"a\":\"\xc3\"}"), {"invalid UTF-8"});
  ExpectCorruption(with_labels("{\"a\":\"\xe0\x80\xaf\"}"), {"invalid UTF-8"});  // overlong
  ExpectCorruption(with_labels("{\"a\":\"\xed\xa0\x80\"}"), {"invalid UTF-8"});  // surrogate
  ExpectCorruption(with_labels("{\"a\":\xc3\xa9}"), {"expected a JSON value"});
  ExpectCorruption(with_labels(R"([])"), {"expected an object (or null) for \"labels\""});
  ExpectCorruption(with_labels(R"("{}")"), {"expected an object"});
  ExpectCorruption(
      R"([{"timestamp":"2025-04-18T18:55:33+02:00","device_id":"d","device_id":"e","metric_id":"m","value":1}])",
      {"duplicate key \"device_id\"", "byte 58"});
  ExpectCorruption(
      R"([{"timestamp":"2025-04-18T18:55:33+02:00","device_id":7,"metric_id":"m","value":1}])",
      {"expected a string for \"device_id\", got '7'"});
  ExpectCorruption(R"([{"timestamp":"2025-04-18T18:55:33+02:00" "device_id":"d"}])",
                   {"expected ',' or '}' after a value in the row"});
  ExpectCorruption(R"([{1:2}])", {"expected a key string"});
  ExpectCorruption(R"([{"a":1,}])", {"expected a key string"});
}

TEST(RowStreamParser, ErrorMessageHasOffsetAndExcerpt) {
  std::string body = "[" + std::string(kRow0) + ",\n" + std::string(kRow0) + "}]";
  Parsed parsed = Parse(body);
  ASSERT_EQ(parsed.feed.code(), Status::Code::kCorruption);
  EXPECT_EQ(parsed.feed.message(),
            "metrics body, byte " + std::to_string(body.size() - 2) +
                ": expected ',' or ']' after row 2, got '}'; near `,\"value\":98,\"labels\":{}}`"
                " ^ `}]`");
  // Rows completed before the error are kept.
  EXPECT_EQ(parsed.rows.size(), 2u);
}

TEST(RowStreamParser, BadRowIsNotAppendedAndParserStaysFailed) {
  StringInterner interner;
  RowStreamParser parser(&interner);
  RowBatch batch;
  std::string body =
      "[" + std::string(kRow0) + "," +
      R"({"timestamp":"2025-04-18T18:55:33+02:00","device_id":"new","metric_id":"new2","value":"x"})";
  Status status = parser.Feed(body, &batch);
  ASSERT_EQ(status.code(), Status::Code::kCorruption);
  EXPECT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch.raw, kRow0);
  EXPECT_EQ(interner.size(), 3u);  // nothing interned from the bad row
  EXPECT_EQ(parser.rows(), 1);
  EXPECT_EQ(parser.bytes(), int64_t(body.size()));
  // Later calls return the same error and change nothing.
  EXPECT_EQ(parser.Feed("]", &batch).ToString(), status.ToString());
  EXPECT_EQ(parser.Finish().ToString(), status.ToString());
  EXPECT_EQ(parser.bytes(), int64_t(body.size()));
  EXPECT_EQ(batch.size(), 1u);
}

TEST(RowStreamParser, FinishFailureIsSticky) {
  StringInterner interner;
  RowStreamParser parser(&interner);
  RowBatch batch;
  ASSERT_TRUE(parser.Feed("[", &batch).ok());
  Status status = parser.Finish();
  ASSERT_EQ(status.code(), Status::Code::kCorruption);
  EXPECT_EQ(parser.Feed("]", &batch).ToString(), status.ToString());
  EXPECT_EQ(parser.Finish().ToString(), status.ToString());
}

TEST(RowStreamParser, LongRowSplitInManyPieces) {
  // A row with large labels, fed in 3-byte pieces: still one row, exact text.
  std::string labels = "{\"_device_orig\":[";
  for (int i = 0; i < 2000; ++i) labels += (i ? ",\"" : "\"") + std::to_string(i) + "\\\"\"";
  labels += "]}";
  std::string row =
      R"({"timestamp":"2025-04-18T18:55:33+02:00","device_id":"d","metric_id":"m","value":1,)"
      R"("labels":)" +
      labels + "}";
  std::string body = "[" + row + "]";
  std::vector<size_t> cuts;
  for (size_t i = 3; i < body.size(); i += 3) cuts.push_back(i);
  Parsed parsed = ParseInPieces(body, cuts);
  ASSERT_TRUE(parsed.finish.ok()) << parsed.finish.ToString();
  ASSERT_EQ(parsed.rows.size(), 1u);
  EXPECT_EQ(parsed.rows[0].raw, row);
  EXPECT_EQ(parsed.rows[0].labels, labels);
}

std::string RowWithTimestamp(std::string_view timestamp) {
  return R"({"timestamp":")" + std::string(timestamp) +
         R"(","device_id":"d","metric_id":"m","value":1})";
}

// The parser reuses the instant of the previous row's minute; every text must still read exactly
// as ParseIsoTimestamp reads it, whatever came before.
TEST(RowStreamParser, TimestampsReadAsParseIsoTimestampDoes) {
  std::vector<std::string_view> timestamps = {"2025-04-18T18:55:33.754307+02:00",
                                              "2025-04-18T18:55:34+02:00",
                                              "2025-04-18T18:55:59.999999999+02:00",
                                              "2025-04-18T18:55:60+02:00",
                                              "2025-04-18T18:55:07.1+02:00",
                                              "2025-04-18T18:55:07.1+01:00",
                                              "2025-04-18T18:55:07.1Z",
                                              "2025-04-18T18:55:07,5+02:00",
                                              "2025-04-18T18:55:07.25-03:30",
                                              "2025-04-18T18:55:08+02",
                                              "2025-04-18T18:55:09+0200",
                                              "2025-04-18 18:55:10+02:00",
                                              "2025-04-18T18:56:00+02:00",
                                              "2025-04-18T24:00:00+02:00",
                                              "2025-04-18T18:56:00.000000001+02:00",
                                              "2025-10-26T02:59:59.5+02:00",
                                              "2025-10-26T02:00:00.5+01:00",
                                              "1969-12-31T23:59:59.9Z",
                                              "2025-04-18T18:55+02:00",
                                              "2025-04-18T18:56:00.123456789+02:00"};
  std::string body = "[";
  for (std::string_view timestamp : timestamps) {
    if (body.size() > 1) body += ",";
    body += RowWithTimestamp(timestamp);
  }
  body += "]";
  for (const Parsed& parsed : {Parse(body), ParseByteByByte(body)}) {
    ASSERT_TRUE(parsed.finish.ok()) << parsed.finish.ToString();
    ASSERT_EQ(parsed.rows.size(), timestamps.size());
    for (size_t i = 0; i < timestamps.size(); ++i) {
      Result<ParsedTime> expected = ParseIsoTimestamp(timestamps[i]);
      ASSERT_TRUE(expected.ok()) << timestamps[i];
      EXPECT_EQ(parsed.rows[i].time, expected->utc) << timestamps[i];
      EXPECT_EQ(parsed.rows[i].utc_offset, *expected->offset_seconds) << timestamps[i];
    }
  }
  // Bad texts are refused even right after a row of the same minute.
  for (std::string_view bad :
       {"2025-04-18T18:55:07.1234567890+02:00", "2025-04-18T18:55:07.+02:00",
        "2025-04-18T18:55:7+02:00", "2025-04-18T18:55:33+02:00x", "2025-04-18T18:55:33",
        "2025-04-18T18:55:61+02:00", "2025-04-18T18:55:3a+02:00", "2025-04-18T18:55:33+02:0"}) {
    ExpectCorruption(
        "[" + RowWithTimestamp("2025-04-18T18:55:33.5+02:00") + "," + RowWithTimestamp(bad) + "]",
        {"row 2", "timestamp"});
  }
  ExpectCorruption("[" + RowWithTimestamp("2025-04-18T24:00:00+02:00") + "," +
                       RowWithTimestamp("2025-04-18T24:00:01+02:00") + "]",
                   {"row 2", "time out of range"});
}

// Many distinct devices and labels, some alike at their start, middle and end: each row still
// refers to its own strings.
TEST(RowStreamParser, ManyDistinctStrings) {
  std::string body = "[";
  std::vector<std::pair<std::string, std::string>> expected;
  for (int i = 0; i < 3000; ++i) {
    int k = (i * 7919) % 1500;
    std::string device = k % 3 == 0 ? "n" + std::to_string(k % 10) : "node-" + std::to_string(k);
    std::string labels =
        R"({"_device_orig":["wattmetre-)" + std::to_string(k) + R"(-port-1"],"phase":"x"})";
    if (i > 0) body += ",";
    body += R"({"timestamp":"2025-04-18T18:55:33+02:00","device_id":")" + device +
            R"(","metric_id":"m","value":1,"labels":)" + labels + "}";
    expected.emplace_back(device, labels);
  }
  body += "]";
  Parsed parsed = Parse(body);
  ASSERT_TRUE(parsed.finish.ok()) << parsed.finish.ToString();
  ASSERT_EQ(parsed.rows.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(parsed.rows[i].device, expected[i].first) << i;
    ASSERT_EQ(parsed.rows[i].labels, expected[i].second) << i;
  }
}

TEST(RowStreamParser, OverlongRowIsRefused) {
  std::string start = R"([{"timestamp":"2025-04-18T18:55:33+02:00","labels":{"a":")";
  std::string filler(1 << 20, 'a');
  // Fed in pieces: the framer stops buffering.
  {
    StringInterner interner;
    RowStreamParser parser(&interner);
    RowBatch batch;
    Status status = parser.Feed(start, &batch);
    for (int i = 0; i < 20 && status.ok(); ++i) status = parser.Feed(filler, &batch);
    ASSERT_EQ(status.code(), Status::Code::kCorruption);
    EXPECT_NE(status.message().find("row longer than 16777216 bytes"), std::string::npos)
        << status.message();
  }
  // Whole in one piece.
  std::string body = start;
  for (int i = 0; i < 17; ++i) body += filler;
  body += R"("},"device_id":"d","metric_id":"m","value":1}])";
  Parsed parsed = Parse(body);
  ASSERT_EQ(parsed.feed.code(), Status::Code::kCorruption);
  EXPECT_NE(parsed.feed.message().find("row longer than"), std::string::npos)
      << parsed.feed.message().substr(0, 200);
}

// The error's place and reason ("metrics body, byte N, row R: what"), without the excerpt, which
// depends on how the body was split.
std::string ErrorWithoutExcerpt(const Parsed& parsed) {
  Status status = parsed.feed.ok() ? parsed.finish : parsed.feed;
  return status.ToString().substr(0, status.ToString().find("; near "));
}

// Random damage to a valid body: the parser refuses whatever is not JSON (nlohmann's parser is the
// reference), accepts only JSON, and gives the same answer however the body is split.
TEST(RowStreamParser, DamagedBodies) {
  const std::string original = TrickyBody();
  std::mt19937 random(20250418);
  const std::string alphabet = "{}[]\",:\\ \nu0aeE.-+9tfnl\x01\xc3\xa9\xff";
  int refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string body = original;
    int edits = 1 + int(random() % 3);
    for (int e = 0; e < edits; ++e) {
      size_t at = random() % body.size();
      switch (random() % 3) {
        case 0:
          body[at] = alphabet[random() % alphabet.size()];
          break;
        case 1:
          body.erase(at, 1 + random() % 3);
          break;
        default:
          body.insert(at, 1, alphabet[random() % alphabet.size()]);
          break;
      }
    }
    SCOPED_TRACE(body);
    Parsed whole = Parse(body);
    size_t a = random() % (body.size() + 1), b = random() % (body.size() + 1);
    Parsed split = ParseInPieces(body, {std::min(a, b), std::max(a, b)});
    bool accepted = whole.feed.ok() && whole.finish.ok();
    EXPECT_EQ(split.feed.ok() && split.finish.ok(), accepted);
    EXPECT_EQ(ErrorWithoutExcerpt(split), ErrorWithoutExcerpt(whole));
    EXPECT_EQ(split.rows, whole.rows);
    if (trial % 20 == 0) {
      Parsed bytewise = ParseByteByByte(body);
      EXPECT_EQ(ErrorWithoutExcerpt(bytewise), ErrorWithoutExcerpt(whole));
      EXPECT_EQ(bytewise.rows, whole.rows);
    }
    bool json = nlohmann::json::accept(body);
    if (!json) {
      EXPECT_FALSE(accepted) << "not JSON, yet accepted";
    }
    if (accepted) {
      EXPECT_TRUE(json);
      EXPECT_EQ(whole.rows.size(), nlohmann::json::parse(body).size());
    } else {
      Status status = whole.feed.ok() ? whole.finish : whole.feed;
      EXPECT_EQ(status.code(), Status::Code::kCorruption) << status.ToString();
      ++refused;
    }
  }
  // Both outcomes are well represented.
  EXPECT_GT(refused, 1000);
  EXPECT_GT(3000 - refused, 300);
}

// ---- JSON Lines (archive data files) ----

constexpr Framing kLines = Framing::kJsonLines;

// The rows of TrickyBody(), one per line (none of them has a newline inside).
std::vector<std::string> TrickyRows() {
  Parsed parsed = Parse(TrickyBody());
  std::vector<std::string> rows;
  for (const Row& row : parsed.rows) rows.push_back(row.raw);
  return rows;
}

std::string Lines(const std::vector<std::string>& rows, bool final_newline = true) {
  std::string text;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i > 0) text += '\n';
    text += rows[i];
  }
  if (final_newline && !rows.empty()) text += '\n';
  return text;
}

TEST(RowStreamParser, JsonLinesGivesTheSameRowsAsTheArray) {
  Parsed array = Parse(TrickyBody());
  ASSERT_EQ(array.rows.size(), 5u);
  std::string text = Lines(TrickyRows());
  for (const Parsed& parsed : {Parse(text, kLines), ParseByteByByte(text, kLines)}) {
    ASSERT_TRUE(parsed.feed.ok()) << parsed.feed.ToString();
    ASSERT_TRUE(parsed.finish.ok()) << parsed.finish.ToString();
    EXPECT_EQ(parsed.rows, array.rows);
    EXPECT_EQ(parsed.row_count, 5);
    EXPECT_EQ(parsed.byte_count, int64_t(text.size()));
  }
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    Parsed two = ParseInPieces(text, {cut}, kLines);
    ASSERT_TRUE(two.feed.ok() && two.finish.ok())
        << "cut at " << cut << ": " << two.feed.ToString() << two.finish.ToString();
    ASSERT_EQ(two.rows, array.rows) << "cut at " << cut;
  }
  // The last row's newline may be missing.
  Parsed no_final = Parse(Lines(TrickyRows(), /*final_newline=*/false), kLines);
  ASSERT_TRUE(no_final.finish.ok()) << no_final.finish.ToString();
  EXPECT_EQ(no_final.rows, array.rows);
}

// The cached-minute shortcut adds seconds to the minute's instant: in the last minute kwatt's times
// reach (2262-04-11T23:47:16.854775807Z is the last instant) that sum must not overflow, and a
// second past the last instant is refused as the full parser refuses it.
TEST(RowStreamParser, TheLastMinuteOfTheTimeRangeIsNotTakenByTheShortcut) {
  auto row = [](const char* time) {
    return std::string(R"({"timestamp":")") + time +
           R"(","device_id":"d","metric_id":"m","value":1,"labels":{}})";
  };
  Parsed in_range = Parse("[" + row("2262-04-11T23:46:59Z") + "," + row("2262-04-11T23:47:00Z") +
                          "," + row("2262-04-11T23:47:16Z") + "]");
  ASSERT_TRUE(in_range.feed.ok()) << in_range.feed.ToString();
  ASSERT_EQ(in_range.rows.size(), 3u);
  EXPECT_EQ(in_range.rows[2].time, 9223372036000000000);
  Parsed past = Parse("[" + row("2262-04-11T23:47:00Z") + "," + row("2262-04-11T23:47:17Z") + "]");
  EXPECT_FALSE(past.feed.ok());
  EXPECT_NE(past.feed.message().find("2262-04-11T23:47:17Z"), std::string::npos)
      << past.feed.ToString();
  EXPECT_EQ(past.rows.size(), 1u);
}

TEST(RowStreamParser, JsonLinesEmptyTextIsZeroRows) {
  Parsed parsed = Parse("", kLines);
  EXPECT_TRUE(parsed.feed.ok());
  EXPECT_TRUE(parsed.finish.ok());
  EXPECT_TRUE(parsed.rows.empty());
}

TEST(RowStreamParser, JsonLinesSpacesAndTabsInsideARowAreKept) {
  std::string spaced =
      "{ \"timestamp\" : \"2025-07-22T13:05:25+02:00\" ,\t\"device_id\":\"d\", \"metric_id\" :"
      "\"m\",\"value\" :\t-1.5 , \"labels\" : { \"a\" : [ 1 , 2 ] } }";
  Parsed parsed = Parse(spaced + "\n", kLines);
  ASSERT_TRUE(parsed.finish.ok()) << parsed.finish.ToString();
  ASSERT_EQ(parsed.rows.size(), 1u);
  EXPECT_EQ(parsed.rows[0].raw, spaced);
}

TEST(RowStreamParser, JsonLinesFramingErrors) {
  const std::string r0(kRow0), r1(kRow1), r2(kRow2);
  ExpectCorruption("\n", {"JSON Lines, line 1, byte 0", "blank line"}, kLines);
  ExpectCorruption(r0 + "\n\n" + r1 + "\n", {"line 2", "blank line"}, kLines);
  ExpectCorruption(r0 + "\n" + r1 + "\n\n", {"line 3", "blank line"}, kLines);
  ExpectCorruption(" " + r0 + "\n", {"line 1", "expected a row '{' at the start of the line"},
                   kLines);
  ExpectCorruption(r0 + " \n", {"line 1", "expected a newline after the row", "' '"}, kLines);
  ExpectCorruption(r0 + "\r\n", {"line 1", "expected a newline after the row", "'\\r'"}, kLines);
  ExpectCorruption(r0 + "\n" + r1 + "\n" + r2 + "x\n", {"line 3", "after the row", "'x'"}, kLines);
  ExpectCorruption("[" + r0 + "]\n", {"line 1", "expected a row '{'", "'['"}, kLines);
  ExpectCorruption(r0 + ",\n" + r1 + "\n", {"line 1", "expected a newline", "','"}, kLines);
  ExpectCorruption(r0 + r1 + "\n", {"line 1", "expected a newline", "'{'"}, kLines);
  // A newline inside a row: between tokens, or in a string (a row cut, the next one glued on).
  std::string broken = r1;
  broken.insert(broken.find("\"device_id\""), "\n");
  ExpectCorruption(r0 + "\n" + broken + "\n",
                   {"line 2", "byte " + std::to_string(r0.size() + 1 + broken.find('\n')), "'\\n'"},
                   kLines);
  ExpectCorruption(r0 + "\n" + r1.substr(0, 30) + "\n" + r2 + "\n",
                   {"line 2", "control character in a string"}, kLines);
  ExpectCorruption(r0 + "\n" + r1.substr(0, 12) + "\n" + r2 + "\n", {"line 2", "'\\n'"}, kLines);
  // A bad row is reported with its line.
  std::string no_value =
      R"({"timestamp":"2025-04-18T18:55:33+02:00","device_id":"d","metric_id":"m"})";
  ExpectCorruption(r0 + "\n" + r1 + "\n" + no_value + "\n", {"line 3", "no \"value\" key"}, kLines);
}

TEST(RowStreamParser, JsonLinesCutTexts) {
  const std::string text = Lines(TrickyRows());
  ExpectCorruption("{", {"ended after 0 rows", "in the middle of a row (line 1, from byte 0"},
                   kLines);
  // Every prefix: whole rows (with or without the last newline) are a valid text; anything else
  // is cut in the middle of a row.
  std::vector<size_t> row_ends;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') row_ends.push_back(i);
  }
  for (size_t length = 0; length < text.size(); ++length) {
    Parsed parsed = Parse(text.substr(0, length), kLines);
    ASSERT_TRUE(parsed.feed.ok()) << length << ": " << parsed.feed.ToString();
    size_t whole = 0;
    bool at_boundary = length == 0;
    for (size_t end : row_ends) {
      if (end <= length) ++whole;
      if (end == length || end + 1 == length) at_boundary = true;
    }
    if (at_boundary) {
      ASSERT_TRUE(parsed.finish.ok()) << length << ": " << parsed.finish.ToString();
      ASSERT_EQ(parsed.rows.size(), whole) << length;
    } else {
      ASSERT_EQ(parsed.finish.code(), Status::Code::kCorruption) << length;
      EXPECT_NE(parsed.finish.message().find("ended after " + std::to_string(whole) +
                                             " rows, in the middle of a row (line " +
                                             std::to_string(whole + 1)),
                std::string::npos)
          << parsed.finish.message();
      EXPECT_NE(parsed.finish.message().find("the text was cut"), std::string::npos);
    }
  }
}

// Random damage to a valid JSON Lines text: refused unless every line is JSON, and the same answer
// however the text is split.
TEST(RowStreamParser, JsonLinesDamagedTexts) {
  const std::string original = Lines(TrickyRows());
  std::mt19937 random(20251129);
  const std::string alphabet = "{}[]\",:\\ \n\n\nu0aeE.-+9tfnl\x01\xc3\xa9\xff";
  int refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text = original;
    int edits = 1 + int(random() % 3);
    for (int e = 0; e < edits; ++e) {
      size_t at = random() % text.size();
      switch (random() % 3) {
        case 0:
          text[at] = alphabet[random() % alphabet.size()];
          break;
        case 1:
          text.erase(at, 1 + random() % 3);
          break;
        default:
          text.insert(at, 1, alphabet[random() % alphabet.size()]);
          break;
      }
    }
    SCOPED_TRACE(text);
    Parsed whole = Parse(text, kLines);
    size_t a = random() % (text.size() + 1), b = random() % (text.size() + 1);
    Parsed split = ParseInPieces(text, {std::min(a, b), std::max(a, b)}, kLines);
    bool accepted = whole.feed.ok() && whole.finish.ok();
    EXPECT_EQ(split.feed.ok() && split.finish.ok(), accepted);
    EXPECT_EQ(ErrorWithoutExcerpt(split), ErrorWithoutExcerpt(whole));
    EXPECT_EQ(split.rows, whole.rows);
    if (trial % 20 == 0) {
      Parsed bytewise = ParseByteByByte(text, kLines);
      EXPECT_EQ(ErrorWithoutExcerpt(bytewise), ErrorWithoutExcerpt(whole));
      EXPECT_EQ(bytewise.rows, whole.rows);
    }
    // The reference: the lines (a final empty one aside) are each a JSON object.
    std::vector<std::string> lines;
    size_t begin = 0;
    while (begin <= text.size()) {
      size_t end = text.find('\n', begin);
      if (end == std::string::npos) end = text.size();
      lines.push_back(text.substr(begin, end - begin));
      begin = end + 1;
    }
    if (!lines.empty() && lines.back().empty()) lines.pop_back();
    bool all_json = true;
    for (const std::string& line : lines) {
      all_json = all_json && !line.empty() && line[0] == '{' && nlohmann::json::accept(line);
    }
    if (!all_json) {
      EXPECT_FALSE(accepted) << "not JSON Lines, yet accepted";
    }
    if (accepted) {
      EXPECT_TRUE(all_json);
      EXPECT_EQ(whole.rows.size(), lines.size());
      for (size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(whole.rows[i].raw, lines[i]);
    } else {
      Status status = whole.feed.ok() ? whole.finish : whole.feed;
      EXPECT_EQ(status.code(), Status::Code::kCorruption) << status.ToString();
      EXPECT_NE(status.message().find("JSON Lines"), std::string::npos) << status.message();
      ++refused;
    }
  }
  EXPECT_GT(refused, 1000);
  EXPECT_GT(3000 - refused, 300);
}

}  // namespace
}  // namespace kwatt::internal::row_parser_test
