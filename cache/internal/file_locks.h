// The file system's own locks on one node, as its caches take them: a LockCache on the lock
// manager's loop, usable from any thread. The caches hold a file's data or attributes lock for
// as long as they read, fetch or write under it; the lock stays cached on the node after that.
//
// Thread-safe: acquire() and release() may be called from any thread. The work and the
// callbacks run on the lock manager's loop, except for a lock the node already holds, which
// try_acquire() hands out on the caller's thread: a read of a cached file crosses no thread.
#pragma once

#include <functional>
#include <memory>

#include "cluster/event_loop.h"
#include "common/status.h"
#include "lockmgr/lock.h"
#include "lockmgr/lock_cache.h"
#include "lockmgr/lock_manager.h"

namespace tidepool::cache {

class FileLocks {
 public:
  // `manager` lives on `loop` and outlives close(). `revoke` runs on the loop, as LockCache's.
  static std::shared_ptr<FileLocks> make(cluster::EventLoop& loop, lockmgr::LockManager& manager,
                                         lockmgr::LockCacheOptions options,
                                         lockmgr::LockCache::Revoke revoke);
  virtual ~FileLocks() = default;

  // Holds `resource` in at least `mode`; `done` runs on the loop with the lock, or with
  // unavailable once closed (then on the closing or the calling thread).
  virtual void acquire(const lockmgr::ResourceName& resource, lockmgr::Mode mode,
                       lockmgr::Range range,
                       std::function<void(Result<lockmgr::CachedLock>)> done) = 0;
  // One acquisition is done with the lock `id`.
  virtual void release(lockmgr::LockId id) = 0;
  // Holds the whole `resource` in at least `mode` at once, on the calling thread, when the
  // node holds such a lock already (an acquisition took it before and no other node wanted it
  // since): true, until release_direct(resource). False: acquire() it. A blocking callback
  // that weakens the lock waits for these holds to end before `revoke` runs.
  virtual bool try_acquire(const lockmgr::ResourceName& resource, lockmgr::Mode mode) = 0;
  virtual void release_direct(const lockmgr::ResourceName& resource) = 0;
  // How many times the node lost every lock it held (LockManager::fences); once closed, more
  // than ever before: no lock held across the close counts as held.
  virtual std::uint64_t fences() const = 0;
  // What the node's lock cache did so far; `done` runs on the loop (never, once closed).
  virtual void statistics(std::function<void(lockmgr::LockCacheStatistics)> done) = 0;
  // On the loop, before the lock manager goes: gives every lock back, and ends every
  // acquisition still waiting with unavailable. Later calls, from any thread, do nothing but
  // answer unavailable.
  virtual void close() = 0;
};

}  // namespace tidepool::cache
