#include "store/internal/migration.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/config.h"

namespace tidepool::store::internal {
namespace {

namespace asio = boost::asio;

// A move keeps its watermark with the shard each time it has copied this much: a crash costs
// at most this much copying again.
constexpr std::uint64_t kWatermarkBytes = 32u << 20;
// A call for a move under way waits for it this long at most, looking this often.
constexpr std::chrono::hours kMoveWaitLimit{1};
constexpr std::chrono::milliseconds kMoveWaitPoll{100};
// How many times in a row a range is copied again because a node restarted meanwhile.
constexpr int kMaxRangeCopies = 3;

// The move a crash cut short, as the shard keeps it, if any.
std::optional<Placement> left_move(const Layout& layout) {
  if (layout.moving_to.empty()) return std::nullopt;
  return Placement{layout.moving_to, layout.moving_protection, layout.stripe_unit,
                   layout.moving_nodes};
}

Status forget_move(sqlite::Database& db, InodeId inode) {
  auto erase = db.prepare("DELETE FROM moves WHERE ino = ?");
  erase.bind(1, inode);
  return erase.run();
}

// `size` rounded up to whole stripe units.
std::uint64_t whole_units(std::uint64_t size, std::uint32_t stripe_unit) {
  return stripe_unit == 0 ? size : (size + stripe_unit - 1) / stripe_unit * stripe_unit;
}

}  // namespace

Migration::Migration(ShardExecutor& shard, ShardRows& rows, PlacementTable& placements,
                     FileData& data, MirrorFeed& mirror, PoolData* pools, CatchUp& catch_up,
                     Store& store, std::shared_ptr<LayoutLocks> layout_locks, Clock& clock)
    : shard_(shard),
      rows_(rows),
      placements_(placements),
      data_(data),
      mirror_(mirror),
      pools_(pools),
      catch_up_(catch_up),
      store_(store),
      layout_locks_(std::move(layout_locks)),
      clock_(clock) {}

asio::awaitable<Result<Move>> Migration::migrate(InodeId inode, std::string pool,
                                                 std::uint32_t protection,
                                                 std::uint64_t bytes_per_second) {
  if (!pools_) {
    co_return error(Errc::not_supported, "moving file data between node pools needs a cluster");
  }
  if (pool != kWithShard && !is_valid_name(pool)) {
    co_return error(Errc::invalid_argument, "'" + pool + "' is not a node pool's name");
  }
  if (protection == 0 || protection > kMaxProtection) {
    co_return error(Errc::invalid_argument, "a protection of 1 to 3 copies");
  }
  if (!placements_.reserve_move(inode)) {
    auto waiting = wait_for_move(inode);
    TP_CO_RETURN_IF_ERROR(co_await std::move(waiting));
    auto again = migrate(inode, std::move(pool), protection, bytes_per_second);
    co_return co_await std::move(again);
  }
  // Nothing else moves the file's data until this call is done with it.
  const PlacementTable::MoveReservation reservation(placements_, inode);
  auto reading = store_.layout(inode);
  const Result<Layout> current = co_await std::move(reading);
  if (!current.ok()) co_return current.status();
  const Placement target = pool == kWithShard ? Placement{}
                                              : Placement{pool, protection, current->stripe_unit,
                                                          pools_->nodes_of(pool)};
  // Within its pool at the same protection a file is restriped over the nodes the pool places
  // on now (a node lost, or back), unless that keeps fewer copies: a lost node's copies are
  // then still the file's best.
  const auto copies_over = [protection](const std::vector<cluster::NodeId>& nodes) {
    return std::min<std::size_t>(protection, nodes.size());
  };
  const bool stays =
      current->pool == pool &&
      (pool == kWithShard || (current->protection == protection &&
                              (same_nodes(current->nodes, target.nodes) ||
                               copies_over(target.nodes) < copies_over(current->nodes))));
  // A move a crash cut short goes on from its watermark, if writes have gone to both copies
  // ever since; one to elsewhere is given up first.
  const std::optional<Placement> dual_writes_to = placements_.where_of(inode).moving_to;
  std::optional<Placement> left = left_move(*current);
  // Writes still going to a target whose row is gone (a give-up whose commit the mirror did
  // not confirm) are a move left too.
  if (!left) left = dual_writes_to;
  const bool resuming = !stays && left == target && dual_writes_to == left;
  if (left && !resuming) {
    auto giving_up = give_up_move(inode, *left);
    TP_CO_RETURN_IF_ERROR(co_await std::move(giving_up));
  }
  if (stays && !left) co_return Move{*current};
  if (stays) {
    auto rereading = store_.layout(inode);
    const Result<Layout> now = co_await std::move(rereading);
    if (!now.ok()) co_return now.status();
    co_return Move{*now};
  }
  if (pool == kWithShard) {
    co_return error(Errc::not_supported, "file data does not move back to its shard");
  }
  if (target.nodes.empty())
    co_return error(Errc::unavailable, "node pool '" + pool + "' has no node");
  // Within its pool (another protection: a restripe), the old and new placements share each
  // node's file of the file's units: only nodes new to the pool are cleared first, the copy
  // goes over whole units (copy_data), and what either placement alone holds on a node is made
  // a hole unit by unit (drop_units, here and in give_up_move) rather than the node's file
  // removed.
  const bool restripe = current->pool == pool;
  std::optional<Placement> source;
  if (current->pool != kWithShard) source = placement_of(*current);
  const std::uint64_t resumed_at = resuming ? current->moved_bytes : 0;
  if (!resuming) {
    // Units an earlier move left behind on the target's nodes must not show through holes.
    // Before writes go there too: a write from then on must not be cut. Within the pool, only
    // the nodes the old placement does not have: the others' files hold its units.
    Placement cleared = target;
    if (restripe) {
      std::erase_if(cleared.nodes, [&](cluster::NodeId node) {
        return std::find(source->nodes.begin(), source->nodes.end(), node) != source->nodes.end();
      });
    }
    auto clearing = data_.offload([this, inode, cleared] {
      std::unique_lock slot(placements_.move_slot(inode));
      return pools_->truncate(cleared, inode, 0);
    });
    TP_CO_RETURN_IF_ERROR(co_await std::move(clearing));
  }
  // From here every write goes to both copies, and one that began before does its data again;
  // every node drops the layout it cached, and writes the home's way until the move is over.
  {
    auto locking = hold_layout(inode);
    const Result<std::shared_ptr<void>> held = co_await std::move(locking);
    TP_CO_RETURN_IF_ERROR(held.status());
    placements_.start_dual_writes(inode, target);
  }
  auto noting = note_watermark(inode, &target, resumed_at);
  Status copied = co_await std::move(noting);
  auto sizing = store_.getattr(inode);
  const Result<Attributes> attributes = co_await std::move(sizing);
  if (copied.ok()) copied = attributes.status();
  const std::uint64_t size = attributes.ok() ? attributes->size : 0;
  // A restripe's copy covers the last unit whole: the new owners' files may hold units a
  // restripe given up left there, which must not show past the end when the file grows.
  const std::uint64_t copy_end = restripe ? whole_units(size, target.stripe_unit) : size;
  const auto start = clock_.steady_now();
  int redone = 0;
  // What the copy read and wrote, a range copied again counted again: the pace counts it.
  std::uint64_t copied_bytes = 0;
  for (std::uint64_t at = resumed_at; copied.ok() && at < copy_end;) {
    const std::uint64_t end = std::min(copy_end, at + kWatermarkBytes);
    // A node that restarted before the range was synced may have lost some of it: the range is
    // copied again rather than counted.
    const std::uint64_t restarts = pools_->restarts();
    auto copying = data_.offload([=, this, &copied_bytes] {
      return copy_data(inode, source, target, {at, end, start}, bytes_per_second, copied_bytes);
    });
    copied = co_await std::move(copying);
    if (copied.ok() && pools_->restarts() != restarts) {
      if (++redone > kMaxRangeCopies) {
        // Left as a crash would leave it: the watermark stays for the next attempt.
        co_return error(Errc::unavailable, "nodes keep restarting while the file's data moves");
      }
      continue;
    }
    if (!copied.ok()) break;
    auto advancing = note_watermark(inode, nullptr, end);
    copied = co_await std::move(advancing);
    at = end;
    redone = 0;
  }
  // A store closing leaves the move as it stands: its watermark is where the next home (or this
  // one, reopened) goes on from.
  if (data_.closed()) co_return error(Errc::unavailable, "the store is closed");
  Result<Layout> switched = error(Errc::internal, "not switched");
  if (!copied.ok()) {
    switched = copied;
  } else {
    // Nobody reads the old copy under a layout it cached once the switch is made.
    auto locking = hold_layout(inode);
    const Result<std::shared_ptr<void>> held = co_await std::move(locking);
    if (held.ok()) {
      auto switching = switch_layout(inode, current->pool, target);
      switched = co_await std::move(switching);
    } else {
      switched = held.status();
    }
  }
  // A switch committed but reported failed (the mirror did not take it) still switched.
  if (!switched.ok() && placements_.where_of(inode).placed != target) {
    auto giving_up = give_up_move(inode, target);
    if (const Status gave_up = co_await std::move(giving_up); !gave_up.ok()) {
      spdlog::warn("inode {}: a move that failed ({}) stays to go on later: {}", inode,
                   switched.status().to_string(), gave_up.to_string());
    }
    co_return switched.status();
  }
  // Readers that began under the old layout finish before its data goes.
  auto resizing = store_.getattr(inode);
  const Result<Attributes> now = co_await std::move(resizing);
  const std::uint64_t end = whole_units(now.ok() ? now->size : size, target.stripe_unit);
  std::vector<cluster::NodeId> kept_by;  // nodes that keep units of the source
  auto freeing = data_.offload([this, inode, source, target, restripe, end, &kept_by] {
    return free_old_copy(inode, source, target, restripe, end, kept_by);
  });
  (void)co_await std::move(freeing);
  if (source) catch_up_.note_units_left(inode, source->pool, std::move(kept_by));
  if (!switched.ok()) co_return switched.status();
  spdlog::info("inode {}: its data {} from {} to pool {} ({} copies){}", inode,
               restripe ? "restriped" : "moved",
               source ? "pool " + source->pool : std::string("its shard"), target.pool,
               target.copies,
               resumed_at > 0 ? ", gone on from byte " + std::to_string(resumed_at) : "");
  co_return Move{*switched, resumed_at, copied_bytes};
}

asio::awaitable<Result<std::shared_ptr<void>>> Migration::hold_layout(InodeId inode) {
  if (!layout_locks_) co_return std::shared_ptr<void>();
  auto locking = layout_locks_->exclusive(inode);
  co_return co_await std::move(locking);
}

asio::awaitable<Result<Layout>> Migration::switch_layout(InodeId inode, std::string from,
                                                         Placement target) {
  auto switching = shard_.run<Layout>(
      true,
      [this, inode, &from, &target](sqlite::Database& db, AfterCommit& after) -> Result<Layout> {
        TP_ASSIGN_OR_RETURN(Layout now, rows_.load_layout(db, inode));
        if (now.pool != from) return error(Errc::unavailable, "moved meanwhile");
        auto update =
            db.prepare("UPDATE layouts SET pool = ?, protection = ?, nodes = ? WHERE ino = ?");
        update.bind(1, target.pool).bind(2, target.copies);
        update.bind(3, nodes_text(target.nodes)).bind(4, inode);
        TP_RETURN_IF_ERROR(update.run());
        TP_RETURN_IF_ERROR(forget_move(db, inode));
        // The old copies go, and with them the ones that were behind.
        auto caught_up = db.prepare("DELETE FROM copies_behind WHERE ino = ?");
        TP_RETURN_IF_ERROR(caught_up.bind(1, inode).run());
        if (now.pool != kWithShard) {
          TP_RETURN_IF_ERROR(catch_up_.note_down_units_left(
              db, after, inode, placement_of(now),
              now.pool == target.pool ? target.nodes : std::vector<cluster::NodeId>{}));
        }
        after.committed.push_back(
            [this, inode, target] { placements_.end_move(inode, target, true); });
        return rows_.load_layout(db, inode);
      });
  co_return co_await std::move(switching);
}

Status Migration::free_old_copy(InodeId inode, const std::optional<Placement>& source,
                                const Placement& target, bool restripe, std::uint64_t end,
                                std::vector<cluster::NodeId>& kept_by) {
  if (restripe) {
    // Readers of the new placement never ask the nodes losing units: once the old one's are
    // done, the units go without holding the slot. One that stays is never read.
    placements_.drain_slot(inode);
    if (Status s = pools_->drop_units(*source, target, inode, 0, end, nullptr, &kept_by); !s.ok()) {
      spdlog::info("inode {}: some units its old placement had stay on their nodes for now: {}",
                   inode, s.to_string());
    }
    return {};
  }
  auto gate = mirror_.gate();
  std::unique_lock slot(placements_.move_slot(inode));
  if (source) {
    kept_by = pools_->remove(*source, inode);
  } else {
    data_.remove_shard_copy(inode);
  }
  return {};
}

asio::awaitable<Status> Migration::note_watermark(InodeId inode, const Placement* target,
                                                  std::uint64_t copied) {
  std::optional<Placement> row;
  if (target) row = *target;
  auto noting = shard_.run<bool>(
      true, [inode, row, copied](sqlite::Database& db, AfterCommit&) -> Result<bool> {
        // A file removed meanwhile has no row to keep.
        auto update = row ? db.prepare(
                                "INSERT OR REPLACE INTO moves(ino, pool, protection, nodes, "
                                "copied) SELECT ?1, ?2, ?3, ?4, ?5 "
                                "WHERE EXISTS (SELECT 1 FROM layouts WHERE ino = ?1)")
                          : db.prepare("UPDATE moves SET copied = ?5 WHERE ino = ?1");
        update.bind(1, inode).bind(5, copied);
        if (row) update.bind(2, row->pool).bind(3, row->copies).bind(4, nodes_text(row->nodes));
        TP_RETURN_IF_ERROR(update.run());
        if (db.changes() == 0) return error(Errc::stale, "the file was removed while it moved");
        return true;
      });
  const Result<bool> noted = co_await std::move(noting);
  co_return noted.status();
}

asio::awaitable<Status> Migration::wait_for_move(InodeId inode) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (const auto deadline = clock_.steady_now() + kMoveWaitLimit;
       placements_.move_reserved(inode);) {
    if (clock_.steady_now() >= deadline || data_.closed()) {
      co_return error(Errc::unavailable, "the file's data is still being moved");
    }
    timer.expires_after(kMoveWaitPoll);
    auto sleeping = timer.async_wait(asio::use_awaitable);
    co_await std::move(sleeping);
  }
  co_return Status{};
}

