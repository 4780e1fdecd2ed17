// A node's cache of the locks its own users take, as OneFS's lazy lock queue: a lock the users
// are done with is kept, idle, until another node wants a conflicting one, so repeated use on
// one node costs no lock traffic. Requests are expandable, so an uncontended one is granted the
// whole resource and one lock serves a whole sequential stream. A lock granted to the cache
// honours a blocking callback only after a minimum hold time and only once its users are done,
// and the users who waited for a grant always get to use it: two nodes that take a lock from
// each other both make progress. When another node wants the lock, the cache keeps the
// strongest mode compatible with what is wanted (an EX holder keeps PR for a reader), or gives
// the lock up.
//
// Unowned locks only: the file system's own (data, attributes). NLM's locks are owned and go
// through AdvisoryLocks.
//
// Not thread-safe: a LockCache, its callbacks and its lock manager live on the manager's loop,
// and the manager outlives it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "cluster/event_loop.h"
#include "common/status.h"
#include "lockmgr/lock.h"
#include "lockmgr/lock_manager.h"

namespace tidepool::lockmgr {

struct LockCacheOptions {
  // How long a granted lock is kept before it honours a blocking callback.
  std::chrono::milliseconds min_hold{10};
  // Idle locks kept at most; past that the least recently used is given up.
  std::size_t max_idle = 65536;
  std::string holder = "node cache";  // who the locks are for, in listings
};

struct LockCacheStatistics {
  std::uint64_t hits = 0;         // acquisitions served by a lock the node had or was getting
  std::uint64_t misses = 0;       // acquisitions that asked the lock manager for a new lock
  std::uint64_t upgrades = 0;     // cached locks converted up for a stronger acquisition
  std::uint64_t revocations = 0;  // cached locks weakened or given up for another node
  std::uint64_t evictions = 0;    // idle locks given up to stay within max_idle
  std::uint64_t lost = 0;         // locks gone because this node left the group view
};

// A lock held through the cache, until LockCache::release(id).
struct CachedLock {
  LockId id;
  Mode mode = Mode::null;  // at least the mode asked for
  Range range;             // at least the range asked for
};

class LockCache {
 public:
  // Before the cache weakens a lock to `kept` (Mode::null: gives it up), it tells its user,
  // which drops what the lock protected and `kept` no longer does (flushing dirty state first)
  // and then runs `done`. Called only while nobody uses the lock — except when the lock is
  // lost (this node left the group view): then `kept` is NL, the lock is already gone, dirty
  // state can no longer be written under it, and the acquisitions holding it are void; it is
  // called again once they are all released, for what they put back meanwhile, and the
  // resource is acquired anew only after that. So a user must not acquire a resource it
  // already holds through this cache: after a loss, that acquisition would wait for itself.
  using Revoke = std::function<void(const ResourceName& resource, Range range, Mode kept,
                                    std::function<void()> done)>;
  // The lock, or `unavailable` when a conversion the acquisition needed was refused to break a
  // deadlock (try again), or the refusal of the lock manager.
  using Acquired = std::function<void(Result<CachedLock>)>;

  LockCache(cluster::EventLoop& loop, LockManager& manager, LockCacheOptions options,
            Revoke revoke);
  // Gives every lock back to the lock manager; callbacks still due never run.
  ~LockCache();
  LockCache(const LockCache&) = delete;
  LockCache& operator=(const LockCache&) = delete;

  // Holds `resource` on `range` in at least `mode` (not NL). `done` runs at once, before
  // acquire returns, when the node holds such a lock; otherwise when the lock manager granted
  // a new lock or converted one up.
  void acquire(const ResourceName& resource, Mode mode, Range range, Acquired done);
  // One acquisition is done with the lock `id`.
  void release(LockId id);

  LockCacheStatistics statistics() const;
  // Locks granted to the cache that nobody uses.
  std::size_t idle() const;

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace tidepool::lockmgr
