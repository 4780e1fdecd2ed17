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

// A policy as the policy module makes it, from its filter's expression.
policy::Policy policy_of(std::string name, const std::string& expression,
                         policy::Actions actions = {}) {
  Result<policy::Filter> filter = policy::parse_expression(expression);
  EXPECT_TRUE(filter.ok()) << expression << ": " << filter.status().message();
  return policy::Policy{std::move(name), filter.ok() ? *filter : policy::Filter{},
                        std::move(actions)};
}

TEST(Filepool, TheStoredListReadsBackInOrderAndUpdatesOnlyWhatWasRead) {
  cluster::GroupView view = view_with_pools();
  StoredPolicies none = policies_of(view);
  EXPECT_EQ(none.changed, 0u);
  EXPECT_TRUE(none.set.policies.empty());
  EXPECT_EQ(none.set.defaults, policy::Defaults{});

  policy::PolicySet set;
  set.policies.push_back(policy_of("b", "size > 1"));
  set.policies.push_back(
      policy_of("a", R"(name =~ "*.jpg" or type == directory)", {.access_pattern = "random"}));
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

// The body is what the Raft log holds: it changes with a new version, never with the API.
TEST(Filepool, TheStoredFormIsVersionedAndOwnedByTheGroupView) {
  policy::PolicySet set;
  set.policies.push_back(
      policy_of("cold", "accessed > 30d", {.storage_target = "h500", .protection = 3}));
  set.defaults.access_pattern = "streaming";
  const cluster::Change created = policies_update(StoredPolicies{}, set);
  EXPECT_EQ(json::parse(created.object.body),
            (json{{"version", 1},
                  {"policies", json::array({{{"name", "cold"},
                                             {"filter", "accessed > 30d"},
                                             {"storage_target", "h500"},
                                             {"protection", "3x"},
                                             {"access_pattern", nullptr}}})},
                  {"default",
                   {{"storage_target", "anywhere"},
                    {"protection", "2x"},
                    {"access_pattern", "streaming"}}}}));
}

// As the release before versions wrote them: the admin API's POLICY without its apply_order, and
// its DEFAULTPOLICY without its name.
TEST(Filepool, PoliciesWrittenBeforeVersionsStillRead) {
  cluster::GroupView view = view_with_pools();
  view.objects.push_back(
      {std::string(kFilepoolKind), std::string(kPoliciesName),
       R"({"default":{"access_pattern":"concurrency","protection":"3x","storage_target":"f800"},)"
       R"("policies":[{"access_pattern":"random","filter":"name =~ \"*.jpg\"","name":"photos",)"
       R"("protection":null,"storage_target":"cold-tier"}]})",
       5});
  policy::PolicySet expected;
  expected.policies.push_back(policy_of(
      "photos", R"(name =~ "*.jpg")", {.storage_target = "cold-tier", .access_pattern = "random"}));
  expected.defaults = policy::Defaults{"f800", 3, "concurrency"};
  const StoredPolicies stored = policies_of(view);
  EXPECT_EQ(stored.set, expected);
  EXPECT_EQ(stored.changed, 5u);
  EXPECT_EQ(json::parse(policies_update(stored, stored.set).object.body)["version"], 1)
      << "the next change writes the current version";
}

TEST(Filepool, PoliciesOfANewerVersionOrDamagedReadAsTheDefault) {
  cluster::GroupView view = view_with_pools();
  policy::PolicySet set;
  set.policies.push_back(policy_of("b", "size > 1"));
  view.objects.push_back({std::string(kFilepoolKind), std::string(kPoliciesName),
                          policies_update(StoredPolicies{}, set).object.body, 7});
  ASSERT_EQ(policies_of(view).set, set);
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {R"("version":1)", R"("version":2)"},
           {R"("protection":null)", R"("protection":2)"},
           {R"("name":"b")", R"("name":"b","apply_order":1)"}}) {
    std::string body = policies_update(StoredPolicies{}, set).object.body;
    ASSERT_NE(body.find(from), std::string::npos) << body;
    body.replace(body.find(from), from.size(), to);
    view.objects.back().body = body;
    EXPECT_EQ(policies_of(view).set, policy::PolicySet{}) << body;
  }
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
  set.policies.push_back(policy_of("archive", "path =~ /ifs/archive/**",
                                   {.storage_target = "cold-tier", .protection = 3}));
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
