#include "daemon/config_objects.h"

#include <gtest/gtest.h>

#include <set>

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
  r.places = {ShardPlace{home, mirror, in_step}};
  r.changed = 42;
  return r;
}

TEST(PlanNamespace, AHomeWithoutAMirrorGetsOneOfTheOtherUpNodes) {
  auto next = plan_namespace(record(1, 0, false), view_with({{1, true}, {2, true}, {3, false}}));
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->places[0].home, 1u);
  EXPECT_EQ(next->places[0].mirror, 2u);
  EXPECT_FALSE(next->places[0].mirror_in_step);
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
  EXPECT_EQ(replaced->places[0].mirror, 3u);
  EXPECT_FALSE(replaced->places[0].mirror_in_step);
  auto gone = plan_namespace(record(1, 7, true), view_with({{1, true}, {3, true}}));
  ASSERT_TRUE(gone.has_value());
  EXPECT_EQ(gone->places[0].mirror, 3u);
}

TEST(PlanNamespace, ADownHomeIsReplacedByItsMirrorOnlyWhileTheMirrorIsInStepAndUp) {
  const auto view = view_with({{1, false}, {2, true}, {3, true}});
  auto promoted = plan_namespace(record(1, 2, true), view);
  ASSERT_TRUE(promoted.has_value());
  EXPECT_EQ(promoted->places[0].home, 2u);
  EXPECT_EQ(promoted->places[0].mirror, 0u);
  EXPECT_FALSE(promoted->places[0].mirror_in_step);
  EXPECT_FALSE(plan_namespace(record(1, 2, false), view)) << "a copy under way is not promoted";
  EXPECT_FALSE(plan_namespace(record(1, 3, true), view_with({{1, false}, {3, false}, {2, true}})));
  EXPECT_FALSE(plan_namespace(record(1, 0, false), view));
}

