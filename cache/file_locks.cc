#include "cache/file_locks.h"

#include <atomic>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace tidepool::cache {
namespace {

using lockmgr::CachedLock;

Status closed_error() { return error(Errc::unavailable, "the node's lock manager stopped"); }

class FileLocksImpl final : public FileLocks, public std::enable_shared_from_this<FileLocksImpl> {
 public:
  FileLocksImpl(cluster::EventLoop& loop, lockmgr::LockManager& manager,
                lockmgr::LockCacheOptions options, lockmgr::LockCache::Revoke revoke)
      : loop_(loop),
        cache_(std::make_unique<lockmgr::LockCache>(loop, manager, std::move(options),
                                                    std::move(revoke))) {}

  void acquire(const lockmgr::ResourceName& resource, lockmgr::Mode mode, lockmgr::Range range,
               std::function<void(Result<CachedLock>)> done) override {
    std::unique_lock guard(mutex_);
    if (closed_) {
      guard.unlock();
      done(closed_error());
      return;
    }
    const std::uint64_t ticket = next_ticket_++;
    waiting_.emplace(ticket, std::move(done));
    loop_.post([weak = weak_from_this(), ticket, resource, mode, range] {
      auto self = weak.lock();
      if (!self || self->closed_) return;
      self->cache_->acquire(resource, mode, range, [weak, ticket](Result<CachedLock> lock) {
        auto self = weak.lock();
        if (!self) return;
        std::function<void(Result<CachedLock>)> done = self->take(ticket);
        if (done) {
          done(std::move(lock));
        } else if (lock.ok() && self->cache_) {
          self->cache_->release(lock->id);
        }
      });
    });
  }

  void release(lockmgr::LockId id) override {
    std::lock_guard guard(mutex_);
    if (closed_) return;
    loop_.post([weak = weak_from_this(), id] {
      auto self = weak.lock();
      if (self && !self->closed_) self->cache_->release(id);
    });
  }

  void statistics(std::function<void(lockmgr::LockCacheStatistics)> done) override {
    std::lock_guard guard(mutex_);
    if (closed_) return;
    loop_.post([weak = weak_from_this(), done = std::move(done)] {
      auto self = weak.lock();
      if (self && !self->closed_) done(self->cache_->statistics());
    });
  }

  void close() override {
    std::map<std::uint64_t, std::function<void(Result<CachedLock>)>> waiting;
    {
      std::lock_guard guard(mutex_);
      if (closed_) return;
      closed_ = true;
      waiting = std::move(waiting_);
      waiting_.clear();
    }
    cache_.reset();
    for (auto& [ticket, done] : waiting) done(closed_error());
  }

 private:
  std::function<void(Result<CachedLock>)> take(std::uint64_t ticket) {
    std::lock_guard guard(mutex_);
    auto it = waiting_.find(ticket);
    if (it == waiting_.end()) return {};
    auto done = std::move(it->second);
    waiting_.erase(it);
    return done;
  }

  cluster::EventLoop& loop_;
  std::unique_ptr<lockmgr::LockCache> cache_;  // on the loop; gone once closed
  std::mutex mutex_;
  // Set under mutex_ by close(), on the loop: from then on nothing is posted to the loop.
  std::atomic<bool> closed_{false};
  std::uint64_t next_ticket_ = 1;  // guarded by mutex_
  // Acquisitions not answered yet, by ticket: close() answers them.
  std::map<std::uint64_t, std::function<void(Result<CachedLock>)>> waiting_;  // guarded by mutex_
};

}  // namespace

std::shared_ptr<FileLocks> FileLocks::make(cluster::EventLoop& loop, lockmgr::LockManager& manager,
                                           lockmgr::LockCacheOptions options,
                                           lockmgr::LockCache::Revoke revoke) {
  return std::make_shared<FileLocksImpl>(loop, manager, std::move(options), std::move(revoke));
}

}  // namespace tidepool::cache