asio::awaitable<Status> Migration::give_up_move(InodeId inode, const Placement& target) {
  const std::optional<Placement> placed = placements_.where_of(inode).placed;
  // Within the pool, the nodes of the placement kept hold the units legitimately.
  std::vector<cluster::NodeId> kept;
  if (placed && placed->pool == target.pool) kept = placed->nodes;
  auto forgetting = shard_.run<bool>(
      true,
      [this, inode, &target, &kept](sqlite::Database& db, AfterCommit& after) -> Result<bool> {
        TP_RETURN_IF_ERROR(forget_move(db, inode));
        TP_RETURN_IF_ERROR(catch_up_.note_down_units_left(db, after, inode, target, kept));
        return true;
      });
  const Result<bool> forgot = co_await std::move(forgetting);
  TP_CO_RETURN_IF_ERROR(forgot.status());
  placements_.end_move(inode, target, false);
  std::vector<cluster::NodeId> left;  // nodes that keep units of the target
  if (!placed || placed->pool != target.pool) {
    auto freeing = data_.offload([this, inode, target, &left] {
      std::unique_lock slot(placements_.move_slot(inode));
      left = pools_->remove(target, inode);
      return Status{};
    });
    const Status freed = co_await std::move(freeing);
    catch_up_.note_units_left(inode, target.pool, std::move(left));
    co_return freed;
  }
  // A restripe given up: the units it wrote on nodes its placement alone has are never read,
  // and a later restripe writes or drops every unit it adds; they go, as far as they can.
  auto sizing = store_.getattr(inode);
  const Result<Attributes> attributes = co_await std::move(sizing);
  if (!attributes.ok()) co_return Status{};
  auto dropping = data_.offload([this, inode, target, keep = *placed,
                                 end = whole_units(attributes->size, target.stripe_unit), &left] {
    placements_.drain_slot(inode);
    if (Status s = pools_->drop_units(target, keep, inode, 0, end, nullptr, &left); !s.ok()) {
      spdlog::info("inode {}: some units a restripe given up wrote stay on their nodes for now: {}",
                   inode, s.to_string());
    }
    return Status{};
  });
  const Status dropped = co_await std::move(dropping);
  catch_up_.note_units_left(inode, target.pool, std::move(left));
  co_return dropped;
}

