// The ring: rendezvous (highest-random-weight) hashing over a set of nodes. For any key it gives
// the nodes in order of preference — the shard home then its mirror, a lock's coordinator, a
// stripe unit's owners. A pure function of the node set: every node computes the same answer
// without asking, and removing a node moves only the keys it owned.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "cluster/types.h"

namespace tidepool::cluster {

class Ring {
 public:
  // The nodes may come in any order and with repeats.
  explicit Ring(std::vector<NodeId> nodes);

  // The first `count` nodes in order of preference for `key` (all nodes if there are fewer).
  std::vector<NodeId> owners(std::uint64_t key, std::size_t count) const;
  // The most preferred node; the ring must not be empty.
  NodeId owner(std::uint64_t key) const;

  const std::vector<NodeId>& nodes() const { return nodes_; }
  bool empty() const { return nodes_.empty(); }

  // A well-mixed 64-bit key for a name (a lock resource, a pool) that is the same on every
  // node and in every release.
  static std::uint64_t key_of(std::string_view name);
  // A key for an ordered pair, such as (inode, stripe unit index).
  static std::uint64_t key_of(std::uint64_t first, std::uint64_t second);

 private:
  std::vector<NodeId> nodes_;  // sorted, unique
};

}  // namespace tidepool::cluster
