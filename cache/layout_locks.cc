#include "cache/layout_locks.h"

#include <mutex>

#include "cache/internal/file_locks.h"
#include "common/callback_awaitable.h"

namespace tidepool::cache {
namespace {

lockmgr::ResourceName data_lock(store::InodeId inode) {
  return {lockmgr::ResourceKind::data, inode};
}

}  // namespace

class LayoutLocks::Impl {
 public:
  // Null while there is no lock manager.
  std::shared_ptr<FileLocks> cluster() {
    std::lock_guard guard(mutex_);
    return locks_;
  }
  void set(std::shared_ptr<FileLocks> next) {
    std::shared_ptr<FileLocks> previous;
    {
      std::lock_guard guard(mutex_);
      previous = std::exchange(locks_, std::move(next));
    }
    if (previous) previous->close();
  }

 private:
  std::mutex mutex_;
  std::shared_ptr<FileLocks> locks_;  // guarded by mutex_
};

LayoutLocks::LayoutLocks() : impl_(std::make_shared<Impl>()) {}

LayoutLocks::~LayoutLocks() = default;

void LayoutLocks::attach(cluster::EventLoop* loop, lockmgr::LockManager* manager) {
  if (loop == nullptr || manager == nullptr) {
    impl_->set(nullptr);
    return;
  }
  lockmgr::LockCacheOptions options;
  options.holder = "layouts";
  // Nothing is kept under these locks: one goes as soon as another holder wants it and the
  // change here is done.
  impl_->set(FileLocks::make(*loop, *manager, options,
                             [](const lockmgr::ResourceName&, lockmgr::Range, lockmgr::Mode,
                                std::function<void()> done) { done(); }));
}

store::awaitable<Result<std::shared_ptr<void>>> LayoutLocks::exclusive(store::InodeId inode) {
  std::shared_ptr<FileLocks> cluster = impl_->cluster();
  if (!cluster) co_return std::shared_ptr<void>();
  auto acquiring = await_callback<Result<lockmgr::CachedLock>>([&cluster, inode](auto done) {
    cluster->acquire(data_lock(inode), lockmgr::Mode::exclusive, lockmgr::kWholeResource,
                     std::move(done));
  });
  Result<lockmgr::CachedLock> granted = co_await std::move(acquiring);
  if (!granted.ok()) co_return granted.status();
  co_return std::shared_ptr<void>(nullptr, [cluster, id = granted->id](void*) {
    cluster->release(id);
  });
}

}  // namespace tidepool::cache
