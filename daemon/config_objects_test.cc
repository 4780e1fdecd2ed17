#include "daemon/config_objects.h"

#include <gtest/gtest.h>

namespace tidepool::daemon {
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
  r.home = home;
  r.mirror = mirror;
  r.mirror_in_step = in_step;
  r.changed = 42;
  return r;
}

TEST(PlanNamespace, AHomeWithoutAMirrorGetsOneOfTheOtherUpNodes) {
  auto next = plan_namespace(record(1, 0, false), view_with({{1, true}, {2, true}, {3, false}}));
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->home, 1u);
  EXPECT_EQ(next->mirror, 2u);
  EXPECT_FALSE(next->mirror_in_step);
  EXPECT_EQ(next->changed, 42u) << "the update is conditional on the record as read";
}

TEST(PlanNamespace, AHomeAloneKeepsNoMirror) {
  EXPECT_FALSE(plan_namespace(record(1, 0, false), view_with({{1, true}, {2, false}})));
}

TEST(PlanNamespace, AnUpMirrorIsLeftAloneInStepOrNot) {
  const auto view = view_with({{1, true}, {2, true}, {3, true}});
  EXPECT_FALSE(plan_namespace(record(1, 2, true), view));
  EXPECT_FALSE(plan_namespace(record(1, 2, false), view));
}

TEST(PlanNamespace, ADownOrRemovedMirrorIsReplaced) {
  auto replaced = plan_namespace(record(1, 2, true), view_with({{1, true}, {2, false}, {3, true}}));
  ASSERT_TRUE(replaced.has_value());
  EXPECT_EQ(replaced->mirror, 3u);
  EXPECT_FALSE(replaced->mirror_in_step);
  auto gone = plan_namespace(record(1, 7, true), view_with({{1, true}, {3, true}}));
  ASSERT_TRUE(gone.has_value());
  EXPECT_EQ(gone->mirror, 3u);
}

TEST(PlanNamespace, ADownHomeIsReplacedByItsMirrorOnlyWhileTheMirrorIsInStepAndUp) {
  const auto view = view_with({{1, false}, {2, true}, {3, true}});
  auto promoted = plan_namespace(record(1, 2, true), view);
  ASSERT_TRUE(promoted.has_value());
  EXPECT_EQ(promoted->home, 2u);
  EXPECT_EQ(promoted->mirror, 0u);
  EXPECT_FALSE(promoted->mirror_in_step);
  EXPECT_FALSE(plan_namespace(record(1, 2, false), view)) << "a copy under way is not promoted";
  EXPECT_FALSE(plan_namespace(record(1, 3, true), view_with({{1, false}, {3, false}, {2, true}})));
  EXPECT_FALSE(plan_namespace(record(1, 0, false), view));
}

TEST(NamespaceRecordBody, RoundTripsAndReadsRecordsFromBeforeMirrors) {
  cluster::GroupView view;
  NamespaceRecord written = record(3, 4, true);
  written.handle_key[0] = 0xab;
  written.shards = 16;
  view.objects.push_back({std::string(kClusterKind), std::string(kNamespaceName),
                          namespace_to_json(written).dump(), 42});
  EXPECT_EQ(namespace_of(view), written);
  view.objects[0].body = R"({"home": 3, "handle_key": ")" + std::string(64, '0') + R"("})";
  auto old = namespace_of(view);
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->home, 3u);
  EXPECT_EQ(old->mirror, 0u);
  EXPECT_EQ(old->shards, 1u) << "records from before shards are of one";
  for (const char* shards : {"0", "257", "\"four\""}) {
    view.objects[0].body = R"({"home": 3, "shards": )" + std::string(shards) +
                           R"(, "handle_key": ")" + std::string(64, '0') + R"("})";
    EXPECT_FALSE(namespace_of(view).has_value()) << shards;
  }
  view.objects[0].body = R"({"home": 3, "mirror": "two", "handle_key": ")" + std::string(64, '0') + R"("})";
  EXPECT_FALSE(namespace_of(view).has_value());
}

TEST(Sysctls, TheTransferLimitIsAPercentageFromOneToAHundred) {
  const SysctlSpec* limit = find_sysctl("efs.smartpools.transfer_limit");
  ASSERT_NE(limit, nullptr);
  EXPECT_EQ(normalize_sysctl(*limit, "85").value(), "85");
  EXPECT_EQ(normalize_sysctl(*limit, "85%").value(), "85");
  EXPECT_EQ(normalize_sysctl(*limit, "100").value(), "100");
  for (const char* bad : {"0", "101", "x", "", "%", "85.5", "-1", "85%%"}) {
    EXPECT_EQ(normalize_sysctl(*limit, bad).status().message(),
              "efs.smartpools.transfer_limit must be a percentage from 1 to 100")
        << bad;
  }
  EXPECT_EQ(sysctl_default(*limit, NodeConfig{}), "90");
  cluster::GroupView view;
  EXPECT_EQ(transfer_limit_percent(view), kDefaultTransferLimitPercent);
  view.objects.push_back({std::string(kSysctlKind), "efs.smartpools.transfer_limit",
                          R"({"value":"75"})", 4});
  EXPECT_EQ(transfer_limit_percent(view), 75u);
  view.objects.back().body = R"({"value":"900"})";
  EXPECT_EQ(transfer_limit_percent(view), kDefaultTransferLimitPercent) << "unreadable: default";
}

TEST(Sysctls, TheFailPointBetweenThePhasesIsADurationAndOffUnlessSet) {
  const SysctlSpec* pause = find_sysctl("debug.fail_point.cross_shard_decide");
  ASSERT_NE(pause, nullptr);
  EXPECT_EQ(normalize_sysctl(*pause, "90s").value(), "90s");
  EXPECT_FALSE(normalize_sysctl(*pause, "soon").ok());
  EXPECT_EQ(sysctl_default(*pause, NodeConfig{}), "0s");
  cluster::GroupView view;
  EXPECT_EQ(cross_shard_decide_pause(view).count(), 0);
  view.objects.push_back(
      {std::string(kSysctlKind), "debug.fail_point.cross_shard_decide", R"({"value":"2s"})", 4});
  EXPECT_EQ(cross_shard_decide_pause(view).count(), 2);
}

}  // namespace
}  // namespace tidepool::daemon
