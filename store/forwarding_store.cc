#include "store/forwarding_store.h"

namespace tidepool::store {

template <typename T, typename... Params, typename... Args>
awaitable<Result<T>> ForwardingStore::forward(InodeId addressed,
                                              awaitable<Result<T>> (Store::*operation)(Params...),
                                              Args... args) {
  Result<std::shared_ptr<Store>> to = next(addressed);
  if (!to.ok()) co_return to.status();
  auto call = ((**to).*operation)(std::move(args)...);
  co_return co_await std::move(call);
}

std::uint64_t ForwardingStore::write_verifier() const {
  Result<std::shared_ptr<Store>> to = next(kRootInode);
  return to.ok() ? (*to)->write_verifier() : 0;
}

void ForwardingStore::close() {
  if (Result<std::shared_ptr<Store>> to = next(kRootInode); to.ok()) (*to)->close();
}

void ForwardingStore::set_atime_policy(bool enabled, std::chrono::seconds grace_period) {
  if (Result<std::shared_ptr<Store>> to = next(kRootInode); to.ok()) {
    (*to)->set_atime_policy(enabled, grace_period);
  }
}

awaitable<Result<Attributes>> ForwardingStore::getattr(InodeId inode) {
  return forward(inode, &Store::getattr, inode);
}

awaitable<Result<Wcc>> ForwardingStore::setattr(InodeId inode, AttributeChanges changes,
                                                Caller caller,
                                                std::optional<std::int64_t> guard_ctime_ns) {
  return forward(inode, &Store::setattr, inode, std::move(changes), std::move(caller),
                 guard_ctime_ns);
}

awaitable<Result<LookupResult>> ForwardingStore::lookup(InodeId directory, std::string name,
                                                        Caller caller) {
  return forward(directory, &Store::lookup, directory, std::move(name), std::move(caller));
}

awaitable<Result<AccessResult>> ForwardingStore::check_access(InodeId inode, Caller caller,
                                                              std::uint32_t requested) {
  return forward(inode, &Store::check_access, inode, std::move(caller), requested);
}

awaitable<Result<ReadlinkResult>> ForwardingStore::readlink(InodeId inode) {
  return forward(inode, &Store::readlink, inode);
}

awaitable<Result<Layout>> ForwardingStore::layout(InodeId inode) {
  return forward(inode, &Store::layout, inode);
}

awaitable<Result<Layout>> ForwardingStore::set_access_pattern(InodeId inode, std::string pattern) {
  return forward(inode, &Store::set_access_pattern, inode, std::move(pattern));
}

awaitable<Result<ReadResult>> ForwardingStore::read(InodeId inode, std::uint64_t offset,
                                                    std::span<std::uint8_t> into, Caller caller) {
  return forward(inode, &Store::read, inode, offset, into, std::move(caller));
}

awaitable<Result<ReadPieces>> ForwardingStore::read_pieces(InodeId inode, std::uint64_t offset,
                                                           std::uint32_t count, Caller caller) {
  return forward(inode, &Store::read_pieces, inode, offset, count, std::move(caller));
}

awaitable<Result<WriteResult>> ForwardingStore::write(InodeId inode, std::uint64_t offset,
                                                      std::span<const std::uint8_t> data,
                                                      Stability stability, Caller caller) {
  return forward(inode, &Store::write, inode, offset, data, stability, std::move(caller));
}

awaitable<Result<WriteResult>> ForwardingStore::record_write(InodeId inode, std::uint64_t offset,
                                                             std::uint32_t count,
                                                             Stability stability, Caller caller,
                                                             Layout written_under) {
  return forward(inode, &Store::record_write, inode, offset, count, stability, std::move(caller),
                 std::move(written_under));
}

awaitable<Result<NewObject>> ForwardingStore::create(InodeId directory, std::string name,
                                                     CreateMode mode, AttributeChanges initial,
                                                     CreateVerifier verifier, Caller caller) {
  return forward(directory, &Store::create, directory, std::move(name), mode, std::move(initial),
                 verifier, std::move(caller));
}

awaitable<Result<NewObject>> ForwardingStore::mkdir(InodeId directory, std::string name,
                                                    AttributeChanges initial, Caller caller) {
  return forward(directory, &Store::mkdir, directory, std::move(name), std::move(initial),
                 std::move(caller));
}

awaitable<Result<NewObject>> ForwardingStore::symlink(InodeId directory, std::string name,
                                                      std::string target, AttributeChanges initial,
                                                      Caller caller) {
  return forward(directory, &Store::symlink, directory, std::move(name), std::move(target),
                 std::move(initial), std::move(caller));
}

awaitable<Result<NewObject>> ForwardingStore::mknod(InodeId directory, std::string name,
                                                    FileType type, std::uint32_t rdev_major,
                                                    std::uint32_t rdev_minor,
                                                    AttributeChanges initial, Caller caller) {
  return forward(directory, &Store::mknod, directory, std::move(name), type, rdev_major, rdev_minor,
                 std::move(initial), std::move(caller));
}

awaitable<Result<Wcc>> ForwardingStore::remove(InodeId directory, std::string name, Caller caller) {
  return forward(directory, &Store::remove, directory, std::move(name), std::move(caller));
}

awaitable<Result<Wcc>> ForwardingStore::rmdir(InodeId directory, std::string name, Caller caller) {
  return forward(directory, &Store::rmdir, directory, std::move(name), std::move(caller));
}

awaitable<Result<RenameResult>> ForwardingStore::rename(InodeId from_directory,
                                                        std::string from_name, InodeId to_directory,
                                                        std::string to_name, Caller caller) {
  return forward(from_directory, &Store::rename, from_directory, std::move(from_name), to_directory,
                 std::move(to_name), std::move(caller));
}

awaitable<Result<LinkResult>> ForwardingStore::link(InodeId file, InodeId directory,
                                                    std::string name, Caller caller) {
  return forward(file, &Store::link, file, directory, std::move(name), std::move(caller));
}

awaitable<Result<DirectoryPage>> ForwardingStore::readdir(InodeId directory, std::uint64_t cookie,
                                                          std::uint64_t cookie_verifier,
                                                          std::uint32_t max_entries,
                                                          bool with_attributes, Caller caller) {
  return forward(directory, &Store::readdir, directory, cookie, cookie_verifier, max_entries,
                 with_attributes, std::move(caller));
}

awaitable<Result<FsStatistics>> ForwardingStore::fsstat() {
  return forward(kRootInode, &Store::fsstat);
}

awaitable<Result<Wcc>> ForwardingStore::commit(InodeId inode, SyncedCopies synced) {
  return forward(inode, &Store::commit, inode, std::move(synced));
}

awaitable<Result<std::uint32_t>> ForwardingStore::record_reads(std::vector<InodeId> inodes) {
  return forward(kRootInode, &Store::record_reads, std::move(inodes));
}

awaitable<Result<Move>> ForwardingStore::migrate(InodeId inode, std::string pool,
                                                 std::uint32_t protection,
                                                 std::uint64_t bytes_per_second) {
  return forward(inode, &Store::migrate, inode, std::move(pool), protection, bytes_per_second);
}

awaitable<Result<CandidatePage>> ForwardingStore::find_files(std::string where,
                                                             std::vector<std::int64_t> values,
                                                             InodeId after, std::uint32_t limit) {
  return forward(after, &Store::find_files, std::move(where), std::move(values), after, limit);
}

}  // namespace tidepool::store
