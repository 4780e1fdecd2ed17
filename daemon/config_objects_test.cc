#include "daemon/config_objects.h"

#include <gtest/gtest.h>

#include <set>
#include <utility>

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

TEST(Sysctls, TheFailPointPausesAreDurationsAndOffUnlessSet) {
  using Pause = std::chrono::seconds (*)(const cluster::GroupView&);
  const std::pair<const char*, Pause> pauses[] = {
      {"debug.fail_point.cross_shard_decide", &cross_shard_decide_pause},
      {"debug.fail_point.nlm_grant_reply", &nlm_grant_reply_pause}};
  for (const auto& [name, pause_of] : pauses) {
    const SysctlSpec* pause = find_sysctl(name);
    ASSERT_NE(pause, nullptr) << name;
    EXPECT_EQ(normalize_sysctl(*pause, "90s").value(), "90s");
    EXPECT_FALSE(normalize_sysctl(*pause, "soon").ok());
    EXPECT_EQ(sysctl_default(*pause, NodeConfig{}), "0s");
    cluster::GroupView view;
    EXPECT_EQ(pause_of(view).count(), 0) << name;
    view.objects.push_back({std::string(kSysctlKind), name, R"({"value":"2s"})", 4});
    EXPECT_EQ(pause_of(view).count(), 2) << name;
  }
}

TEST(Sysctls, TheFailPointSwitchesAreFlagsAndOffUnlessSet) {
  for (const std::string name : {"ignore_leases", "keep_what_callbacks_drop", "leak_at_exit"}) {
    const std::string sysctl = "debug.fail_point." + name;
    const SysctlSpec* spec = find_sysctl(sysctl);
    ASSERT_NE(spec, nullptr) << sysctl;
    EXPECT_EQ(normalize_sysctl(*spec, "1").value(), "true") << sysctl;
    EXPECT_FALSE(normalize_sysctl(*spec, "30s").ok()) << sysctl;
    EXPECT_EQ(sysctl_default(*spec, NodeConfig{}), "false") << sysctl;
    cluster::GroupView view;
    EXPECT_FALSE(fail_point_switched_on(view, name)) << sysctl;
    view.objects.push_back({std::string(kSysctlKind), sysctl, R"({"value":"true"})", 4});
    EXPECT_TRUE(fail_point_switched_on(view, name)) << sysctl;
    EXPECT_FALSE(fail_point_switched_on(view, "another")) << sysctl;
  }
}

