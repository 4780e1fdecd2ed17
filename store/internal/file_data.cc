#include "store/internal/file_data.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <mutex>

#include "store/internal/mirror_messages.h"

namespace tidepool::store::internal {
namespace {

namespace asio = boost::asio;

// READs from this size up go out from the page cache by reference: below it, the copy costs
// less than the pipe's system calls.
constexpr std::uint32_t kMinLentBytes = 64u << 10;

}  // namespace

FileData::FileData(DataFiles& shard_files, PoolData* pools, PlacementTable& placements,
                   MirrorFeed& mirror, const StoreOptions& options, UnitsLeft units_left)
    : shard_files_(shard_files),
      pools_(pools),
      placements_(placements),
      mirror_(mirror),
      l2_(options.l2),
      integrity_(options.integrity),
      units_left_(std::move(units_left)),
      pool_("store-pool", options.threads) {}

FileData::~FileData() {
  close();
  pool_.join();
}

asio::awaitable<Result<FileData::Read>> FileData::read(InodeId inode, std::uint64_t offset,
                                                       std::span<std::uint8_t> into) {
  Read read;
  // Never waits for a move's chunk on this thread: a busy slot means the pool's read.
  Result<bool> cached = false;
  if (std::shared_lock slot(placements_.move_slot(inode), std::try_to_lock);
      slot.owns_lock() && !placements_.where_of(inode).placed) {
    read.l2_hit = shard_files_.read_from_l2(inode, offset, into);
    cached = read.l2_hit ? Result<bool>(true) : shard_files_.read_cached(inode, offset, into);
  }
  if (!cached.ok() && cached.status().code() != Errc::corrupt) co_return cached.status();
  if (cached.ok() && *cached) co_return read;
  auto fill = offload(
      [this, inode, offset, into, &read] { return read_any(inode, offset, into, read.from_pool); });
  TP_CO_RETURN_IF_ERROR(co_await std::move(fill));
  co_return read;
}

std::optional<ReadPieces> FileData::pinned_from_l2(InodeId inode, std::uint64_t offset,
                                                   std::uint32_t count) {
  if (count == 0 || !l2_->may_pin(count)) return std::nullopt;
  CachedUnits cached;
  // The slot keeps the file's data here while the units are taken.
  if (std::shared_lock slot(placements_.move_slot(inode), std::try_to_lock);
      slot.owns_lock() && !placements_.where_of(inode).placed) {
    cached = shard_files_.cached_units(inode, offset, count);
  }
  std::shared_ptr<const CachedUnits> pinned = l2_->pin_for_reply(std::move(cached), count);
  if (!pinned) return std::nullopt;
  ReadPieces pieces;
  pieces.pieces = pinned->pieces(offset, count);
  pieces.keep = std::move(pinned);
  pieces.pins_a_cache = true;
  return pieces;
}

asio::awaitable<std::unique_ptr<PipedBytes>> FileData::lend(InodeId inode, std::uint64_t offset,
                                                            std::uint32_t count) {
  if (count < kMinLentBytes || count > kMaxLentBytes || offset % kChecksumBlock != 0 ||
      count % kChecksumBlock != 0) {
    co_return nullptr;
  }
  std::unique_ptr<PipedBytes> lent;
  auto lending = offload([this, inode, offset, count, &lent]() -> Status {
    // The slot keeps the file's data here while it is lent.
    std::shared_lock slot(placements_.move_slot(inode));
    if (placements_.where_of(inode).placed) return {};
    TP_ASSIGN_OR_RETURN(lent, shard_files_.lend(inode, offset, count));
    return {};
  });
  if (const Status lend_status = co_await std::move(lending); !lend_status.ok()) co_return nullptr;
  co_return std::move(lent);
}

void FileData::count_read(std::uint32_t count, bool l2_hit) {
  l2_->reads().data_bytes_read.fetch_add(count, std::memory_order_relaxed);
  if (l2_hit) l2_->reads().data_bytes_hit.fetch_add(count, std::memory_order_relaxed);
}

void FileData::count_lent(std::uint32_t count) {
  l2_->reads().data_bytes_lent.fetch_add(count, std::memory_order_relaxed);
}

Status FileData::read_any(InodeId inode, std::uint64_t offset, std::span<std::uint8_t> into,
                          bool& from_pool) {
  std::shared_lock slot(placements_.move_slot(inode));
  if (const Where where = placements_.where_of(inode); where.placed) {
    from_pool = true;
    return pools_->read(*where.placed, inode, offset, into, where.behind);
  }
  return read_shard_copy(inode, offset, into);
}

// The repair takes the mirror gate shared under the slot, against the usual order (gate, then
// slot): only shared holders of the gate can wait on a slot, and glibc's rwlock lets a shared
// holder in while a whole copy waits for the gate.
Status FileData::read_shard_copy(InodeId inode, std::uint64_t offset,
                                 std::span<std::uint8_t> into) {
  Status read = shard_files_.read(inode, offset, into);
  if (read.code() != Errc::corrupt) return read;
  {
    auto gate = mirror_.gate();
    TP_RETURN_IF_ERROR(repair_from_mirror(inode, offset, into.size(), read));
  }
  return shard_files_.read(inode, offset, into);
}

Status FileData::write_shard_copy(InodeId inode, std::uint64_t offset,
                                  std::span<const std::uint8_t> data) {
  Status written = shard_files_.write(inode, offset, data);
  if (written.code() != Errc::corrupt) return written;
  TP_RETURN_IF_ERROR(repair_from_mirror(inode, offset, data.size(), written));
  return shard_files_.write(inode, offset, data);
}

Status FileData::repair_from_mirror(InodeId inode, std::uint64_t offset, std::uint64_t length,
                                    const Status& failure) {
  integrity_->checksum_failures.fetch_add(1);
  if (!mirror_.mirrored()) {
    spdlog::error("inode {}: no mirror to repair the data at offset {} from", inode, offset);
    return failure;
  }
  const std::uint64_t first = offset / kChecksumBlock * kChecksumBlock;
  const std::uint64_t end =
      (offset + length + kChecksumBlock - 1) / kChecksumBlock * kChecksumBlock;
  std::uint64_t repaired = 0;
  for (std::uint64_t at = first; at < end; at += kCopyChunkBytes) {
    const auto piece =
        static_cast<std::uint32_t>(std::min<std::uint64_t>(kCopyChunkBytes, end - at));
    auto good = mirror_.fetch(MirrorMethod::read, encode_mirror_range({inode, at, piece}));
    if (!good.ok() || good->size() != piece) {
      spdlog::error(
          "inode {}: the mirror's copy of offsets {}..{} could not be read to repair this "
          "node's: {}",
          inode, at, at + piece, good.ok() ? "short answer" : good.status().to_string());
      return failure;
    }
    TP_ASSIGN_OR_RETURN(std::uint64_t put_back, shard_files_.repair(inode, at, *good));
    repaired += put_back;
  }
  integrity_->checksum_repairs.fetch_add(repaired);
  spdlog::warn("inode {}: put back {} block(s) between offsets {} and {} from the mirror's copy",
               inode, repaired, first, end);
  return {};
}

Result<std::vector<MissedCopy>> FileData::new_copies_down(InodeId inode, const Placement& where,
                                                          std::uint64_t offset,
                                                          std::uint64_t length) const {
  const CopyBehind behind = placements_.behind_of(inode);
  TP_ASSIGN_OR_RETURN(std::vector<MissedCopy> down,
                      pools_->copies_down(where, inode, offset, length, behind));
  if (behind) {
    std::erase_if(down, [&](const MissedCopy& copy) { return behind(copy.node, copy.unit); });
  }
  return down;
}

Status FileData::write(InodeId inode, std::uint64_t offset, std::span<const std::uint8_t> data,
                       bool durable, std::vector<MissedCopy>& missed,
                       std::optional<Placement>& placed) {
  auto gate = mirror_.gate();
  std::shared_lock slot(placements_.move_slot(inode));
  const Where where = placements_.where_of(inode);
  if (where.moving_to) {
    TP_RETURN_IF_ERROR(pools_->write(*where.moving_to, inode, offset, data, durable));
  }
  if (where.placed) {
    placed = where.placed;
    const Status written =
        pools_->write_past_down(*where.placed, inode, offset, data, durable, where.behind, missed);
    placements_.note_behind(inode, *where.placed, missed);
    return written;
  }
  TP_RETURN_IF_ERROR(write_shard_copy(inode, offset, data));
  if (durable) TP_RETURN_IF_ERROR(shard_files_.sync(inode));
  return mirror_.send(MirrorMethod::write, encode_mirror_extent({inode, offset, durable, data}));
}

Status FileData::sync(InodeId inode, std::uint64_t size, const SyncedCopies& synced,
                      std::vector<MissedCopy>& missed, std::optional<Placement>& placed) {
  auto gate = mirror_.gate();
  std::shared_lock slot(placements_.move_slot(inode));
  const Where where = placements_.where_of(inode);
  if (where.moving_to) TP_RETURN_IF_ERROR(pools_->sync(*where.moving_to, inode));
  if (where.placed) {
    placed = where.placed;
    const bool still_laid_out_so =
        !where.moving_to && *where.placed == placement_of(synced.layout) &&
        synced.layout.epoch == truncation_count(inode) + placements_.move_count(inode);
    TP_ASSIGN_OR_RETURN(missed,
                        missed_syncs(*where.placed, inode, size, where.behind,
                                     still_laid_out_so ? synced.nodes : std::vector<SyncedNode>{}));
    placements_.note_behind(inode, *where.placed, missed);
    return {};
  }
  TP_RETURN_IF_ERROR(shard_files_.sync(inode));
  return mirror_.send(MirrorMethod::sync, encode_mirror_inode({inode}));
}

Result<std::vector<MissedCopy>> FileData::missed_syncs(const Placement& where, InodeId inode,
                                                       std::uint64_t size, const CopyBehind& behind,
                                                       const std::vector<SyncedNode>& synced) {
  TP_ASSIGN_OR_RETURN(std::vector<cluster::NodeId> nodes,
                      pools_->sync_past_down(where, inode, synced));
  std::vector<MissedCopy> missed;
  if (nodes.empty()) return missed;
  if (!pools_->every_unit_kept(where, inode, size, nodes, behind)) {
    return error(Errc::unavailable, "inode " + std::to_string(inode) +
                                        ": some of its data has no synced copy on a node up");
  }
  for (cluster::NodeId node : nodes) {
    if (!pools_->units_held_by(where, inode, node, size).empty()) {
      missed.push_back({node, kEveryUnit});
    }
  }
  return missed;
}

Status FileData::truncate(InodeId inode, std::uint64_t size) {
  truncations_[inode % kTruncationSlots].fetch_add(1);
  std::shared_lock slot(placements_.move_slot(inode));
  const Where where = placements_.where_of(inode);
  if (where.moving_to) TP_RETURN_IF_ERROR(pools_->truncate(*where.moving_to, inode, size));
  if (where.placed) return pools_->truncate(*where.placed, inode, size);
  TP_RETURN_IF_ERROR(shard_files_.truncate(inode, size));
  return mirror_.send(MirrorMethod::truncate, encode_mirror_inode({inode, size}));
}

void FileData::remove(InodeId inode) {
  const Where where = placements_.take_removed(inode);
  if (!where.placed && !where.moving_to) {
    auto gate = mirror_.gate();
    return remove_shard_copy(inode);
  }
  // Calls to the pool's nodes go on the store's threads: the shard thread never waits on them.
  asio::post(pool_, [this, inode, where] {
    auto gate = mirror_.gate();
    std::shared_lock slot(placements_.move_slot(inode));
    if (where.moving_to) {
      units_left_(inode, where.moving_to->pool, pools_->remove(*where.moving_to, inode));
    }
    if (where.placed) {
      units_left_(inode, where.placed->pool, pools_->remove(*where.placed, inode));
    } else {
      remove_shard_copy(inode);
    }
  });
}

void FileData::remove_shard_copy(InodeId inode) {
  shard_files_.remove(inode);
  if (!mirror_.mirrored()) return;
  if (Status s = mirror_.send(MirrorMethod::remove, encode_mirror_inode({inode})); !s.ok()) {
    spdlog::warn("the mirror may keep the data of removed inode {}: {}", inode, s.to_string());
  }
}

asio::awaitable<Status> FileData::drop_caches() {
  l2_->clear();
  auto advising = offload([this] { return shard_files_.drop_page_cache(); });
  co_return co_await std::move(advising);
}

}  // namespace tidepool::store::internal
