// Where the data of a shard's files is, as the data path reads it on every READ and WRITE:
// the files whose data a node pool holds (as their layouts say: loaded at open, changed after
// the commit that places or moves a file), the files being moved and where to, the moves under
// way, and the copies of placed files that missed writes or syncs while their node was down
// (copies behind: per file and node, the units missed, or all the node holds).
//
// It also keeps the move slots: a move copies each chunk, and frees the old data, holding its
// file's slot exclusively; every other data operation holds it shared while its bytes go to or
// come from a disk, so that none sees a layout switch half done. Slots are shared by inodes (a
// collision only costs a wait).
//
// Thread-safe: one shared mutex guards the table; most shards place no file in a pool, and
// their lookups take no lock at all.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/sqlite.h"
#include "store/pool_data.h"

namespace tidepool::store::internal {

// Where a file's data is: in a node pool (placed), or with the shard; where it is being moved
// to; and the placed copies that are behind, as of the same moment.
struct Where {
  std::optional<Placement> placed;
  std::optional<Placement> moving_to;
  CopyBehind behind;
};

class PlacementTable {
 public:
  // `integrity` counts the copies behind (a gauge shared by the node's stores).
  explicit PlacementTable(std::shared_ptr<IntegrityCounters> integrity);
  ~PlacementTable();  // the next home of the shard counts the copies behind
  PlacementTable(const PlacementTable&) = delete;
  PlacementTable& operator=(const PlacementTable&) = delete;

  // At open, in the caller's transaction: the placements, the moves a crash cut short (writes
  // go to both copies until the move goes on or is given up), and the copies behind; rows of
  // copies behind of files no longer placed go.
  Status open(sqlite::Database& db);

  Where where_of(InodeId inode) const;
  // Whether the file's data is placed in a node pool: where_of(inode).placed, without copying it.
  bool is_placed(InodeId inode) const;
  CopyBehind behind_of(InodeId inode) const;
  bool any_behind() const;

  std::shared_mutex& move_slot(InodeId inode) { return move_slots_[inode % kMoveSlots]; }
  // Waits for the operations holding the file's move slot when it is called, and lets the ones
  // after go on: those began under a layout already changed.
  void drain_slot(InodeId inode) { std::unique_lock slot(move_slot(inode)); }
  // Bumped when a move of a file in the slot begins; writes compare it before and after their
  // data goes out.
  std::uint64_t move_count(InodeId inode) const { return moves_[inode % kMoveSlots].load(); }

  // Keeps other moves of the file away until it is released (false: one is under way).
  bool reserve_move(InodeId inode);
  // The file's move is over, its old copy freed (or the move given up): it may move again.
  void release_move(InodeId inode);
  bool move_reserved(InodeId inode) const;
  // Holds a file's move reservation for as long as it lives.
  class MoveReservation {
   public:
    MoveReservation(PlacementTable& table, InodeId inode) : table_(table), inode_(inode) {}
    ~MoveReservation() { table_.release_move(inode_); }
    MoveReservation(const MoveReservation&) = delete;
    MoveReservation& operator=(const MoveReservation&) = delete;

   private:
    PlacementTable& table_;
    InodeId inode_;
  };

  // A new file's data is in `where` (after the commit that made it).
  void place(InodeId inode, const Placement& where);
  // From now on every write of the file goes to `target` too (replacing where a move given up
  // sent them), and writes under way do their data again: the moves count changes.
  void start_dual_writes(InodeId inode, const Placement& target);
  // The move ends: switched (the file's data is at `target` from now on) or not.
  void end_move(InodeId inode, const Placement& target, bool switched);
  // The file is gone: where its data was, to remove it there. A move under way forgets its
  // target itself; one a crash cut short is forgotten here.
  Where take_removed(InodeId inode);

