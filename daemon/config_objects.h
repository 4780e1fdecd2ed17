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
inline constexpr std::string_view kNamespaceName = "namespace";

// An export's object is named by its decimal id. Its body (daemon/stored_records.h):
//   {"version": 1, "path", "clients": [...], "read_only", "root_squash",
//    "map_all_uid": N|null, "map_all_gid": N|null, "anon_uid", "anon_gid"}
// A body without "version" (0) was written before there was one, as the admin API showed the
// export then: the same fields and its "id"; it reads the same.
inline constexpr std::uint32_t kExportVersion = 1;
std::string encode_export(const ExportConfig& entry);
// corrupt, naming what is wrong, for a body that is neither version.
Result<ExportConfig> decode_export(std::string_view body);
// The cluster's exports by id. An object that does not parse (written by a newer release) is
// left out and logged.
std::map<std::uint32_t, ExportConfig> exports_of(const cluster::GroupView& view);

struct SysctlSpec {
  std::string_view name;
  std::string_view description;
};
const std::vector<SysctlSpec>& sysctl_specs();
const SysctlSpec* find_sysctl(std::string_view name);
// The value in canonical form ("true", "1D"), or invalid_argument saying what was expected.
Result<std::string> normalize_sysctl(const SysctlSpec& spec, std::string_view value);
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

// Lowercase hex, as the cluster's ids, token hashes and keys are written.
std::string to_hex(std::span<const std::uint8_t> bytes);

// Where one shard of the namespace lives: its home, and the mirror that takes the home's place
// if it dies. A mirror is promoted only while in step: it holds everything the home
// acknowledged. A home asked to hand the shard over (only while its mirror is in step) stops
// serving it, then makes the mirror the home (handed_over()): the two never serve it at once.
struct ShardPlace {
  cluster::NodeId home = 0;
  cluster::NodeId mirror = 0;
  bool mirror_in_step = false;
  bool handing_over = false;
  bool operator==(const ShardPlace&) const = default;
};

// Where the namespace's shards live, and the key every node seals file handles under, so that
// a handle one node gave out is good on all. Body: {"places": [{"home": node id, "mirror":
// node id or 0, "mirror_in_step": bool}, ...one per shard], "handle_key": 64 hex digits,
// "shards": 1..256}, each place also "handing_over": bool when it is. The number of shards is
// fixed when the cluster is made. Records written
// before shards had places of their own say {"home", "mirror", "mirror_in_step"} once, for
// every shard (and before shards, have one).
struct NamespaceRecord {
  std::vector<ShardPlace> places{1};
  std::array<std::uint8_t, 32> handle_key{};
  cluster::Epoch changed = 0;  // when the record was last written (not in the body)

  std::uint32_t shards() const { return static_cast<std::uint32_t>(places.size()); }
  bool operator==(const NamespaceRecord&) const = default;
};
// A new namespace of `shards` shards, every one at `home` until the leader spreads them.
NamespaceRecord new_namespace(cluster::NodeId home, std::uint32_t shards);
nlohmann::json namespace_to_json(const NamespaceRecord& record);
// Null when the view has no namespace record or it does not parse.
std::optional<NamespaceRecord> namespace_of(const cluster::GroupView& view);
// The change that writes `next` over the record as it was when read (and fails if it changed
// since).
cluster::Change namespace_update(const NamespaceRecord& next);

// What the group leader changes next about where the namespace's shards live, if anything; for
// each shard: promote an in-step mirror when the home is down; name a mirror when there is
// none, or it is down or gone (the first up node the ring lists for the shard, but the home).
// A namespace of several shards also spreads them: a shard whose home is not the first up node
// the ring lists for it is moved there — that node is made its mirror, and once in step the
// home is asked to hand the shard over. (A namespace of one shard has nothing to spread.)
std::optional<NamespaceRecord> plan_namespace(const NamespaceRecord& record,
                                              const cluster::GroupView& view);
// `record` with shard `shard` handed over by its home, which stopped serving it: its mirror is
// its home, and the first other up node the ring lists for it its mirror, to be copied.
NamespaceRecord handed_over(const NamespaceRecord& record, std::uint32_t shard,
                            const cluster::GroupView& view);

// The nodes the cluster places file data on no more: down past the repair delay. The leader
// writes the record; every home leaves these nodes out of their pools (pool_nodes), for new
// files and restripes, and the FlexProtect job restripes the files with units on them over the
// rest of their pools. A lost node that has been up again for the repair delay is placed on
// again, and FlexProtect spreads the files over it. Body: {"nodes": [id, ...], "generation":
// changes of `nodes` so far, "protected": the generation FlexProtect was last started for}.
inline constexpr std::string_view kLostNodesName = "lost_nodes";
struct LostNodes {
  std::set<cluster::NodeId> nodes;
  std::uint64_t generation = 0;
  std::uint64_t protected_generation = 0;
  cluster::Epoch changed = 0;  // when the record was last written; 0: there is none yet
  bool operator==(const LostNodes&) const = default;
};
// No nodes when the view has no record, or it does not parse (logged).
LostNodes lost_nodes_of(const cluster::GroupView& view);
// Creates the record, or writes `next` over it as it was when read.
cluster::Change lost_nodes_update(const LostNodes& next);
// What the leader writes next, if anything: the nodes of `down_past_delay` are lost, and a lost
// node of `up_past_delay` (up again for the repair delay, ten minutes at most, so that one that
// keeps failing is not restriped back and forth) or gone from the view is lost no more; a change
// counts a generation.
std::optional<LostNodes> plan_lost_nodes(const LostNodes& lost, const cluster::GroupView& view,
                                         const std::set<cluster::NodeId>& down_past_delay,
                                         const std::set<cluster::NodeId>& up_past_delay);
// The nodes of each node pool that file data is placed on: those not lost, in the view's order.
std::map<std::string, std::vector<cluster::NodeId>> pool_nodes(const cluster::GroupView& view);

// A tier's body: {"children": [pool, ...]}.
std::vector<std::string> tier_children(const cluster::ConfigObject& tier);

}  // namespace tidepool::daemon
