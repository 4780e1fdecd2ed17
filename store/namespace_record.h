// Where the namespace's shards live, as the group view records it: one object of the view,
// which every node follows (store/namespace_service.h) and the group leader changes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <vector>

#include "cluster/group.h"

namespace tidepool::store {

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
// Null when the view has no namespace record or it does not parse.
std::optional<NamespaceRecord> namespace_of(const cluster::GroupView& view);
// The change that makes the record, when the cluster is made.
cluster::Change namespace_creation(const NamespaceRecord& record);
// The change that writes `next` over the record as it was when read (and fails if it changed
// since).
cluster::Change namespace_update(const NamespaceRecord& next);

// What the group leader changes next about where the namespace's shards live, if anything; for
// each shard: promote an in-step mirror when the home is down; name a mirror when there is
// none, or it is down, gone or `leaving` (the first up node the ring lists for the shard, but
// the home and the nodes leaving). A home `leaving` (being SmartFailed) hands the shard over to
// its in-step mirror, or to a node named its mirror first when its mirror is leaving too.
// A namespace of several shards also spreads them: a shard whose home is not the first up node
// the ring lists for it is moved there — that node is made its mirror, and once in step the
// home is asked to hand the shard over. (A namespace of one shard has nothing to spread.)
std::optional<NamespaceRecord> plan_namespace(const NamespaceRecord& record,
                                              const cluster::GroupView& view,
                                              const std::set<cluster::NodeId>& leaving);
// `record` with shard `shard` handed over by its home, which stopped serving it: its mirror is
// its home, and the first other up node the ring lists for it, not `leaving`, its mirror, to be
// copied.
NamespaceRecord handed_over(const NamespaceRecord& record, std::uint32_t shard,
                            const cluster::GroupView& view,
                            const std::set<cluster::NodeId>& leaving);

}  // namespace tidepool::store
