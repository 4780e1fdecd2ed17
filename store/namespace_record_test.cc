#include "store/namespace_record.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace tidepool::store {
namespace {

cluster::GroupView view_with(std::vector<std::pair<cluster::NodeId, bool>> nodes) {
  cluster::GroupView view;
  for (const auto& [id, up] : nodes) {
    cluster::NodeInfo node;
    node.id = id;
    node.name = "node" + std::to_string(id);
    node.up = up;
    view.nodes.push_back(node);
  }
  return view;
}

NamespaceRecord record(cluster::NodeId home, cluster::NodeId mirror, bool in_step) {
  NamespaceRecord r;
  r.places = {ShardPlace{home, mirror, in_step}};
  r.changed = 42;
  return r;
}

TEST(PlanNamespace, AHomeWithoutAMirrorGetsOneOfTheOtherUpNodes) {
  auto next =
      plan_namespace(record(1, 0, false), view_with({{1, true}, {2, true}, {3, false}}), {});
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->places[0].home, 1u);
  EXPECT_EQ(next->places[0].mirror, 2u);
  EXPECT_FALSE(next->places[0].mirror_in_step);
  EXPECT_EQ(next->changed, 42u) << "the update is conditional on the record as read";
}

TEST(PlanNamespace, AHomeAloneKeepsNoMirror) {
  EXPECT_FALSE(plan_namespace(record(1, 0, false), view_with({{1, true}, {2, false}}), {}));
}

TEST(PlanNamespace, AnUpMirrorIsLeftAloneInStepOrNot) {
  const auto view = view_with({{1, true}, {2, true}, {3, true}});
  EXPECT_FALSE(plan_namespace(record(1, 2, true), view, {}));
  EXPECT_FALSE(plan_namespace(record(1, 2, false), view, {}));
}

TEST(PlanNamespace, ADownOrRemovedMirrorIsReplaced) {
  auto replaced =
      plan_namespace(record(1, 2, true), view_with({{1, true}, {2, false}, {3, true}}), {});
  ASSERT_TRUE(replaced.has_value());
  EXPECT_EQ(replaced->places[0].mirror, 3u);
  EXPECT_FALSE(replaced->places[0].mirror_in_step);
  auto gone = plan_namespace(record(1, 7, true), view_with({{1, true}, {3, true}}), {});
  ASSERT_TRUE(gone.has_value());
  EXPECT_EQ(gone->places[0].mirror, 3u);
}

TEST(PlanNamespace, ADownHomeIsReplacedByItsMirrorOnlyWhileTheMirrorIsInStepAndUp) {
  const auto view = view_with({{1, false}, {2, true}, {3, true}});
  auto promoted = plan_namespace(record(1, 2, true), view, {});
  ASSERT_TRUE(promoted.has_value());
  EXPECT_EQ(promoted->places[0].home, 2u);
  EXPECT_EQ(promoted->places[0].mirror, 0u);
  EXPECT_FALSE(promoted->places[0].mirror_in_step);
  EXPECT_FALSE(plan_namespace(record(1, 2, false), view, {})) << "a copy under way is not promoted";
  EXPECT_FALSE(
      plan_namespace(record(1, 3, true), view_with({{1, false}, {3, false}, {2, true}}), {}));
  EXPECT_FALSE(plan_namespace(record(1, 0, false), view, {}));
}

// Plans from `record` until there is nothing left to change, each mirror named coming in step
// at once (as its whole copy would complete) and each home asked to hand over doing so; at
// most 20 rounds.
NamespaceRecord settle(NamespaceRecord record, const cluster::GroupView& view,
                       const std::set<cluster::NodeId>& leaving = {}) {
  for (int round = 0; round < 20; ++round) {
    std::optional<NamespaceRecord> next = plan_namespace(record, view, leaving);
    if (!next) return record;
    record = *next;
    for (std::uint32_t shard = 0; shard < record.shards(); ++shard) {
      if (record.places[shard].handing_over) {
        record = handed_over(record, shard, view, leaving);
      } else {
        record.places[shard].mirror_in_step = record.places[shard].mirror != 0;
      }
    }
  }
  ADD_FAILURE() << "the plan did not settle in 20 rounds";
  return record;
}