// Plans from `record` until there is nothing left to change, each mirror named coming in step
// at once (as its whole copy would complete) and each home asked to hand over doing so; at
// most 20 rounds.
NamespaceRecord settle(NamespaceRecord record, const cluster::GroupView& view) {
  for (int round = 0; round < 20; ++round) {
    std::optional<NamespaceRecord> next = plan_namespace(record, view);
    if (!next) return record;
    record = *next;
    for (std::uint32_t shard = 0; shard < record.shards(); ++shard) {
      if (record.places[shard].handing_over) {
        record = handed_over(record, shard, view);
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
  auto first = plan_namespace(made, view);
  ASSERT_TRUE(first.has_value());
  for (const ShardPlace& place : first->places) {
    EXPECT_EQ(place.home, 1u);
    EXPECT_NE(place.mirror, 0u);
    EXPECT_NE(place.mirror, 1u);
    EXPECT_FALSE(place.mirror_in_step);
    EXPECT_FALSE(place.handing_over);
  }
  EXPECT_FALSE(plan_namespace(*first, view)) << "nothing moves before its new home is in step";

  NamespaceRecord copied = *first;
  for (ShardPlace& place : copied.places) place.mirror_in_step = true;
  auto asked = plan_namespace(copied, view);
  ASSERT_TRUE(asked.has_value());
  std::size_t moving = 0;
  for (std::uint32_t shard = 0; shard < asked->shards(); ++shard) {
    const ShardPlace& place = asked->places[shard];
    EXPECT_EQ(place.home, 1u) << "the home hands a shard over itself";
    moving += place.handing_over;
    if (!place.handing_over) continue;
    const ShardPlace moved = handed_over(*asked, shard, view).places[shard];
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
    auto next = plan_namespace(record, view);
    ASSERT_TRUE(next.has_value()) << shard;
    EXPECT_EQ(next->places[shard], (ShardPlace{elsewhere, preferred, false, false})) << shard;
    record.places[shard].mirror_in_step = true;
    record.places[shard].handing_over = false;
    next = plan_namespace(record, view);
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
    auto next = plan_namespace(handing, view_with({{1, false}, {2, true}}));
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
  auto next = plan_namespace(record, view_with({{1, false}, {2, true}, {3, true}}));
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->places[0], (ShardPlace{2, 0, false}));
  EXPECT_EQ(next->places[1], (ShardPlace{3, 0, false}));
  EXPECT_EQ(next->places[2].home, 2u);
  EXPECT_NE(next->places[2].mirror, 1u) << "a down mirror is replaced";
}

TEST(NamespaceRecordBody, RoundTripsAndReadsRecordsFromBeforeMirrors) {
  cluster::GroupView view;
  NamespaceRecord written = record(3, 4, true);
  written.handle_key[0] = 0xab;
  written.places.resize(16, ShardPlace{5, 0, false});
  written.places[3] = ShardPlace{5, 6, true, true};
  view.objects.push_back({std::string(kClusterKind), std::string(kNamespaceName),
                          namespace_to_json(written).dump(), 42});
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

TEST(Sysctls, TheRepairDelayIsTenMinutesUnlessSet) {
  const SysctlSpec* delay = find_sysctl("efs.flexprotect.repair_delay");
  ASSERT_NE(delay, nullptr);
  EXPECT_EQ(sysctl_default(*delay, NodeConfig{}), "10m");
  EXPECT_FALSE(normalize_sysctl(*delay, "later").ok());
  EXPECT_FALSE(normalize_sysctl(*delay, "0s").ok()) << "every restart would restripe";
  EXPECT_FALSE(normalize_sysctl(*delay, "5W").ok());
  EXPECT_EQ(normalize_sysctl(*delay, "4W").value(), "4W");
  cluster::GroupView view;
  EXPECT_EQ(repair_delay(view), std::chrono::minutes(10));
  view.objects.push_back(
      {std::string(kSysctlKind), "efs.flexprotect.repair_delay", R"({"value":"3s"})", 4});
  EXPECT_EQ(repair_delay(view).count(), 3);
}

// `view` with the lost-node record `body`, written at epoch 9.
cluster::GroupView with_lost(cluster::GroupView view, std::string body) {
  view.objects.push_back(
      {std::string(kClusterKind), std::string(kLostNodesName), std::move(body), 9});
  return view;
}

TEST(LostNodes, ANodeDownPastTheDelayIsLostUntilItIsUpAsLongOrGone) {
  const auto view = view_with({{1, true}, {2, false}, {3, false}, {4, true}});
  EXPECT_FALSE(plan_lost_nodes(LostNodes{}, view, {}, {})) << "no node down long enough";
  const std::optional<LostNodes> lost = plan_lost_nodes(LostNodes{}, view, {2}, {});
  ASSERT_TRUE(lost.has_value());
  EXPECT_EQ(lost->nodes, std::set<cluster::NodeId>{2});
  EXPECT_EQ(lost->generation, 1u);
  EXPECT_EQ(lost->protected_generation, 0u) << "FlexProtect is still to start for it";
  EXPECT_FALSE(plan_lost_nodes(*lost, view, {2}, {})) << "nothing changed";
  EXPECT_FALSE(plan_lost_nodes(*lost, view, {}, {})) << "a leader that just began counts anew";

  const auto up_again = view_with({{1, true}, {2, true}, {3, false}, {4, true}});
  EXPECT_FALSE(plan_lost_nodes(*lost, up_again, {}, {})) << "not up for long enough";
  const std::optional<LostNodes> back = plan_lost_nodes(*lost, up_again, {}, {2});
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(back->nodes.empty());
  EXPECT_EQ(back->generation, 2u);
  const std::optional<LostNodes> gone =
      plan_lost_nodes(*lost, view_with({{1, true}, {3, false}, {4, true}}), {3}, {});
  ASSERT_TRUE(gone.has_value());
  EXPECT_EQ(gone->nodes, std::set<cluster::NodeId>{3}) << "a node removed is lost no more";
}

TEST(LostNodes, TheRecordRoundTripsAndLeavesLostNodesOutOfTheirPools) {
  cluster::GroupView view = view_with({{1, true}, {2, false}, {3, true}, {4, true}});
  view.nodes[0].pool = view.nodes[1].pool = view.nodes[2].pool = "f800";
  view.nodes[3].pool = "h500";
  EXPECT_EQ(lost_nodes_of(view), LostNodes{});
  EXPECT_EQ(pool_nodes(view).at("f800"), (std::vector<cluster::NodeId>{1, 2, 3}));

  LostNodes lost{{2, 4}, 3, 2, 0};
  const cluster::Change created = lost_nodes_update(lost);
  EXPECT_EQ(created.kind, cluster::Change::Kind::create_object) << "there was no record";
  const cluster::GroupView marked = with_lost(view, created.object.body);
  lost.changed = 9;
  EXPECT_EQ(lost_nodes_of(marked), lost);
  const auto pools = pool_nodes(marked);
  EXPECT_EQ(pools.at("f800"), (std::vector<cluster::NodeId>{1, 3}));
  EXPECT_FALSE(pools.contains("h500")) << "its one node is lost";

  const cluster::Change updated = lost_nodes_update(lost);
  EXPECT_EQ(updated.kind, cluster::Change::Kind::update_object);
  EXPECT_EQ(updated.object.changed, 9u) << "only over the record as read";

  for (const char* bad :
       {R"({"nodes":[2],"generation":1})", R"({"nodes":["2"],"generation":1,"protected":0})",
        R"([2])", "not json"}) {
    EXPECT_TRUE(lost_nodes_of(with_lost(view, bad)).nodes.empty()) << bad;
  }
}

ExportConfig data_export() {
  ExportConfig entry;
  entry.path = "/ifs/data";
  entry.clients = {"10.0.0.0/8", "192.168.1.7"};
  entry.read_only = true;
  entry.map_all_uid = 1000;
  entry.map_all_gid = 100;
  return entry;
}

cluster::GroupView view_with_export(const std::string& body) {
  cluster::GroupView view;
  view.objects.push_back({std::string(kExportKind), "3", body, 4});
  return view;
}

// The body is what the Raft log holds: it changes with a new version, never with the API.
TEST(Exports, TheStoredFormIsVersionedAndReadsBack) {
  const std::string body = encode_export(data_export());
  EXPECT_EQ(nlohmann::json::parse(body),
            (nlohmann::json{{"version", 1},
                            {"path", "/ifs/data"},
                            {"clients", {"10.0.0.0/8", "192.168.1.7"}},
                            {"read_only", true},
                            {"root_squash", true},
                            {"map_all_uid", 1000},
                            {"map_all_gid", 100},
                            {"anon_uid", 65534},
                            {"anon_gid", 65534}}));
  const auto exports = exports_of(view_with_export(body));
  ASSERT_EQ(exports.size(), 1u);
  EXPECT_EQ(exports.at(3), data_export());
}

// As the release before versions wrote them: the admin API's EXPORT, its id included.
TEST(Exports, ExportsWrittenBeforeVersionsStillRead) {
  const auto exports = exports_of(view_with_export(
      R"({"anon_gid":65534,"anon_uid":65534,"clients":["10.0.0.0/8","192.168.1.7"],"id":3,)"
      R"("map_all_gid":100,"map_all_uid":1000,"path":"/ifs/data","read_only":true,)"
      R"("root_squash":true})"));
  ASSERT_EQ(exports.size(), 1u);
  EXPECT_EQ(exports.at(3), data_export());
}

TEST(Exports, AnExportOfANewerVersionOrDamagedIsLeftOut) {
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {R"("version":1)", R"("version":2)"},
           {R"("version":1)", R"("version":1,"id":3)"},
           {R"("read_only":true)", R"("read_only":"yes")"},
           {R"("anon_uid":65534,)", ""},
           {R"("path":"/ifs/data")", R"("path":"data")"}}) {
    std::string body = encode_export(data_export());
    ASSERT_NE(body.find(from), std::string::npos) << body;
    body.replace(body.find(from), from.size(), to);
    EXPECT_TRUE(exports_of(view_with_export(body)).empty()) << body;
    EXPECT_EQ(decode_export(body).status().code(), Errc::corrupt) << body;
  }
}

}  // namespace
}  // namespace tidepool::daemon
