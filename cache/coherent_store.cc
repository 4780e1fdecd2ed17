// CoherentStore, a facade over CoherentStore::Impl (cache/internal/coherent_store_impl.h): each
// change of files runs through Impl::change_files, under those files' locks.
#include "cache/coherent_store.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cache/internal/coherent_store_impl.h"

namespace tidepool::cache {

CoherentStore::CoherentStore(store::Store& inner, DataIsLocal data_is_local, CacheOptions options,
                             std::shared_ptr<store::UnitClient> units)
    : impl_(std::make_shared<Impl>(inner, std::move(data_is_local), options, std::move(units))) {}

CoherentStore::~CoherentStore() = default;

void CoherentStore::attach(cluster::EventLoop* loop, lockmgr::LockManager* manager) {
  impl_->attach(loop, manager);
}

CacheStatistics CoherentStore::statistics() const { return impl_->statistics(); }

std::size_t CoherentStore::l1_budget() const { return impl_->l1_budget(); }

void CoherentStore::flush() { impl_->flush(); }

std::uint64_t CoherentStore::write_verifier() const {
  return impl_->verifier_of(impl_->inner().write_verifier());
}

awaitable<Result<store::Wcc>> CoherentStore::commit(store::InodeId inode,
                                                    store::SyncedCopies synced) {
  auto impl = impl_;
  auto committing = impl->commit(inode, std::move(synced));
  co_return co_await std::move(committing);
}

Result<std::shared_ptr<store::Store>> CoherentStore::next(store::InodeId) const {
  // Not owned: the inner store outlives the cache.
  return std::shared_ptr<store::Store>(std::shared_ptr<store::Store>(), &impl_->inner());
}

void CoherentStore::set_atime_policy(bool enabled, std::chrono::seconds grace_period) {
  impl_->set_atime_policy(enabled, grace_period);
}

awaitable<Result<store::Attributes>> CoherentStore::getattr(store::InodeId inode) {
  auto impl = impl_;
  auto asking = impl->getattr(inode);
  co_return co_await std::move(asking);
}

awaitable<Result<store::Wcc>> CoherentStore::setattr(store::InodeId inode,
                                                     store::AttributeChanges changes,
                                                     store::Caller caller,
                                                     std::optional<std::int64_t> guard_ctime_ns) {
  // Every attribute change runs under the file's locks, so that attributes cached under PR
  // (sizes, modes, owners) stay true while a lock is held.
  auto impl = impl_;
  auto changing = impl->change_files<store::Wcc>({inode}, [&] {
    return impl->inner().setattr(inode, std::move(changes), std::move(caller), guard_ctime_ns);
  });
  co_return co_await std::move(changing);
}

awaitable<Result<store::AccessResult>> CoherentStore::check_access(store::InodeId inode,
                                                                   store::Caller caller,
                                                                   std::uint32_t requested) {
  auto impl = impl_;
  auto asking = impl->check_access(inode, std::move(caller), requested);
  co_return co_await std::move(asking);
}

awaitable<Result<store::Layout>> CoherentStore::set_access_pattern(store::InodeId inode,
                                                                   std::string pattern) {
  // Under the file's locks: every node that cached the file's pattern drops it.
  auto impl = impl_;
  auto changing = impl->change_files<store::Layout>(
      {inode}, [&] { return impl->inner().set_access_pattern(inode, std::move(pattern)); });
  co_return co_await std::move(changing);
}

awaitable<Result<store::ReadResult>> CoherentStore::read(store::InodeId inode, std::uint64_t offset,
                                                         std::span<std::uint8_t> into,
                                                         store::Caller caller) {
  auto impl = impl_;
  auto reading = impl->read(inode, offset, into, std::move(caller));
  co_return co_await std::move(reading);
}

awaitable<Result<store::ReadPieces>> CoherentStore::read_pieces(store::InodeId inode,
                                                                std::uint64_t offset,
                                                                std::uint32_t count,
                                                                store::Caller caller) {
  auto impl = impl_;
  auto reading = impl->read_pieces(inode, offset, count, std::move(caller));
  co_return co_await std::move(reading);
}

awaitable<Result<store::WriteResult>> CoherentStore::write(store::InodeId inode,
                                                           std::uint64_t offset,
                                                           std::span<const std::uint8_t> data,
                                                           store::Stability stability,
                                                           store::Caller caller) {
  auto impl = impl_;
  const std::uint64_t fences = impl->lock_fences();
  auto changing = impl->change_files<store::WriteResult>(
      {inode},
      [&] {
        return impl->write_under_lock(inode, offset, data, stability, std::move(caller), fences);
      },
      true);
  Result<store::WriteResult> written = co_await std::move(changing);
  if (written.ok()) written->verifier = impl->verifier_of(written->verifier);
  co_return written;
}

awaitable<Result<store::NewObject>> CoherentStore::create(store::InodeId directory,
                                                          std::string name, store::CreateMode mode,
                                                          store::AttributeChanges initial,
                                                          store::CreateVerifier verifier,
                                                          store::Caller caller) {
  // An UNCHECKED create with a size, of a name that exists, cuts the file there (an open with
  // O_TRUNC) as a SETATTR does: under the file's locks.
  auto impl = impl_;
  std::vector<store::InodeId> files;
  if (mode == store::CreateMode::unchecked && initial.size) {
    auto finding = impl->file_named(directory, name, caller);
    files = co_await std::move(finding);
  }
  auto changing = impl->change_files<store::NewObject>(std::move(files), [&] {
    return impl->inner().create(directory, std::move(name), mode, std::move(initial), verifier,
                                std::move(caller));
  });
  co_return co_await std::move(changing);
}

awaitable<Result<store::Wcc>> CoherentStore::remove(store::InodeId directory, std::string name,
                                                    store::Caller caller) {
  // Under the file's locks: every node drops the attributes (the link count) and blocks it
  // cached of it.
  auto impl = impl_;
  auto finding = impl->file_named(directory, name, caller);
  std::vector<store::InodeId> files = co_await std::move(finding);
  auto changing = impl->change_files<store::Wcc>(std::move(files), [&] {
    return impl->inner().remove(directory, std::move(name), std::move(caller));
  });
  co_return co_await std::move(changing);
}

awaitable<Result<store::RenameResult>> CoherentStore::rename(store::InodeId from_directory,
                                                             std::string from_name,
                                                             store::InodeId to_directory,
                                                             std::string to_name,
                                                             store::Caller caller) {
  // Under the locks of the file renamed (its ctime) and of the file the new name replaces (its
  // link count).
  auto impl = impl_;
  auto finding_from = impl->file_named(from_directory, from_name, caller);
  std::vector<store::InodeId> files = co_await std::move(finding_from);
  auto finding_to = impl->file_named(to_directory, to_name, caller);
  std::vector<store::InodeId> replaced = co_await std::move(finding_to);
  files.insert(files.end(), replaced.begin(), replaced.end());
  auto changing = impl->change_files<store::RenameResult>(std::move(files), [&] {
    return impl->inner().rename(from_directory, std::move(from_name), to_directory,
                                std::move(to_name), std::move(caller));
  });
  co_return co_await std::move(changing);
}

awaitable<Result<store::LinkResult>> CoherentStore::link(store::InodeId file,
                                                         store::InodeId directory, std::string name,
                                                         store::Caller caller) {
  auto impl = impl_;
  auto changing = impl->change_files<store::LinkResult>({file}, [&] {
    return impl->inner().link(file, directory, std::move(name), std::move(caller));
  });
  co_return co_await std::move(changing);
}

}  // namespace tidepool::cache
