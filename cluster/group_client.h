// Changes to the group view from any member. Only the leader may propose; a GroupClient on any
// other node sends the change to the leader over backend RPC. Either way `done` runs once the
// change is applied on this node too, so a caller reads its own write here.
//
// Not thread-safe: lives on the member's EventLoop.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "cluster/event_loop.h"
#include "cluster/group.h"
#include "cluster/rpc.h"

namespace tidepool::cluster {

class GroupClient {
 public:
  // The backend RPC methods the leader serves proposals, read indexes and transfers of the lead
  // on (the daemon's own use 2 and 4).
  static constexpr std::uint32_t kProposeMethod = 1;
  static constexpr std::uint32_t kReadIndexMethod = 3;
  static constexpr std::uint32_t kTransferLeadershipMethod = 5;

  // Serves forwarded proposals on `rpc` when this node leads.
  GroupClient(EventLoop& loop, GroupMember& member, RpcEndpoint& rpc);
  ~GroupClient();
  GroupClient(const GroupClient&) = delete;
  GroupClient& operator=(const GroupClient&) = delete;

  // While no leader is known, waits for one until `deadline`. Fails with the change's own
  // outcome, or `unavailable`/`timed_out` when the group could not decide in time (then the
  // change may or may not have been applied).
  void propose(const Change& change, std::chrono::milliseconds deadline, GroupMember::Done done);
  // GroupMember::add_node and remove_node, through the leader; safe to repeat.
  void add_node(const NodeInfo& node, std::chrono::milliseconds deadline,
                GroupMember::Done done);
  // A leader that is to be removed first hands on the lead, and the new leader removes it.
  void remove_node(NodeId node, std::chrono::milliseconds deadline, GroupMember::Done done);
  // GroupMember::transfer_leadership, through the leader.
  void transfer_leadership(NodeId to, std::chrono::milliseconds deadline, GroupMember::Done done);
  // Waits until this node has applied every change the leader had applied when asked, so that
  // a read here sees what was written through any node. Fails like propose() when no leader
  // answers in time.
  void catch_up(std::chrono::milliseconds deadline, GroupMember::Done done);

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace tidepool::cluster
