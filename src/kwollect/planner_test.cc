#include "src/kwollect/planner.h"

#include <gtest/gtest.h>

#include <set>

namespace kwatt::kwollect::internal::planner_test {
namespace {

constexpr UnixNanos kT0 = 1744977600LL * kNanosPerSecond;

std::vector<NodeRate> Nodes(int n, double rate) {
  std::vector<NodeRate> nodes;
  for (int i = 0; i < n; ++i) nodes.push_back({"n-" + std::to_string(i), rate});
  return nodes;
}

// Every (node, microsecond) of the window is covered exactly once.
void ExpectExactCover(const std::vector<PlannedRequest>& plan, int nodes, UnixNanos start,
                      UnixNanos end) {
  std::map<std::string, std::vector<std::pair<UnixNanos, UnixNanos>>> by_node;
  for (const PlannedRequest& r : plan) {
    EXPECT_LE(r.start, r.end);
    EXPECT_EQ(r.start % kNanosPerMicro, 0);
    for (const std::string& uid : r.uids) by_node[uid].emplace_back(r.start, r.end);
  }
  ASSERT_EQ(int(by_node.size()), nodes);
  for (auto& [uid, ranges] : by_node) {
    std::sort(ranges.begin(), ranges.end());
    EXPECT_EQ(ranges.front().first, start);
    EXPECT_EQ(ranges.back().second, end);
    for (size_t i = 1; i < ranges.size(); ++i) {
      EXPECT_EQ(ranges[i].first, ranges[i - 1].second + kNanosPerMicro) << uid;
    }
  }
}

TEST(PlanSite, SmallQueryIsOneRequest) {
  auto plan = PlanSite(Nodes(20, 1.0), {}, kT0, kT0 + 600 * kNanosPerSecond, 50000);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].uids.size(), 20u);
}

TEST(PlanSite, SplitsTimeFirstUnderTheBudget) {
  // 20 nodes at 50 rows/s for 10000 s: 10 million rows, 50000 per request.
  UnixNanos end = kT0 + 10000 * kNanosPerSecond;
  auto plan = PlanSite(Nodes(20, 50), {}, kT0, end, 50000);
  EXPECT_EQ(plan.size(), 200u);
  for (const auto& r : plan) {
    EXPECT_EQ(r.uids.size(), 20u);
    EXPECT_LE(20 * 50 * double(r.end - r.start) / 1e9, 50000 * 1.01);
  }
  ExpectExactCover(plan, 20, kT0, end);
}

TEST(PlanSite, ThenNodesThenMetrics) {
  UnixNanos end = kT0 + 3600 * kNanosPerSecond;
  // 100 rows/s per node: 10 s of one node is 1000 rows; a budget of 3000 fits 3 nodes.
  auto plan = PlanSite(Nodes(10, 100), {}, kT0, end, 3000);
  std::set<size_t> group_sizes;
  for (const auto& r : plan) group_sizes.insert(r.uids.size());
  EXPECT_EQ(*group_sizes.rbegin(), 3u);
  ExpectExactCover(plan, 10, kT0, end);
  // One node far over budget even for 10 s: split by the listed metrics.
  auto metrics =
      PlanSite(Nodes(1, 1000), {"a", "b", "c", "d"}, kT0, kT0 + 20 * kNanosPerSecond, 5000);
  std::set<std::vector<std::string>> groups;
  for (const auto& r : metrics) groups.insert(r.metrics);
  EXPECT_EQ(groups.size(), 2u);
  // Without an explicit list, metrics are never split (an implicit "all" cannot be).
  for (const auto& r : PlanSite(Nodes(1, 1000), {}, kT0, kT0 + 20 * kNanosPerSecond, 5000)) {
    EXPECT_TRUE(r.metrics.empty());
  }
}

// Issue 21, item 18: lists too long for a URL are cut into groups, and the metric groups of one
// window are one merge group (their rows are delivered merged in time order).
TEST(PlanSite, ListsTooLongForAUrlAreCut) {
  std::vector<std::string> metrics;
  for (int k = 0; k < 420; ++k) metrics.push_back("my_custom_metric_number_" + std::to_string(k));
  for (const auto& group : GroupsForUrl(metrics)) {
    std::string joined;
    for (const std::string& m : group) joined += (joined.empty() ? "" : "%2C") + m;
    EXPECT_LE(joined.size(), kMaxListUrlBytes);
  }
  auto plan = PlanSite(Nodes(1, 10), metrics, kT0, kT0 + 60 * kNanosPerSecond, 100000);
  ASSERT_GT(plan.size(), 1u);
  std::vector<std::string> asked;
  for (const auto& r : plan) {
    EXPECT_EQ(r.merge_group, plan[0].merge_group);
    EXPECT_NE(r.merge_group, 0u);
    EXPECT_EQ(r.start, kT0);
    asked.insert(asked.end(), r.metrics.begin(), r.metrics.end());
  }
  EXPECT_EQ(asked, metrics);
  std::vector<NodeRate> many = Nodes(600, 1);
  auto nodes = PlanSite(many, {}, kT0, kT0 + 60 * kNanosPerSecond, 1000000);
  EXPECT_GT(nodes.size(), 1u);
  for (const auto& r : nodes) EXPECT_EQ(r.merge_group, 0u);  // other nodes: other files
  ExpectExactCover(nodes, 600, kT0, kT0 + 60 * kNanosPerSecond);
}

