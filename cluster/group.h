// The group view: the replicated record of which nodes are in the cluster and up, and of the
// cluster's configuration (pools, tiers, exports, sysctls, job schedules, policies). Changes go
// through a Raft log (canonical/raft) so that every node applies the same changes in the same
// order, and a side of a partition without a majority cannot change anything. Every applied
// change bumps the group epoch. Each node applies the log into its own SQLite config database.
//
// The node that leads the log also watches the others: a node not heard from for
// `down_after` is recorded down, and up again when it is heard from. It grants every node a
// lease (cluster/lease.h), shorter than `down_after`, that the node renews while it reaches
// the leader and the leader a majority.
//
// Not thread-safe: a GroupMember and the callbacks it makes live on its EventLoop.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/event_loop.h"
#include "cluster/lease.h"
#include "cluster/transport.h"
#include "cluster/types.h"
#include "common/status.h"

namespace tidepool::cluster {

struct NodeInfo {
  NodeId id = 0;
  std::string name;              // "node-3"
  std::string backend_address;   // "127.0.0.3:7100": node-to-node messages, Raft among them
  std::string frontend_address;  // where NFS, MOUNT and the portmapper answer
  std::string admin_address;     // REST API and metrics
  std::string pool;              // node pool, e.g. "f800"
  bool up = true;
  // The SHA-256 fingerprint of the certificate the cluster issued the node: the only one its
  // peers take from it (cluster::TcpTransport::PeerCertificates). Empty where none is pinned.
  std::string certificate;
  bool operator==(const NodeInfo&) const = default;
};

// A named piece of cluster configuration — a tier, an export, a sysctl, a schedule. The body
// is JSON that the admin plane validates before proposing it; the group view stores it as is.
struct ConfigObject {
  std::string kind;
  std::string name;
  std::string body;
  Epoch changed = 0;  // epoch of the change that last wrote it
  bool operator==(const ConfigObject&) const = default;
};

// One consistent state of the group view, as of `epoch`.
struct GroupView {
  Epoch epoch = 0;
  std::uint64_t applied = 0;  // changes applied so far, including refused ones
  // A hash chained over every applied change: two nodes with the same `applied` and `digest`
  // applied the same history.
  std::uint64_t digest = 0;
  std::vector<NodeInfo> nodes;        // ordered by id
  std::vector<ConfigObject> objects;  // ordered by (kind, name)
  // Fingerprints of the certificates of the nodes removed, sorted: revoked, refused by every
  // node's backend.
  std::vector<std::string> revoked_certificates;

  const NodeInfo* node(NodeId id) const;
  bool is_up(NodeId id) const;  // registered and up
  std::vector<NodeId> up_nodes() const;
  std::vector<NodeId> up_nodes_in_pool(std::string_view pool) const;
  const ConfigObject* object(std::string_view kind, std::string_view name) const;
  std::vector<ConfigObject> objects_of(std::string_view kind) const;
};

// A change to the group view, applied on every node in log order. Its outcome is decided by
// the state it applies to (creating what exists fails with already_exists on every node alike).
struct Change {
  enum class Kind : std::uint32_t {
    add_node = 1,    // node: registers it (its addresses and pool)
    remove_node,     // node.id; revokes the node's certificate
    set_node_state,  // node.id, node.up
    create_object,   // object; fails if it exists
    update_object,   // object; fails unless it exists (and, with object.changed set, unless it
                     // was last changed at that epoch: precondition_failed)
    delete_object,   // object.kind, object.name; fails unless it exists
  };
  Kind kind = Kind::create_object;
  NodeInfo node;
  ConfigObject object;