TEST(PlanNamespace, ShardsSpreadOverTheNodesMirrorFirstThenHome) {
  const auto view = view_with({{1, true}, {2, true}, {3, true}, {4, true}});
  const NamespaceRecord made = new_namespace(1, 8);
  auto first = plan_namespace(made, view, {});
  ASSERT_TRUE(first.has_value());
  for (const ShardPlace& place : first->places) {
    EXPECT_EQ(place.home, 1u);
    EXPECT_NE(place.mirror, 0u);
    EXPECT_NE(place.mirror, 1u);
    EXPECT_FALSE(place.mirror_in_step);
    EXPECT_FALSE(place.handing_over);
  }
  EXPECT_FALSE(plan_namespace(*first, view, {})) << "nothing moves before its new home is in step";

  NamespaceRecord copied = *first;
  for (ShardPlace& place : copied.places) place.mirror_in_step = true;
  auto asked = plan_namespace(copied, view, {});
  ASSERT_TRUE(asked.has_value());
  std::size_t moving = 0;
  for (std::uint32_t shard = 0; shard < asked->shards(); ++shard) {
    const ShardPlace& place = asked->places[shard];
    EXPECT_EQ(place.home, 1u) << "the home hands a shard over itself";
    moving += place.handing_over;
    if (!place.handing_over) continue;
    const ShardPlace moved = handed_over(*asked, shard, view, {}).places[shard];
    EXPECT_EQ(moved.home, place.mirror) << shard;
    EXPECT_NE(moved.mirror, moved.home) << shard;
    EXPECT_NE(moved.mirror, 0u) << shard;
    EXPECT_FALSE(moved.mirror_in_step) << shard;
    EXPECT_FALSE(moved.handing_over) << shard;
  }
  EXPECT_GE(moving, 4u) << "most of eight shards belong elsewhere than node 1";

  const NamespaceRecord spread = settle(made, view);
  std::set<cluster::NodeId> homes;
  for (const ShardPlace& place : spread.places) {
    homes.insert(place.home);
    EXPECT_NE(place.mirror, place.home);
    EXPECT_NE(place.mirror, 0u);
    EXPECT_FALSE(place.handing_over);
  }
  EXPECT_GE(homes.size(), 3u) << "eight shards over four nodes";
  EXPECT_EQ(settle(spread, view), spread);
}

TEST(PlanNamespace, AHomeIsAskedToHandOverOnlyWhileItsMirrorIsInStep) {
  const auto view = view_with({{1, true}, {2, true}, {3, true}, {4, true}});
  const NamespaceRecord spread = settle(new_namespace(1, 8), view);
  for (std::uint32_t shard = 0; shard < spread.shards(); ++shard) {
    const cluster::NodeId preferred = spread.places[shard].home;
    const cluster::NodeId elsewhere = preferred % 4 + 1;
    NamespaceRecord record = spread;
    record.places[shard] = ShardPlace{elsewhere, preferred, false, true};
    auto next = plan_namespace(record, view, {});
    ASSERT_TRUE(next.has_value()) << shard;
    EXPECT_EQ(next->places[shard], (ShardPlace{elsewhere, preferred, false, false})) << shard;
    record.places[shard].mirror_in_step = true;
    record.places[shard].handing_over = false;
    next = plan_namespace(record, view, {});
    ASSERT_TRUE(next.has_value()) << shard;
    EXPECT_EQ(next->places[shard], (ShardPlace{elsewhere, preferred, true, true})) << shard;
  }
}

TEST(PlanNamespace, AHandOverTheRingNoLongerWantsIsCalledOff) {
  NamespaceRecord record = new_namespace(1, 2);
  const auto all_up = view_with({{1, true}, {2, true}});
  const NamespaceRecord spread = settle(record, all_up);
  // A shard whose home is node 2, asked to move back to node 1 while node 1 goes down.
  for (std::uint32_t shard = 0; shard < spread.shards(); ++shard) {
    NamespaceRecord handing = spread;
    handing.places[shard] = ShardPlace{2, 1, true, true};
    auto next = plan_namespace(handing, view_with({{1, false}, {2, true}}), {});
    ASSERT_TRUE(next.has_value());
    EXPECT_EQ(next->places[shard], (ShardPlace{2, 1, true, false})) << shard;
  }
}

TEST(PlanNamespace, OneShardStaysWhereItIs) {
  const auto view = view_with({{1, true}, {2, true}, {3, true}, {4, true}});
  const NamespaceRecord settled = settle(new_namespace(1, 1), view);
  EXPECT_EQ(settled.places[0].home, 1u);
}

TEST(PlanNamespace, EveryShardOfADownNodeIsPromotedAtOnce) {
  NamespaceRecord record = new_namespace(1, 3);
  record.places = {ShardPlace{1, 2, true}, ShardPlace{1, 3, true}, ShardPlace{2, 1, true}};
  auto next = plan_namespace(record, view_with({{1, false}, {2, true}, {3, true}}), {});
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->places[0], (ShardPlace{2, 0, false}));
  EXPECT_EQ(next->places[1], (ShardPlace{3, 0, false}));
  EXPECT_EQ(next->places[2].home, 2u);
  EXPECT_NE(next->places[2].mirror, 1u) << "a down mirror is replaced";
}

