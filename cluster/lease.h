// A node's lease from the majority of its group (cluster/group.h). While a node holds it,
// nobody has handed its locks, its shards or its stripe units to another node: the group's
// leader marks a node down only once every lease it granted that node has run out by the
// node's own clock (docs/DESIGN.md, "Leases"). A node that finds its lease lapsed — cut off
// from the majority, paused, or starved of CPU — serves nothing from what it may have lost
// until it holds one again, which it gets only once it has applied every change that took
// something from it.
//
// Thread-safe: the group member extends it on its loop; anyone reads it.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "cluster/event_loop.h"

namespace tidepool::cluster {

class Lease {
 public:
  // Times are on the lease's clock: `clock`'s now_ms() (callable from any thread, as both
  // loops' are), except that it never runs back. A step back of `clock` counts as no time and
  // lapses the lease, since the request a lease was granted for was timed on the clock before
  // — a step seen, that is: one smaller than the time since the lease's clock was last read
  // goes unseen and lengthens the lease by as much. The daemon's clock never steps back.
  explicit Lease(const EventLoop& clock) : clock_(&clock) {}

  // 0 once the group member is gone.
  std::uint64_t now_ms() const;
  // Whether the lease was held, without a break, from `start_ms` until now. An answer built
  // from cached state since `start_ms` is right only while this holds when it is sent.
  bool held_since(std::uint64_t start_ms) const;
  bool held() const { return held_since(now_ms()); }
  // When the lease runs out, or ran out; 0 when never held.
  std::uint64_t until_ms() const;

  // For the group member: a grant of the request sent at `asked_ms`. Holds the lease until
  // `until_ms`, from now if it had lapsed — unless the clock stepped back since `asked_ms`.
  void extend(std::uint64_t asked_ms, std::uint64_t until_ms);
  // Gives it up now.
  void lapse();
  // The group took what this node held (it applied a change that has it down): gives the
  // lease up, and counts.
  void fence();
  // How often fence() was called. A call that waited for a lease across a fence was made
  // before what it relied on was taken: it must not be served with the next lease.
  std::uint64_t fences() const;
  // Gives it up for good, before `clock` goes: a reader may outlive the group member.
  void detach();

 private:
  // With mutex_ held.
  void lapse_locked() const;
  std::uint64_t now_locked() const;

  const EventLoop* clock_;  // guarded by mutex_
  mutable std::mutex mutex_;
  // Reading the clock lapses the lease when it finds a step back, so these change on reads.
  std::uint64_t from_ms_ = 0;
  mutable std::uint64_t until_ms_ = 0;
  mutable ForwardReadings readings_;
  // Atomic: every NFS call reads it, and it must not take the mutex for that.
  std::atomic<std::uint64_t> fences_{0};
};

}  // namespace tidepool::cluster
