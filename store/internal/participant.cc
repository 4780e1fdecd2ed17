#include "store/internal/participant.h"

#include "store/internal/permissions.h"

namespace tidepool::store::internal {
namespace {

// The states of a row of `transactions`.
constexpr std::int64_t kPrepared = 0;
constexpr std::int64_t kDecided = 1;
constexpr std::int64_t kAborted = 2;

Result<std::vector<ShardStep>> part_steps(sqlite::Database& db, TransactionId id) {
  auto rows = db.prepare(
      "SELECT kind, directory, name, inode, delta, parent FROM transaction_steps WHERE id = ? "
      "ORDER BY seq");
  rows.bind(1, id);
  std::vector<ShardStep> steps;
  while (rows.next_row()) {
    ShardStep step;
    step.kind = static_cast<StepKind>(rows.int64(0));
    step.directory = static_cast<InodeId>(rows.int64(1));
    step.name = rows.blob(2);
    step.inode = static_cast<InodeId>(rows.int64(3));
    step.delta = static_cast<std::int32_t>(rows.int64(4));
    step.parent = static_cast<InodeId>(rows.int64(5));
    steps.push_back(std::move(step));
  }
  TP_RETURN_IF_ERROR(rows.status());
  return steps;
}

Status changed_since(const ShardStep& step) {
  return error(Errc::precondition_failed,
               "the shard changed since the change across shards was planned (step " +
                   std::to_string(static_cast<int>(step.kind)) + ")");
}

}  // namespace

struct Participant::PartRow {
  ShardId coordinator = 0;
  std::int64_t state = kPrepared;

