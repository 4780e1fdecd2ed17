#include "cache/directory_locks.h"

#include <algorithm>

#include "cache/internal/attached_locks.h"
#include "common/callback_awaitable.h"

namespace tidepool::cache {
namespace {

lockmgr::ResourceName directory(store::InodeId key) {
  return {lockmgr::ResourceKind::directory, key};
}

// What one lock() holds: the cluster's locks, given back before this process's.
struct Held {
  std::shared_ptr<void> here;
  std::shared_ptr<FileLocks> cluster;
  std::vector<lockmgr::LockId> acquired;
  std::vector<store::InodeId> held_directly;  // FileLocks::try_acquire's

  ~Held() {
    for (const lockmgr::LockId& id : acquired) cluster->release(id);
    for (store::InodeId key : held_directly) cluster->release_direct(directory(key));
  }
};

}  // namespace

class DirectoryLocks::Impl {
 public:
  std::shared_ptr<store::NamespaceLocks> here = store::make_process_locks();
  AttachedLocks cluster{"namespace"};
};

DirectoryLocks::DirectoryLocks() : impl_(std::make_shared<Impl>()) {}

DirectoryLocks::~DirectoryLocks() = default;

void DirectoryLocks::attach(cluster::EventLoop* loop, lockmgr::LockManager* manager) {
  impl_->cluster.attach(loop, manager);
}

store::awaitable<Result<std::shared_ptr<void>>> DirectoryLocks::lock(
    std::vector<store::InodeId> keys, store::LockMode mode) {
  const std::shared_ptr<Impl> impl = impl_;
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  auto locking = impl->here->lock(keys, mode);
  Result<std::shared_ptr<void>> here = co_await std::move(locking);
  if (!here.ok()) co_return here.status();
  std::shared_ptr<FileLocks> cluster = impl->cluster.get();
  if (!cluster) co_return here;
  auto held = std::make_shared<Held>();
  held->here = std::move(here).value();
  held->cluster = cluster;
  // Shared holders on different nodes go together, as in one process; an exclusive one goes
  // alone.
  const lockmgr::Mode wanted =
      mode == store::LockMode::shared ? lockmgr::Mode::concurrent_write : lockmgr::Mode::exclusive;
  for (store::InodeId key : keys) {
    // A lock the node kept since its last use is held at once, with no trip to the loop.
    if (cluster->try_acquire(directory(key), wanted)) {
      held->held_directly.push_back(key);
      continue;
    }
    auto acquiring =
        await_callback<Result<lockmgr::CachedLock>>([&cluster, key, wanted](auto done) {
          cluster->acquire(directory(key), wanted, lockmgr::kWholeResource, std::move(done));
        });
    Result<lockmgr::CachedLock> granted = co_await std::move(acquiring);
    if (!granted.ok()) co_return granted.status();
    held->acquired.push_back(granted->id);
  }
  co_return std::shared_ptr<void>(held);
}

}  // namespace tidepool::cache