TEST(PlanNamespace, AHomeBeingSmartFailedHandsItsShardToItsMirrorOnceInStep) {
  const auto view = view_with({{1, true}, {2, true}, {3, true}});
  auto asked = plan_namespace(record(1, 2, true), view, {1});
  ASSERT_TRUE(asked.has_value());
  EXPECT_EQ(asked->places[0], (ShardPlace{1, 2, true, true})) << "the mirror stays in step";
  const ShardPlace moved = handed_over(*asked, 0, view, {1}).places[0];
  EXPECT_EQ(moved, (ShardPlace{2, 3, false, false})) << "never back to the node leaving";
  EXPECT_FALSE(plan_namespace(record(1, 2, false), view, {1})) << "its mirror is copied first";
  auto named = plan_namespace(record(1, 0, false), view, {1});
  ASSERT_TRUE(named.has_value());
  EXPECT_NE(named->places[0].mirror, 1u);
  EXPECT_NE(named->places[0].mirror, 0u);
  EXPECT_FALSE(named->places[0].handing_over);
}

TEST(PlanNamespace, AMirrorBeingSmartFailedIsReplaced) {
  const auto view = view_with({{1, true}, {2, true}, {3, true}});
  auto next = plan_namespace(record(1, 2, true), view, {2});
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->places[0], (ShardPlace{1, 3, false, false}));
}

TEST(PlanNamespace, NoShardIsLeftOnANodeBeingSmartFailed) {
  const auto view = view_with({{1, true}, {2, true}, {3, true}, {4, true}});
  for (const std::uint32_t shards : {1u, 8u}) {
    const NamespaceRecord spread = settle(new_namespace(1, shards), view);
    for (const cluster::NodeId leaving : {1u, 2u, 3u, 4u}) {
      const NamespaceRecord left = settle(spread, view, {leaving});
      for (const ShardPlace& place : left.places) {
        EXPECT_NE(place.home, leaving) << shards << " shards";
        EXPECT_NE(place.mirror, leaving) << shards << " shards";
        EXPECT_NE(place.mirror, 0u) << shards << " shards";
      }
    }
  }
}

TEST(NamespaceRecordBody, RoundTripsAndReadsRecordsFromBeforeMirrors) {
  cluster::GroupView view;
  NamespaceRecord written = record(3, 4, true);
  written.handle_key[0] = 0xab;
  written.places.resize(16, ShardPlace{5, 0, false});
  written.places[3] = ShardPlace{5, 6, true, true};
  cluster::ConfigObject object = namespace_creation(written).object;
  object.changed = 42;
  view.objects.push_back(object);
  EXPECT_EQ(namespace_of(view), written);
  view.objects[0].body = R"({"home": 3, "handle_key": ")" + std::string(64, '0') + R"("})";
  auto old = namespace_of(view);
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->places[0].home, 3u);
  EXPECT_EQ(old->places[0].mirror, 0u);
  EXPECT_EQ(old->shards(), 1u) << "records from before shards are of one";
  for (const char* shards : {"0", "257", "\"four\""}) {
    view.objects[0].body = R"({"home": 3, "shards": )" + std::string(shards) +
                           R"(, "handle_key": ")" + std::string(64, '0') + R"("})";
    EXPECT_FALSE(namespace_of(view).has_value()) << shards;
  }
  view.objects[0].body = R"({"home": 3, "mirror": "two", "handle_key": ")" + std::string(64, '0') + R"("})";
  EXPECT_FALSE(namespace_of(view).has_value());

  view.objects[0].body = R"({"home": 3, "mirror": 4, "mirror_in_step": true, "shards": 4, )"
                         R"("handle_key": ")" +
                         std::string(64, '0') + R"("})";
  auto before_places = namespace_of(view);
  ASSERT_TRUE(before_places.has_value());
  EXPECT_EQ(before_places->places, std::vector<ShardPlace>(4, ShardPlace{3, 4, true}))
      << "records from before places put every shard at their home";
  const std::string key = R"("handle_key": ")" + std::string(64, '0') + R"(")";
  for (const char* places :
       {R"([{"home": 1}])", R"([{"home": 1}, {"mirror": 2}])",
        R"([{"home": 1}, {"home": 2, "mirror_in_step": 1}])",
        R"([{"home": 1}, {"home": 2, "handing_over": "yes"}])", R"({"home": 1})"}) {
    view.objects[0].body = R"({"shards": 2, "places": )" + std::string(places) + ", " + key + "}";
    EXPECT_FALSE(namespace_of(view).has_value()) << places;
  }
}

}  // namespace
}  // namespace tidepool::store
