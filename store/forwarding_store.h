// A Store that hands every operation to another — the store it decorates or routes to — so
// that a layer overrides only the operations whose behaviour it changes: the one declaration of
// the forwarding that the layers over the store share (ShardRouter, ShardedNamespace,
// cache::CoherentStore).
#pragma once

#include <memory>

#include "store/store.h"

namespace tidepool::store {

class ForwardingStore : public Store {
 public:
  std::uint64_t write_verifier() const override;
  void close() override;
  void set_atime_policy(bool enabled, std::chrono::seconds grace_period) override;

  awaitable<Result<Attributes>> getattr(InodeId inode) override;
  awaitable<Result<Wcc>> setattr(InodeId inode, AttributeChanges changes, Caller caller,
                                 std::optional<std::int64_t> guard_ctime_ns) override;
  awaitable<Result<LookupResult>> lookup(InodeId directory, std::string name,
                                         Caller caller) override;
  awaitable<Result<AccessResult>> check_access(InodeId inode, Caller caller,
                                               std::uint32_t requested) override;
  awaitable<Result<ReadlinkResult>> readlink(InodeId inode) override;
  awaitable<Result<Layout>> layout(InodeId inode) override;
  awaitable<Result<Layout>> set_access_pattern(InodeId inode, std::string pattern) override;
  awaitable<Result<ReadResult>> read(InodeId inode, std::uint64_t offset,
                                     std::span<std::uint8_t> into, Caller caller) override;
  awaitable<Result<ReadPieces>> read_pieces(InodeId inode, std::uint64_t offset,
                                            std::uint32_t count, Caller caller) override;
  awaitable<Result<WriteResult>> write(InodeId inode, std::uint64_t offset,
                                       std::span<const std::uint8_t> data, Stability stability,
                                       Caller caller) override;
  awaitable<Result<WriteResult>> record_write(InodeId inode, std::uint64_t offset,
                                              std::uint32_t count, Stability stability,
                                              Caller caller, Layout written_under) override;
  awaitable<Result<NewObject>> create(InodeId directory, std::string name, CreateMode mode,
                                      AttributeChanges initial, CreateVerifier verifier,
                                      Caller caller) override;
  awaitable<Result<NewObject>> mkdir(InodeId directory, std::string name,
                                     AttributeChanges initial, Caller caller) override;
  awaitable<Result<NewObject>> symlink(InodeId directory, std::string name, std::string target,
                                       AttributeChanges initial, Caller caller) override;
  awaitable<Result<NewObject>> mknod(InodeId directory, std::string name, FileType type,
                                     std::uint32_t rdev_major, std::uint32_t rdev_minor,
                                     AttributeChanges initial, Caller caller) override;
  awaitable<Result<Wcc>> remove(InodeId directory, std::string name, Caller caller) override;
  awaitable<Result<Wcc>> rmdir(InodeId directory, std::string name, Caller caller) override;
  awaitable<Result<RenameResult>> rename(InodeId from_directory, std::string from_name,
                                         InodeId to_directory, std::string to_name,
                                         Caller caller) override;
  awaitable<Result<LinkResult>> link(InodeId file, InodeId directory, std::string name,
                                     Caller caller) override;
  awaitable<Result<DirectoryPage>> readdir(InodeId directory, std::uint64_t cookie,
                                           std::uint64_t cookie_verifier,
                                           std::uint32_t max_entries, bool with_attributes,
                                           Caller caller) override;
  awaitable<Result<FsStatistics>> fsstat() override;
  awaitable<Result<Wcc>> commit(InodeId inode, SyncedCopies synced) override;
  awaitable<Result<std::uint32_t>> record_reads(std::vector<InodeId> inodes) override;
  awaitable<Result<Move>> migrate(InodeId inode, std::string pool, std::uint32_t protection,
                                  std::uint64_t bytes_per_second) override;
  awaitable<Result<CandidatePage>> find_files(std::string where, std::vector<std::int64_t> values,
                                              InodeId after, std::uint32_t limit) override;

 protected:
  // The store an operation addressed to `addressed` goes to now — the inode it names first: the
  // file, or the directory of a name; kRootInode for what concerns the whole store — held by
  // the operation until it completes (so that a change of it never pulls a store from under
  // one); or why there is none.
  virtual Result<std::shared_ptr<Store>> next(InodeId addressed) const = 0;

 private:
  template <typename T, typename... Params, typename... Args>
  awaitable<Result<T>> forward(InodeId addressed,
                               awaitable<Result<T>> (Store::*operation)(Params...), Args... args);
};

}  // namespace tidepool::store
