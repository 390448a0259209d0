#include "kwatt/energy/stats.h"

#include <gtest/gtest.h>

namespace kwatt::energy::stats_test {
namespace {

constexpr UnixNanos kS = kNanosPerSecond;

void AddRow(RowBatch* batch, StringInterner* interner, UnixNanos t, const char* device,
            const char* metric, double value, const char* labels = "{}") {
  batch->time.push_back(t);
  batch->utc_offset.push_back(3600);
  batch->device.push_back(interner->Intern(device));
  batch->metric.push_back(interner->Intern(metric));
  batch->value.push_back(value);
  batch->labels.push_back(interner->Intern(labels));
  batch->raw.append("{}");
  batch->raw_end.push_back(uint32_t(batch->raw.size()));
}

TEST(StatsCollector, GaugesCountersResetsAndCpu) {
  StringInterner interner;
  RowBatch batch;
  // A counter that resets (reboot) between 20 s and 30 s.
  double counter[] = {100, 150, 200, 10, 60};
  for (int i = 0; i < 5; ++i) {
    AddRow(&batch, &interner, i * 10 * kS, "n-1", "network_ifacein_bytes_total", counter[i]);
    AddRow(&batch, &interner, i * 10 * kS, "n-1", "bmc_cpu_temp_celsius", 40 + i);
    // Two CPUs: one always busy, one always idle.
    AddRow(&batch, &interner, i * 10 * kS, "n-1", "prom_node_cpu_seconds_total", 10.0 * i,
           R"({"cpu":"0","mode":"user"})");
    AddRow(&batch, &interner, i * 10 * kS, "n-1", "prom_node_cpu_seconds_total", 10.0 * i,
           R"({"cpu":"1","mode":"idle"})");
  }
  AddRow(&batch, &interner, 0, "other-1", "bmc_cpu_temp_celsius", 99);  // not a node asked for
  StatsCollector stats({"n-1.s.grid5000.fr"}, 0, 40 * kS, {{"late", 20 * kS, 40 * kS}});
  ASSERT_TRUE(stats.Write("s", batch, interner).ok());
  auto results = stats.Results();
  ASSERT_EQ(results.size(), 2u);
  const NodeStats& window = results[0][0];
  const MetricStats& bytes = window.metrics.at("network_ifacein_bytes_total");
  EXPECT_TRUE(bytes.counter);
  EXPECT_EQ(bytes.resets, 1);
  EXPECT_DOUBLE_EQ(bytes.increase, 50 + 50 + 10 + 50);
  EXPECT_DOUBLE_EQ(bytes.rate(), 160.0 / 40);
  const MetricStats& temp = window.metrics.at("bmc_cpu_temp_celsius");
  EXPECT_EQ(temp.count, 5);
  EXPECT_DOUBLE_EQ(temp.mean(), 42);
  EXPECT_DOUBLE_EQ(temp.min, 40);
  EXPECT_DOUBLE_EQ(temp.max, 44);
  EXPECT_DOUBLE_EQ(temp.last, 44);
  EXPECT_DOUBLE_EQ(window.cpu_busy, 0.5);
  EXPECT_EQ(window.cpu_source, "prom_node_cpu_seconds_total");
  const NodeStats& late = results[1][0];
  EXPECT_EQ(late.metrics.at("bmc_cpu_temp_celsius").count, 3);
  EXPECT_DOUBLE_EQ(late.metrics.at("network_ifacein_bytes_total").increase, 10 + 50);
}

// Issue 21 #19: a metric without a finite value has no minimum or maximum (NaN: null in JSON,
// "-" in text), not +inf and -inf.
TEST(StatsCollector, AMetricWithoutAFiniteValueHasNoMinimumOrMaximum) {
  StringInterner interner;
  RowBatch batch;
  for (int i = 0; i < 3; ++i) {
    AddRow(&batch, &interner, i * kS, "n-1", "bmc_fan_speed_rpm", NAN);
    AddRow(&batch, &interner, i * kS, "n-1", "bmc_cpu_temp_celsius", i == 1 ? NAN : 40.0 + i);
  }
  StatsCollector stats({"n-1.s.grid5000.fr"}, 0, 10 * kS, {});
  ASSERT_TRUE(stats.Write("s", batch, interner).ok());
  auto results = stats.Results();
  const MetricStats& fans = results[0][0].metrics.at("bmc_fan_speed_rpm");
  EXPECT_EQ(fans.count, 0);
  EXPECT_TRUE(std::isnan(fans.min)) << fans.min;
  EXPECT_TRUE(std::isnan(fans.max)) << fans.max;
  EXPECT_TRUE(std::isnan(fans.mean()));
  const MetricStats& temp = results[0][0].metrics.at("bmc_cpu_temp_celsius");
  EXPECT_EQ(temp.count, 2);
  EXPECT_DOUBLE_EQ(temp.min, 40);
  EXPECT_DOUBLE_EQ(temp.max, 42);
  // Merged into a role: still none.
  NodeStats role = MergeNodeStats("role r", {&results[0][0], &results[0][0]});
  EXPECT_TRUE(std::isnan(role.metrics.at("bmc_fan_speed_rpm").min));
  EXPECT_TRUE(std::isnan(role.metrics.at("bmc_fan_speed_rpm").max));
  EXPECT_DOUBLE_EQ(role.metrics.at("bmc_cpu_temp_celsius").min, 40);
  EXPECT_DOUBLE_EQ(role.metrics.at("bmc_cpu_temp_celsius").max, 42);
}

// Issue 21 #12: as in energy, "window" names the whole window and a phase needs some length.
TEST(StatsSink, RefusesAnEmptyPhaseOrOneNamedWindow) {
  RowsReport resolved;
  resolved.nodes = {{"n-1", "s"}};
  resolved.start = 0;
  resolved.end = 10 * kS;
  StatsSink empty({{"p", 5 * kS, 5 * kS}});
  Status status = empty.Begin(resolved);
  EXPECT_EQ(status.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(status.message().find("phase p is empty"), std::string::npos) << status.message();
  StatsSink named({{"window", 0, 5 * kS}});
  EXPECT_EQ(named.Begin(resolved).code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace kwatt::energy::stats_test
