// Copies of placed files that missed writes or syncs while their node was down (copies
// behind), and nodes that keep units where no placement reads them (units left): both kept
// with the shard, durably and on the mirror, so that a new home knows them too; both mended in
// the background once the node is up again — the units put back on it from the good copies, or
// removed from it — about once a second, a pass at a time, on the store's threads.
//
// Thread-safe. note_down_units_left() and start() run on the shard thread.
#pragma once

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "store/internal/file_data.h"
#include "store/internal/placement_table.h"
#include "store/internal/shard_executor.h"
#include "store/internal/shard_rows.h"
#include "store/pool_data.h"

namespace tidepool::store::internal {

class CatchUp {
 public:
  // `attributes`: a file's attributes as the store answers them (its size, to know which units
  // a node holds). `pools`: null outside a cluster, where nothing is ever behind.
  CatchUp(ShardExecutor& shard, ShardRows& rows, PlacementTable& placements, FileData& data,
          PoolData* pools, std::shared_ptr<IntegrityCounters> integrity,
          std::function<boost::asio::awaitable<Result<Attributes>>(InodeId)> attributes);
  ~CatchUp();  // the next home of the shard counts the units left
  CatchUp(const CatchUp&) = delete;
  CatchUp& operator=(const CatchUp&) = delete;

  // At open, in the caller's transaction: how many rows of units_left the shard has.
  Status open(sqlite::Database& db);
  // On the shard thread, about once a second: a pass begins unless one is under way or there is
  // nothing to mend.
  void start();
  // Lowers the node's low-water mark of unit copies to what the placements can count on now:
  // owners up, not removed, not behind. Any thread.
  void note_protection();

  // Keeps the missed copies with the shard, durably and on the mirror, while the file's data
  // is still in `where`: a new home must not read them either.
  boost::asio::awaitable<Status> keep_behind(InodeId inode, Placement where,
                                             std::vector<MissedCopy> missed);
  // Has the shard keep that `nodes` hold units of the file in `pool` where no placement reads
  // them, until a pass removes them there. Any thread.
  void note_units_left(InodeId inode, const std::string& pool, std::vector<cluster::NodeId> nodes);
  // In the transaction after which the file's units in `where` go (its removal, or its move's
  // switch away; `keep`: nodes that keep them as the new placement's): the nodes the view has
  // down keep them, noted with the change itself, so that no crash before the units go loses
  // the note. Nodes that fail later are noted by note_units_left().
  Status note_down_units_left(sqlite::Database& db, AfterCommit& after, InodeId inode,
                              const Placement& where,
                              const std::vector<cluster::NodeId>& keep = {});

 private:
  // A row of units_left, and where a pass goes on from.
  struct LeftUnits {
    InodeId inode = 0;
    std::string pool;
    cluster::NodeId node = 0;
    bool operator==(const LeftUnits&) const = default;
  };

  // Puts the units back on each node that is up and has copies behind, from the good copies,
  // then has the shard forget them; then a page of units left. A node that cannot be reached
  // ends the pass: the next one tries again.
  boost::asio::awaitable<void> pass();
  // On the pool: copies each unit of the file that `node` is behind on (all it holds of the
  // first `size` bytes, for every unit) from a good copy, a unit at a time under the file's
  // move slot, so that no write lands between the read of the good copy and the copy's write.
  Status copy_to(InodeId inode, cluster::NodeId node, std::uint64_t size);
  // Has the shard keep, of the file's copies on `node` (every node: nullopt), only those still
  // noted behind in memory.
  boost::asio::awaitable<Status> forget_behind(InodeId inode, std::optional<cluster::NodeId> node);
  boost::asio::awaitable<void> keep_units_left(InodeId inode, std::string pool,
                                               std::vector<cluster::NodeId> nodes);
  // Removes the units that nodes up keep where no placement reads them, a page of rows a pass
  // from where the last one ended — unless the file is placed on the node again: its move
  // cleared the node's file first. The file's move reservation keeps its placement still until
  // its row is gone. Rows of nodes the cluster removed are dropped: nothing is there to remove.
  boost::asio::awaitable<void> clear_units_left();
  // Has the shard forget the row.
  boost::asio::awaitable<Status> forget_units_left(const LeftUnits& row);
  // This shard's rows of units_left, and the node's gauge, change by `delta`.
  void count_units_left(std::int64_t delta);

  ShardExecutor& shard_;
  ShardRows& rows_;
  PlacementTable& placements_;
  FileData& data_;
  PoolData* const pools_;
  const std::shared_ptr<IntegrityCounters> integrity_;
  const std::function<boost::asio::awaitable<Result<Attributes>>(InodeId)> attributes_;
  std::atomic<bool> running_ = false;  // a pass is under way
  // units_left may have rows: set after one is written, cleared before a pass reads them.
  std::atomic<bool> any_units_left_ = false;
  std::atomic<std::uint64_t> units_left_here_ = 0;  // its rows
  LeftUnits units_left_after_;                      // the pass's
};

}  // namespace tidepool::store::internal
