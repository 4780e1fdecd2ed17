#include "cache/internal/file_locks.h"

#include <atomic>
#include <limits>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tidepool::cache {
namespace {

using lockmgr::CachedLock;
using lockmgr::Mode;

Status closed_error() { return error(Errc::unavailable, "the node's lock manager stopped"); }

// Whether a lock in `held` protects at least what one in `wanted` would: it is compatible
// with no mode `wanted` is not.
bool at_least(Mode held, Mode wanted) {
  for (std::size_t other = 0; other < lockmgr::kModeCount; ++other) {
    const auto o = static_cast<Mode>(other);
    if (lockmgr::compatible(held, o) && !lockmgr::compatible(wanted, o)) return false;
  }
  return true;
}

class FileLocksImpl final : public FileLocks, public std::enable_shared_from_this<FileLocksImpl> {
 public:
  FileLocksImpl(cluster::EventLoop& loop, lockmgr::LockManager& manager)
      : loop_(loop), manager_(manager) {}

  // Separate from the constructor: the cache's callbacks need weak_from_this().
  void start(lockmgr::LockCacheOptions options, lockmgr::LockCache::Revoke revoke) {
    cache_ = std::make_unique<lockmgr::LockCache>(
        loop_, manager_, std::move(options),
        [weak = weak_from_this(), revoke = std::move(revoke)](const lockmgr::ResourceName& resource,
                                                              lockmgr::Range range, Mode kept,
                                                              std::function<void()> done) {
          auto proceed = [revoke, resource, range, kept, done = std::move(done)] {
            revoke(resource, range, kept, done);
          };
          if (auto self = weak.lock()) return self->after_direct_holds(resource, proceed);
          proceed();
        });
  }

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
      self->cache_->acquire(resource, mode, range,
                            [weak, ticket, resource](Result<CachedLock> lock) {
                              auto self = weak.lock();
                              if (!self) return;
                              if (lock.ok() && lock->range == lockmgr::kWholeResource) {
                                self->held(resource, lock->mode);
                              }
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

  bool try_acquire(const lockmgr::ResourceName& resource, Mode mode) override {
    std::lock_guard guard(mutex_);
    if (closed_) return false;
    auto it = direct_.find(resource);
    if (it == direct_.end() || !it->second.revokes_when_idle.empty() ||
        !at_least(it->second.mode, mode)) {
      return false;
    }
    it->second.holders++;
    return true;
  }

  void release_direct(const lockmgr::ResourceName& resource) override {
    std::vector<std::function<void()>> revokes;
    {
      std::lock_guard guard(mutex_);
      auto it = direct_.find(resource);
      if (it == direct_.end() || --it->second.holders > 0) return;
      revokes = std::move(it->second.revokes_when_idle);
      if (revokes.empty()) return;
      direct_.erase(it);
      if (closed_) return;
    }
    for (std::function<void()>& revoke : revokes) loop_.post(std::move(revoke));
  }

  std::uint64_t fences() const override {
    std::lock_guard guard(mutex_);
    return closed_ ? std::numeric_limits<std::uint64_t>::max() : manager_.fences();
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
      direct_.clear();
    }
    cache_.reset();
    for (auto& [ticket, done] : waiting) done(closed_error());
  }

 private:
  // On the loop: an acquisition was granted the whole resource in `mode`, which the node now
  // holds until a blocking callback weakens it.
  void held(const lockmgr::ResourceName& resource, Mode mode) {
    std::lock_guard guard(mutex_);
    Direct& direct = direct_[resource];
    if (direct.revokes_when_idle.empty()) direct.mode = mode;
  }

  // On the loop: a lock on `resource` is being weakened. No hold starts from now on; `revoke`
  // runs once the holds under way end, as does that of every other lock of the node on
  // `resource` weakened meanwhile (one being converted down when the node wanted it again had
  // the node ask for another).
  void after_direct_holds(const lockmgr::ResourceName& resource, std::function<void()> revoke) {
    {
      std::lock_guard guard(mutex_);
      auto it = direct_.find(resource);
      if (it != direct_.end() && it->second.holders > 0) {
        it->second.revokes_when_idle.push_back(std::move(revoke));
        return;
      }
      if (it != direct_.end()) direct_.erase(it);
    }
    revoke();
  }

  std::function<void(Result<CachedLock>)> take(std::uint64_t ticket) {
    std::lock_guard guard(mutex_);
    auto it = waiting_.find(ticket);
    if (it == waiting_.end()) return {};
    auto done = std::move(it->second);
    waiting_.erase(it);
    return done;
  }

  cluster::EventLoop& loop_;
  lockmgr::LockManager& manager_;              // until closed
  std::unique_ptr<lockmgr::LockCache> cache_;  // on the loop; gone once closed
  mutable std::mutex mutex_;
  // Set under mutex_ by close(), on the loop: from then on nothing is posted to the loop.
  std::atomic<bool> closed_{false};
  std::uint64_t next_ticket_ = 1;  // guarded by mutex_
  // Acquisitions not answered yet, by ticket: close() answers them.
  std::map<std::uint64_t, std::function<void(Result<CachedLock>)>> waiting_;  // guarded by mutex_
  // The whole-resource locks the node holds, which try_acquire() hands out.
  struct Direct {
    Mode mode = Mode::null;
    std::size_t holders = 0;                               // try_acquire()s not released yet
    std::vector<std::function<void()>> revokes_when_idle;  // blocking callbacks waiting for them
  };
  std::unordered_map<lockmgr::ResourceName, Direct> direct_;  // guarded by mutex_
};

}  // namespace

std::shared_ptr<FileLocks> FileLocks::make(cluster::EventLoop& loop, lockmgr::LockManager& manager,
                                           lockmgr::LockCacheOptions options,
                                           lockmgr::LockCache::Revoke revoke) {
  auto locks = std::make_shared<FileLocksImpl>(loop, manager);
  locks->start(std::move(options), std::move(revoke));
  return locks;
}

}  // namespace tidepool::cache
