#include "daemon/admin/policy_json.h"

#include <gtest/gtest.h>

#include "daemon/config_objects.h"

namespace tidepool::daemon::admin {
namespace {

using nlohmann::json;

// Nodes in pools f800 and h500; h500 makes up the tier cold-tier.
cluster::GroupView view_with_pools() {
  cluster::GroupView view;
  view.nodes = {cluster::NodeInfo{1, "node-1", "", "", "", "f800", true},
                cluster::NodeInfo{2, "node-2", "", "", "", "h500", true}};
  view.objects = {{std::string(kTierKind), "cold-tier", R"({"children":["h500"]})", 3}};
  return view;
}

Result<policy::Policy> made(const json& body) {
  return policy_from_json(body, policy::Policy{body.value("name", ""), {}, {}}, view_with_pools());
}

TEST(PolicyJson, APolicyFromTheApiKeepsItsFilterAndActions) {
  auto p = made(json{{"name", "cold"},
                     {"filter", "accessed > 30d and size >= 1GiB"},
                     {"storage_target", "cold-tier"},
                     {"protection", "3x"}});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->actions.storage_target, "cold-tier");
  EXPECT_EQ(p->actions.protection, 3u);
  EXPECT_FALSE(p->actions.access_pattern);
  const json shown = policy_to_json(*p, 2);
  EXPECT_EQ(shown["apply_order"], 2);
  EXPECT_EQ(shown["filter"], "accessed > 30d and size >= 1GiB");
  EXPECT_EQ(shown["protection"], "3x");
  EXPECT_TRUE(shown["access_pattern"].is_null());

  auto unset = policy_from_json(json{{"storage_target", nullptr}, {"protection", nullptr}}, *p,
                                view_with_pools());
  ASSERT_TRUE(unset.ok()) << unset.status().message();
  EXPECT_FALSE(unset->actions.storage_target) << "null: from the default policy again";
  EXPECT_FALSE(unset->actions.protection);
  EXPECT_EQ(unset->filter, p->filter);

  auto flags =
      made(json{{"name", "f"},
                {"filter_flags", {"--begin-filter", "--size=1GB", "--operator=ge", "--end-filter"}},
                {"storage_target", "f800"}});
  ASSERT_TRUE(flags.ok()) << flags.status().message();
  EXPECT_EQ(policy::to_expression(flags->filter), "size >= 1GB");
}

TEST(PolicyJson, BadFieldsAreRefusedByName) {
  auto message = [](const json& body) {
    auto p = made(body);
    EXPECT_FALSE(p.ok()) << body.dump();
    return p.ok() ? "" : p.status().message();
  };
  EXPECT_EQ(message({{"filter", "size >> 1"}}),
            "filter: at column 7: expected a value for size, found '>'");
  EXPECT_EQ(message({{"storage_target", "ssd"}}),
            "storage target 'ssd' is neither a node pool nor a tier");
  EXPECT_EQ(message({{"protection", "4x"}}), "'protection' must be \"2x\" or \"3x\"");
  EXPECT_EQ(message({{"access_pattern", "fast"}}),
            "an access pattern is random, concurrency or streaming");
  EXPECT_EQ(message({{"colour", "red"}}), "unknown field 'colour'");
  EXPECT_EQ(message({{"filter_flags",
                      {"--begin-filter", "--path=/" + std::string(4090, 'a'), "--end-filter"}}}),
            "filter: too long to keep (at most 4096 characters once written as an expression)");
  EXPECT_EQ(message({{"filter", "size > 1"}, {"filter_flags", json::array()}}),
            "give 'filter' or 'filter_flags', not both");
  auto defaults = defaults_from_json(json{{"filter", "size > 1"}}, {}, view_with_pools());
  EXPECT_EQ(defaults.status().message(), "the default policy matches every file: no filter");
}

}  // namespace
}  // namespace tidepool::daemon::admin
