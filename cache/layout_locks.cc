#include "cache/layout_locks.h"

#include "cache/internal/attached_locks.h"
#include "common/callback_awaitable.h"

namespace tidepool::cache {
namespace {

lockmgr::ResourceName data_lock(store::InodeId inode) {
  return {lockmgr::ResourceKind::data, inode};
}

}  // namespace

class LayoutLocks::Impl {
 public:
  AttachedLocks locks{"layouts"};
};

LayoutLocks::LayoutLocks() : impl_(std::make_shared<Impl>()) {}

LayoutLocks::~LayoutLocks() = default;

void LayoutLocks::attach(cluster::EventLoop* loop, lockmgr::LockManager* manager) {
  impl_->locks.attach(loop, manager);
}

store::awaitable<Result<std::shared_ptr<void>>> LayoutLocks::exclusive(store::InodeId inode) {
  std::shared_ptr<FileLocks> cluster = impl_->locks.get();
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
