// What the lock manager's parts say to each other about a lock: the name of the resource, the
// byte range, who holds it, and the request that asks for it.
#pragma once

#include <array>
#include <chrono>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>

#include "cluster/types.h"
#include "common/latency_histogram.h"
#include "lockmgr/mode.h"

namespace tidepool::lockmgr {

// What a resource protects. Each kind is its own namespace of ids.
enum class ResourceKind : std::uint8_t {
  data = 1,        // a file's data, cached in L1 under PR, written under PW/EX
  attributes = 2,  // a file's attributes, cached under PR
  advisory = 3,    // NLM byte-range locks of NFS clients
  share = 4,       // share reservations (NLM SHARE)
  directory = 5,   // a directory's entries moving to or from another shard (EX, whole)
};
inline constexpr ResourceKind kLastResourceKind = ResourceKind::directory;

struct ResourceName {
  ResourceKind kind = ResourceKind::data;
  std::uint64_t id = 0;  // the inode number for every kind so far
  auto operator<=>(const ResourceName&) const = default;
};

// The bytes [start, end) of a resource; locks on one resource conflict only where their ranges
// overlap. Never empty.
struct Range {
  std::uint64_t start = 0;
  std::uint64_t end = std::numeric_limits<std::uint64_t>::max();
  auto operator<=>(const Range&) const = default;
  bool valid() const { return start < end; }
  bool overlaps(const Range& other) const { return start < other.end && other.start < end; }
};
inline constexpr Range kWholeResource{};

// Who a POSIX-style lock belongs to: NLM's byte-range locks, whose owner is a process on an NFS
// client. Locks of one owner never conflict with each other; they are granted as soon as they are
// compatible with the locks other owners hold, without regard to requests queued before them (as
// POSIX locks, which do not promise fairness), and their holders get no blocking callbacks (an
// advisory lock is given up by its client only). The zero owner is no owner: the lock stands
// alone, queues in FIFO order and is called back, as the cache's locks are.
struct LockOwner {
  std::uint64_t high = 0;
  std::uint64_t low = 0;
  auto operator<=>(const LockOwner&) const = default;
  bool none() const { return high == 0 && low == 0; }
};

// Every lock has an id its requesting node chose: unique in the cluster, never reused.
struct LockId {
  cluster::NodeId node = 0;
  std::uint64_t sequence = 0;
  auto operator<=>(const LockId&) const = default;
};

// A small value kept with a resource while anybody holds a lock on it: a holder in PW or EX may
// set it when it converts down or releases; every grant carries the current one.
using LockValue = std::array<std::uint8_t, 32>;

struct LockRequest {
  LockId id;
  ResourceName resource;
  Mode mode = Mode::null;
  Range range = kWholeResource;
  bool try_only = false;          // refused at once instead of queued when it cannot be granted now
  bool expandable = false;        // may be granted the whole resource when nobody else holds it
  std::uint64_t deadline_ms = 0;  // refused as timed out if still queued then; 0: never
  LockOwner owner;
};

// Why a request or a conversion was not granted.
enum class Refusal : std::uint8_t {
  would_block,  // a try-only request that could not be granted at once
  deadlock,     // a conversion that would wait for a holder waiting for it
  timed_out,    // its deadline passed while it waited
  cancelled,    // its requester gave up on it
};

enum class LockState : std::uint8_t { granted, converting, waiting };

// One lock as a coordinator's table has it, and as its node keeps it to rebuild that table
// after the coordinator died.
struct LockRecord {
  LockId id;
  ResourceName resource;
  Range range;
  LockState state = LockState::waiting;
  Mode granted = Mode::null;    // meaningless while waiting
  Mode requested = Mode::null;  // equals `granted` once settled
  std::uint64_t position = 0;   // in the resource's queue while converting or waiting
  std::uint64_t deadline_ms = 0;
  LockValue value{};     // the resource's value block, as the table has it or the holder saw it
  std::uint64_t op = 0;  // the node's latest operation number on the lock, in its reports
  LockOwner owner;
};

// What a node asks of the lock manager for one of its users.
struct LockSpec {
  ResourceName resource;
  Mode mode = Mode::null;
  Range range = kWholeResource;
  bool try_only = false;
  bool expandable = false;
  std::chrono::milliseconds timeout{0};  // 0: wait as long as it takes
  LockOwner owner;
  std::string holder;  // who it is for, in listings: "nfs client 10.1.2.3"
};

struct ConvertSpec {
  Mode mode = Mode::null;
  bool try_only = false;
  std::chrono::milliseconds timeout{0};
  std::optional<LockValue> value;  // a PW or EX holder converting down may leave a new value
};

struct LockGrant {
  LockId id;
  Mode mode = Mode::null;
  Range range;  // wider than asked when an expandable request met no competition
  LockValue value{};
};

// A granted lock of another owner that stands in the way of a request.
struct Conflict {
  Range range;
  Mode mode = Mode::null;
  LockOwner owner;
};

// How a request or a conversion ended.
struct LockResult {
  std::optional<Refusal> refused;  // why it was not granted; empty when it was
  // The lock as its node now holds it: as granted; after a refused conversion, in the mode it
  // still has (see protected_by_both); after a refused request, not at all (NL).
  LockGrant lock;
  // For a request refused as would_block: a granted lock in its way, when one is (it may wait
  // only behind queued requests).
  std::optional<Conflict> in_the_way;
  bool granted() const { return !refused.has_value(); }
};

// A lock of this node, granted or wanted, as listings show it.
struct HeldLock {
  LockRecord record;
  std::string holder;
  std::uint64_t since_ms = 0;  // when it was asked for, on the node's clock
};

// A node's lock manager counters: as the node that asks, then as a coordinator.
struct LockStatistics {
  std::uint64_t requests = 0;
  std::uint64_t grants = 0;
  std::uint64_t conversions = 0;  // conversions granted
  std::uint64_t refusals = 0;
  std::uint64_t callbacks_received = 0;
  std::uint64_t retransmissions = 0;
  // From a call's first sending to the coordinator's first answer (granted, queued, refused or
  // released): what a request costs when nothing stands in its way.
  LatencyHistogram round_trips;
  std::uint64_t unwanted_released = 0;  // grants that came after the node let the lock go
  std::uint64_t fenced = 0;             // views that left this node out
  std::uint64_t locks_lost = 0;         // granted locks given up for that
  std::uint64_t stale_dropped = 0;      // messages of another epoch, or overtaken calls
  std::uint64_t unleased_dropped = 0;   // calls to coordinators while this node held no lease
  std::uint64_t callbacks_sent = 0;
  std::uint64_t unresponsive_reported = 0;  // holders' nodes that left callbacks unanswered
  std::uint64_t recoveries = 0;
  std::uint64_t last_recovery_ms = 0;
  std::uint64_t conflicting_reports = 0;  // never seen unless a node lies: a bug
  std::uint64_t coordinated_locks = 0;
};

}  // namespace tidepool::lockmgr

template <>
struct std::hash<tidepool::lockmgr::LockId> {
  std::size_t operator()(const tidepool::lockmgr::LockId& id) const noexcept {
    return std::hash<std::uint64_t>{}(id.node * 0x9E3779B97F4A7C15ULL ^ id.sequence);
  }
};

template <>
struct std::hash<tidepool::lockmgr::ResourceName> {
  std::size_t operator()(const tidepool::lockmgr::ResourceName& name) const noexcept {
    return std::hash<std::uint64_t>{}(name.id * 0x9E3779B97F4A7C15ULL ^
                                      static_cast<std::uint64_t>(name.kind));
  }
};