  static Change add_node(NodeInfo node);
  static Change remove_node(NodeId id);
  static Change set_node_state(NodeId id, bool up);
  static Change create_object(std::string kind, std::string name, std::string body);
  // With `if_changed_at`, only while nobody changed the object since the epoch the caller
  // read it at: a decision taken on a view that is no longer current fails instead of undoing
  // what came after it.
  static Change update_object(std::string kind, std::string name, std::string body,
                              Epoch if_changed_at = 0);
  static Change delete_object(std::string kind, std::string name);
};

// What an observer learns of each applied change.
struct AppliedChange {
  const Change& change;
  const Status& outcome;
  Epoch epoch;             // the epoch after the change
  std::uint64_t applied;   // position of the change in the history, from 1
  std::uint64_t digest;    // the history's digest after it
};

struct GroupOptions {
  NodeId id = 0;
  std::string address;  // this node's backend address, as other nodes reach it
  // Raft's log and the config database; ":memory:" keeps them in this process (tests).
  std::string raft_log_path;
  std::string config_db_path;
  std::chrono::milliseconds heartbeat{100};
  std::chrono::milliseconds election_timeout{1000};
  // The leader records a node down after this long without a lease request from it.
  std::chrono::milliseconds down_after{2000};
  // How long a lease lasts from the request that got it, and how often a node asks. With the
  // clocks' drift, a lease must end before `down_after`.
  std::chrono::milliseconds lease{1500};
  std::chrono::milliseconds lease_renew{250};
  unsigned snapshot_threshold = 1024;  // entries between snapshots of the config database
  unsigned snapshot_trailing = 128;    // entries kept behind a snapshot for slow followers
  // How long the leader waits for a follower to take a snapshot before sending it again.
  std::chrono::milliseconds install_snapshot_timeout{3000};
};

class GroupMember {
 public:
  using Done = std::function<void(Status)>;

  // Opens (or creates) the member's log and config database. The config database is rebuilt
  // from the log at start(): the log and its snapshots are the durable truth.
  static Result<std::unique_ptr<GroupMember>> open(EventLoop& loop, Transport& transport,
                                                   GroupOptions options);
  // Leaves at once, as a crash would: proposals still pending fail with `unavailable`.
  ~GroupMember();
  GroupMember(const GroupMember&) = delete;
  GroupMember& operator=(const GroupMember&) = delete;

  // Makes this node the whole of a new cluster; call once, before start(), on an empty log.
  // The node registers itself in the view as soon as it leads.
  Status bootstrap(const NodeInfo& self);
  // Joins the group: loads the log and starts taking part. A node that was never bootstrapped
  // waits, with an empty view, until a member adds it.
  Status start();

  // Applies `change` through the log; `done` runs once it is applied here (with its outcome)
  // or has failed. Only the leader accepts changes: others answer `unavailable` naming the
  // leader. A leader that loses its majority fails pending changes with `unavailable`; such a
  // change may or may not have been applied. A node recorded down this way first stops
  // getting its lease: the change is made `down_after` later, once the lease has run out.
  void propose(const Change& change, Done done);
  // Registers `node` in the view, then makes it a voting member of the log. Safe to repeat.
  // timed_out when the node never caught up with the log to become a voter (Raft gives a
  // promotion up after a few election timeouts; add_node tries a few before it gives up).
  void add_node(const NodeInfo& node, Done done);
  // Takes `node` out of the log's membership, then out of the view. Safe to repeat.
  void remove_node(NodeId node, Done done);

  // Hands the lead to `to`, a voter, or with 0 to the voter Raft finds most up to date; `done`
  // runs once that node leads (its first heartbeat reached this one), or fails with timed_out
  // after an election timeout. Proposals made here meanwhile fail as on any follower.
  void transfer_leadership(NodeId to, Done done);

  // Runs after every applied change, on this member's loop.
  void on_applied(std::function<void(const AppliedChange&)> observer);

  NodeId id() const;
  bool is_leader() const;
  NodeId leader() const;  // 0 when not known
  Epoch epoch() const;
  std::uint64_t applied() const;
  std::uint64_t digest() const;
  // The current view; the reference is valid until the next change is applied.
  const GroupView& view();
  // This node's lease; readable from any thread, for as long as the caller keeps it.
  std::shared_ptr<const Lease> lease() const;

 private:
  class Impl;
  explicit GroupMember(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tidepool::cluster
