#include "kwatt/collect/device.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kwatt/core/null_value.h"

namespace kwatt::collect::device_test {
namespace {

MetricDescription Metric(std::string device, std::string alias = "") {
  MetricDescription metric;
  metric.name = "pdu_outlet_power_watt";
  metric.device_id = std::move(device);
  if (!alias.empty()) {
    metric.labels.emplace_back("_device_alias", "\"" + alias + "\"");
    metric.device_alias = alias;
  }
  return metric;
}

TEST(ReadingOf, ReadsNumbersAsPythonsFloatAndKeepsOtherTextAsValueStr) {
  MetricDescription metric = Metric("pdu-port-1");
  metric.scale_factor = 0.1;
  EXPECT_DOUBLE_EQ(ReadingOf(metric, 5, " 1234 ").value, 123.4);
  EXPECT_DOUBLE_EQ(ReadingOf(metric, 5, "-1e3").value, -100);
  EXPECT_DOUBLE_EQ(ReadingOf(metric, 5, "+7").value, 0.7);
  EXPECT_TRUE(std::isinf(ReadingOf(metric, 5, "inf").value));
  EXPECT_TRUE(std::isnan(ReadingOf(metric, 5, "NaN").value));
  EXPECT_TRUE(ReadingOf(metric, 5, "NaN").labels.empty());
  Reading text = ReadingOf(metric, 5, "on \"battery\"");
  EXPECT_TRUE(std::isnan(text.value));
  ASSERT_EQ(text.labels.size(), 1u);
  EXPECT_EQ(text.labels[0].first, "value_str");
  EXPECT_EQ(text.labels[0].second, R"("on \"battery\"")");
  EXPECT_TRUE(std::isnan(ReadingOf(metric, 5, "").value));
  EXPECT_TRUE(std::isnan(ReadingOf(metric, 5, "--1").value));
  EXPECT_EQ(ReadingOf(metric, 5, 1.0).time, 5);
  EXPECT_EQ(ReadingOf(metric, 5, 1.0).device_id, "pdu-port-1");
}

TEST(AliasReadings, SumsTheOutletsOfANodeAsKwollectsViewDoes) {
  std::vector<Reading> readings = {ReadingOf(Metric("pdu-port-2", "gros-1"), 10, 60.0),
                                   ReadingOf(Metric("pdu-port-1", "gros-1"), 10, 40.0),
                                   ReadingOf(Metric("pdu-port-3", "gros-2"), 10, 80.0),
                                   ReadingOf(Metric("pdu-port-4"), 10, 1.0),
                                   // another instant: another row
                                   ReadingOf(Metric("pdu-port-1", "gros-1"), 20, 41.0)};
  AliasReadings(&readings);
  ASSERT_EQ(readings.size(), 8u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(LabelsText(readings[i].labels), "{}");
  auto find = [&](const std::string& device, UnixNanos time) -> const Reading* {
    for (const Reading& r : readings) {
      if (r.device_id == device && r.time == time) return &r;
    }
    return nullptr;
  };
  const Reading* gros1 = find("gros-1", 10);
  ASSERT_NE(gros1, nullptr);
  EXPECT_EQ(gros1->value, 100);
  EXPECT_EQ(LabelsText(gros1->labels), R"({"_device_orig":["pdu-port-1","pdu-port-2"]})");
  ASSERT_NE(find("gros-2", 10), nullptr);
  EXPECT_EQ(find("gros-2", 10)->value, 80);
  ASSERT_NE(find("gros-1", 20), nullptr);
  EXPECT_EQ(find("gros-1", 20)->value, 41);
  EXPECT_EQ(find("pdu-port-4", 10)->value, 1);
}

// As Kwollect's sum(value): an outlet without a value (null) is left out of its node's sum, the
// node's value is null only when every outlet's is; a NaN makes the sum NaN.
TEST(AliasReadings, NullsAreLeftOutOfTheSumAsSqlsSumLeavesThemOut) {
  std::vector<Reading> readings = {ReadingOf(Metric("pdu-port-1", "gros-1"), 10, 40.0),
                                   ReadingOf(Metric("pdu-port-2", "gros-1"), 10, 0.0),
                                   ReadingOf(Metric("pdu-port-1", "gros-1"), 20, 0.0),
                                   ReadingOf(Metric("pdu-port-2", "gros-1"), 20, 0.0),
                                   ReadingOf(Metric("pdu-port-1", "gros-1"), 30, 1.0),
                                   ReadingOf(Metric("pdu-port-2", "gros-1"), 30, 2.0)};
  readings[1].value = NullValue();
  readings[2].value = NullValue();
  readings[3].value = NullValue();
  readings[5].value = std::numeric_limits<double>::quiet_NaN();
  AliasReadings(&readings);
  ASSERT_EQ(readings.size(), 9u);
  EXPECT_EQ(readings[6].time, 10);
  EXPECT_EQ(readings[6].value, 40);
  EXPECT_EQ(LabelsText(readings[6].labels), R"({"_device_orig":["pdu-port-1","pdu-port-2"]})");
  EXPECT_EQ(readings[7].time, 20);
  EXPECT_TRUE(IsNullValue(readings[7].value));
  EXPECT_EQ(readings[8].time, 30);
  EXPECT_TRUE(std::isnan(readings[8].value) && !IsNullValue(readings[8].value));
}

}  // namespace
}  // namespace kwatt::collect::device_test