  // The fewest copies any unit of a placed file can count on: the owners of its placement
  // (min(copies, nodes) per unit) but those not `usable` or behind on the file, as many of
  // them as one unit could have. A bound per file, exact once the file has units on every
  // combination of owners; nullopt when no file is placed. A move's target counts only once
  // switched: reads go to the old copies until then.
  template <typename Usable>
  std::optional<std::uint64_t> fewest_copies(Usable usable) const {
    std::optional<std::uint64_t> fewest;
    std::shared_lock lock(mutex_);
    for (const auto& [inode, placed] : placed_) {
      const std::uint64_t owners = std::min<std::uint64_t>(placed.copies, placed.nodes.size());
      const auto behind = behind_.find(inode);
      std::uint64_t unusable = 0;
      for (const cluster::NodeId node : placed.nodes) {
        const bool is_behind = behind != behind_.end() && behind->second.contains(node);
        unusable += (is_behind || !usable(node)) ? 1 : 0;
      }
      const std::uint64_t copies = owners - std::min(owners, unusable);
      if (!fewest || copies < *fewest) fewest = copies;
    }
    return fewest;
  }

  // Copies a write or sync of `where` missed, from now on read from no more. Not if the file's
  // data left `where` meanwhile (removed, or moved).
  void note_behind(InodeId inode, const Placement& where, const std::vector<MissedCopy>& missed);
  // The (file, node) pairs with copies behind whose node `is_up`.
  template <typename IsUp>
  std::vector<std::pair<InodeId, cluster::NodeId>> copies_behind_on(IsUp is_up) const {
    std::vector<std::pair<InodeId, cluster::NodeId>> due;
    std::shared_lock lock(mutex_);
    for (const auto& [inode, nodes] : behind_) {
      for (const auto& [node, behind] : nodes) {
        if (is_up(node)) due.emplace_back(inode, node);
      }
    }
    return due;
  }
  // What `node` is behind on of the file: where it is placed, the units missed, and the note of
  // every unit (0: none). None when nothing is behind there, or when the file is no longer
  // placed (its copies behind are then forgotten).
  struct BehindOnNode {
    Placement placed;
    std::set<std::uint64_t> units;
    std::uint64_t every_unit = 0;
  };
  std::optional<BehindOnNode> behind_on(InodeId inode, cluster::NodeId node);
  // The unit is put back on `node`.
  void caught_up_unit(InodeId inode, cluster::NodeId node, std::uint64_t unit);
  // Every unit behind_on() named is put back on `node`: the note of every unit it saw goes, and
  // the node's entry if nothing else is behind there.
  void caught_up_node(InodeId inode, cluster::NodeId node, std::uint64_t every_unit);
  // The copies still behind of the file on `node`, to keep with the shard; every node
  // (nullopt): the file's copies behind all go.
  std::vector<MissedCopy> still_behind(InodeId inode, std::optional<cluster::NodeId> node);

 private:
  static constexpr std::size_t kMoveSlots = 1024;
  struct Behind {
    std::set<std::uint64_t> units;
    std::uint64_t every_unit = 0;  // the note's number, so that a catch-up forgets only what it saw
  };

  // Holding mutex_: the file's copies not to read; null when none is behind.
  CopyBehind behind_of_locked(InodeId inode) const;
  // Holding mutex_ exclusively.
  void erase_behind(InodeId inode);
  void note_placements();
  // Lowers the node's low-water mark of unit copies to those of a file now placed in `where`.
  void note_copies(const Placement& where);

  const std::shared_ptr<IntegrityCounters> integrity_;
  mutable std::shared_mutex mutex_;
  std::unordered_map<InodeId, Placement> placed_;     // guarded by mutex_
  std::unordered_map<InodeId, Placement> moving_to_;  // guarded by mutex_
  std::atomic<bool> any_placement_{false};            // either map is not empty
  std::unordered_set<InodeId> in_move_;               // guarded by mutex_
  std::unordered_map<InodeId, std::map<cluster::NodeId, Behind>> behind_;  // guarded by mutex_
  std::uint64_t behind_notes_ = 0;                                         // guarded by mutex_
  std::array<std::atomic<std::uint64_t>, kMoveSlots> moves_{};
  std::array<std::shared_mutex, kMoveSlots> move_slots_;
};

}  // namespace tidepool::store::internal
