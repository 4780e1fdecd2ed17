// What the lock manager's parts say to each other about a lock: the name of the resource, the
// byte range, who holds it, and the request that asks for it.
#pragma once

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>

#include "cluster/types.h"
#include "lockmgr/mode.h"

namespace tidepool::lockmgr {

// What a resource protects. Each kind is its own namespace of ids.
enum class ResourceKind : std::uint8_t {
  data = 1,        // a file's data, cached in L1 under PR, written under PW/EX
  attributes = 2,  // a file's attributes, cached under PR
  advisory = 3,    // NLM byte-range locks of NFS clients
  share = 4,       // share reservations (NLM SHARE)
};

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
