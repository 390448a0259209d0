#include "kwatt/core/row_ids.h"

#include <gtest/gtest.h>

#include <string>

#include "kwatt/core/text.h"

namespace kwatt::row_ids_test {
namespace {

void ExpectRefused(const Status& status, const std::string& fragment) {
  EXPECT_EQ(status.code(), Status::Code::kInvalidArgument) << fragment;
  EXPECT_NE(status.message().find(fragment), std::string::npos) << status.message();
}

TEST(RowIds, TakeWhatTheMetricsQueryCanAskFor) {
  for (const char* id :
       {"nova-1", "gros-pdu2-port-1", "wattmetre1-port7", "a b", "kwatt-collect", "nœud-1", "x"}) {
    EXPECT_TRUE(CheckDeviceId(id).ok()) << id;
    EXPECT_TRUE(CheckMetricId(id).ok()) << id;
  }
  EXPECT_TRUE(CheckMetricId("prom_node_cpu_seconds_total").ok());
  EXPECT_TRUE(CheckMetricId("my.metric").ok());  // only device ids are cut at '.'
  EXPECT_TRUE(CheckDeviceId(std::string(kMaxRowIdBytes, 'd')).ok());
}

TEST(RowIds, RefuseWhatTheQueryWouldReadAsAnotherId) {
  ExpectRefused(CheckDeviceId("pdu.lab"), "holds '.'");
  ExpectRefused(CheckDeviceId("pdu.lab"), "(\"pdu-lab\")");
  ExpectRefused(CheckDeviceId("nova-1,nova-2"), "holds ','");
  ExpectRefused(CheckMetricId("m,comma"), "holds ','");
  ExpectRefused(CheckMetricId(","), "holds ','");
  ExpectRefused(CheckDeviceId(" nova-1"), "begins or ends with a space");
  ExpectRefused(CheckMetricId("m\t"), "control character (0x09)");
  ExpectRefused(CheckMetricId(" "), "begins or ends with a space");
  ExpectRefused(CheckDeviceId(""), "is empty");
  ExpectRefused(CheckMetricId(std::string("a\0b", 3)), "control character (0x00)");
  ExpectRefused(CheckDeviceId("a\nb"), "control character (0x0a)");
  ExpectRefused(CheckDeviceId(std::string(kMaxRowIdBytes + 1, 'd')), "256 bytes long");
}

// The rule is the query's: every id taken reads back as itself through the query's list reading.
TEST(RowIds, AnIdTakenIsReadBackByTheQuery) {
  for (const char* id : {"nova-1", "a b", "x", "m-1_2:3"}) {
    ASSERT_TRUE(CheckDeviceId(id).ok());
    EXPECT_EQ(SplitCommaList(id), std::vector<std::string>{id});
  }
}

}  // namespace
}  // namespace kwatt::row_ids_test
