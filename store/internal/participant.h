// A shard's part in changes that span shards (store/cross_shard.h): its parts prepared,
// decided, committed, aborted and forgotten in its own database (`transactions`,
// `transaction_steps`), and held against every other change while prepared (CrossShardHolds).
//
// Thread-safe: each call runs its work on the shard thread.
#pragma once

#include <set>
#include <vector>

#include "store/cross_shard.h"
#include "store/internal/cross_shard_holds.h"
#include "store/internal/shard_executor.h"
#include "store/internal/shard_namespace.h"
#include "store/internal/shard_rows.h"

namespace tidepool::store::internal {

class Participant final : public ShardParticipant {
 public:
  Participant(ShardExecutor& shard, ShardRows& rows, CrossShardHolds& holds, ShardNamespace& names);

  // At open, in the caller's transaction, with this boot's count: what earlier boots answered
  // their coordinators goes (those coordinators are gone), and the parts prepared before a
  // crash hold what they held.
  Status open(sqlite::Database& db, std::uint64_t boot);

  boost::asio::awaitable<Result<std::vector<InodeId>>> prepare(TransactionPart part) override;
  boost::asio::awaitable<Status> decide(TransactionId id) override;
  // One transaction of the shard: the part is prepared and decided, or neither.
  boost::asio::awaitable<Status> prepare_and_decide(TransactionPart part) override;
  boost::asio::awaitable<Status> commit(TransactionId id) override;
  boost::asio::awaitable<Status> abort(TransactionId id) override;
  boost::asio::awaitable<Status> finish(TransactionId id) override;
  boost::asio::awaitable<Result<Outcome>> outcome(TransactionId id) override;
  boost::asio::awaitable<Result<std::vector<PendingPart>>> pending() override;

 private:
  struct PartRow;
  using Db = sqlite::Database;

  template <typename Work>
  boost::asio::awaitable<Status> run_changing(Work work);
  // What a part says of itself, before the shard is looked at: its steps' counts, and who
  // takes part. A shipped part may say anything.
  Status check_part_shape(const TransactionPart& part) const;
  // Checks one step against the shard (as the part's earlier steps leave it) and makes its
  // inode; `freed`: the entries the earlier steps remove.
  Status check_step(Db& db, AfterCommit& after, ShardStep& step, std::set<EntryName>& freed);
  Result<std::vector<InodeId>> prepare_in(Db& db, AfterCommit& after, TransactionPart& part);
  Status adjust_directory(Db& db, InodeId directory, std::int32_t delta, std::int64_t now);
  Status apply_step(Db& db, AfterCommit& after, const ShardStep& step, std::int64_t now);
  // `deciding`: the coordinator's commit, which keeps the decision; a part it does not know was
  // aborted (or never prepared) and is not decided. Another shard's part not known was
  // committed before.
  Status commit_in(Db& db, AfterCommit& after, TransactionId id, bool deciding);
  // On the coordinator, the part stays as an aborted row: a decision that comes after it (the
  // change's own, still under way while recovery gave it up) fails.
  Status abort_in(Db& db, AfterCommit& after, TransactionId id);
  // A part's steps are done with: its row stays in state `kept` (the coordinator's decision, or
  // its abort), or goes; what it held is released once that is committed.
  Status end_part(Db& db, AfterCommit& after, TransactionId id, std::optional<std::int64_t> kept);
  Status check_local(InodeId inode) const;

  ShardExecutor& shard_;
  ShardRows& rows_;
  CrossShardHolds& holds_;
  ShardNamespace& names_;
  std::uint64_t boot_ = 0;  // meta's boots, this store's
};

}  // namespace tidepool::store::internal
