// Node pools and tiers through the admin API of a one-node cluster.
#include <gtest/gtest.h>

#include "daemon/admin/test_node.h"

namespace tidepool::daemon::admin::testing {
namespace {

class StoragepoolRoutesTest : public OneNodeClusterTest {};

TEST_F(StoragepoolRoutesTest, ANodePoolIsTheNodesThatNameIt) {
  const json pool{{"name", kPool}, {"nodes", {kNodeId}}, {"tier", nullptr}};
  EXPECT_EQ(json_of(node_.call("GET", "/v1/storagepool/nodepools")),
            (json{{"nodepools", json::array({pool})}}));
  EXPECT_EQ(json_of(node_.call("GET", "/v1/storagepool/nodepools/f800")), pool);
  const HttpResponse missing = node_.call("GET", "/v1/storagepool/nodepools/h500");
  EXPECT_EQ(missing.status, 404u);
  EXPECT_EQ(error_of(missing), "no node pool 'h500'");
}

TEST_F(StoragepoolRoutesTest, ATierIsCreatedReadChangedAndDeleted) {
  const json tier{{"name", "hot-tier"}, {"children", {kPool}}};
  const HttpResponse created = node_.call("POST", "/v1/storagepool/tiers",
                                          json{{"name", "hot-tier"}, {"children", {kPool}}});
  EXPECT_EQ(created.status, 201u) << created.body;
  EXPECT_EQ(json_of(created), tier);
  EXPECT_EQ(json_of(node_.call("GET", "/v1/storagepool/tiers/hot-tier")), tier);
  EXPECT_EQ(json_of(node_.call("GET", "/v1/storagepool/tiers")),
            (json{{"tiers", json::array({tier})}}));
  EXPECT_EQ(json_of(node_.call("GET", "/v1/storagepool/nodepools/f800"))["tier"], "hot-tier");

  const HttpResponse emptied =
      node_.call("PUT", "/v1/storagepool/tiers/hot-tier", json{{"children", json::array()}});
  EXPECT_EQ(emptied.status, 200u) << emptied.body;
  EXPECT_EQ(json_of(node_.call("GET", "/v1/storagepool/tiers/hot-tier"))["children"],
            json::array());

  EXPECT_EQ(node_.call("DELETE", "/v1/storagepool/tiers/hot-tier").status, 204u);
  const HttpResponse gone = node_.call("GET", "/v1/storagepool/tiers/hot-tier");
  EXPECT_EQ(gone.status, 404u);
  EXPECT_EQ(error_of(gone), "no tier 'hot-tier'");
  EXPECT_EQ(node_.call("DELETE", "/v1/storagepool/tiers/hot-tier").status, 404u);
}

TEST_F(StoragepoolRoutesTest, ATierIsRefusedWhatItCannotHold) {
  auto create = [&](const json& body) { return node_.call("POST", "/v1/storagepool/tiers", body); };
  const HttpResponse unknown_pool = create(json{{"name", "t"}, {"children", {"h500"}}});
  EXPECT_EQ(unknown_pool.status, 400u);
  EXPECT_EQ(error_of(unknown_pool), "no node pool 'h500' in the cluster");
  EXPECT_EQ(create(json{{"name", "t"}, {"children", {kPool, kPool}}}).status, 400u);
  EXPECT_EQ(create(json{{"name", "bad name"}}).status, 400u);
  EXPECT_EQ(create(json{{"name", "t"}, {"children", "f800"}}).status, 400u);

  ASSERT_EQ(create(json{{"name", "hot"}, {"children", {kPool}}}).status, 201u);
  EXPECT_EQ(create(json{{"name", "hot"}}).status, 409u);
  const HttpResponse taken = create(json{{"name", "other"}, {"children", {kPool}}});
  EXPECT_EQ(taken.status, 409u);
  EXPECT_EQ(error_of(taken), "node pool 'f800' already belongs to tier 'hot'");
  EXPECT_EQ(
      node_.call("PUT", "/v1/storagepool/tiers/none", json{{"children", json::array()}}).status,
      404u);
}

}  // namespace
}  // namespace tidepool::daemon::admin::testing
