// Identifiers shared by every cluster component.
#pragma once

#include <cstdint>

namespace tidepool::cluster {

// A node's id in the group view; also its Raft server id. Never 0.
using NodeId = std::uint64_t;

// The group epoch: increases with every change the group view applies. Backend messages carry
// the sender's epoch so that a node can refuse work decided under an older view (fencing).
using Epoch = std::uint64_t;

}  // namespace tidepool::cluster
