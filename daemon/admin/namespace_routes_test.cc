// Files of the namespace (`tide get`, `tide set -a`) through the admin API of a one-node
// cluster, whose one shard is the local store.
#include <gtest/gtest.h>

#include "daemon/admin/test_node.h"

namespace tidepool::daemon::admin::testing {
namespace {

constexpr std::uint32_t kStripeUnit = 128u << 10;

class NamespaceRoutesTest : public OneNodeClusterTest {
 protected:
  void write(store::InodeId file, std::size_t bytes) {
    const std::vector<std::uint8_t> data(bytes, 0x5a);
    auto written = node_.run(
        node_.store().write(file, 0, data, store::Stability::file_sync, store::Caller{0, 0, {}}));
    ASSERT_TRUE(written && written->ok());
  }
};

const json kShardZero{{"id", 0},
                      {"home", kNodeId},
                      {"state", "serving"},
                      {"mirror", nullptr},
                      {"mirror_state", "none"}};

TEST_F(NamespaceRoutesTest, ADirectoryShowsItsAttributesAndShard) {
  const HttpResponse answer = node_.call("GET", "/v1/namespace/ifs");
  ASSERT_EQ(answer.status, 200u) << answer.body;
  const json root = json_of(answer);
  EXPECT_EQ(root["path"], "/ifs");
  EXPECT_EQ(root["inode"], store::kRootInode);
  EXPECT_EQ(root["type"], "directory");
  EXPECT_EQ(root["shard"], kShardZero);
  EXPECT_FALSE(root.contains("layout"));
}

TEST_F(NamespaceRoutesTest, AFileShowsItsLayoutAndWhereItsStripeUnitsAre) {
  const store::InodeId file = node_.create_in_root("data.bin");
  ASSERT_NE(file, 0u);
  write(file, 2 * kStripeUnit + 1);
  const HttpResponse answer = node_.call("GET", "/v1/namespace/ifs/data.bin");
  ASSERT_EQ(answer.status, 200u) << answer.body;
  const json shown = json_of(answer);
  EXPECT_EQ(shown["type"], "file");
  EXPECT_EQ(shown["size"], 2 * kStripeUnit + 1);
  EXPECT_EQ(shown["layout"]["pool"], std::string(store::kWithShard));
  EXPECT_EQ(shown["layout"]["stripe_unit"], kStripeUnit);
  EXPECT_EQ(shown["stripe_units"],
            json::array({{{"first", 0}, {"count", 3}, {"nodes", {kNodeId}}}}));
  EXPECT_EQ(shown["unlisted_units"], 0);
  EXPECT_TRUE(shown["moving"].is_null());
  // No policy matches: the default policy's target, a new cluster's pool, is where the next
  // SmartPools run puts the data, which is kept with its shard until then.
  EXPECT_EQ(shown["policy"], (json{{"name", "default"}, {"storage_target", std::string(kPool)}}));
}

TEST_F(NamespaceRoutesTest, PathSegmentsArePercentDecoded) {
  ASSERT_NE(node_.create_in_root("my dir", true), 0u);
  const HttpResponse answer = node_.call("GET", "/v1/namespace/ifs/my%20dir");
  EXPECT_EQ(answer.status, 200u) << answer.body;
  EXPECT_EQ(json_of(answer)["path"], "/ifs/my dir");
}

TEST_F(NamespaceRoutesTest, APathThatNamesNoFileIsNotFound) {
  const HttpResponse outside = node_.call("GET", "/v1/namespace");
  EXPECT_EQ(outside.status, 404u);
  EXPECT_EQ(error_of(outside), "paths in the namespace start with /ifs");
  const HttpResponse missing = node_.call("GET", "/v1/namespace/ifs/none/deeper");
  EXPECT_EQ(missing.status, 404u);
  EXPECT_EQ(error_of(missing), "no such file: /ifs/none/deeper");
  EXPECT_EQ(node_.call("GET", "/v1/namespace/ifs/..").status, 400u);
}

TEST_F(NamespaceRoutesTest, SettingAnAccessPatternAnswersWithTheFile) {
  ASSERT_NE(node_.create_in_root("stream.bin"), 0u);
  const HttpResponse set =
      node_.call("PUT", "/v1/namespace/ifs/stream.bin", json{{"access_pattern", "streaming"}});
  ASSERT_EQ(set.status, 200u) << set.body;
  EXPECT_EQ(json_of(set)["layout"]["access_pattern"], "streaming");
  EXPECT_EQ(json_of(node_.call("GET", "/v1/namespace/ifs/stream.bin"))["layout"]["access_pattern"],
            "streaming");
}

TEST_F(NamespaceRoutesTest, AnAccessPatternIsRefusedWhereItCannotBe) {
  ASSERT_NE(node_.create_in_root("dir", true), 0u);
  ASSERT_NE(node_.create_in_root("file"), 0u);
  const HttpResponse directory =
      node_.call("PUT", "/v1/namespace/ifs/dir", json{{"access_pattern", "random"}});
  EXPECT_EQ(directory.status, 400u);
  EXPECT_EQ(error_of(directory), "only a regular file has an access pattern");
  const HttpResponse other =
      node_.call("PUT", "/v1/namespace/ifs/file", json{{"access_pattern", "random"}, {"x", 1}});
  EXPECT_EQ(error_of(other), "unknown field 'x'");
  EXPECT_EQ(node_.call("PUT", "/v1/namespace/ifs/file", json{{"access_pattern", 1}}).status, 400u);
  EXPECT_EQ(
      node_.call("PUT", "/v1/namespace/ifs/file", json{{"access_pattern", "sideways"}}).status,
      400u);
  EXPECT_EQ(node_.call("PUT", "/v1/namespace/ifs/none", json{{"access_pattern", "random"}}).status,
            404u);
}

}  // namespace
}  // namespace tidepool::daemon::admin::testing
