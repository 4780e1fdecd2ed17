// What the nodes report, gathered, and cache flushes, through the admin API of a one-node
// cluster: its lock manager runs; its NFS server and cache do not (tided wires them).
#include <gtest/gtest.h>

#include "daemon/admin/test_node.h"

namespace tidepool::daemon::admin::testing {
namespace {

class ReportRoutesTest : public OneNodeClusterTest {};

TEST_F(ReportRoutesTest, EveryNodeUpReportsItsLocks) {
  EXPECT_EQ(json_of(node_.call("GET", "/v1/locks")),
            (json{{"locks", json::array()}, {"unreachable", json::array()}, {"unlisted", 0}}));
  const json statistics = json_of(node_.call("GET", "/v1/statistics/locks"));
  ASSERT_EQ(statistics["statistics"].size(), 1u);
  EXPECT_EQ(statistics["statistics"][0]["node"], kNodeId);
  EXPECT_EQ(statistics["unreachable"], json::array());
}

TEST_F(ReportRoutesTest, LocksAreFilteredByKindFileAndWaiting) {
  ASSERT_NE(node_.create_in_root("a%41"), 0u);
  const HttpResponse by_file =
      node_.call("GET", "/v1/locks?path=%2Fifs%2Fa%2541&kind=data&waiters=true");
  EXPECT_EQ(by_file.status, 200u) << by_file.body;
  const HttpResponse no_file = node_.call("GET", "/v1/locks?path=/ifs/none");
  EXPECT_EQ(no_file.status, 404u);
  EXPECT_EQ(error_of(no_file), "no such file: /ifs/none");
  const HttpResponse kind = node_.call("GET", "/v1/locks?kind=table");
  EXPECT_EQ(kind.status, 400u);
  EXPECT_EQ(error_of(kind), "unknown lock kind 'table' (data, attributes, advisory or share)");
  EXPECT_EQ(error_of(node_.call("GET", "/v1/locks?waiters=yes")), "'waiters' is true or false");
}

TEST_F(ReportRoutesTest, ANodeWithoutTheReportIsListedUnreachable) {
  const json cache = json_of(node_.call("GET", "/v1/statistics/cache"));
  EXPECT_EQ(cache["statistics"], json::array());
  EXPECT_EQ(cache["unreachable"], json::array({kNodeId}));
  EXPECT_TRUE(cache.contains("total"));
  EXPECT_EQ(json_of(node_.call("GET", "/v1/statistics/clients"))["unreachable"],
            json::array({kNodeId}));
  EXPECT_EQ(json_of(node_.call("GET", "/v1/nfs/nlm/sessions")),
            (json{{"sessions", json::array()}, {"unreachable", json::array()}}));
}

TEST_F(ReportRoutesTest, AFlushEmptiesBothLevelsOfEveryNodeUnlessTold) {
  EXPECT_EQ(json_of(node_.call("POST", "/v1/cache/flush", json::object())),
            (json{{"flushed", json::array({{{"node", kNodeId}, {"l1", true}, {"l2", true}}})},
                  {"unreachable", json::array()}}));
  const HttpResponse one =
      node_.call("POST", "/v1/cache/flush", json{{"l2", true}, {"node", kNodeId}});
  EXPECT_EQ(json_of(one)["flushed"],
            json::array({{{"node", kNodeId}, {"l1", false}, {"l2", true}}}));
  EXPECT_EQ(node_.flushes(), (std::vector<std::pair<bool, bool>>{{true, true}, {false, true}}));
}

TEST_F(ReportRoutesTest, AFlushIsRefusedBadLevelsAndUnknownNodes) {
  const HttpResponse levels = node_.call("POST", "/v1/cache/flush", json{{"l1", 1}});
  EXPECT_EQ(levels.status, 400u);
  EXPECT_EQ(error_of(levels), "'l1' and 'l2' are true or false");
  const HttpResponse node = node_.call("POST", "/v1/cache/flush", json{{"node", 99}});
  EXPECT_EQ(node.status, 404u);
  EXPECT_EQ(error_of(node), "no node 99 in the cluster");
  EXPECT_EQ(node_.call("POST", "/v1/cache/flush", json{{"node", "seven"}}).status, 404u);
  EXPECT_TRUE(node_.flushes().empty());
}

}  // namespace
}  // namespace tidepool::daemon::admin::testing