TEST(Sysctls, TheAtimeGracePeriodTakesMillisecondsAsOneFsAndShowsThemBack) {
  const SysctlSpec* grace = find_sysctl("efs.bam.atime_grace_period");
  ASSERT_NE(grace, nullptr);
  EXPECT_EQ(grace->unit, "ms");
  EXPECT_EQ(normalize_sysctl(*grace, "86400000").value(), "1D");
  EXPECT_EQ(normalize_sysctl(*grace, "1D").value(), "1D");
  EXPECT_FALSE(normalize_sysctl(*grace, "1500").ok());
  EXPECT_EQ(normalize_sysctl(*grace, "86400000ms").value(), "1D") << "what tide prints";
  EXPECT_EQ(normalize_sysctl(*grace, "52W").value(), "52W");
  for (const char* too_long : {"53W", "18446744073709551000", "9223372036854775807s"}) {
    EXPECT_FALSE(normalize_sysctl(*grace, too_long).ok()) << too_long;
  }
  EXPECT_EQ(sysctl_in_unit(*grace, "1D"), "86400000");
  EXPECT_EQ(sysctl_in_unit(*grace, "0s"), "0");
  EXPECT_EQ(sysctl_in_unit(*find_sysctl("efs.flexprotect.repair_delay"), "10m"), "600");
  EXPECT_EQ(sysctl_in_unit(*find_sysctl("efs.bam.atime_enabled"), "true"), std::nullopt);
  EXPECT_EQ(sysctl_in_unit(*find_sysctl("efs.smartpools.transfer_limit"), "90"), std::nullopt);
  for (const SysctlSpec& spec : sysctl_specs()) {
    if (!spec.unit.empty() && spec.unit != "%") {
      EXPECT_NE(spec.description.find(spec.unit == "ms" ? "milliseconds" : "seconds"),
                std::string_view::npos)
          << spec.name << "'s help does not say its unit";
    }
  }
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
  const std::optional<LostNodes> known = plan_lost_nodes(LostNodes{}, view, {}, {});
  ASSERT_TRUE(known.has_value()) << "the members are noted";
  EXPECT_EQ(known->members, (std::set<cluster::NodeId>{1, 2, 3, 4}));
  EXPECT_TRUE(known->nodes.empty()) << "no node down long enough";
  EXPECT_EQ(known->generation, 0u);
  EXPECT_FALSE(plan_lost_nodes(*known, view, {}, {}));
  const std::optional<LostNodes> lost = plan_lost_nodes(*known, view, {2}, {});
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

TEST(LostNodes, AMemberRemovedWithoutSmartFailIsANewGeneration) {
  const auto view = view_with({{1, true}, {2, true}, {3, true}});
  const LostNodes known = plan_lost_nodes(LostNodes{}, view, {}, {}).value();
  const std::optional<LostNodes> added =
      plan_lost_nodes(known, view_with({{1, true}, {2, true}, {3, true}, {4, true}}), {}, {});
  ASSERT_TRUE(added.has_value());
  EXPECT_EQ(added->generation, known.generation) << "a node added copies nothing back";
  const std::optional<LostNodes> removed =
      plan_lost_nodes(*added, view_with({{1, true}, {3, true}, {4, true}}), {}, {});
  ASSERT_TRUE(removed.has_value());
  EXPECT_EQ(removed->generation, known.generation + 1) << "its units have a copy fewer";
  EXPECT_EQ(removed->members, (std::set<cluster::NodeId>{1, 3, 4}));
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

TEST(LostNodes, ANodeBeingSmartFailedIsPlacedOnNoMoreUntilItLeaves) {
  cluster::GroupView view = view_with({{1, true}, {2, true}, {3, true}, {4, true}});
  for (cluster::NodeInfo& node : view.nodes) node.pool = "f800";
  view.nodes[3].pool = "h500";
  const Result<LostNodes> failing = plan_smartfail(LostNodes{}, view, 2, 2);
  ASSERT_TRUE(failing.ok()) << failing.status().message();
  EXPECT_EQ(failing->smartfailing, std::set<cluster::NodeId>{2});
  EXPECT_EQ(failing->generation, 1u) << "FlexProtect runs for it";
  EXPECT_TRUE(failing->nodes.empty()) << "it is not lost: it serves what it holds meanwhile";

  const cluster::GroupView marked = with_lost(view, lost_nodes_update(*failing).object.body);
  EXPECT_EQ(lost_nodes_of(marked).smartfailing, std::set<cluster::NodeId>{2});
  EXPECT_EQ(smartfailing_nodes(marked), std::set<cluster::NodeId>{2});
  EXPECT_EQ(pool_nodes(marked).at("f800"), (std::vector<cluster::NodeId>{1, 3}));
  EXPECT_FALSE(plan_lost_nodes(lost_nodes_of(marked), marked, {}, {})) << "nothing to change";

  const std::string refused_again =
      plan_smartfail(lost_nodes_of(marked), marked, 2, 2).status().message();
  EXPECT_NE(refused_again.find("is being SmartFailed"), std::string::npos) << refused_again;
  const Status too_few = plan_smartfail(lost_nodes_of(marked), marked, 1, 2).status();
  EXPECT_EQ(too_few.code(), Errc::precondition_failed);
  EXPECT_NE(too_few.message().find("node pool 'f800' would be left with 1 node"), std::string::npos)
      << too_few.message();
  const std::string last = plan_smartfail(LostNodes{}, view, 4, 2).status().message();
  EXPECT_NE(last.find("'h500' would be left with 0 nodes"), std::string::npos) << last;
  EXPECT_EQ(plan_smartfail(LostNodes{}, view, 9, 2).status().code(), Errc::not_found);
  const std::string three = plan_smartfail(LostNodes{}, view, 1, 3).status().message();
  EXPECT_NE(three.find("too few for 3 copies"), std::string::npos)
      << "files at 3x in a pool of 3 would keep their copies on it: " << three;

  // Called off: placed on again, and a new generation, for FlexProtect to spread files over it.
  const Result<LostNodes> stopped = plan_stopfail(lost_nodes_of(marked), marked, 2);
  ASSERT_TRUE(stopped.ok()) << stopped.status().message();
  EXPECT_TRUE(stopped->smartfailing.empty());
  EXPECT_EQ(stopped->generation, 2u);
  const cluster::GroupView back = with_lost(view, lost_nodes_update(*stopped).object.body);
  EXPECT_EQ(pool_nodes(back).at("f800"), (std::vector<cluster::NodeId>{1, 2, 3}));
  const Status not_failing = plan_stopfail(lost_nodes_of(back), back, 2).status();
  EXPECT_EQ(not_failing.code(), Errc::precondition_failed);
  EXPECT_NE(not_failing.message().find("is not being SmartFailed"), std::string::npos)
      << not_failing.message();
  EXPECT_EQ(plan_stopfail(lost_nodes_of(marked), marked, 9).status().code(), Errc::not_found);
  LostNodes deciding = lost_nodes_of(marked);
  deciding.leaving.insert(2);
  const cluster::GroupView decided = with_lost(view, lost_nodes_update(deciding).object.body);
  EXPECT_EQ(lost_nodes_of(decided).leaving, std::set<cluster::NodeId>{2}) << "kept in the record";
  const Status late = plan_stopfail(lost_nodes_of(decided), decided, 2).status();
  EXPECT_EQ(late.code(), Errc::precondition_failed);
  EXPECT_NE(late.message().find("is leaving the cluster already"), std::string::npos)
      << late.message();

  // Removed: forgotten, with no new generation (the pools placed on are the same).
  cluster::GroupView removed = marked;
  removed.nodes.erase(removed.nodes.begin() + 1);
  const std::optional<LostNodes> forgotten =
      plan_lost_nodes(lost_nodes_of(marked), removed, {}, {});
  ASSERT_TRUE(forgotten.has_value());
  EXPECT_TRUE(forgotten->smartfailing.empty());
  EXPECT_TRUE(plan_lost_nodes(lost_nodes_of(decided), removed, {}, {})->leaving.empty());
  EXPECT_EQ(forgotten->generation, 1u);
  EXPECT_TRUE(
      lost_nodes_of(
          with_lost(view, R"({"nodes":[],"generation":1,"protected":0,"smartfailing":["2"]})"))
          .smartfailing.empty())
      << "a record that does not parse leaves no node out";
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
            (nlohmann::json{{"version", 2},
                            {"path", "/ifs/data"},
                            {"clients", {"10.0.0.0/8", "192.168.1.7"}},
                            {"read_only", true},
                            {"secure", true},
                            {"root_squash", true},
                            {"map_all_uid", 1000},
                            {"map_all_gid", 100},
                            {"anon_uid", 65534},
                            {"anon_gid", 65534}}));
  const auto exports = exports_of(view_with_export(body));
  ASSERT_EQ(exports.size(), 1u);
  EXPECT_EQ(exports.at(3), data_export());
}

// The exports of releases before "secure" took calls from any port, and still do.
ExportConfig insecure_data_export() {
  ExportConfig entry = data_export();
  entry.secure = false;
  return entry;
}

// As the release before versions wrote them: the admin API's EXPORT, its id included.
TEST(Exports, ExportsWrittenBeforeVersionsStillRead) {
  const auto exports = exports_of(view_with_export(
      R"({"anon_gid":65534,"anon_uid":65534,"clients":["10.0.0.0/8","192.168.1.7"],"id":3,)"
      R"("map_all_gid":100,"map_all_uid":1000,"path":"/ifs/data","read_only":true,)"
      R"("root_squash":true})"));
  ASSERT_EQ(exports.size(), 1u);
  EXPECT_EQ(exports.at(3), insecure_data_export());
}

TEST(Exports, ExportsOfVersionOneStillReadAndTakeCallsFromAnyPort) {
  const auto exports = exports_of(view_with_export(
      R"({"version":1,"path":"/ifs/data","clients":["10.0.0.0/8","192.168.1.7"],)"
      R"("read_only":true,"root_squash":true,"map_all_uid":1000,"map_all_gid":100,)"
      R"("anon_uid":65534,"anon_gid":65534})"));
  ASSERT_EQ(exports.size(), 1u);
  EXPECT_EQ(exports.at(3), insecure_data_export());
}

TEST(Exports, AnExportOfANewerVersionOrDamagedIsLeftOut) {
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {R"("version":2)", R"("version":3)"},
           {R"("version":2)", R"("version":2,"id":3)"},
           {R"("read_only":true)", R"("read_only":"yes")"},
           {R"("secure":true,)", ""},
           {R"("secure":true)", R"("secure":1)"},
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
