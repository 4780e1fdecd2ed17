#include "daemon/filepool.h"

#include <gtest/gtest.h>

#include "daemon/config_objects.h"

namespace tidepool::daemon {
namespace {

using nlohmann::json;

cluster::GroupView view_with_pools() {
  cluster::GroupView view;
  view.epoch = 9;
  cluster::NodeInfo hot;
  hot.id = 1;
  hot.pool = "f800";
  cluster::NodeInfo cold;
  cold.id = 2;
  cold.pool = "h500";
  view.nodes = {hot, cold};
  view.objects.push_back({std::string(kTierKind), "cold-tier", R"({"children":["h500"]})", 3});
  return view;
}

Result<policy::Policy> made(const json& body) {
  return policy_from_json(body, policy::Policy{body.value("name", ""), {}, {}}, view_with_pools());
}

TEST(Filepool, APolicyFromTheApiKeepsItsFilterAndActions) {
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

TEST(Filepool, BadFieldsAreRefusedByName) {
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

TEST(Filepool, TheStoredListReadsBackInOrderAndUpdatesOnlyWhatWasRead) {
  cluster::GroupView view = view_with_pools();
  StoredPolicies none = policies_of(view);
  EXPECT_EQ(none.changed, 0u);
  EXPECT_TRUE(none.set.policies.empty());
  EXPECT_EQ(none.set.defaults, policy::Defaults{});

  policy::PolicySet set;
  set.policies.push_back(*made(json{{"name", "b"}, {"filter", "size > 1"}}));
  set.policies.push_back(*made(json{{"name", "a"},
                                    {"filter", "name =~ \"*.jpg\" or type == directory"},
                                    {"access_pattern", "random"}}));
  set.defaults.storage_target = "f800";
  set.defaults.protection = 3;
  const cluster::Change created = policies_update(none, set);
  EXPECT_EQ(created.kind, cluster::Change::Kind::create_object);
  view.objects.push_back({created.object.kind, created.object.name, created.object.body, 12});
  const StoredPolicies stored = policies_of(view);
  EXPECT_EQ(stored.changed, 12u);
  EXPECT_EQ(stored.set, set);
  const cluster::Change updated = policies_update(stored, set);
  EXPECT_EQ(updated.kind, cluster::Change::Kind::update_object);
  EXPECT_EQ(updated.object.changed, 12u) << "refused if someone changed the list since";

  view.objects.back().body = R"({"policies": [{"name": 7}], "default": {}})";
  const StoredPolicies unreadable = policies_of(view);
  EXPECT_TRUE(unreadable.set.policies.empty()) << "what does not parse is left out";
  EXPECT_EQ(policies_update(unreadable, set).kind, cluster::Change::Kind::update_object)
      << "and the next change writes over it";
}

// Placement on create: the policy that matches the new file names where its data goes.
TEST(Filepool, NewFilesArePlacedWhereTheirPolicyWantsThem) {
  cluster::GroupView view = view_with_pools();
  PolicyPlacement placement;
  placement.follow(view);
  const store::NewFile logs{"/ifs/logs/a.log", 0, 1'700'000'000'000'000'000};
  EXPECT_EQ(placement.place(logs), std::nullopt) << "the built-in default: anywhere";
  EXPECT_FALSE(placement.places_any()) << "so the shard need not work out paths";

  policy::PolicySet set;
  set.policies.push_back(*made(json{{"name", "archive"},
                                    {"filter", "path =~ /ifs/archive/**"},
                                    {"storage_target", "cold-tier"},
                                    {"protection", "3x"}}));
  set.defaults.storage_target = "f800";
  const cluster::Change created = policies_update(policies_of(view), set);
  view.objects.push_back({created.object.kind, created.object.name, created.object.body, 12});
  placement.follow(view);
  EXPECT_TRUE(placement.places_any());
  const std::optional<store::PoolChoice> archived =
      placement.place({"/ifs/archive/2024/a.tar", 0, 1'700'000'000'000'000'000});
  ASSERT_TRUE(archived);
  EXPECT_EQ(archived->pool, "h500") << "the cold tier's pool";
  EXPECT_EQ(archived->protection, 3u);
  const std::optional<store::PoolChoice> hot = placement.place(logs);
  ASSERT_TRUE(hot);
  EXPECT_EQ(hot->pool, "f800") << "the default policy's target";
  EXPECT_EQ(hot->protection, 2u);

  view.nodes.pop_back();  // h500 has no node left
  placement.follow(view);
  EXPECT_EQ(placement.place({"/ifs/archive/b.tar", 0, 0}), std::nullopt);
}

}  // namespace
}  // namespace tidepool::daemon
