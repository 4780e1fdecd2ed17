#include "store/internal/placement_table.h"

#include "store/internal/shard_rows.h"

namespace tidepool::store::internal {

PlacementTable::PlacementTable(std::shared_ptr<IntegrityCounters> integrity)
    : integrity_(std::move(integrity)) {}

PlacementTable::~PlacementTable() {
  for (const auto& [inode, nodes] : behind_) integrity_->copies_behind.fetch_sub(nodes.size());
}

Status PlacementTable::open(sqlite::Database& db) {
  std::unique_lock lock(mutex_);
  auto placed =
      db.prepare("SELECT ino, pool, protection, stripe_unit, nodes FROM layouts WHERE pool != ?");
  placed.bind(1, kWithShard);
  while (placed.next_row()) {
    placed_[static_cast<InodeId>(placed.int64(0))] =
        Placement{placed.blob(1), static_cast<std::uint32_t>(placed.int64(2)),
                  static_cast<std::uint32_t>(placed.int64(3)), nodes_from_text(placed.blob(4))};
  }
  TP_RETURN_IF_ERROR(placed.status());
  auto moving = db.prepare(
      "SELECT m.ino, m.pool, m.protection, l.stripe_unit, m.nodes FROM moves m "
      "JOIN layouts l ON l.ino = m.ino");
  while (moving.next_row()) {
    moving_to_[static_cast<InodeId>(moving.int64(0))] =
        Placement{moving.blob(1), static_cast<std::uint32_t>(moving.int64(2)),
                  static_cast<std::uint32_t>(moving.int64(3)), nodes_from_text(moving.blob(4))};
  }
  TP_RETURN_IF_ERROR(moving.status());
  note_placements();
  lock.unlock();
  auto behind = db.prepare("SELECT ino, node, unit FROM copies_behind");
  std::vector<InodeId> gone;  // files whose data is no longer placed
  while (behind.next_row()) {
    const auto inode = static_cast<InodeId>(behind.int64(0));
    const std::int64_t unit = behind.int64(2);
    if (const std::optional<Placement> where = where_of(inode).placed) {
      note_behind(inode, *where,
                  {{static_cast<cluster::NodeId>(behind.int64(1)),
                    unit < 0 ? kEveryUnit : static_cast<std::uint64_t>(unit)}});
    } else {
      gone.push_back(inode);
    }
  }
  TP_RETURN_IF_ERROR(behind.status());
  for (InodeId inode : gone) {
    auto forget = db.prepare("DELETE FROM copies_behind WHERE ino = ?");
    TP_RETURN_IF_ERROR(forget.bind(1, inode).run());
  }
  return {};
}

Where PlacementTable::where_of(InodeId inode) const {
  // Most shards have no file in a pool: their reads and writes skip the shared lock.
  if (!any_placement_.load(std::memory_order_acquire)) return {};
  std::shared_lock lock(mutex_);
  Where where;
  if (auto placed = placed_.find(inode); placed != placed_.end()) where.placed = placed->second;
  if (auto moving = moving_to_.find(inode); moving != moving_to_.end()) {
    where.moving_to = moving->second;
  }
  where.behind = behind_of_locked(inode);
  return where;
}

bool PlacementTable::is_placed(InodeId inode) const {
  if (!any_placement_.load(std::memory_order_acquire)) return false;
  std::shared_lock lock(mutex_);
  return placed_.contains(inode);
}

CopyBehind PlacementTable::behind_of(InodeId inode) const {
  std::shared_lock lock(mutex_);
  return behind_of_locked(inode);
}

bool PlacementTable::any_behind() const {
  std::shared_lock lock(mutex_);
  return !behind_.empty();
}

CopyBehind PlacementTable::behind_of_locked(InodeId inode) const {
  auto found = behind_.find(inode);
  if (found == behind_.end()) return nullptr;
  return [nodes = found->second](cluster::NodeId node, std::uint64_t unit) {
    auto behind = nodes.find(node);
    return behind != nodes.end() &&
           (behind->second.every_unit != 0 || behind->second.units.contains(unit));
  };
}

bool PlacementTable::reserve_move(InodeId inode) {
  std::unique_lock lock(mutex_);
  return in_move_.insert(inode).second;
}

void PlacementTable::release_move(InodeId inode) {
  std::unique_lock lock(mutex_);
  in_move_.erase(inode);
}

bool PlacementTable::move_reserved(InodeId inode) const {
  std::shared_lock lock(mutex_);
  return in_move_.contains(inode);
}

void PlacementTable::place(InodeId inode, const Placement& where) {
  {
    std::unique_lock lock(mutex_);
    placed_[inode] = where;
    note_placements();
  }
  note_copies(where);
}

void PlacementTable::start_dual_writes(InodeId inode, const Placement& target) {
  {
    std::unique_lock lock(mutex_);
    moving_to_[inode] = target;
    note_placements();
  }
  moves_[inode % kMoveSlots].fetch_add(1);
}

void PlacementTable::end_move(InodeId inode, const Placement& target, bool switched) {
  {
    std::unique_lock lock(mutex_);
    if (switched) {
      placed_[inode] = target;
      erase_behind(inode);
    }
    moving_to_.erase(inode);
    note_placements();
  }
  if (switched) note_copies(target);
}

void PlacementTable::note_copies(const Placement& where) {
  // Placed or switched to only with every node of `where` up: its copies are whole.
  IntegrityCounters::lower(integrity_->unit_copies_low_water,
                           std::min<std::uint64_t>(where.copies, where.nodes.size()));
}

Where PlacementTable::take_removed(InodeId inode) {
  std::unique_lock lock(mutex_);
  Where where;
  if (auto placed = placed_.find(inode); placed != placed_.end()) {
    where.placed = placed->second;
    placed_.erase(placed);
  }
  erase_behind(inode);
  if (auto moving = moving_to_.find(inode); moving != moving_to_.end()) {
    where.moving_to = moving->second;
    if (!in_move_.contains(inode)) moving_to_.erase(moving);
  }
  note_placements();
  return where;
}

void PlacementTable::note_placements() {
  any_placement_.store(!placed_.empty() || !moving_to_.empty(), std::memory_order_release);
}

void PlacementTable::note_behind(InodeId inode, const Placement& where,
                                 const std::vector<MissedCopy>& missed) {
  if (missed.empty()) return;
  std::unique_lock lock(mutex_);
  if (auto placed = placed_.find(inode); placed == placed_.end() || placed->second != where) {
    return;
  }
  std::map<cluster::NodeId, Behind>& nodes = behind_[inode];
  for (const MissedCopy& copy : missed) {
    auto [behind, added] = nodes.try_emplace(copy.node);
    if (added) integrity_->copies_behind.fetch_add(1);
    if (copy.unit == kEveryUnit) {
      behind->second.every_unit = ++behind_notes_;
    } else {
      behind->second.units.insert(copy.unit);
    }
  }
}

void PlacementTable::erase_behind(InodeId inode) {
  auto nodes = behind_.find(inode);
  if (nodes == behind_.end()) return;
  integrity_->copies_behind.fetch_sub(nodes->second.size());
  behind_.erase(nodes);
}

std::optional<PlacementTable::BehindOnNode> PlacementTable::behind_on(InodeId inode,
                                                                      cluster::NodeId node) {
  std::unique_lock lock(mutex_);
  auto nodes = behind_.find(inode);
  if (nodes == behind_.end() || !nodes->second.contains(node)) return std::nullopt;
  auto placed = placed_.find(inode);
  if (placed == placed_.end()) {
    erase_behind(inode);
    return std::nullopt;
  }
  const Behind& behind = nodes->second.at(node);
  return BehindOnNode{placed->second, behind.units, behind.every_unit};
}

void PlacementTable::caught_up_unit(InodeId inode, cluster::NodeId node, std::uint64_t unit) {
  std::unique_lock lock(mutex_);
  if (auto nodes = behind_.find(inode); nodes != behind_.end()) {
    if (auto behind = nodes->second.find(node); behind != nodes->second.end()) {
      behind->second.units.erase(unit);
    }
  }
}

void PlacementTable::caught_up_node(InodeId inode, cluster::NodeId node, std::uint64_t every_unit) {
  std::unique_lock lock(mutex_);
  auto nodes = behind_.find(inode);
  if (nodes == behind_.end()) return;
  if (auto behind = nodes->second.find(node); behind != nodes->second.end()) {
    if (behind->second.every_unit == every_unit) behind->second.every_unit = 0;
    if (behind->second.every_unit == 0 && behind->second.units.empty()) {
      nodes->second.erase(behind);
      integrity_->copies_behind.fetch_sub(1);
    }
  }
  if (nodes->second.empty()) behind_.erase(nodes);
}

std::vector<MissedCopy> PlacementTable::still_behind(InodeId inode,
                                                     std::optional<cluster::NodeId> node) {
  std::vector<MissedCopy> still;
  std::unique_lock lock(mutex_);
  auto nodes = behind_.find(inode);
  if (nodes == behind_.end()) return still;
  if (!node) {
    erase_behind(inode);
    return still;
  }
  auto behind = nodes->second.find(*node);
  if (behind == nodes->second.end()) return still;
  if (behind->second.every_unit != 0) still.push_back({*node, kEveryUnit});
  for (std::uint64_t unit : behind->second.units) still.push_back({*node, unit});
  return still;
}

}  // namespace tidepool::store::internal