Status Migration::copy_data(InodeId inode, const std::optional<Placement>& source,
                            const Placement& target, const CopyRange& range,
                            std::uint64_t bytes_per_second, std::uint64_t& copied) {
  std::vector<std::uint8_t> chunk(kCopyChunkBytes);
  for (std::uint64_t at = range.at; at < range.end; at += kCopyChunkBytes) {
    if (data_.closed()) return error(Errc::unavailable, "the store is closed");
    const auto piece =
        std::span(chunk).first(std::min<std::uint64_t>(kCopyChunkBytes, range.end - at));
    std::unique_lock slot(placements_.move_slot(inode));
    const CopyBehind held = held_already(inode, source, target);
    if (held && pools_->every_copy_held(target, inode, at, piece.size(), held)) continue;
    TP_RETURN_IF_ERROR(source
                           ? pools_->read(*source, inode, at, piece, placements_.behind_of(inode))
                           : data_.read_shard_copy(inode, at, piece));
    copied += piece.size();
    if (std::all_of(piece.begin(), piece.end(), [](std::uint8_t b) { return b == 0; })) {
      // Within a pool the new owners' files were not cleared: a hole is made where they may hold
      // a unit a restripe given up left, and on owners whose copy is behind.
      if (source && source->pool == target.pool) {
        TP_RETURN_IF_ERROR(pools_->drop_units(target, *source, inode, at, at + piece.size(),
                                              placements_.behind_of(inode)));
      }
      continue;
    }
    TP_RETURN_IF_ERROR(pools_->write(target, inode, at, piece, false, held));
    slot.unlock();
    // Keeps to the job's pace: this store thread waits, the file's readers and writers don't.
    if (bytes_per_second > 0) {
      clock_.sleep_until(range.start +
                         std::chrono::microseconds(copied * 1'000'000 / bytes_per_second));
    }
  }
  // The copy is the job's, not a client's: it leaves the new owners' page caches once durable.
  return pools_->sync(target, inode, AfterSync::release_cached);
}

CopyBehind Migration::held_already(InodeId inode, const std::optional<Placement>& source,
                                   const Placement& target) const {
  if (!source || source->pool != target.pool || source->stripe_unit != target.stripe_unit) {
    return nullptr;
  }
  return [this, inode, source = *source, behind = placements_.behind_of(inode)](
             cluster::NodeId node, std::uint64_t unit) {
    const Result<std::vector<cluster::NodeId>> owners = pools_->owners(source, inode, unit);
    return owners.ok() && std::ranges::find(*owners, node) != owners->end() &&
           !(behind && behind(node, unit));
  };
}

}  // namespace tidepool::store::internal
