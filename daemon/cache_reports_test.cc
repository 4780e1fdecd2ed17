#include "daemon/cache_reports.h"

#include <gtest/gtest.h>

namespace tidepool::daemon {
namespace {

using nlohmann::json;

TEST(CacheStatisticsReport, GivesEachLevelItsCountersAndHitPercentages) {
  cache::CacheStatistics l1;
  l1.l1_bytes_accessed = 400;
  l1.l1_bytes_hit = 300;
  l1.l1_bytes_prefetched = 256;
  l1.l1_prefetch_used = 128;
  l1.l1_prefetch_wasted = 64;
  l1.l1_metadata_reads = 10;
  l1.l1_metadata_hits = 9;
  l1.coherence_invalidations = 2;
  l1.blocks.bytes = 4096;
  store::ReadCounters l2;
  l2.data_bytes_read = 1000;
  l2.data_bytes_hit = 250;
  const json report = cache_statistics_report(3, l1, 1 << 20, l2, {8192, 1 << 21})["statistics"];
  EXPECT_EQ(report["node"], 3);
  EXPECT_EQ(report["l1"]["budget_bytes"], 1 << 20);
  EXPECT_EQ(report["l1"]["cached_bytes"], 4096);
  EXPECT_DOUBLE_EQ(report["l1"]["data"]["hit_percent"].get<double>(), 75.0);
  EXPECT_EQ(report["l1"]["data"]["prefetch_wasted_bytes"], 64);
  EXPECT_DOUBLE_EQ(report["l1"]["metadata"]["hit_percent"].get<double>(), 90.0);
  EXPECT_EQ(report["l1"]["coherence_invalidations"], 2);
  EXPECT_DOUBLE_EQ(report["l2"]["data"]["hit_percent"].get<double>(), 25.0);
  EXPECT_EQ(report["l2"]["cached_bytes"], 8192);
  EXPECT_EQ(report["l2"]["budget_bytes"], 1 << 21);
  // Nothing looked up: no percentage rather than a made-up one.
  EXPECT_TRUE(report["l2"]["metadata"]["hit_percent"].is_null());
}

TEST(CacheStatisticsTotal, SumsTheNodesAndWorksThePercentagesOutAgain) {
  cache::CacheStatistics busy;
  busy.l1_bytes_accessed = 300;
  busy.l1_bytes_hit = 300;
  cache::CacheStatistics cold;
  cold.l1_bytes_accessed = 100;
  store::ReadCounters l2;
  const json nodes =
      json::array({cache_statistics_report(1, busy, 100, l2, {10, 50})["statistics"],
                   cache_statistics_report(2, cold, 100, l2, {0, 50})["statistics"]});
  const json total = cache_statistics_total(nodes);
  EXPECT_FALSE(total.contains("node"));
  EXPECT_EQ(total["l1"]["budget_bytes"], 200);
  EXPECT_EQ(total["l2"]["budget_bytes"], 100);
  EXPECT_EQ(total["l2"]["cached_bytes"], 10);
  EXPECT_EQ(total["l1"]["data"]["accessed_bytes"], 400);
  EXPECT_DOUBLE_EQ(total["l1"]["data"]["hit_percent"].get<double>(), 75.0);
  EXPECT_TRUE(cache_statistics_total(json::array()).empty());
}

// Found by admin_input_fuzzer: a report without a section, or with a counter where another
// node has a section, made the total throw (and the node with it).
TEST(CacheStatisticsTotal, ReportsOfAnotherShapeAddWhatTheyCanAndThrowNothing) {
  const json nodes = json::parse(R"([
      {"node": 1, "l1": {"hits": 5, "data": {"hit_bytes": 3, "accessed_bytes": 4}}},
      {"node": 2, "l1": {"hits": {"odd": 1}, "data": 7, "metadata": {"hits": "x", "reads": 2}}},
      {"node": 3, "l1": 9, "l2": {"data": {"read_bytes": 8}}}])");
  const json total = cache_statistics_total(nodes);
  EXPECT_EQ(total["l1"]["hits"], 5);
  EXPECT_EQ(total["l1"]["data"]["hit_bytes"], 3);
  EXPECT_DOUBLE_EQ(total["l1"]["data"]["hit_percent"].get<double>(), 75.0);
  EXPECT_EQ(total["l1"]["metadata"]["reads"], 2);
  EXPECT_DOUBLE_EQ(total["l1"]["metadata"]["hit_percent"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(total["l2"]["data"]["hit_percent"].get<double>(), 0.0);
}

}  // namespace
}  // namespace tidepool::daemon
