#include "cli/tide.h"

#include <gtest/gtest.h>

#include <string>

#include "cli/internal/tide_fixture.h"

namespace tidepool::cli {
namespace {

using internal::TideTest;

TEST_F(TideTest, TiersCreateSendsChildrenRepeatedOrCommaSeparated) {
  write_credentials_in(root_.path());
  cluster_.reply(201, R"({"name": "hot-tier", "children": ["f800", "h500", "a200"]})");
  EXPECT_EQ(tide({"storagepool", "tiers", "create", "hot-tier", "--children", "f800,h500",
                  "--children", "a200"}),
            kExitSuccess);
  EXPECT_EQ(only_request().method, Method::post);
  EXPECT_EQ(only_request().target, "/v1/storagepool/tiers");
  EXPECT_EQ(only_request().body, R"({"name":"hot-tier","children":["f800","h500","a200"]})");
  EXPECT_EQ(out_.str(), "Created tier hot-tier.\n");
}

TEST_F(TideTest, TiersModifyGetsTheChildrenThenPutsTheWholeNewList) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"name": "hot", "children": ["f800", "h500"]})");
  cluster_.reply(200, R"({"name": "hot", "children": ["h500"]})");
  EXPECT_EQ(tide({"storagepool", "tiers", "modify", "hot", "--remove-children", "f800"}),
            kExitSuccess)
      << err_.str();
  ASSERT_EQ(cluster_.requests().size(), 2u);
  EXPECT_EQ(cluster_.requests()[0].method, Method::get);
  EXPECT_EQ(cluster_.requests()[0].target, "/v1/storagepool/tiers/hot");
  EXPECT_EQ(cluster_.requests()[1].method, Method::put);
  EXPECT_EQ(cluster_.requests()[1].target, "/v1/storagepool/tiers/hot");
  EXPECT_EQ(cluster_.requests()[1].body, R"({"children":["h500"]})");
  EXPECT_EQ(out_.str(), "Modified tier hot.\n");
}

TEST_F(TideTest, TiersModifyAddsOnlyPoolsNotThereYet) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"name": "hot", "children": ["f800"]})");
  cluster_.reply(200, R"({"name": "hot", "children": ["f800", "h500"]})");
  EXPECT_EQ(tide({"storagepool", "tiers", "modify", "hot", "--add-children", "h500,f800"}),
            kExitSuccess);
  ASSERT_EQ(cluster_.requests().size(), 2u);
  EXPECT_EQ(cluster_.requests()[1].body, R"({"children":["f800","h500"]})");
}

TEST_F(TideTest, TiersModifyRemovingAPoolThatIsNotAChildChangesNothing) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"name": "hot", "children": ["f800"]})");
  EXPECT_EQ(tide({"storagepool", "tiers", "modify", "hot", "--remove-children", "h500"}),
            kExitFailure);
  EXPECT_EQ(err_.str(), "tide: tier hot: node pool 'h500' is not a child\n");
  EXPECT_EQ(cluster_.requests().size(), 1u);  // the GET only
}

TEST_F(TideTest, TiersModifySetChildrenToNone) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"name": "hot", "children": ["f800"]})");
  cluster_.reply(200, R"({"name": "hot", "children": []})");
  EXPECT_EQ(tide({"storagepool", "tiers", "modify", "hot", "--set-children", ""}), kExitSuccess);
  ASSERT_EQ(cluster_.requests().size(), 2u);
  EXPECT_EQ(cluster_.requests()[1].body, R"({"children":[]})");
}

TEST_F(TideTest, TiersViewAndDelete) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"name": "hot", "children": ["f800"]})");
  EXPECT_EQ(tide({"storagepool", "tiers", "view", "hot"}), kExitSuccess);
  EXPECT_EQ(out_.str(), "    Name: hot\nChildren: f800\n");
  cluster_.reply(204, "");
  EXPECT_EQ(tide({"storagepool", "tiers", "delete", "hot", "--force"}), kExitSuccess);
  EXPECT_EQ(cluster_.requests().back().method, Method::delete_);
  EXPECT_EQ(cluster_.requests().back().target, "/v1/storagepool/tiers/hot");
  EXPECT_EQ(out_.str(), "Deleted tier hot.\n");
}

TEST_F(TideTest, NodepoolsListAndView) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"nodepools": [{"name": "f800", "nodes": [1, 2], "tier": null}]})");
  EXPECT_EQ(tide({"storagepool", "nodepools", "list"}), kExitSuccess);
  EXPECT_EQ(out_.str(),
            "Name  Nodes  Tier\n-----------------\nf800  1,2    -\n-----------------\nTotal: 1\n");
  cluster_.reply(200, R"({"name": "f800", "nodes": [1, 2], "tier": "hot"})");
  EXPECT_EQ(tide({"storagepool", "nodepools", "view", "f800", "--format", "json"}), kExitSuccess);
  EXPECT_EQ(cluster_.requests().back().target, "/v1/storagepool/nodepools/f800");
  EXPECT_EQ(out_.str(),
            "{\n  \"name\": \"f800\",\n  \"nodes\": [\n    1,\n    2\n  ],\n"
            "  \"tier\": \"hot\"\n}\n");
}

}  // namespace
}  // namespace tidepool::cli
