// The coordinator's table of the resources it coordinates: for each, the locks granted, the
// conversions waiting and the requests waiting, each queue in the order requests arrived.
//
// A pure state machine: no clock, no messages. Each call changes the table and appends to
// `notices` what the coordinator must tell the nodes — grants, refusals, and blocking callbacks
// to holders that stand in the way of a queued request. Not thread-safe; the coordinator owns
// one and calls it from its loop.
//
// The grant rule, for a queued request on a resource: its mode is compatible with the granted
// mode of every other lock whose range overlaps, and with the requested mode of every request
// queued before it whose range overlaps (conversions queue ahead of new requests). So a reader
// never overtakes a waiting writer, and a holder converting never waits behind a newcomer.
// Locks with an owner (LockOwner) follow POSIX instead: they ignore the queue before them and
// other locks of their owner, and their holders are not called back.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "common/status.h"
#include "lockmgr/lock.h"

namespace tidepool::lockmgr::internal {

// A request (or a conversion) was granted: the completion notification.
struct Granted {
  LockId id;
  Mode mode = Mode::null;
  Range range;
  LockValue value{};
};

// A request (or a conversion) cannot be granted yet: it waits at `position` of the resource's
// queue, an order that survives the coordinator's death (recovery re-queues by it).
struct Queued {
  LockId id;
  std::uint64_t position = 0;
};

// A request was refused; a refused conversion leaves the lock held in its old mode.
struct Refused {
  LockId id;
  Refusal reason = Refusal::would_block;
  std::optional<Conflict> in_the_way;  // for a request refused as would_block
};

// The blocking callback: `holder` stands in the way of a request for `wanted` on `range`, and
// should convert down to a mode compatible with it, or release. Sent once per holder for each
// mode it holds.
struct Blocking {
  LockId holder;
  Mode wanted = Mode::null;
  Range range;
};

using Notice = std::variant<Granted, Queued, Refused, Blocking>;

class LockTable {
 public:
  // A new request: granted, queued or refused. invalid_argument for an empty range or an id
  // already in the table.
  Status request(const LockRequest& request, std::vector<Notice>& notices);
  // Asks that a granted lock be held in `mode` instead. A conversion down is granted at once
  // and may set the value block (PW or EX held); an upward one waits like a request, or is
  // refused as a deadlock when a conversion queued before it waits for this very lock.
  // not_found for an unknown id; precondition_failed for a lock not granted.
  Status convert(LockId id, Mode mode, bool try_only, std::uint64_t deadline_ms,
                 std::optional<LockValue> value, std::vector<Notice>& notices);
  // Gives up a lock, granted or queued; a holder in PW or EX may leave a new value.
  Status release(LockId id, std::optional<LockValue> value, std::vector<Notice>& notices);
  // Withdraws a queued request or conversion. precondition_failed when there is nothing queued
  // (it may just have been granted: the requester then holds it and releases it).
  Status cancel(LockId id, std::vector<Notice>& notices);
  // Refuses as timed out every queued request whose deadline is at or before `now_ms`. Returns
  // the earliest deadline still ahead, 0 when none.
  std::uint64_t expire(std::uint64_t now_ms, std::vector<Notice>& notices);
  // The blocking callbacks again, to every holder in the way of a queued request, whether or
  // not it had one: the coordinator repeats them until they are heeded, as a message may be
  // lost.
  void remind(std::vector<Notice>& notices);
  // Drops every lock of a node that left the cluster, and grants what that frees.
  void drop_node(cluster::NodeId node, std::vector<Notice>& notices);

  // Recovery: a new coordinator adopts the locks survivors report (granted as they were, queued
  // in their old positions; a queued one without a position goes to the end of its queue, so
  // adopt those last), then settles the table once all have reported. The value block comes
  // from a PW or EX holder's record, else from any holder's.
  Status adopt(const LockRecord& record);
  void settle(std::vector<Notice>& notices);

  std::optional<LockRecord> find(LockId id) const;
  // Every lock, resource by resource, each resource's locks in queue order.
  std::vector<LockRecord> records() const;
  std::size_t size() const { return locks_.size(); }
  // Whether anything is queued.
  bool contended() const { return !contended_.empty(); }

 private:
  struct Resource {
    std::vector<LockRecord> locks;  // granted first, then by position
    LockValue value{};
    std::uint64_t next_position = 1;
    // Holders sent a blocking callback, with the mode they held then.
    std::unordered_map<LockId, Mode> warned;
    bool value_from_writer = false;  // while adopting: the value came from a PW or EX holder
  };

  Resource* resource_of(LockId id);
  static LockRecord* find_in(Resource& resource, LockId id);
  void remove(Resource& resource, LockId id);
  // Takes back a queued request or conversion, refused for `reason`.
  void withdraw(ResourceName name, Resource& resource, LockId id, Refusal reason,
                std::vector<Notice>& notices);
  void enqueue(Resource& resource, LockRecord& lock, std::vector<Notice>& notices);
  bool grantable(const Resource& resource, const LockRecord& lock) const;
  // The first granted lock of another owner that conflicts with `lock`, if any.
  static std::optional<Conflict> in_the_way(const Resource& resource, const LockRecord& lock);
  // Whether a conversion queued before `conversion` waits for the mode it holds while it would
  // wait for that one: neither could ever be granted.
  bool waits_for_it(const Resource& resource, const LockRecord& conversion) const;
  // Sends the blocking callback to each holder whose mode conflicts with `wanting`, unless it
  // had one for the mode it holds.
  void warn_holders_in_the_way(Resource& resource, const LockRecord& wanting,
                               std::vector<Notice>& notices, bool again = false);
  // Grants what can be granted, in queue order, then warns the holders in the way of what
  // still waits. Forgets the resource when it has no locks left.
  void settle(ResourceName name, Resource& resource, std::vector<Notice>& notices);

  std::unordered_map<ResourceName, Resource> resources_;
  std::unordered_map<LockId, ResourceName> locks_;
  // Resources with a queued request or conversion: the only ones remind() has to visit.
  std::unordered_set<ResourceName> contended_;
};

}  // namespace tidepool::lockmgr::internal
