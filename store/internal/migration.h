// Moves a file's data to another node pool, or restripes it within its pool, while the file
// stays readable and writable (Store::migrate has the whole contract): the data is copied in
// chunks under a watermark kept with the shard, writes made meanwhile go to both copies, one
// metadata change switches the layout, and the old copy is freed once the readers that began
// under it are done.
//
// Thread-safe: each call runs on its caller's executor, its copying on the store's threads.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <optional>
#include <string>

#include "store/internal/catch_up.h"
#include "store/internal/file_data.h"
#include "store/internal/mirror_feed.h"
#include "store/internal/placement_table.h"
#include "store/internal/shard_executor.h"
#include "store/internal/shard_rows.h"
#include "store/store.h"

namespace tidepool::store::internal {

class Migration {
 public:
  // `store`: the store the file is in, for its attributes and layout as they are answered;
  // `layout_locks`: taken around the changes of a layout (null: none to take); `clock`: what a
  // move's pace and a wait for another move count on.
  Migration(ShardExecutor& shard, ShardRows& rows, PlacementTable& placements, FileData& data,
            MirrorFeed& mirror, PoolData* pools, CatchUp& catch_up, Store& store,
            std::shared_ptr<LayoutLocks> layout_locks, Clock& clock);

  boost::asio::awaitable<Result<Move>> migrate(InodeId inode, std::string pool,
                                               std::uint32_t protection,
                                               std::uint64_t bytes_per_second);

 private:
  // Bytes [at, end) of a move's copy, whose pace counts from `start`, when the copy began.
  struct CopyRange {
    std::uint64_t at = 0;
    std::uint64_t end = 0;
    std::chrono::steady_clock::time_point start;
  };

  // Keeps the move's watermark with the shard (durable, and on the mirror): with `target`, a
  // new move's row; without, how far the move under way has copied.
  boost::asio::awaitable<Status> note_watermark(InodeId inode, const Placement* target,
                                                std::uint64_t copied);
  // Waits (bounded) for the move of the file under way here to end.
  boost::asio::awaitable<Status> wait_for_move(InodeId inode);
  // Gives up a move (one that failed, or one a crash cut short that is not to go on): its
  // watermark goes first, so that no crash can go on into freed units; then writes stop going
  // to its target, and the target's units are freed. When the watermark cannot go, the move
  // stays as a crash would have left it.
  boost::asio::awaitable<Status> give_up_move(InodeId inode, const Placement& target);
  // The file's data lock held exclusively, for a change of its layout (null: no lock to take).
  boost::asio::awaitable<Result<std::shared_ptr<void>>> hold_layout(InodeId inode);
  // The switch to `target`, in one transaction, if the file is still in pool `from`.
  boost::asio::awaitable<Result<Layout>> switch_layout(InodeId inode, std::string from,
                                                       Placement target);
  // Frees the old copy once the switch committed; `kept_by`: nodes that keep units of it.
  Status free_old_copy(InodeId inode, const std::optional<Placement>& source,
                       const Placement& target, bool restripe, std::uint64_t end,
                       std::vector<cluster::NodeId>& kept_by);
  // On the pool: copies a range of the file's data, a chunk at a time under its move slot, from
  // `source` (null: the shard's own copy) to `target`, at most `bytes_per_second` (0: no
  // limit), and makes it durable there. Holes are left holes (made holes, within a pool).
  // `copied`: what the move copied so far, counting the chunks read here.
  Status copy_data(InodeId inode, const std::optional<Placement>& source, const Placement& target,
                   const CopyRange& range, std::uint64_t bytes_per_second, std::uint64_t& copied);
  // Within one pool, the new placement's copies that the old one has on the same node, up to
  // date: the node's file of the file's units is the same, so a restripe copies only the units
  // that change owners (a node lost or back: a few of them). Null for a move between pools.
  // Under the file's move slot.
  CopyBehind held_already(InodeId inode, const std::optional<Placement>& source,
                          const Placement& target) const;

  ShardExecutor& shard_;
  ShardRows& rows_;
  PlacementTable& placements_;
  FileData& data_;
  MirrorFeed& mirror_;
  PoolData* const pools_;
  CatchUp& catch_up_;
  Store& store_;
  const std::shared_ptr<LayoutLocks> layout_locks_;
  Clock& clock_;  // the pace and the wait for a move
};

}  // namespace tidepool::store::internal
