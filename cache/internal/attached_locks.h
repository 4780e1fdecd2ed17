// The cluster's locks of a holder on this node that keeps nothing under them (DirectoryLocks,
// LayoutLocks): one goes as soon as another holder wants it and its users here are done. Made
// when the node's lock manager starts, closed when it stops; none in between.
//
// Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "cache/internal/file_locks.h"

namespace tidepool::cache {

class AttachedLocks {
 public:
  explicit AttachedLocks(std::string holder) : holder_(std::move(holder)) {}

  // As CoherentStore::attach: on the lock manager's loop; null before the lock manager goes.
  void attach(cluster::EventLoop* loop, lockmgr::LockManager* manager) {
    if (loop == nullptr || manager == nullptr) {
      set(nullptr);
      return;
    }
    lockmgr::LockCacheOptions options;
    options.holder = holder_;
    set(FileLocks::make(*loop, *manager, options,
                        [](const lockmgr::ResourceName&, lockmgr::Range, lockmgr::Mode,
                           std::function<void()> done) { done(); }));
  }

  // Null while there is no lock manager.
  std::shared_ptr<FileLocks> get() {
    std::lock_guard guard(mutex_);
    return locks_;
  }

 private:
  void set(std::shared_ptr<FileLocks> next) {
    std::shared_ptr<FileLocks> previous;
    {
      std::lock_guard guard(mutex_);
      previous = std::exchange(locks_, std::move(next));
    }
    if (previous) previous->close();
  }

  const std::string holder_;
  std::mutex mutex_;
  std::shared_ptr<FileLocks> locks_;  // guarded by mutex_
};

}  // namespace tidepool::cache