TEST(SplitRequest, TimeThenNodesThenMetrics) {
  PlannedRequest r{{"a", "b"}, {"m1", "m2"}, kT0, kT0 + 10 * kNanosPerSecond};
  auto halves = SplitRequest(r);
  ASSERT_EQ(halves.size(), 2u);
  EXPECT_EQ(halves[0].start, kT0);
  EXPECT_EQ(halves[1].start, halves[0].end + kNanosPerMicro);
  EXPECT_EQ(halves[1].end, r.end);
  PlannedRequest instant{{"a", "b"}, {"m1", "m2"}, kT0, kT0};
  halves = SplitRequest(instant);
  ASSERT_EQ(halves.size(), 2u);
  EXPECT_EQ(halves[0].uids, std::vector<std::string>{"a"});
  halves = SplitRequest(PlannedRequest{{"a"}, {"m1", "m2"}, kT0, kT0});
  ASSERT_EQ(halves.size(), 2u);
  EXPECT_EQ(halves[1].metrics, std::vector<std::string>{"m2"});
  EXPECT_TRUE(SplitRequest(PlannedRequest{{"a"}, {}, kT0, kT0}).empty());
}

// Splits `r` again and again, as a server that always answers "too much data" would make the
// fetcher do; returns the pieces that could not be split further, and counts every request.
std::vector<PlannedRequest> SplitToTheEnd(const PlannedRequest& r,
                                          const std::vector<std::string>& all_metrics,
                                          int64_t* requests) {
  ++*requests;
  std::vector<PlannedRequest> halves = SplitRequest(r, all_metrics);
  if (halves.empty()) return {r};
  std::vector<PlannedRequest> leaves;
  for (const PlannedRequest& half : halves) {
    for (PlannedRequest& leaf : SplitToTheEnd(half, all_metrics, requests)) {
      leaves.push_back(std::move(leaf));
    }
  }
  return leaves;
}

TEST(SplitRequest, StopsAtTheFloorOfOneSecond) {
  // A 16 s window refused again and again: 16 slices of 1 s, not sub-millisecond ones.
  int64_t requests = 0;
  auto leaves =
      SplitToTheEnd(PlannedRequest{{"a"}, {}, kT0, kT0 + 16 * kNanosPerSecond}, {}, &requests);
  EXPECT_LE(leaves.size(), 17u);
  EXPECT_LE(requests, 40);
  for (const PlannedRequest& leaf : leaves) {
    EXPECT_GE(leaf.end - leaf.start + kNanosPerMicro, kMinSplitNs / 2) << leaf.start - kT0;
  }
}

TEST(SplitRequest, AtTheFloorSplitsAnImplicitAllByTheCatalogueMetrics) {
  // One instant of one node holding more rows than Kwollect allows: only metrics can divide it.
  std::vector<std::string> all = {"m1", "m2", "m3"};
  auto halves = SplitRequest(PlannedRequest{{"a"}, {}, kT0, kT0}, all);
  ASSERT_EQ(halves.size(), 2u);
  EXPECT_EQ(halves[0].metrics, std::vector<std::string>{"m1"});
  EXPECT_EQ(halves[1].metrics, (std::vector<std::string>{"m2", "m3"}));
  int64_t requests = 0;
  auto leaves =
      SplitToTheEnd(PlannedRequest{{"a"}, {}, kT0, kT0 + 4 * kNanosPerSecond}, all, &requests);
  std::set<std::vector<std::string>> metrics;
  for (const PlannedRequest& leaf : leaves) metrics.insert(leaf.metrics);
  EXPECT_EQ(metrics, (std::set<std::vector<std::string>>{{"m1"}, {"m2"}, {"m3"}}));
  // Nodes before metrics: several nodes are first split by nodes.
  halves = SplitRequest(PlannedRequest{{"a", "b"}, {}, kT0, kT0}, all);
  ASSERT_EQ(halves.size(), 2u);
  EXPECT_TRUE(halves[0].metrics.empty());
  EXPECT_EQ(halves[0].uids, std::vector<std::string>{"a"});
  // One metric left: nothing to split.
  EXPECT_TRUE(SplitRequest(PlannedRequest{{"a"}, {}, kT0, kT0}, {"m1"}).empty());
}

TEST(ExpectedRowsPerSecond, FollowsPeriodsAndJobTypes) {
  auto catalogue = Catalogue::FromJson(R"([
    {"name":"wattmetre_power_watt","period":1000,"optional_period":20,"source":{"protocol":"wattmetre"}},
    {"name":"bmc_node_power_watt","period":5000,"source":{"protocol":"snmp"}},
    {"name":"bmc_fan_speed_rpm","period":0,"optional_period":5000,"source":{"protocol":"snmp"}}])");
  ASSERT_TRUE(catalogue.ok());
  EXPECT_DOUBLE_EQ(ExpectedRowsPerSecond(*catalogue, "x", {}, {}, false, false), 1.2);
  EXPECT_DOUBLE_EQ(ExpectedRowsPerSecond(*catalogue, "x", {}, {"monitor=wattmetre"}, true, false),
                   50.2);
  EXPECT_DOUBLE_EQ(ExpectedRowsPerSecond(*catalogue, "x", {}, {"monitor"}, true, false), 50.4);
  EXPECT_DOUBLE_EQ(
      ExpectedRowsPerSecond(*catalogue, "x", {"bmc_node_power_watt"}, {}, false, false), 0.2);
  EXPECT_DOUBLE_EQ(ExpectedRowsPerSecond(*catalogue, "x", {}, {}, false, true), 2.0 / 300);
}

}  // namespace
}  // namespace kwatt::kwollect::internal::planner_test
