// The namespace as the NFS front end of one node sees it: every operation runs on the home of
// the shard — on this node's own store when it is the home, shipped to the home otherwise, and
// refused as unavailable (NFS3ERR_JUKEBOX: retry later) while the home is unknown or down.
//
// A namespace of one shard is routed so as a whole; one of several is routed to the node's
// ShardedNamespace (store/namespace.h), which reaches each shard at its own home.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "cluster/types.h"
#include "store/remote_store.h"
#include "store/store.h"

namespace tidepool::store {

class ShardRouter final : public Store {
 public:
  using ChannelTo = std::function<std::shared_ptr<ShardChannel>(cluster::NodeId home)>;

  // Until set_home(), there is no home: every operation is unavailable.
  ShardRouter(cluster::NodeId self, ChannelTo channel_to);

  // Where the shard's home is now: 0 when there is none to reach; this node with the store it
  // serves from (none yet: unavailable); or another node, reached through its channel.
  // Callable from any thread; operations already under way finish where they started.
  void set_home(cluster::NodeId home, std::shared_ptr<Store> local = nullptr);
  cluster::NodeId home() const { return home_.load(); }

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
  awaitable<Result<Wcc>> commit(InodeId inode) override;
  awaitable<Result<std::uint32_t>> record_reads(std::vector<InodeId> inodes) override;
  awaitable<Result<Move>> migrate(InodeId inode, std::string pool, std::uint32_t protection,
                                  std::uint64_t bytes_per_second) override;
  awaitable<Result<CandidatePage>> find_files(std::string where, std::vector<std::int64_t> values,
                                              InodeId after, std::uint32_t limit) override;

 private:
  // The store operations go to now; null while there is no home to reach. Held by each
  // operation until it completes, so a change of home never pulls a store from under it.
  std::shared_ptr<Store> target() const;
  template <typename T, typename Call>
  awaitable<Result<T>> route(Call call);

  const cluster::NodeId self_;
  const ChannelTo channel_to_;
  std::atomic<cluster::NodeId> home_ = 0;
  std::atomic<std::shared_ptr<Store>> target_;
  std::atomic<std::shared_ptr<Store>> local_;  // set while this node is the home
};

}  // namespace tidepool::store
