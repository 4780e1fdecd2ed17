// The bytes of a shard's files, wherever they are: kept with the shard (its data files on the
// home, copied to the mirror) or placed in a node pool (store/pool_data.h), and both while a
// file moves. Reads come from the L2 or the page cache without blocking where they can, lent by
// reference for READ replies, or from the disks on the store's own threads (offload()); writes,
// syncs, truncations and removals go to every copy.
//
// Every data operation holds the file's move slot (PlacementTable) shared while its bytes go to
// or come from a disk, and, for the shard's own copy, the mirror feed's gate shared.
//
// Thread-safe. The blocking calls (marked "on the pool") run on the store's threads, never on
// the shard thread or a caller's executor.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/thread_name.h"
#include "store/internal/data_files.h"
#include "store/internal/mirror_feed.h"
#include "store/internal/placement_table.h"
#include "store/pool_data.h"

namespace tidepool::store::internal {

class FileData {
 public:
  // Nodes that keep units of a file in a pool where no placement reads them (down when the
  // units were to go), for the catch-up to remove there later.
  using UnitsLeft =
      std::function<void(InodeId inode, const std::string& pool, std::vector<cluster::NodeId>)>;

  // `shard_files`: the shard's own copy; `pools`: null outside a cluster.
  FileData(DataFiles& shard_files, PoolData* pools, PlacementTable& placements, MirrorFeed& mirror,
           const StoreOptions& options, UnitsLeft units_left);
  ~FileData();

  // Later offloads fail as unavailable; those under way finish. Whether it was closed already.
  bool close() { return closed_.exchange(true); }
  // Waits for the work on the pool, after close(): what it runs may use every part of the store.
  void join() { pool_.join(); }
  bool closed() const { return closed_.load(); }
  boost::asio::any_io_executor executor() { return pool_.get_executor(); }
  // Runs blocking file I/O on the pool; the caller resumes on its own executor.
  template <typename F>
  boost::asio::awaitable<Status> offload(F f) {
    if (closed()) co_return error(Errc::unavailable, "the store is closed");
    auto run = boost::asio::co_spawn(
        pool_, [f = std::move(f)]() -> boost::asio::awaitable<Status> { co_return f(); },
        boost::asio::use_awaitable);
    co_return co_await std::move(run);
  }

  // Reads into `into` from the L2 or the page cache when they hold it, else on the pool.
  struct Read {
    bool l2_hit = false;
    bool from_pool = false;  // a node pool's nodes counted it
  };
  boost::asio::awaitable<Result<Read>> read(InodeId inode, std::uint64_t offset,
                                            std::span<std::uint8_t> into);
  // The L2's units holding all `count` bytes at `offset` of a file kept with the shard, pinned
  // for a READ reply (its `result` left to the caller); none when the L2 does not hold them all,
  // or replies pin too much of it already.
  std::optional<ReadPieces> pinned_from_l2(InodeId inode, std::uint64_t offset,
                                           std::uint32_t count);
  // The page cache's pages of whole blocks, kMinLentBytes or more, of a file kept with the
  // shard, in a pipe by reference (DataFiles::lend); null for any other read, or when the data
  // cannot be lent so.
  boost::asio::awaitable<std::unique_ptr<PipedBytes>> lend(InodeId inode, std::uint64_t offset,
                                                           std::uint32_t count);
  void count_read(std::uint32_t count, bool l2_hit);
  void count_lent(std::uint32_t count);

  // Of the copies a write to `where` would miss (their nodes down), those not noted yet;
  // unavailable when the write would fail for want of an up-to-date copy up.
  Result<std::vector<MissedCopy>> new_copies_down(InodeId inode, const Placement& where,
                                                  std::uint64_t offset,
                                                  std::uint64_t length) const;
  // On the pool: writes to every copy, the move's target too; `durable`: on their disks first.
  // Copies of a placed file that the write missed go into `missed` (noted behind already), with
  // the placement they are of in `placed`.
  Status write(InodeId inode, std::uint64_t offset, std::span<const std::uint8_t> data,
               bool durable, std::vector<MissedCopy>& missed, std::optional<Placement>& placed);
  // On the pool: makes the file's data durable on every copy. Each node of a placed file that
  // missed the sync and holds some of its first `size` bytes may have lost what it took
  // UNSTABLE: all its copies of the file fall behind (`missed`, noted already). Unavailable when
  // some unit then has no copy that is neither. The nodes an initiator synced (`synced`) are
  // not synced again while the file keeps the layout they were synced under.
  Status sync(InodeId inode, std::uint64_t size, const SyncedCopies& synced,
              std::vector<MissedCopy>& missed, std::optional<Placement>& placed);
  // Cuts every copy to `size`; the truncation count moves first, so that writes under way do
  // their data again. Blocks: on the shard thread within the truncating operation.
  Status truncate(InodeId inode, std::uint64_t size);
  // Writes compare it before and after their data goes out.
  std::uint64_t truncation_count(InodeId inode) const {
    return truncations_[inode % kTruncationSlots].load();
  }
  // After the commit that removed the inode, so that a failure here leaves only an orphan file:
  // the shard's copy at once, placed data on the pool.
  void remove(InodeId inode);
  // Holding the mirror gate shared: the shard's own copy of the file's data, here and on the
  // mirror.
  void remove_shard_copy(InodeId inode);
  // On the pool, holding the file's move slot: from the shard's own copy. A block that fails its
  // checksum is put back from the mirror's copy, when there is a mirror; then the read is done
  // again.
  Status read_shard_copy(InodeId inode, std::uint64_t offset, std::span<std::uint8_t> into);

  // Empties the L2 and the page cache's clean pages of the shard's data files.
  boost::asio::awaitable<Status> drop_caches();

 private:
  static constexpr std::size_t kTruncationSlots = 1024;

  // On the pool: from the node pool holding the file's data (`from_pool` set), or from the
  // shard's own copy.
  Status read_any(InodeId inode, std::uint64_t offset, std::span<std::uint8_t> into,
                  bool& from_pool);
  // On the pool, holding the mirror gate shared. A write into part of a block reads the rest of
  // it, which must be good first.
  Status write_shard_copy(InodeId inode, std::uint64_t offset, std::span<const std::uint8_t> data);
  // Holding the mirror gate shared: `failure` (a checksum mismatch in the range) is returned
  // unless the mirror's copy of the range put every bad block back.
  Status repair_from_mirror(InodeId inode, std::uint64_t offset, std::uint64_t length,
                            const Status& failure);
  Result<std::vector<MissedCopy>> missed_syncs(const Placement& where, InodeId inode,
                                               std::uint64_t size, const CopyBehind& behind,
                                               const std::vector<SyncedNode>& synced);

  DataFiles& shard_files_;
  PoolData* const pools_;
  PlacementTable& placements_;
  MirrorFeed& mirror_;
  const std::shared_ptr<L2> l2_;
  const std::shared_ptr<IntegrityCounters> integrity_;
  const UnitsLeft units_left_;
  // Bumped whenever a file in the slot is truncated. Slots are shared by inodes: a collision
  // only costs a write its retry.
  std::array<std::atomic<std::uint64_t>, kTruncationSlots> truncations_{};
  std::atomic<bool> closed_ = false;
  NamedThreadPool pool_;
};

}  // namespace tidepool::store::internal
