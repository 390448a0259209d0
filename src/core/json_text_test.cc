#include "kwatt/core/json_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "kwatt/core/null_value.h"

namespace kwatt::json_text_test {
namespace {

std::string Number(double v) {
  std::string out;
  AppendJsonNumber(&out, v);
  return out;
}

TEST(JsonNumber, PostgresFloat8Rendering) {
  EXPECT_EQ(Number(98), "98");
  EXPECT_EQ(Number(152601965318.0), "152601965318");
  EXPECT_EQ(Number(90.18), "90.18");
  EXPECT_EQ(Number(6.914999999999997), "6.914999999999997");
  EXPECT_EQ(Number(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(Number(-3.5), "-3.5");
  EXPECT_EQ(Number(0), "0");
  EXPECT_EQ(Number(1e20), "1e+20");
  EXPECT_EQ(Number(1.5e-7), "1.5e-07");
  EXPECT_EQ(Number(std::nan("")), "\"NaN\"");
  EXPECT_EQ(Number(std::numeric_limits<double>::infinity()), "\"Infinity\"");
}

TEST(JsonNumber, NullIsWrittenNullAndNaNStaysNaN) {
  EXPECT_EQ(Number(NullValue()), "null");
  EXPECT_EQ(Number(-NullValue()), "null");
  EXPECT_EQ(Number(std::numeric_limits<double>::quiet_NaN()), "\"NaN\"");
  EXPECT_EQ(NumberKind(NullValue()), JsonValueKind::kNull);
  EXPECT_TRUE(std::isnan(NullValue()));
  EXPECT_FALSE(IsNullValue(std::numeric_limits<double>::quiet_NaN()));
  EXPECT_FALSE(IsNullValue(0));
}

TEST(JsonNumber, RoundTrips) {
  for (double v : {1.0 / 3, 2.0 / 3 * 1e10, 123456.789, 5e-324, 1.7976931348623157e308}) {
    EXPECT_EQ(std::strtod(Number(v).c_str(), nullptr), v);
  }
}

TEST(JsonString, Escapes) {
  std::string out;
  AppendJsonString(&out,
                   "a\"b\\c\nd\x01"
                   "é");
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\nd\\u0001é\"");
}

TEST(JsonValueKind, OfARowsValueAsJsonLoadsSeesIt) {
  auto kind = [](std::string_view value) {
    std::string row = R"({"timestamp":"2025-04-18T18:55:33+02:00","device_id":"value",)"
                      R"("metric_id":"m","value":)" +
                      std::string(value) + R"(,"labels":{}})";
    return RowValueKind(row);
  };
  EXPECT_EQ(kind("98"), JsonValueKind::kInt);
  EXPECT_EQ(kind("-152601965318"), JsonValueKind::kInt);
  EXPECT_EQ(kind("90.18"), JsonValueKind::kFloat);
  EXPECT_EQ(kind("1e+20"), JsonValueKind::kFloat);
  EXPECT_EQ(kind("null"), JsonValueKind::kNull);
  EXPECT_EQ(kind(R"("NaN")"), JsonValueKind::kText);
  EXPECT_EQ(kind(R"("-Infinity")"), JsonValueKind::kText);
  EXPECT_EQ(RowValueKind(R"({"value" : 7 })"), JsonValueKind::kInt);
  EXPECT_EQ(RowValueKind(R"({"labels":{"x":"value"}})"), JsonValueKind::kFloat);
}

TEST(JsonValueKind, OfANumberAsKwollectRendersIt) {
  EXPECT_EQ(NumberKind(98), JsonValueKind::kInt);
  EXPECT_EQ(NumberKind(152601965318.0), JsonValueKind::kInt);
  EXPECT_EQ(NumberKind(6.914999999999997), JsonValueKind::kFloat);
  EXPECT_EQ(NumberKind(1e20), JsonValueKind::kFloat);
  EXPECT_EQ(NumberKind(NAN), JsonValueKind::kText);
  EXPECT_EQ(NumberKind(-INFINITY), JsonValueKind::kText);
}

TEST(JsonbObjectText, OrdersKeysAsJsonbAndKeepsTheLastValue) {
  EXPECT_EQ(JsonbObjectText({}), "{}");
  EXPECT_EQ(
      JsonbObjectText(
          {{"interface", "\"eth0\""}, {"psu", "1"}, {"b", "true"}, {"a", "null"}, {"psu", "2"}}),
      R"({"a":null,"b":true,"psu":2,"interface":"eth0"})");
}

}  // namespace
}  // namespace kwatt::json_text_test
