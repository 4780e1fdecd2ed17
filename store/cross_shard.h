// Changes that span shards: a rename between directories of two shards, a new directory on a
// hashed shard, the removal of an entry whose inode is on another shard. Each shard's part is a
// list of steps it applies all at once, and the parts commit all or none, by two-phase commit
// with presumed abort:
//
// 1. Every shard but the coordinator prepares its part: each checks its steps against the
//    shard as it is, keeps them durably, and holds what they touch (the entries, the inodes)
//    against every other change, which is refused as unavailable (retry later) until the part
//    commits or aborts.
// 2. The coordinator prepares and commits its own part: that is the decision (decide), made in
//    one change of its shard where it can (prepare_and_decide: the coordinator is the last to
//    prepare). It keeps the decision until every other part committed, then forgets it
//    (finish).
// 3. A part whose transaction its coordinator does not know (outcome) is aborted: the
//    coordinator remembers that it told so, and never decides that transaction afterwards; so
//    does a coordinator whose part was aborted.
//
// Recovery (store/namespace.h) drives what a crash left. A coordinator's parts prepared by an
// earlier boot of its store, whose driver is gone, are aborted (there first) or, decided,
// committed everywhere. Another shard's prepared part, of any boot, asks its coordinator: its
// driver may have died while this shard lived on, and asking is safe while it lives (see 3).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "store/store.h"

namespace tidepool::store {

using TransactionId = std::uint64_t;

// The most steps one shard's part holds, and the most pending parts one call reports.
inline constexpr std::size_t kMaxStepsPerPart = 16;
inline constexpr std::size_t kMaxPendingParts = 16384;

enum class StepKind : std::uint8_t {
  // directory/name -> inode; the name must be free (or freed by an earlier step of the part).
  // `delta`: the directory's link count changes by it (+1 for a subdirectory).
  add_entry = 1,
  // directory/name, which must name `inode`, goes; the directory's link count changes by
  // `delta`.
  remove_entry = 2,
  // A new inode with `attributes` (its number chosen when the part is prepared), and for a
  // directory its parent `parent`. Named by no entry of this shard until another step or
  // part adds one.
  make_inode = 3,
  // A file's (not a directory's) link count changes by `delta`; at 0 it goes, with its data.
  add_links = 4,
  // The directory `inode`, which must be empty, goes.
  remove_directory = 5,
  // The directory `inode`'s parent becomes `parent` (its ".." after a rename).
  set_parent = 6,
};

struct ShardStep {
  StepKind kind = StepKind::add_entry;
  InodeId directory = 0;
  std::string name;
  InodeId inode = 0;
  std::int32_t delta = 0;
  InodeId parent = 0;
  Attributes attributes;  // make_inode only
};

// One shard's part of a transaction.
struct TransactionPart {
  TransactionId id = 0;
  ShardId coordinator = 0;
  // The coordinator's part names the other shards taking part; theirs name none.
  std::vector<ShardId> participants;
  std::vector<ShardStep> steps;
};

// What a shard says of a transaction it coordinates.
enum class Outcome : std::uint8_t { prepared = 0, committed = 1, aborted = 2 };

// A part a crash (or a lost message) left on a shard: prepared, or, on its coordinator,
// decided with other parts still to commit.
struct PendingPart {
  TransactionId id = 0;
  ShardId coordinator = 0;
  std::vector<ShardId> participants;
  bool decided = false;
};

class ShardParticipant {
 public:
  virtual ~ShardParticipant() = default;

  // Checks `part`'s steps against the shard and keeps them durably, holding what they touch.
  // The inode numbers of its make_inode steps, in order. precondition_failed when a step does
  // not hold (an entry changed since the caller looked), unavailable while something it
  // touches is held by another transaction; on the coordinator, aborted (unavailable) once it
  // told outcome() the transaction is unknown.
  virtual boost::asio::awaitable<Result<std::vector<InodeId>>> prepare(TransactionPart part) = 0;
  // On the coordinator: applies its prepared part and keeps the decision until finish().
  // precondition_failed when the part is not prepared there (aborted, or never prepared).
  virtual boost::asio::awaitable<Status> decide(TransactionId id) = 0;
  // On the coordinator, once every other part is prepared: prepare(part), then decide(part.id),
  // as one change of the shard where it can — then a crash leaves no part of it there, and the
  // others are aborted as their coordinator does not know them. Ok: decided. Otherwise what
  // outcome() says: not decided if it says aborted or prepared.
  virtual boost::asio::awaitable<Status> prepare_and_decide(TransactionPart part) {
    const TransactionId id = part.id;
    auto preparing = prepare(std::move(part));
    const Result<std::vector<InodeId>> prepared = co_await std::move(preparing);
    if (!prepared.ok()) co_return prepared.status();
    auto deciding = decide(id);
    co_return co_await std::move(deciding);
  }
  // On another shard: applies a prepared part and forgets it. A part not known (committed
  // before) is ok.
  virtual boost::asio::awaitable<Status> commit(TransactionId id) = 0;
  // Forgets a prepared part, undoing its make_inode steps (on the coordinator, it stays
  // aborted). A part not known is ok.
  virtual boost::asio::awaitable<Status> abort(TransactionId id) = 0;
  // On the coordinator, once every other part committed: forgets the decision.
  virtual boost::asio::awaitable<Status> finish(TransactionId id) = 0;
  // On the coordinator: what became of `id`. Unknown is aborted from then on.
  virtual boost::asio::awaitable<Result<Outcome>> outcome(TransactionId id) = 0;
  // The parts this shard holds that recovery must drive: its own (as coordinator) that an
  // earlier boot of its store prepared or decided with others to commit, and every part
  // another shard coordinates; at most kMaxPendingParts, the lowest ids first.
  virtual boost::asio::awaitable<Result<std::vector<PendingPart>>> pending() = 0;
};

}  // namespace tidepool::store
