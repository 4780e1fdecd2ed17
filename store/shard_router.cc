#include "store/shard_router.h"

namespace tidepool::store {

ShardRouter::ShardRouter(cluster::NodeId self, ChannelTo channel_to)
    : self_(self), channel_to_(std::move(channel_to)) {}

void ShardRouter::set_home(cluster::NodeId home, std::shared_ptr<Store> local) {
  if (home == self_) {
    local_.store(local);
    target_.store(std::move(local));
    home_.store(home);
    return;
  }
  local_.store(nullptr);
  if (home_.exchange(home) == home && home != 0) return;
  target_.store(home == 0 ? nullptr : std::shared_ptr<Store>(make_remote_store(channel_to_(home))));
}

std::shared_ptr<Store> ShardRouter::target() const { return target_.load(); }

template <typename T, typename Call>
awaitable<Result<T>> ShardRouter::route(Call call) {
  std::shared_ptr<Store> to = target();
  if (!to) co_return error(Errc::unavailable, "the namespace's home node is down");
  auto op = call(*to);
  co_return co_await std::move(op);
}

std::uint64_t ShardRouter::write_verifier() const {
  std::shared_ptr<Store> to = target();
  return to ? to->write_verifier() : 0;
}

void ShardRouter::close() { target_.store(nullptr); }

void ShardRouter::set_atime_policy(bool enabled, std::chrono::seconds grace_period) {
  if (std::shared_ptr<Store> local = local_.load()) local->set_atime_policy(enabled, grace_period);
}

awaitable<Result<Attributes>> ShardRouter::getattr(InodeId inode) {
  return route<Attributes>([=](Store& s) { return s.getattr(inode); });
}

awaitable<Result<Wcc>> ShardRouter::setattr(InodeId inode, AttributeChanges changes,
                                            Caller caller,
                                            std::optional<std::int64_t> guard_ctime_ns) {
  return route<Wcc>([=](Store& s) { return s.setattr(inode, changes, caller, guard_ctime_ns); });
}

awaitable<Result<LookupResult>> ShardRouter::lookup(InodeId directory, std::string name,
                                                    Caller caller) {
  return route<LookupResult>([=](Store& s) { return s.lookup(directory, name, caller); });
}

awaitable<Result<AccessResult>> ShardRouter::check_access(InodeId inode, Caller caller,
                                                          std::uint32_t requested) {
  return route<AccessResult>([=](Store& s) { return s.check_access(inode, caller, requested); });
}

awaitable<Result<ReadlinkResult>> ShardRouter::readlink(InodeId inode) {
  return route<ReadlinkResult>([=](Store& s) { return s.readlink(inode); });
}

awaitable<Result<Layout>> ShardRouter::layout(InodeId inode) {
  return route<Layout>([=](Store& s) { return s.layout(inode); });
}

awaitable<Result<Layout>> ShardRouter::set_access_pattern(InodeId inode, std::string pattern) {
  return route<Layout>([=](Store& s) { return s.set_access_pattern(inode, pattern); });
}

awaitable<Result<ReadResult>> ShardRouter::read(InodeId inode, std::uint64_t offset,
                                                std::span<std::uint8_t> into, Caller caller) {
  return route<ReadResult>([=](Store& s) { return s.read(inode, offset, into, caller); });
}

awaitable<Result<ReadPieces>> ShardRouter::read_pieces(InodeId inode, std::uint64_t offset,
                                                       std::uint32_t count, Caller caller) {
  return route<ReadPieces>([=](Store& s) { return s.read_pieces(inode, offset, count, caller); });
}

awaitable<Result<WriteResult>> ShardRouter::write(InodeId inode, std::uint64_t offset,
                                                  std::span<const std::uint8_t> data,
                                                  Stability stability, Caller caller) {
  return route<WriteResult>(
      [=](Store& s) { return s.write(inode, offset, data, stability, caller); });
}

awaitable<Result<NewObject>> ShardRouter::create(InodeId directory, std::string name,
                                                 CreateMode mode, AttributeChanges initial,
                                                 CreateVerifier verifier, Caller caller) {
  return route<NewObject>(
      [=](Store& s) { return s.create(directory, name, mode, initial, verifier, caller); });
}

awaitable<Result<NewObject>> ShardRouter::mkdir(InodeId directory, std::string name,
                                                AttributeChanges initial, Caller caller) {
  return route<NewObject>([=](Store& s) { return s.mkdir(directory, name, initial, caller); });
}

awaitable<Result<NewObject>> ShardRouter::symlink(InodeId directory, std::string name,
                                                  std::string target, AttributeChanges initial,
                                                  Caller caller) {
  return route<NewObject>(
      [=](Store& s) { return s.symlink(directory, name, target, initial, caller); });
}

awaitable<Result<NewObject>> ShardRouter::mknod(InodeId directory, std::string name,
                                                FileType type, std::uint32_t rdev_major,
                                                std::uint32_t rdev_minor,
                                                AttributeChanges initial, Caller caller) {
  return route<NewObject>([=](Store& s) {
    return s.mknod(directory, name, type, rdev_major, rdev_minor, initial, caller);
  });
}

awaitable<Result<Wcc>> ShardRouter::remove(InodeId directory, std::string name, Caller caller) {
  return route<Wcc>([=](Store& s) { return s.remove(directory, name, caller); });
}

awaitable<Result<Wcc>> ShardRouter::rmdir(InodeId directory, std::string name, Caller caller) {
  return route<Wcc>([=](Store& s) { return s.rmdir(directory, name, caller); });
}

awaitable<Result<RenameResult>> ShardRouter::rename(InodeId from_directory,
                                                    std::string from_name,
                                                    InodeId to_directory, std::string to_name,
                                                    Caller caller) {
  return route<RenameResult>([=](Store& s) {
    return s.rename(from_directory, from_name, to_directory, to_name, caller);
  });
}

awaitable<Result<LinkResult>> ShardRouter::link(InodeId file, InodeId directory,
                                                std::string name, Caller caller) {
  return route<LinkResult>([=](Store& s) { return s.link(file, directory, name, caller); });
}

awaitable<Result<DirectoryPage>> ShardRouter::readdir(InodeId directory, std::uint64_t cookie,
                                                      std::uint64_t cookie_verifier,
                                                      std::uint32_t max_entries,
                                                      bool with_attributes, Caller caller) {
  return route<DirectoryPage>([=](Store& s) {
    return s.readdir(directory, cookie, cookie_verifier, max_entries, with_attributes, caller);
  });
}

awaitable<Result<FsStatistics>> ShardRouter::fsstat() {
  return route<FsStatistics>([](Store& s) { return s.fsstat(); });
}

awaitable<Result<Wcc>> ShardRouter::commit(InodeId inode) {
  return route<Wcc>([=](Store& s) { return s.commit(inode); });
}

awaitable<Result<Move>> ShardRouter::migrate(InodeId inode, std::string pool,
                                             std::uint32_t protection,
                                             std::uint64_t bytes_per_second) {
  return route<Move>(
      [=](Store& s) { return s.migrate(inode, pool, protection, bytes_per_second); });
}

awaitable<Result<CandidatePage>> ShardRouter::find_files(std::string where,
                                                         std::vector<std::int64_t> values,
                                                         InodeId after, std::uint32_t limit) {
  return route<CandidatePage>([where = std::move(where), values = std::move(values), after,
                               limit](Store& s) { return s.find_files(where, values, after, limit); });
}

awaitable<Result<std::uint32_t>> ShardRouter::record_reads(std::vector<InodeId> inodes) {
  return route<std::uint32_t>(
      [inodes = std::move(inodes)](Store& s) mutable { return s.record_reads(std::move(inodes)); });
}

}  // namespace tidepool::store
