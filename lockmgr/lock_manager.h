// A node's lock manager: the distributed lock manager's one object per node. It asks for the
// locks this node's users want, and coordinates the resources the ring gives this node: the
// coordinator of a resource is the first node, among those up in the group view, on the ring
// for the resource's name. Messages travel on the transport's lock channel.
//
// Every lock operation completes exactly once, even across lost and repeated messages and
// coordinator failures: on each view change every node reports its locks to their coordinators
// in the new view, which rebuild their tables from the reports (granted locks as they were,
// waiters in their old order) and drop the locks of nodes no longer up.
//
// Not thread-safe: a LockManager, its completions and its blocking callbacks live on its loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "cluster/event_loop.h"
#include "cluster/transport.h"
#include "cluster/types.h"
#include "common/status.h"
#include "lockmgr/lock.h"

namespace tidepool::lockmgr {

struct LockManagerOptions {
  cluster::NodeId self = 0;
  // Lock ids count from here; a restarted node must start past every id it used before (the
  // daemon uses its start time).
  std::uint64_t first_sequence = 1;
  std::chrono::milliseconds retransmit{200};  // an unanswered call is sent again after this
  std::chrono::milliseconds poll{1000};       // a queued request asks again after this
  std::chrono::milliseconds remind{500};      // blocking callbacks are repeated after this
  std::size_t max_held_back = 65536;          // calls a recovering coordinator keeps for later
  // How long, and how many, released locks are remembered so that a late copy of a call
  // cannot ask for them again.
  std::chrono::milliseconds tombstone_lifetime{60'000};
  std::size_t max_tombstones = 65536;
  // A node that acknowledges no blocking callback for one of its locks this long after it was
  // sent is reported to `unresponsive` (once per node and view): the daemon has the group view
  // mark it down, which drops its locks everywhere and fences it.
  std::chrono::milliseconds callback_deadline{10'000};
  std::function<void(cluster::NodeId)> unresponsive;
  // Whether this node may coordinate now: whether it holds its lease (cluster/lease.h). A node
  // without one may have been replaced as the coordinator of its locks, and grant what another
  // granted: its coordinators drop the calls they get, as if lost, until it holds one again,
  // and their requesters send them again. Null: always.
  std::function<bool()> may_coordinate;
};

class LockManager {
 public:
  // Runs once with the outcome of a request or a conversion.
  using Completion = std::function<void(const LockResult&)>;
  // A lock of this node stands in the way of a request for `wanted` on `range`: its user should
  // convert it down to a compatible mode or release it. Called once per mode held.
  using BlockingHandler = std::function<void(LockId holder, Mode wanted, Range range)>;
  // The lock is gone: this node left the group view (it was marked down while alive), so the
  // coordinators dropped its locks and may grant them to others. The user stops relying on it
  // at once; any call about the lock answers not_found from then on.
  using LostHandler = std::function<void(LockId lost)>;

  LockManager(cluster::EventLoop& loop, cluster::Transport& transport, LockManagerOptions options);
  ~LockManager();
  LockManager(const LockManager&) = delete;
  LockManager& operator=(const LockManager&) = delete;

  // A new group view. Until the first, requests wait. A view without this node fences it: every
  // lock it holds is lost (LostHandler), every operation in flight ends refused (cancelled),
  // and new requests wait until a view takes it back.
  void set_view(cluster::Epoch epoch, const std::vector<cluster::NodeId>& up_nodes);

  LockId lock(const LockSpec& spec, Completion done, BlockingHandler on_blocking = {},
              LostHandler on_lost = {});
  // precondition_failed unless the lock is granted and idle. A conversion down gives up the
  // stronger mode at once: the user stops relying on it before it calls.
  Status convert(LockId id, const ConvertSpec& spec, Completion done);
  // Gives up a lock, or a request still waiting (whose completion then runs, cancelled).
  // `released` runs once the coordinator no longer has it, so nobody else waits behind it.
  Status release(LockId id, std::optional<LockValue> value = std::nullopt,
                 std::function<void()> released = {});
  // Withdraws a waiting request or conversion: its completion runs, cancelled, or granted if
  // the grant came first. precondition_failed when nothing waits.
  Status cancel(LockId id);

  // This node's locks, granted and wanted.
  std::vector<HeldLock> held() const;
  // The table of the resources this node coordinates.
  std::vector<LockRecord> coordinated() const;
  // Whether this node is rebuilding its table after a view change.
  bool recovering() const;
  // Whether every operation of this node is answered and its recovery report acknowledged.
  bool settled() const;
  LockStatistics statistics() const;
  // How many views left this node out so far, each taking every lock it held: a change made
  // under a lock taken before the count moved may land after what another node did under the
  // lock the group gave it meanwhile. Moves once the lost locks' users were told. Callable from
  // any thread.
  std::uint64_t fences() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tidepool::lockmgr
