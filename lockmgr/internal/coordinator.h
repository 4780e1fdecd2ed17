// The coordinator side of a node's lock manager: the lock table of the resources this node
// coordinates in the current group epoch, driven by the nodes' messages.
//
// Calls are idempotent: a node repeats a call until it is answered, and a repeated call is
// answered with the lock's current state; a call whose operation number is older than one
// already applied to the lock is ignored. A lock that is gone leaves a tombstone for a while
// (its last operation and how it ended), so that a late copy of its lock call is answered as
// before instead of asking for the lock anew. Blocking callbacks are repeated every `remind` until
// the holder gives way, so a lost one delays a waiter but never strands it.
//
// Recovery: on every view change the table is forgotten and rebuilt from the reports of every
// up node (what each holds and waits for here); calls that arrive meanwhile wait, and the table
// is settled once the last report is in. Messages of any other epoch are dropped: an older one
// was decided under a view that no longer holds, and the sender of a newer one repeats it once
// this node has caught up.
//
// Not thread-safe: lives on its node's EventLoop.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cluster/event_loop.h"
#include "cluster/types.h"
#include "lockmgr/internal/lock_table.h"
#include "lockmgr/internal/messages.h"

namespace tidepool::lockmgr::internal {

class Coordinator {
 public:
  using Send = std::function<void(cluster::NodeId to, const LockMessage& message)>;

  struct Limits {
    std::chrono::milliseconds remind{500};
    std::size_t max_held_back = 65536;
    std::chrono::milliseconds tombstone_lifetime{60'000};
    std::size_t max_tombstones = 65536;
    // A holder's node that acknowledges no blocking callback for this long is reported to
    // `unresponsive`, once per node and view.
    std::chrono::milliseconds callback_deadline{10'000};
    std::function<void(cluster::NodeId)> unresponsive;
    // LockManagerOptions::may_coordinate.
    std::function<bool()> may_coordinate;
  };

  // Counts into `counters`, which the node's requester shares.
  Coordinator(cluster::EventLoop& loop, Send send, Limits limits, LockStatistics& counters);
  ~Coordinator();
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  void set_view(cluster::Epoch epoch, const std::vector<cluster::NodeId>& up_nodes);
  void receive(cluster::NodeId from, const LockMessage& message);

  bool recovering() const { return !waiting_for_.empty(); }
  cluster::Epoch epoch() const { return epoch_; }
  std::vector<LockRecord> records() const { return table_.records(); }
  std::size_t size() const { return table_.size(); }

 private:
  struct Tombstone {
    std::uint64_t op = 0;
    std::optional<Refusal> refusal;  // how it ended when it was never granted
    std::uint64_t buried_ms = 0;
  };
  struct ReportParts {
    std::vector<bool> received;
    std::size_t count = 0;
  };

  void serve(cluster::NodeId from, const LockMessage& message);
  void take_report(cluster::NodeId from, const Report& report);
  void finish_recovery();
  // Answers a repeated call with where the lock stands now.
  void answer_current_state(LockId id);
  // Answers a late call for a lock that is gone; false when there is no tombstone for it.
  bool answer_from_tombstone(LockId id, std::uint64_t op);
  void bury(LockId id, std::uint64_t op, std::optional<Refusal> refusal);
  // Sends the table's notices, each answer stamped with its lock's operation number, and
  // forgets the operation numbers of locks the table no longer has.
  void publish(const std::vector<Notice>& notices);
  // Makes sure the expiry timer runs by `deadline_ms` (0: no deadline).
  void expire_by(std::uint64_t deadline_ms);
  // Repeats the blocking callbacks every `remind_` while anything waits.
  void remind_while_contended();
  // Reports the nodes of holders that left a blocking callback unacknowledged past its deadline.
  void check_callback_deadlines();

  cluster::EventLoop& loop_;
  Send send_;
  Limits limits_;
  LockTable table_;
  cluster::Epoch epoch_ = 0;
  std::unordered_map<LockId, std::uint64_t> ops_;  // the latest operation applied to each lock
  std::unordered_map<LockId, Tombstone> tombstones_;
  std::deque<std::pair<std::uint64_t, LockId>> burials_;  // (when, lock), oldest first

  std::set<cluster::NodeId> waiting_for_;  // nodes whose report is not complete
  std::map<cluster::NodeId, ReportParts> reports_;
  std::set<cluster::NodeId> complete_;  // nodes whose whole report is in
  std::vector<LockRecord> reported_;
  std::vector<std::pair<cluster::NodeId, LockMessage>> held_back_;
  std::uint64_t recovery_started_ms_ = 0;
  // Holders sent a blocking callback their node has not acknowledged: when the first went, and
  // the last (callbacks are repeated while the holder is in a waiter's way); and the nodes
  // reported unresponsive in this view.
  struct Unacknowledged {
    std::uint64_t first_sent_ms = 0;
    std::uint64_t last_sent_ms = 0;
  };
  std::unordered_map<LockId, Unacknowledged> unacknowledged_;
  std::set<cluster::NodeId> reported_unresponsive_;

  std::uint64_t expiry_at_ = 0;  // when the expiry timer runs, 0: not armed
  cluster::EventLoop::TimerId expiry_timer_ = 0;
  cluster::EventLoop::TimerId remind_timer_ = 0;
  LockStatistics& counters_;
};

}  // namespace tidepool::lockmgr::internal
