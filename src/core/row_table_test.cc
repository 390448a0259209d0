#include "kwatt/core/row_table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "kwatt/core/row_parser.h"

namespace kwatt::row_table_test {
namespace {

// Rows as the API sends them, parsed by the real parser into `batch` (ids of `interner`).
void Parse(const std::string& body, StringInterner* interner, RowBatch* batch) {
  internal::RowStreamParser parser(interner);
  ASSERT_TRUE(parser.Feed(body, batch).ok());
  ASSERT_TRUE(parser.Finish().ok());
}

std::string Row(const std::string& device, const std::string& metric, const std::string& value,
                const std::string& labels = "{}", int second = 0) {
  return R"({"timestamp":"2024-03-01T10:00:0)" + std::to_string(second) +
         R"(+01:00","device_id":")" + device + R"(","metric_id":")" + metric + R"(","value":)" +
         value + R"(,"labels":)" + labels + "}";
}

TEST(RowTable, SitesWithTheirOwnInternersGetDenseCodesOfTheTable) {
  StringInterner lyon_ids, nancy_ids;
  RowBatch lyon, nancy;
  Parse("[" + Row("nova-1", "wattmetre_power_watt", "101.5") + "," +
            Row("nova-2", "wattmetre_power_watt", "99.25") + "]",
        &lyon_ids, &lyon);
  // Nancy's interner gives id 0 to another device and id 1 to another metric.
  Parse("[" + Row("gros-3", "bmc_node_power_watt", "120.0", R"({"unit":"W"})") + "," +
            Row("gros-3", "wattmetre_power_watt", "118.5") + "]",
        &nancy_ids, &nancy);
  RowTable table;
  ASSERT_TRUE(table.Write("lyon", lyon, lyon_ids).ok());
  ASSERT_TRUE(table.Write("nancy", nancy, nancy_ids).ok());
  ASSERT_EQ(table.size(), 4u);
  EXPECT_EQ(table.site, (std::vector<int32_t>{0, 0, 1, 1}));
  EXPECT_EQ(table.device, (std::vector<int32_t>{0, 1, 2, 2}));
  EXPECT_EQ(table.metric, (std::vector<int32_t>{0, 0, 1, 0}));
  EXPECT_EQ(table.labels, (std::vector<int32_t>{0, 0, 1, 0}));
  EXPECT_EQ(table.devices.Get(2), "gros-3");
  EXPECT_EQ(table.metrics.Get(1), "bmc_node_power_watt");
  EXPECT_EQ(table.label_texts.Get(1), R"({"unit":"W"})");
  EXPECT_EQ(table.nodes.Get(uint32_t(table.node[2])), "gros-3.nancy.grid5000.fr");
  EXPECT_EQ(table.nodes.Get(uint32_t(table.node[1])), "nova-2.lyon.grid5000.fr");
  EXPECT_EQ(table.value, (std::vector<double>{101.5, 99.25, 120.0, 118.5}));
  EXPECT_EQ(table.utc_offset[0], 3600);
  EXPECT_EQ(table.time[1], lyon.time[1]);
}

TEST(RowTable, OneInternerGrownBetweenAppendsKeepsItsMapping) {
  // An archive loads every file with one interner, then appends file after file.
  StringInterner ids;
  RowBatch batch;
  Parse("[" + Row("nova-1", "m", "1.5") + "]", &ids, &batch);
  Parse("[" + Row("nova-2", "m", "2.5") + "," + Row("nova-1", "m", "3.5") + "]", &ids, &batch);
  RowTable table;
  table.Append("lyon", batch, ids, 0, 1);
  table.Append("lyon", batch, ids, 1, 3);
  EXPECT_EQ(table.device, (std::vector<int32_t>{0, 1, 0}));
  EXPECT_EQ(table.value, (std::vector<double>{1.5, 2.5, 3.5}));
  // The same device id under another site is another node.
  table.Append("nancy", batch, ids, 0, 1);
  EXPECT_EQ(table.nodes.Get(uint32_t(table.node[3])), "nova-1.nancy.grid5000.fr");
  EXPECT_EQ(table.node[3], 2);
}

TEST(RowTable, AnotherInternerReusingIdsIsNotMistakenForTheLastOne) {
  RowTable table;
  StringInterner ids;
  RowBatch batch;
  Parse("[" + Row("nova-1", "m1", "1.5") + "]", &ids, &batch);
  table.Append("lyon", batch, ids, 0, batch.size());
  // A new interner at the same address and of the same size, whose ids name other strings.
  ids = StringInterner();
  batch.Clear();
  Parse("[" + Row("nova-9", "m9", "9.5") + "]", &ids, &batch);
  table.Append("lyon", batch, ids, 0, batch.size());
  EXPECT_EQ(table.devices.Get(uint32_t(table.device[1])), "nova-9");
  EXPECT_EQ(table.metrics.Get(uint32_t(table.metric[1])), "m9");
  EXPECT_EQ(table.nodes.Get(uint32_t(table.node[1])), "nova-9.lyon.grid5000.fr");
}

TEST(RowTable, KindsAsJsonLoadsReadsTheValues) {
  StringInterner ids;
  RowBatch batch;
  Parse("[" + Row("a", "m", "98") + "," + Row("a", "m", "98.0") + "," + Row("a", "m", "null") +
            "," + Row("a", "m", R"("NaN")") + "," + Row("a", "m", "70.18") + "," +
            Row("a", "m", "1e+20") + "]",
        &ids, &batch);
  RowTable table;
  table.Append("lyon", batch, ids, 0, batch.size());
  EXPECT_EQ(table.kind, (std::vector<JsonValueKind>{JsonValueKind::kInt, JsonValueKind::kFloat,
                                                    JsonValueKind::kNull, JsonValueKind::kText,
                                                    JsonValueKind::kFloat, JsonValueKind::kFloat}));
  EXPECT_TRUE(std::isnan(table.value[2]) && std::isnan(table.value[3]));
  // Without the rows' text (an archive loaded without it) the value decides.
  batch.raw.clear();
  batch.raw_end.clear();
  RowTable bare;
  bare.Append("lyon", batch, ids, 0, batch.size());
  EXPECT_EQ(bare.kind[0], NumberKind(98.0));
  EXPECT_EQ(bare.kind[4], JsonValueKind::kFloat);
}

TEST(RowTable, BeginKeepsTheResolvedQuery) {
  RowsReport resolved;
  resolved.nodes.push_back({"nova-1", "lyon"});
  resolved.start = 10;
  resolved.end = 20;
  RowTable table;
  ASSERT_TRUE(table.Begin(resolved).ok());
  EXPECT_EQ(table.report.nodes, resolved.nodes);
  EXPECT_EQ(table.report.end, 20);
  EXPECT_EQ(table.size(), 0u);
}

}  // namespace
}  // namespace kwatt::row_table_test
