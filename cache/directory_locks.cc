#include "cache/directory_locks.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "cache/file_locks.h"
#include "common/callback_awaitable.h"

namespace tidepool::cache {

class DirectoryLocks::Impl {
 public:
  std::shared_ptr<store::NamespaceLocks> here = store::make_process_locks();

  // Null: no lock manager; `ever_attached` tells whether one went away.
  std::shared_ptr<FileLocks> cluster() {
    std::lock_guard guard(mutex_);
    return locks_;
  }
  bool ever_attached() {
    std::lock_guard guard(mutex_);
    return ever_attached_;
  }
  void set(std::shared_ptr<FileLocks> next) {
    std::shared_ptr<FileLocks> previous;
    {
      std::lock_guard guard(mutex_);
      previous = std::exchange(locks_, std::move(next));
      ever_attached_ = true;
    }
    if (previous) previous->close();
  }

 private:
  std::mutex mutex_;
  std::shared_ptr<FileLocks> locks_;  // guarded by mutex_
  bool ever_attached_ = false;        // guarded by mutex_
};

namespace {

// What one lock() holds: the cluster's locks, given back before this process's.
struct Held {
  std::shared_ptr<void> here;
  std::shared_ptr<FileLocks> cluster;
  std::vector<lockmgr::LockId> ids;

  ~Held() {
    for (const lockmgr::LockId& id : ids) cluster->release(id);
  }
};

}  // namespace

DirectoryLocks::DirectoryLocks() : impl_(std::make_shared<Impl>()) {}

DirectoryLocks::~DirectoryLocks() = default;

void DirectoryLocks::attach(cluster::EventLoop* loop, lockmgr::LockManager* manager) {
  if (loop == nullptr || manager == nullptr) {
    impl_->set(nullptr);
    return;
  }
  lockmgr::LockCacheOptions options;
  options.holder = "namespace";
  // Nothing is kept under these locks: one goes as soon as another node wants it and its users
  // here are done.
  impl_->set(FileLocks::make(*loop, *manager, options,
                             [](const lockmgr::ResourceName&, lockmgr::Range, lockmgr::Mode,
                                std::function<void()> done) { done(); }));
}

store::awaitable<Result<std::shared_ptr<void>>> DirectoryLocks::lock(
    std::vector<store::InodeId> keys) {
  const std::shared_ptr<Impl> impl = impl_;
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  auto locking = impl->here->lock(keys);
  Result<std::shared_ptr<void>> here = co_await std::move(locking);
  if (!here.ok()) co_return here.status();
  std::shared_ptr<FileLocks> cluster = impl->cluster();
  if (!cluster) {
    if (impl->ever_attached()) {
      co_return error(Errc::unavailable, "the node's lock manager has stopped");
    }
    co_return here;
  }
  auto held = std::make_shared<Held>();
  held->here = std::move(here).value();
  held->cluster = cluster;
  for (store::InodeId key : keys) {
    auto acquiring = await_callback<Result<lockmgr::CachedLock>>([&cluster, key](auto done) {
      cluster->acquire({lockmgr::ResourceKind::directory, key}, lockmgr::Mode::exclusive,
                       lockmgr::kWholeResource, std::move(done));
    });
    Result<lockmgr::CachedLock> granted = co_await std::move(acquiring);
    if (!granted.ok()) co_return granted.status();
    held->ids.push_back(granted->id);
  }
  co_return std::shared_ptr<void>(held);
}

}  // namespace tidepool::cache
