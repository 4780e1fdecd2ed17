#include "store/internal/catch_up.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <set>

namespace tidepool::store::internal {
namespace {

namespace asio = boost::asio;

// Rows of units_left one pass goes through.
constexpr std::size_t kUnitsLeftPerPass = 256;

// The copy behind, as a row of copies_behind.
Status insert_behind(sqlite::Database& db, InodeId inode, const MissedCopy& copy) {
  auto insert = db.prepare("INSERT OR IGNORE INTO copies_behind(ino, node, unit) VALUES(?, ?, ?)");
  insert.bind(1, inode).bind(2, copy.node);
  insert.bind(3, copy.unit == kEveryUnit ? std::int64_t{-1} : static_cast<std::int64_t>(copy.unit));
  return insert.run();
}

// Notes that `node` keeps units of the file in `pool`: 1 row added, or 0 if it was noted.
Result<std::int64_t> insert_units_left(sqlite::Database& db, InodeId inode, const std::string& pool,
                                       cluster::NodeId node) {
  auto insert = db.prepare("INSERT OR IGNORE INTO units_left(ino, pool, node) VALUES(?, ?, ?)");
  TP_RETURN_IF_ERROR(insert.bind(1, inode).bind(2, pool).bind(3, node).run());
  return db.changes();
}

}  // namespace

CatchUp::CatchUp(ShardExecutor& shard, ShardRows& rows, PlacementTable& placements, FileData& data,
                 PoolData* pools, std::shared_ptr<IntegrityCounters> integrity,
                 std::function<asio::awaitable<Result<Attributes>>(InodeId)> attributes)
    : shard_(shard),
      rows_(rows),
      placements_(placements),
      data_(data),
      pools_(pools),
      integrity_(std::move(integrity)),
      attributes_(std::move(attributes)) {}

CatchUp::~CatchUp() { integrity_->units_left.fetch_sub(units_left_here_.load()); }

Status CatchUp::open(sqlite::Database& db) {
  auto left = db.prepare("SELECT count(*) FROM units_left");
  if (!left.next_row()) return left.status();
  count_units_left(left.int64(0));
  any_units_left_.store(left.int64(0) > 0);
  return {};
}

void CatchUp::note_protection() {
  if (!pools_) return;
  const std::optional<std::uint64_t> fewest = placements_.fewest_copies(
      [this](cluster::NodeId node) { return pools_->is_up(node) && !pools_->is_removed(node); });
  if (fewest) IntegrityCounters::lower(integrity_->unit_copies_low_water, *fewest);
}

void CatchUp::start() {
  if (!pools_ || data_.closed()) return;
  if (!placements_.any_behind() && !any_units_left_.load()) return;
  if (running_.exchange(true)) return;
  asio::co_spawn(data_.executor(), pass(), asio::detached);
}

asio::awaitable<void> CatchUp::pass() {
  struct PassEnds {
    std::atomic<bool>& running;
    ~PassEnds() { running.store(false); }
  } pass_ends{running_};
  const auto due =
      placements_.copies_behind_on([this](cluster::NodeId node) { return pools_->is_up(node); });
  for (const auto& due_copy : due) {
    // Named, not bound: lambdas capture them (clang does not capture structured bindings).
    const InodeId inode = due_copy.first;
    const cluster::NodeId node = due_copy.second;
    if (data_.closed()) break;
    auto sizing = attributes_(inode);
    const Result<Attributes> attributes = co_await std::move(sizing);
    if (attributes.code() == Errc::stale) {
      auto forgetting = forget_behind(inode, std::nullopt);
      (void)co_await std::move(forgetting);
      continue;
    }
    if (!attributes.ok()) continue;
    auto copying = data_.offload(
        [this, inode, node, size = attributes->size] { return copy_to(inode, node, size); });
    const Status copied = co_await std::move(copying);
    if (!copied.ok()) {
      spdlog::warn("inode {}: node {} is not caught up yet: {}", inode, node, copied.to_string());
      if (copied.code() == Errc::unavailable || copied.code() == Errc::timed_out) break;
      continue;
    }
    auto forgetting = forget_behind(inode, node);
    if (const Status forgot = co_await std::move(forgetting); !forgot.ok()) {
      spdlog::warn("inode {}: node {}'s copies are caught up but still noted behind: {}", inode,
                   node, forgot.to_string());
    }
  }
  auto clearing = clear_units_left();
  co_await std::move(clearing);
}

Status CatchUp::copy_to(InodeId inode, cluster::NodeId node, std::uint64_t size) {
  std::optional<PlacementTable::BehindOnNode> behind = placements_.behind_on(inode, node);
  if (!behind) return {};
  std::set<std::uint64_t> units = behind->units;
  if (behind->every_unit != 0) {
    for (std::uint64_t unit : pools_->units_held_by(behind->placed, inode, node, size)) {
      units.insert(unit);
    }
  }
  for (std::uint64_t unit : units) {
    if (data_.closed()) return error(Errc::unavailable, "the store is closed");
    std::unique_lock slot(placements_.move_slot(inode));
    const Where where = placements_.where_of(inode);
    // A move took the file elsewhere meanwhile: its old copies are gone.
    if (where.placed != behind->placed) return {};
    TP_RETURN_IF_ERROR(pools_->copy_unit_to(behind->placed, inode, unit, node, where.behind));
    integrity_->units_caught_up.fetch_add(1);
    placements_.caught_up_unit(inode, node, unit);
  }
  placements_.caught_up_node(inode, node, behind->every_unit);
  return {};
}

asio::awaitable<Status> CatchUp::keep_behind(InodeId inode, Placement where,
                                             std::vector<MissedCopy> missed) {
  auto keeping =
      shard_.run<bool>(true,
                       [this, inode, where = std::move(where), missed = std::move(missed)](
                           sqlite::Database& db, AfterCommit&) -> Result<bool> {
                         Result<Layout> layout = rows_.load_layout(db, inode);
                         if (layout.code() == Errc::stale || layout.code() == Errc::not_found)
                           return false;
                         TP_RETURN_IF_ERROR(layout.status());
                         if (layout->pool != where.pool || layout->nodes != where.nodes)
                           return false;
                         for (const MissedCopy& copy : missed)
                           TP_RETURN_IF_ERROR(insert_behind(db, inode, copy));
                         return true;
                       });
  const Result<bool> kept = co_await std::move(keeping);
  co_return kept.status();
}

asio::awaitable<Status> CatchUp::forget_behind(InodeId inode, std::optional<cluster::NodeId> node) {
  auto forgetting = shard_.run<bool>(
      true, [this, inode, node](sqlite::Database& db, AfterCommit&) -> Result<bool> {
        auto forget = db.prepare(node ? "DELETE FROM copies_behind WHERE ino = ? AND node = ?"
                                      : "DELETE FROM copies_behind WHERE ino = ?");
        forget.bind(1, inode);
        if (node) forget.bind(2, *node);
        TP_RETURN_IF_ERROR(forget.run());
        for (const MissedCopy& copy : placements_.still_behind(inode, node)) {
          TP_RETURN_IF_ERROR(insert_behind(db, inode, copy));
        }
        return true;
      });
  const Result<bool> forgot = co_await std::move(forgetting);
  co_return forgot.status();
}

void CatchUp::note_units_left(InodeId inode, const std::string& pool,
                              std::vector<cluster::NodeId> nodes) {
  if (nodes.empty() || data_.closed()) return;
  asio::co_spawn(data_.executor(), keep_units_left(inode, pool, std::move(nodes)), asio::detached);
}

asio::awaitable<void> CatchUp::keep_units_left(InodeId inode, std::string pool,
                                               std::vector<cluster::NodeId> nodes) {
  auto keeping = shard_.run<bool>(
      true, [this, inode, pool, nodes](sqlite::Database& db, AfterCommit& after) -> Result<bool> {
        std::int64_t added = 0;
        for (const cluster::NodeId node : nodes) {
          TP_ASSIGN_OR_RETURN(const std::int64_t one, insert_units_left(db, inode, pool, node));
          added += one;
        }
        after.committed.push_back([this, added] { count_units_left(added); });
        return true;
      });
  if (const Result<bool> kept = co_await std::move(keeping); !kept.ok()) {
    spdlog::warn(
        "inode {}: the nodes that keep its units in pool {} could not be noted, and keep them: {}",
        inode, pool, kept.status().to_string());
    co_return;
  }
  any_units_left_.store(true);
}

Status CatchUp::note_down_units_left(sqlite::Database& db, AfterCommit& after, InodeId inode,
                                     const Placement& where,
                                     const std::vector<cluster::NodeId>& keep) {
  std::int64_t added = 0;
  for (const cluster::NodeId node : where.nodes) {
    if (pools_->is_up(node) || std::ranges::find(keep, node) != keep.end()) continue;
    TP_ASSIGN_OR_RETURN(const std::int64_t one, insert_units_left(db, inode, where.pool, node));
    added += one;
  }
  if (added > 0) {
    after.committed.push_back([this, added] {
      count_units_left(added);
      any_units_left_.store(true);
    });
  }
  return {};
}

void CatchUp::count_units_left(std::int64_t delta) {
  units_left_here_.fetch_add(static_cast<std::uint64_t>(delta));
  integrity_->units_left.fetch_add(static_cast<std::uint64_t>(delta));
}

asio::awaitable<void> CatchUp::clear_units_left() {
  if (!any_units_left_.exchange(false)) co_return;
  auto listing = shard_.run<std::vector<LeftUnits>>(
      false, [this](sqlite::Database& db, AfterCommit&) -> Result<std::vector<LeftUnits>> {
        auto rows = db.prepare(
            "SELECT ino, pool, node FROM units_left WHERE (ino, pool, node) > (?, ?, ?) "
            "ORDER BY ino, pool, node LIMIT ?");
        rows.bind(1, units_left_after_.inode).bind(2, units_left_after_.pool);
        rows.bind(3, units_left_after_.node);
        rows.bind(4, static_cast<std::int64_t>(kUnitsLeftPerPass));
        std::vector<LeftUnits> left;
        while (rows.next_row()) {
          left.push_back({static_cast<InodeId>(rows.int64(0)), rows.blob(1),
                          static_cast<cluster::NodeId>(rows.int64(2))});
        }
        TP_RETURN_IF_ERROR(rows.status());
        return left;
      });
  const Result<std::vector<LeftUnits>> page = co_await std::move(listing);
  if (!page.ok()) {
    any_units_left_.store(true);
    co_return;
  }
  // A page shorter than a whole one ends the table: the next pass starts again from its top.
  bool remaining = page->size() == kUnitsLeftPerPass || units_left_after_ != LeftUnits{};
  units_left_after_ = page->size() == kUnitsLeftPerPass ? page->back() : LeftUnits{};
  std::set<cluster::NodeId> failing;  // not waited for again in this pass
  std::size_t cleared = 0;
  std::size_t forgotten = 0;  // on nodes the cluster removed: nothing there to remove
  for (const LeftUnits& row : *page) {
    if (pools_->is_removed(row.node)) {
      auto forgetting = forget_units_left(row);
      if (const Status forgot = co_await std::move(forgetting); forgot.ok()) {
        ++forgotten;
      } else {
        remaining = true;
      }
      continue;
    }
    if (data_.closed() || failing.contains(row.node) || !pools_->is_up(row.node) ||
        !placements_.reserve_move(row.inode)) {
      remaining = true;
      continue;
    }
    const PlacementTable::MoveReservation reservation(placements_, row.inode);
    const Where where = placements_.where_of(row.inode);
    const auto placed_there = [&row](const std::optional<Placement>& placement) {
      return placement && placement->pool == row.pool &&
             std::ranges::find(placement->nodes, row.node) != placement->nodes.end();
    };
    if (!placed_there(where.placed) && !placed_there(where.moving_to)) {
      auto removing = data_.offload([this, &row] {
        return pools_->remove(Placement{row.pool, 1, 0, {row.node}}, row.inode).empty()
                   ? Status{}
                   : error(Errc::unavailable, "not removed");
      });
      if (const Status removed = co_await std::move(removing); !removed.ok()) {
        failing.insert(row.node);
        remaining = true;
        continue;
      }
    }
    auto forgetting = forget_units_left(row);
    if (const Status forgot = co_await std::move(forgetting); !forgot.ok()) {
      remaining = true;
      continue;
    }
    ++cleared;
  }
  if (cleared > 0) {
    spdlog::info("units of {} files left on nodes now up where no placement reads them are gone",
                 cleared);
  }
  if (forgotten > 0) {
    spdlog::info("units of {} files left on nodes the cluster removed are forgotten", forgotten);
  }
  if (remaining) any_units_left_.store(true);
}

asio::awaitable<Status> CatchUp::forget_units_left(const LeftUnits& row) {
  auto forgetting = shard_.run<bool>(
      true, [this, &row](sqlite::Database& db, AfterCommit& after) -> Result<bool> {
        auto forget = db.prepare("DELETE FROM units_left WHERE ino = ? AND pool = ? AND node = ?");
        TP_RETURN_IF_ERROR(forget.bind(1, row.inode).bind(2, row.pool).bind(3, row.node).run());
        after.committed.push_back([this, removed = db.changes()] { count_units_left(-removed); });
        return true;
      });
  const Result<bool> forgot = co_await std::move(forgetting);
  co_return forgot.status();
}

}  // namespace tidepool::store::internal
