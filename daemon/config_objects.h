// The cluster configuration the admin API edits, as objects of the group view: their kinds,
// their bodies, and what a node reads back out of them (exports, sysctls, tiers).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/group.h"
#include "common/config.h"
#include "common/status.h"

namespace tidepool::daemon {

inline constexpr std::string_view kTierKind = "tier";
inline constexpr std::string_view kExportKind = "export";
inline constexpr std::string_view kSysctlKind = "sysctl";
// The cluster's identity and its CA: never shown by the API.
inline constexpr std::string_view kClusterKind = "cluster";
inline constexpr std::string_view kIdentityName = "identity";
inline constexpr std::string_view kCaName = "ca";

// An export's object is named by its decimal id. Its body (daemon/stored_records.h):
//   {"version": 2, "path", "clients": [...], "read_only", "secure", "root_squash",
//    "map_all_uid": N|null, "map_all_gid": N|null, "anon_uid", "anon_gid"}
// Version 1 had no "secure": it reads as false, the export taking calls from any port as it
// did. A body without "version" (0) was written before there was one, as the admin API showed
// the export then: version 1's fields and its "id"; it reads the same.
inline constexpr std::uint32_t kExportVersion = 2;
std::string encode_export(const ExportConfig& entry);
// corrupt, naming what is wrong, for a body that is neither version.
Result<ExportConfig> decode_export(std::string_view body);
// The cluster's exports by id. An object that does not parse (written by a newer release) is
// left out and logged.
std::map<std::uint32_t, ExportConfig> exports_of(const cluster::GroupView& view);

struct SysctlSpec {
  std::string_view name;
  std::string_view description;
  // What a bare number counts: "ms" or "s" for a duration (OneFS's keys in OneFS's unit), "%"
  // for a percentage; "" for a flag.
  std::string_view unit;
};
const std::vector<SysctlSpec>& sysctl_specs();
const SysctlSpec* find_sysctl(std::string_view name);
// The value in canonical form ("true", "1D"), or invalid_argument saying what was expected.
Result<std::string> normalize_sysctl(const SysctlSpec& spec, std::string_view value);
// A duration's canonical value as a bare number in its unit ("1D" -> "86400000" in ms); nothing
// for other sysctls.
std::optional<std::string> sysctl_in_unit(const SysctlSpec& spec, std::string_view value);
// What a sysctl is when the cluster has not set it: this node's configuration.
std::string sysctl_default(const SysctlSpec& spec, const NodeConfig& config);
// The cluster's value if set, else the default.
std::string sysctl_value(const SysctlSpec& spec, const cluster::GroupView& view,
                         const NodeConfig& config);

struct AtimePolicy {
  bool enabled = true;
  std::chrono::seconds grace_period{0};
};
AtimePolicy atime_policy(const cluster::GroupView& view, const NodeConfig& config);

// efs.smartpools.transfer_limit: how full a node pool's disks may be (a percentage) and the pool
// still receive the data the SmartPools job moves (OneFS's transfer limit).
inline constexpr std::uint32_t kDefaultTransferLimitPercent = 90;
std::uint32_t transfer_limit_percent(const cluster::GroupView& view);

// efs.flexprotect.repair_delay: how long a node is down before the cluster stops placing file
// data on it and restores the protection of the data it held elsewhere (FlexProtect).
inline constexpr std::chrono::seconds kDefaultRepairDelay{600};
std::chrono::seconds repair_delay(const cluster::GroupView& view);

// debug.fail_point.cross_shard_decide: the pause of fail point kCrossShardDecide
// (common/fail_points.h) on every node; 0 when unset.
std::chrono::seconds cross_shard_decide_pause(const cluster::GroupView& view);
// debug.fail_point.nlm_grant_reply: the pause of fail point kNlmGrantReply; 0 when unset.
std::chrono::seconds nlm_grant_reply_pause(const cluster::GroupView& view);
// debug.fail_point.add_node_after_join: the pause of fail point kAddNodeAfterJoin; 0 when unset.
std::chrono::seconds add_node_after_join_pause(const cluster::GroupView& view);
// debug.fail_point.NAME, for the switches among the fail points (common/fail_points.h): whether
// switch NAME is on, on every node; off when unset.
bool fail_point_switched_on(const cluster::GroupView& view, std::string_view name);

// The nodes the cluster places file data on no more: down past the repair delay, or being
// SmartFailed. The leader writes the record; every home leaves these nodes out of their pools
// (pool_nodes), for new files and restripes, and the FlexProtect job restripes the files with
// units on them over the rest of their pools. A lost node that has been up again for the repair
// delay is placed on again, and FlexProtect spreads the files over it. A node being SmartFailed
// (`tide cluster smartfail`) is up and keeps serving what it holds while FlexProtect copies it
// elsewhere, and holds no shard once the leader moved them off (store::plan_namespace); then the
// leader removes it from the cluster. Body: {"nodes": [id, ...], "generation": changes of the
// nodes left out so far, "protected": the generation FlexProtect was last started for,
// "smartfailing": [id, ...], "members": [id, ...], "leaving": [id, ...]} (records written
// before SmartFail have none of the last three).
inline constexpr std::string_view kLostNodesName = "lost_nodes";
struct LostNodes {
  std::set<cluster::NodeId> nodes;
  std::uint64_t generation = 0;
  std::uint64_t protected_generation = 0;
  cluster::Epoch changed = 0;  // when the record was last written; 0: there is none yet
  std::set<cluster::NodeId> smartfailing;
  // The view's nodes when the record was last written: one of them gone (removed without
  // SmartFail) is a new generation, since the files with units on it have a copy fewer.
  std::set<cluster::NodeId> members;
  // Of `smartfailing`, the nodes whose removal the leader decided: written before it proposes
  // the removal, so that a stopfail either comes first (and the leader's write fails) or is
  // refused.
  std::set<cluster::NodeId> leaving;
  bool operator==(const LostNodes&) const = default;
};
// No nodes when the view has no record, or it does not parse (logged).
LostNodes lost_nodes_of(const cluster::GroupView& view);
// Creates the record, or writes `next` over it as it was when read.
cluster::Change lost_nodes_update(const LostNodes& next);
// What the leader writes next, if anything: the nodes of `down_past_delay` are lost, and a lost
// node of `up_past_delay` (up again for the repair delay, ten minutes at most, so that one that
// keeps failing is not restriped back and forth) or gone from the view is lost no more; a change
// counts a generation, and so does a member gone from the view that was not SmartFailed (its
// units are to be copied again). A node being SmartFailed that is gone from the view is
// forgotten (no new generation: FlexProtect copied what it held before it left).
std::optional<LostNodes> plan_lost_nodes(const LostNodes& lost, const cluster::GroupView& view,
                                         const std::set<cluster::NodeId>& down_past_delay,
                                         const std::set<cluster::NodeId>& up_past_delay);
// `lost` with `node` being SmartFailed, a new generation; refused (with the reason, for the
// administrator) when the node is not in the view, is SmartFailed already, or the nodes left
// to place on could not keep what is asked: fewer than `copies` (the most any file pool
// policy asks for) in its pool, whose files would then keep their copies on it and never let
// it go, or fewer than two nodes in the cluster for the namespace's home and mirror.
Result<LostNodes> plan_smartfail(const LostNodes& lost, const cluster::GroupView& view,
                                 cluster::NodeId node, std::uint32_t copies);
// `lost` with the SmartFail of `node` called off (`tide cluster stopfail`), a new generation:
// files are placed on it again and FlexProtect spreads them over it, as over a node back from
// being lost. The shards moved off it stay where they went. Refused when the node is not in the
// view, not being SmartFailed, or leaving already (the leader decided its removal).
Result<LostNodes> plan_stopfail(const LostNodes& lost, const cluster::GroupView& view,
                                cluster::NodeId node);
// The nodes of each node pool that file data is placed on: those neither lost nor being
// SmartFailed, in the view's order.
std::map<std::string, std::vector<cluster::NodeId>> pool_nodes(const cluster::GroupView& view);
// The nodes being SmartFailed: no shard is homed or mirrored on them (store::plan_namespace).
std::set<cluster::NodeId> smartfailing_nodes(const cluster::GroupView& view);

// A tier's body: {"children": [pool, ...]}.
std::vector<std::string> tier_children(const cluster::ConfigObject& tier);

}  // namespace tidepool::daemon