  static Result<std::optional<PartRow>> of(sqlite::Database& db, TransactionId id) {
    auto row = db.prepare("SELECT coordinator, state FROM transactions WHERE id = ?");
    row.bind(1, id);
    if (!row.next_row()) {
      TP_RETURN_IF_ERROR(row.status());
      return std::optional<PartRow>();
    }
    return std::optional<PartRow>(PartRow{static_cast<ShardId>(row.int64(0)), row.int64(1)});
  }
};

Participant::Participant(ShardExecutor& shard, ShardRows& rows, CrossShardHolds& holds,
                         ShardNamespace& names)
    : shard_(shard), rows_(rows), holds_(holds), names_(names) {}

Status Participant::open(Db& db, std::uint64_t boot) {
  boot_ = boot;
  auto forget = db.prepare("DELETE FROM transactions WHERE state = ? AND boot < ?");
  TP_RETURN_IF_ERROR(forget.bind(1, kAborted).bind(2, boot_).run());
  auto rows = db.prepare("SELECT id FROM transactions WHERE state = ?");
  rows.bind(1, kPrepared);
  std::vector<TransactionId> prepared;
  while (rows.next_row()) prepared.push_back(static_cast<TransactionId>(rows.int64(0)));
  TP_RETURN_IF_ERROR(rows.status());
  for (TransactionId id : prepared) {
    TP_ASSIGN_OR_RETURN(std::vector<ShardStep> steps, part_steps(db, id));
    holds_.hold(id, CrossShardHolds::keys_of(steps));
  }
  return {};
}

template <typename Work>
boost::asio::awaitable<Status> Participant::run_changing(Work work) {
  auto op =
      shard_.run<bool>(true, [work = std::move(work)](Db& db, AfterCommit& after) -> Result<bool> {
        TP_RETURN_IF_ERROR(work(db, after));
        return true;
      });
  const Result<bool> done = co_await std::move(op);
  co_return done.status();
}

boost::asio::awaitable<Result<std::vector<InodeId>>> Participant::prepare(TransactionPart part) {
  return shard_.run<std::vector<InodeId>>(
      true, [this, part = std::move(part)](Db& db, AfterCommit& after) mutable {
        return prepare_in(db, after, part);
      });
}

boost::asio::awaitable<Status> Participant::decide(TransactionId id) {
  return run_changing(
      [this, id](Db& db, AfterCommit& after) { return commit_in(db, after, id, true); });
}

boost::asio::awaitable<Status> Participant::prepare_and_decide(TransactionPart part) {
  auto op = shard_.run<bool>(
      true, [this, part = std::move(part)](Db& db, AfterCommit& after) mutable -> Result<bool> {
        TP_RETURN_IF_ERROR(prepare_in(db, after, part).status());
        TP_RETURN_IF_ERROR(commit_in(db, after, part.id, true));
        return true;
      });
  const Result<bool> done = co_await std::move(op);
  co_return done.status();
}

boost::asio::awaitable<Status> Participant::commit(TransactionId id) {
  return run_changing(
      [this, id](Db& db, AfterCommit& after) { return commit_in(db, after, id, false); });
}

boost::asio::awaitable<Status> Participant::abort(TransactionId id) {
  return run_changing([this, id](Db& db, AfterCommit& after) { return abort_in(db, after, id); });
}

boost::asio::awaitable<Status> Participant::finish(TransactionId id) {
  return run_changing([id](Db& db, AfterCommit&) {
    auto forget = db.prepare("DELETE FROM transactions WHERE id = ? AND state = ?");
    return forget.bind(1, id).bind(2, kDecided).run();
  });
}

boost::asio::awaitable<Result<Outcome>> Participant::outcome(TransactionId id) {
  return shard_.run<Outcome>(true, [this, id](Db& db, AfterCommit&) -> Result<Outcome> {
    TP_ASSIGN_OR_RETURN(std::optional<PartRow> row, PartRow::of(db, id));
    if (row) {
      return row->state == kPrepared  ? Outcome::prepared
             : row->state == kDecided ? Outcome::committed
                                      : Outcome::aborted;
    }
    // Never to commit from now on: its coordinator may still be preparing it.
    auto tombstone = db.prepare(
        "INSERT INTO transactions(id, coordinator, state, participants, boot) "
        "VALUES(?, ?, ?, '', ?)");
    tombstone.bind(1, id).bind(2, std::uint32_t{rows_.shard()}).bind(3, kAborted);
    tombstone.bind(4, boot_);
    TP_RETURN_IF_ERROR(tombstone.run());
    return Outcome::aborted;
  });
}

boost::asio::awaitable<Result<std::vector<PendingPart>>> Participant::pending() {
  return shard_.run<std::vector<PendingPart>>(
      false, [this](Db& db, AfterCommit&) -> Result<std::vector<PendingPart>> {
        // This shard's own parts only from earlier boots: one of this boot is still driven by
        // its coordinator, which is alive. Another shard's part may be asked about at any time:
        // a coordinator told that it does not know one never decides it.
        auto rows = db.prepare(
            "SELECT id, coordinator, state, participants FROM transactions "
            "WHERE state != ? AND (boot < ? OR coordinator != ?) ORDER BY id LIMIT ?");
        rows.bind(1, kAborted).bind(2, boot_).bind(3, std::uint32_t{rows_.shard()});
        rows.bind(4, static_cast<std::int64_t>(kMaxPendingParts));
        std::vector<PendingPart> parts;
        while (rows.next_row()) {
          PendingPart part{static_cast<TransactionId>(rows.int64(0)),
                           static_cast<ShardId>(rows.int64(1)),
                           {},
                           rows.int64(2) == kDecided};
          for (std::uint64_t shard : nodes_from_text(rows.blob(3))) {
            part.participants.push_back(static_cast<ShardId>(shard));
          }
          parts.push_back(std::move(part));
        }
        TP_RETURN_IF_ERROR(rows.status());
        return parts;
      });
}

Status Participant::check_local(InodeId inode) const {
  if (rows_.is_foreign(inode)) {
    return error(Errc::invalid_argument, "inode " + std::to_string(inode) + " is not this shard's");
  }
  return {};
}

Status Participant::check_step(Db& db, AfterCommit& after, ShardStep& step,
                               std::set<EntryName>& freed) {
  switch (step.kind) {
    case StepKind::add_entry: {
      TP_RETURN_IF_ERROR(check_local(step.directory));
      TP_ASSIGN_OR_RETURN(Attributes dir, rows_.load_directory(db, step.directory));
      TP_RETURN_IF_ERROR(validate_new_name(step.name));
      TP_RETURN_IF_ERROR(rows_.reserve_numbers(db, after));  // its cookie, taken at commit
      TP_RETURN_IF_ERROR(holds_.check_not_sealed(dir.inode));
      if (rows_.find_entry(db, step.directory, step.name) &&
          !freed.contains({step.directory, step.name})) {
        return changed_since(step);
      }
      if (step.delta > 0 && dir.nlink >= kMaxLinks) {
        return error(Errc::too_many_links, "too many subdirectories");
      }
      return {};
    }
    case StepKind::remove_entry: {
      TP_RETURN_IF_ERROR(check_local(step.directory));
      const std::optional<InodeId> found = rows_.find_entry(db, step.directory, step.name);
      if (!found || *found != step.inode) return changed_since(step);
      freed.insert({step.directory, step.name});
      return {};
    }
    case StepKind::make_inode: {
      if (step.attributes.type != FileType::directory) {
        return error(Errc::invalid_argument, "a change across shards makes directories only");
      }
      TP_RETURN_IF_ERROR(rows_.reserve_numbers(db, after));
      step.attributes.inode = step.inode = rows_.take_inode_number();
      step.attributes.generation = rows_.new_generation();
      step.attributes.nlink = 2;
      return rows_.insert_inode(db, step.attributes, {}, std::nullopt, step.parent);
    }
    case StepKind::add_links: {
      TP_RETURN_IF_ERROR(check_local(step.inode));
      TP_ASSIGN_OR_RETURN(Attributes file, rows_.load(db, step.inode));
      const std::int64_t links = std::int64_t{file.nlink} + step.delta;
      if (file.type == FileType::directory || links < 0) return changed_since(step);
      if (links > kMaxLinks) return error(Errc::too_many_links, "too many links");
      return {};
    }
    case StepKind::remove_directory:
    case StepKind::set_parent: {
      TP_RETURN_IF_ERROR(check_local(step.inode));
      TP_ASSIGN_OR_RETURN(Attributes dir, rows_.load(db, step.inode));
      if (dir.type != FileType::directory) return changed_since(step);
      if (step.kind == StepKind::remove_directory && rows_.has_entries(db, step.inode)) {
        return error(Errc::not_empty, "directory not empty");
      }
      return {};
    }
  }
  return error(Errc::invalid_argument, "unknown step of a change across shards");
}

Status Participant::check_part_shape(const TransactionPart& part) const {
  if (part.steps.empty() || part.steps.size() > kMaxStepsPerPart) {
    return error(Errc::invalid_argument,
                 "a part holds 1 to " + std::to_string(kMaxStepsPerPart) + " steps");
  }
  const bool coordinating = part.coordinator == rows_.shard();
  if (!coordinating && !part.participants.empty()) {
    return error(Errc::invalid_argument, "only the coordinator's part names the participants");
  }
  std::set<ShardId> participants;
  for (ShardId shard : part.participants) {
    if (shard == part.coordinator || !participants.insert(shard).second) {
      return error(Errc::invalid_argument, "a change's participants are other shards, once each");
    }
  }
  std::set<EntryName> added;
  for (const ShardStep& step : part.steps) {
    const EntryName name{step.directory, step.name};
    if (step.kind == StepKind::add_entry && !added.insert(name).second) {
      return error(Errc::invalid_argument, "a part adds one name twice");
    }
    if (step.kind == StepKind::remove_entry) added.erase(name);
    const bool entry = step.kind == StepKind::add_entry || step.kind == StepKind::remove_entry;
    const bool link_count_step = entry || step.kind == StepKind::add_links;
    if (link_count_step ? step.delta < -1 || step.delta > 1 : step.delta != 0) {
      return error(Errc::invalid_argument, "a step changes a link count by -1, 0 or 1");
    }
    if (step.kind == StepKind::add_links && step.delta == 0) {
      return error(Errc::invalid_argument, "a step adding links adds or takes one");
    }
  }
  return {};
}

Result<std::vector<InodeId>> Participant::prepare_in(Db& db, AfterCommit& after,
                                                     TransactionPart& part) {
  TP_RETURN_IF_ERROR(check_part_shape(part));
  TP_ASSIGN_OR_RETURN(std::optional<PartRow> known, PartRow::of(db, part.id));
  if (known) {
    return known->state == kAborted
               ? error(Errc::unavailable, "the change across shards was given up; retry")
               : error(Errc::precondition_failed, "the change across shards is prepared already");
  }
  std::set<EntryName> freed;
  std::vector<InodeId> made;
  for (ShardStep& step : part.steps) {
    TP_RETURN_IF_ERROR(check_step(db, after, step, freed));
    if (step.kind == StepKind::make_inode) made.push_back(step.inode);
  }
  CrossShardHolds::Keys keys = CrossShardHolds::keys_of(part.steps);
  TP_RETURN_IF_ERROR(holds_.check_free(keys));
  std::vector<std::uint64_t> participants(part.participants.begin(), part.participants.end());
  auto row = db.prepare(
      "INSERT INTO transactions(id, coordinator, state, participants, boot) "
      "VALUES(?, ?, ?, ?, ?)");
  row.bind(1, part.id).bind(2, std::uint32_t{part.coordinator}).bind(3, kPrepared);
  TP_RETURN_IF_ERROR(row.bind(4, nodes_text(participants)).bind(5, boot_).run());
  std::uint32_t seq = 0;
  for (const ShardStep& step : part.steps) {
    auto insert = db.prepare(
        "INSERT INTO transaction_steps(id, seq, kind, directory, name, inode, delta, parent) "
        "VALUES(?, ?, ?, ?, ?, ?, ?, ?)");
    insert.bind(1, part.id).bind(2, seq++).bind(3, static_cast<std::uint32_t>(step.kind));
    insert.bind(4, step.directory).bind(5, std::string_view(step.name)).bind(6, step.inode);
    insert.bind(7, std::int64_t{step.delta}).bind(8, step.parent);
    TP_RETURN_IF_ERROR(insert.run());
  }
  holds_.hold(part.id, std::move(keys));
  after.rolled_back.push_back([this, id = part.id] { holds_.release(id); });
  return made;
}

Status Participant::adjust_directory(Db& db, InodeId directory, std::int32_t delta,
                                     std::int64_t now) {
  TP_ASSIGN_OR_RETURN(Attributes dir, rows_.load_directory(db, directory));
  dir.nlink = static_cast<std::uint32_t>(std::int64_t{dir.nlink} + delta);
  dir.mtime_ns = dir.ctime_ns = now;
  return rows_.save(db, dir);
}

Status Participant::apply_step(Db& db, AfterCommit& after, const ShardStep& step,
                               std::int64_t now) {
  switch (step.kind) {
    case StepKind::add_entry:
      TP_RETURN_IF_ERROR(rows_.insert_entry(db, step.directory, step.name, step.inode));
      return adjust_directory(db, step.directory, step.delta, now);
    case StepKind::remove_entry:
      TP_RETURN_IF_ERROR(rows_.delete_entry(db, step.directory, step.name));
      return adjust_directory(db, step.directory, step.delta, now);
    case StepKind::make_inode:
      return {};
    case StepKind::add_links: {
      TP_ASSIGN_OR_RETURN(Attributes file, rows_.load(db, step.inode));
      file.nlink = static_cast<std::uint32_t>(std::int64_t{file.nlink} + step.delta);
      file.ctime_ns = now;
      if (file.nlink > 0) return rows_.save(db, file);
      return names_.drop_inode(db, file, after);
    }
    case StepKind::remove_directory: {
      TP_ASSIGN_OR_RETURN(Attributes dir, rows_.load(db, step.inode));
      return names_.drop_inode(db, dir, after);
    }
    case StepKind::set_parent: {
      TP_RETURN_IF_ERROR(rows_.set_parent(db, step.inode, step.parent));
      TP_ASSIGN_OR_RETURN(Attributes dir, rows_.load(db, step.inode));
      dir.ctime_ns = now;
      return rows_.save(db, dir);
    }
  }
  return error(Errc::internal, "unknown step of a change across shards");
}

Status Participant::commit_in(Db& db, AfterCommit& after, TransactionId id, bool deciding) {
  TP_ASSIGN_OR_RETURN(std::optional<PartRow> row, PartRow::of(db, id));
  if (!row) {
    if (!deciding) return {};
    return error(Errc::precondition_failed, "the change across shards is not known here");
  }
  if (deciding != (row->coordinator == rows_.shard())) {
    return error(Errc::invalid_argument, "only a change's coordinator decides it");
  }
  if (row->state == kDecided) return {};
  if (row->state == kAborted) {
    return error(Errc::precondition_failed, "the change across shards was given up");
  }
  TP_ASSIGN_OR_RETURN(std::vector<ShardStep> steps, part_steps(db, id));
  // The cookies of its entries: claimed with the commit if the prepare's claim ran short.
  TP_RETURN_IF_ERROR(rows_.claim_cookies(db, after));
  const std::int64_t now = rows_.now_ns();
  for (const ShardStep& step : steps) TP_RETURN_IF_ERROR(apply_step(db, after, step, now));
  return end_part(db, after, id, deciding ? std::optional(kDecided) : std::nullopt);
}

Status Participant::abort_in(Db& db, AfterCommit& after, TransactionId id) {
  TP_ASSIGN_OR_RETURN(std::optional<PartRow> row, PartRow::of(db, id));
  if (!row || row->state == kAborted) return {};
  if (row->state == kDecided) {
    return error(Errc::precondition_failed, "the change across shards was decided");
  }
  TP_ASSIGN_OR_RETURN(std::vector<ShardStep> steps, part_steps(db, id));
  for (const ShardStep& step : steps) {
    if (step.kind != StepKind::make_inode) continue;
    auto unmake = db.prepare("DELETE FROM inodes WHERE ino = ?");
    TP_RETURN_IF_ERROR(unmake.bind(1, step.inode).run());
    rows_.forget(step.inode);
  }
  return end_part(db, after, id,
                  row->coordinator == rows_.shard() ? std::optional(kAborted) : std::nullopt);
}

Status Participant::end_part(Db& db, AfterCommit& after, TransactionId id,
                             std::optional<std::int64_t> kept) {
  auto forget_steps = db.prepare("DELETE FROM transaction_steps WHERE id = ?");
  TP_RETURN_IF_ERROR(forget_steps.bind(1, id).run());
  if (kept) {
    auto keep = db.prepare("UPDATE transactions SET state = ? WHERE id = ?");
    TP_RETURN_IF_ERROR(keep.bind(1, *kept).bind(2, id).run());
  } else {
    auto forget = db.prepare("DELETE FROM transactions WHERE id = ?");
    TP_RETURN_IF_ERROR(forget.bind(1, id).run());
  }
  after.committed.push_back([this, id] { holds_.release(id); });
  return {};
}

}  // namespace tidepool::store::internal
