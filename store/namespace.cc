#include "store/namespace.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <map>
#include <mutex>
#include <random>

#include "common/crc32c.h"
#include "common/fail_points.h"
#include "store/internal/permissions.h"

namespace tidepool::store {
namespace {

namespace asio = boost::asio;
using internal::check_may_add;
using internal::check_may_delete;
using internal::is_dot_or_dotdot;
using internal::kDefaultDirectoryMode;
using internal::kMayWrite;
using internal::new_object;
using internal::permits;

// How deep the walk up from a rename's target directory goes looking for the moved one.
constexpr int kMaxDepth = 4096;

// The namespace's own walks (".." of directories) look as root.
const Caller kWalker{0, 0, {}};

// A change across shards found the shard changed since it looked (a race with another
// change): the client asks again.
Status retry_if_changed(Status status) {
  if (status.code() == Errc::precondition_failed) {
    return error(Errc::unavailable, "the namespace changed meanwhile; retry: " + status.message());
  }
  return status;
}

}  // namespace

class ShardedNamespace::Impl {
 public:
  Impl(ShardId count, ShardOf shard, std::shared_ptr<NamespaceLocks> locks, Clock& clock)
      : count_(count), shard_(std::move(shard)), locks_(std::move(locks)), clock_(clock) {}

  ShardId count() const { return count_; }
  Clock& clock() const { return clock_; }
  NamespaceLocks& locks() { return *locks_; }

  Result<ShardAccess> at(ShardId shard) const {
    if (shard >= count_) return error(Errc::stale, "no shard " + std::to_string(shard));
    return shard_(shard);
  }
  Result<ShardAccess> of(InodeId inode) const { return at(shard_of(inode)); }
  // Whether the changes across shards that `shard` coordinates run here (its home is this
  // process); if not, they are shipped whole to it.
  bool coordinates(ShardId shard) const {
    Result<ShardAccess> access = at(shard);
    return access.ok() && access->local;
  }

  TransactionId new_transaction_id() {
    std::unique_lock lock(random_mutex_);
    TransactionId id = 0;
    while (id == 0) id = random_();
    return id;
  }

 private:
  const ShardId count_;
  const ShardOf shard_;
  const std::shared_ptr<NamespaceLocks> locks_;
  Clock& clock_;
  std::mutex random_mutex_;
  std::mt19937_64 random_{std::random_device{}()};
};

namespace {

// A change across shards: each shard's steps, and the shard that decides.
struct Plan {
  ShardId coordinator = 0;
  std::map<ShardId, std::vector<ShardStep>> parts;

  void add(InodeId where, ShardStep step) { parts[shard_of(where)].push_back(std::move(step)); }
};

ShardStep entry_step(StepKind kind, InodeId directory, std::string name, InodeId inode,
                     std::int32_t delta) {
  ShardStep step;
  step.kind = kind;
  step.directory = directory;
  step.name = std::move(name);
  step.inode = inode;
  step.delta = delta;
  return step;
}

ShardStep inode_step(StepKind kind, InodeId inode, std::int32_t delta = 0, InodeId parent = 0) {
  ShardStep step;
  step.kind = kind;
  step.inode = inode;
  step.delta = delta;
  step.parent = parent;
  return step;
}

}  // namespace

// The coordinator's finish() of `id`, every part of which committed.
static awaitable<void> forget_decision(std::shared_ptr<ShardParticipant> coordinator,
                                       TransactionId id) {
  auto finishing = coordinator->finish(id);
  const Status finished = co_await std::move(finishing);
  if (!finished.ok()) {
    spdlog::info("change across shards {:x}: its decision is kept until recovery ({})", id,
                 finished.to_string());
  }
}

// How run_plan ended: `status` as the caller tells it; `refused` when no part was decided, so
// nothing changed and the plan may be made again.
struct PlanEnd {
  Status status;
  bool refused = false;
};

// Runs `plan` by two-phase commit (store/cross_shard.h): every other shard prepares, then the
// coordinator prepares and decides, its add_entry steps naming inode 0 naming the first inode
// another part made; then the others commit, then `locks` (the caller's, if any) go, and the
// coordinator forgets its decision while the caller answers. Fails, with nothing changed, when a
// part cannot be prepared or the decision is refused; once decided, succeeds even if another part's
// commit does not get through (recovery commits it). Only a decision the coordinator cannot say it
// made or not leaves the parts to recovery. Only the coordinating shard's home drives a change: a
// shard whose home moved away is refused, so a deposed home cannot decide what the new one settled.
static awaitable<PlanEnd> run_plan(ShardedNamespace::Impl& ns, Plan plan,
                                   std::shared_ptr<void>* locks = nullptr) {
  if (!ns.coordinates(plan.coordinator)) {
    co_return PlanEnd{error(Errc::unavailable, "this node no longer coordinates shard " +
                                                   std::to_string(plan.coordinator) + "'s changes"),
                      true};
  }
  const TransactionId id = ns.new_transaction_id();
  std::vector<std::pair<ShardId, std::shared_ptr<ShardParticipant>>> prepared;
  auto abort_prepared = [&]() -> awaitable<void> {
    for (auto& [shard, participant] : prepared) {
      auto aborting = participant->abort(id);
      const Status aborted = co_await std::move(aborting);
      if (!aborted.ok()) {
        spdlog::warn("shard {}: change across shards {:x} not aborted: {} (recovery will)", shard,
                     id, aborted.to_string());
      }
    }
  };
  std::vector<ShardId> participants;
  InodeId made = 0;
  for (auto& [shard, steps] : plan.parts) {
    if (shard == plan.coordinator) continue;
    participants.push_back(shard);
    Result<ShardAccess> access = ns.at(shard);
    Result<std::vector<InodeId>> made_here = std::vector<InodeId>();
    if (!access.ok()) {
      made_here = access.status();
    } else {
      auto preparing =
          access->participant->prepare(TransactionPart{id, plan.coordinator, {}, steps});
      made_here = co_await std::move(preparing);
    }
    if (!made_here.ok()) {
      co_await abort_prepared();
      co_return PlanEnd{retry_if_changed(made_here.status()), true};
    }
    prepared.emplace_back(shard, access->participant);
    if (!made_here->empty() && made == 0) made = made_here->front();
  }
  std::vector<ShardStep>& own = plan.parts[plan.coordinator];
  for (ShardStep& step : own) {
    if (step.kind == StepKind::add_entry && step.inode == 0) step.inode = made;
  }
  Result<ShardAccess> coordinator = ns.at(plan.coordinator);
  if (!coordinator.ok() || !coordinator->local) {
    co_await abort_prepared();
    co_return PlanEnd{coordinator.ok()
                          ? error(Errc::unavailable, "shard " + std::to_string(plan.coordinator) +
                                                         "'s home moved during the change")
                          : coordinator.status(),
                      true};
  }
  if (const auto pause = fail_points::pause_at(fail_points::kCrossShardDecide); pause.count() > 0) {
    asio::steady_timer between_phases(co_await asio::this_coro::executor, pause);
    auto pausing = between_phases.async_wait(asio::use_awaitable);
    co_await std::move(pausing);
  }
  ShardParticipant& deciding_shard = *coordinator->participant;
  auto deciding =
      deciding_shard.prepare_and_decide(TransactionPart{id, plan.coordinator, participants, own});
  const Status decided = co_await std::move(deciding);
  if (!decided.ok()) {
    // Refused, or cut short: the coordinator says which, and from now on never decides it
    // unless it did.
    auto asking = deciding_shard.outcome(id);
    const Result<Outcome> outcome = co_await std::move(asking);
    if (!outcome.ok()) {
      co_return PlanEnd{error(Errc::unavailable, "a change across shards was cut short (" +
                                                     decided.to_string() +
                                                     "); recovery settles it")};
    }
    if (*outcome != Outcome::committed) {
      if (*outcome == Outcome::prepared) {
        // There first, as recovery does, so that it is never decided afterwards.
        prepared.emplace(prepared.begin(), plan.coordinator, coordinator->participant);
      }
      co_await abort_prepared();
      co_return PlanEnd{retry_if_changed(decided), true};
    }
  }
  bool all_committed = true;
  for (auto& [shard, participant] : prepared) {
    auto committing = participant->commit(id);
    const Status committed = co_await std::move(committing);
    if (!committed.ok()) {
      all_committed = false;
      spdlog::warn("shard {}: change across shards {:x} decided, not yet committed there: {}",
                   shard, id, committed.to_string());
    }
  }
  // The change is made: what comes after needs no lock.
  if (locks != nullptr) locks->reset();
  // Nor does the answer wait for the decision to be forgotten: until it is, recovery would
  // only commit the parts again, which are committed.
  if (all_committed) {
    asio::co_spawn(co_await asio::this_coro::executor,
                   forget_decision(coordinator->participant, id), asio::detached);
  }
  co_return PlanEnd{};
}

ShardedNamespace::ShardedNamespace(ShardId shard_count, ShardOf shard,
                                   std::shared_ptr<NamespaceLocks> locks, Clock& clock)
    : impl_(std::make_shared<Impl>(shard_count, std::move(shard), std::move(locks), clock)) {}

ShardId ShardedNamespace::shard_for_directory(InodeId parent, std::string_view name) const {
  std::array<std::uint8_t, sizeof parent> key{};
  for (std::size_t i = 0; i < key.size(); ++i)
    key[i] = static_cast<std::uint8_t>(parent >> (8 * i));
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(name.data());
  const std::uint32_t hash = crc32c({bytes, name.size()}, crc32c(key));
  return static_cast<ShardId>(hash % impl_->count());
}

namespace {

template <typename T, typename Call>
awaitable<Result<T>> on_shard(const ShardedNamespace::Impl& ns, InodeId inode, Call call) {
  Result<ShardAccess> shard = ns.of(inode);
  if (!shard.ok()) co_return shard.status();
  auto op = call(*shard->store);
  co_return co_await std::move(op);
}

awaitable<Result<Attributes>> attributes_of(const ShardedNamespace::Impl& ns, InodeId inode) {
  return on_shard<Attributes>(ns, inode, [inode](Store& s) { return s.getattr(inode); });
}

Wcc wcc_of(const Attributes& before, const Result<Attributes>& after) {
  Wcc wcc{pre_of(before), std::nullopt};
  if (after.ok()) wcc.after = *after;
  return wcc;
}

}  // namespace

Result<std::shared_ptr<Store>> ShardedNamespace::next(InodeId addressed) const {
  TP_ASSIGN_OR_RETURN(ShardAccess access, impl_->of(addressed));
  return std::move(access.store);
}

std::uint64_t ShardedNamespace::write_verifier() const {
  std::uint64_t verifier = 0;
  for (ShardId shard = 0; shard < impl_->count(); ++shard) {
    if (Result<ShardAccess> access = impl_->at(shard); access.ok()) {
      verifier ^= access->store->write_verifier() * (std::uint64_t{shard} * 2 + 1);
    }
  }
  return verifier;
}

void ShardedNamespace::close() {
  for (ShardId shard = 0; shard < impl_->count(); ++shard) {
    if (Result<ShardAccess> access = impl_->at(shard); access.ok()) access->store->close();
  }
}

void ShardedNamespace::set_atime_policy(bool enabled, std::chrono::seconds grace_period) {
  for (ShardId shard = 0; shard < impl_->count(); ++shard) {
    if (Result<ShardAccess> access = impl_->at(shard); access.ok()) {
      access->store->set_atime_policy(enabled, grace_period);
    }
  }
}

awaitable<Result<LookupResult>> ShardedNamespace::lookup(InodeId directory, std::string name,
                                                         Caller caller) {
  auto looking = on_shard<LookupResult>(
      *impl_, directory, [=](Store& s) { return s.lookup(directory, name, caller); });
  Result<LookupResult> found = co_await std::move(looking);
  if (!found.ok() || !found->object_elsewhere) co_return found;
  auto fetching = attributes_of(*impl_, found->object.inode);
  Result<Attributes> object = co_await std::move(fetching);
  if (!object.ok()) co_return object.status();
  co_return LookupResult{*object, found->directory, false};
}

awaitable<Result<WriteResult>> ShardedNamespace::write(InodeId inode, std::uint64_t offset,
                                                       std::span<const std::uint8_t> data,
                                                       Stability stability, Caller caller) {
  auto writing = on_shard<WriteResult>(
      *impl_, inode, [=](Store& s) { return s.write(inode, offset, data, stability, caller); });
  Result<WriteResult> written = co_await std::move(writing);
  // The namespace's verifier, as COMMIT answers it: a client compares like with like.
  if (written.ok()) written->verifier = write_verifier();
  co_return written;
}

awaitable<Result<WriteResult>> ShardedNamespace::record_write(InodeId inode, std::uint64_t offset,
                                                              std::uint32_t count,
                                                              Stability stability, Caller caller,
                                                              Layout written_under) {
  auto recording = on_shard<WriteResult>(*impl_, inode, [=](Store& s) {
    return s.record_write(inode, offset, count, stability, caller, written_under);
  });
  Result<WriteResult> recorded = co_await std::move(recording);
  // The namespace's verifier, as COMMIT answers it: a client compares like with like.
  if (recorded.ok()) recorded->verifier = write_verifier();
  co_return recorded;
}

awaitable<Result<NewObject>> ShardedNamespace::create(InodeId directory, std::string name,
                                                      CreateMode mode, AttributeChanges initial,
                                                      CreateVerifier verifier, Caller caller) {
  auto creating = on_shard<NewObject>(*impl_, directory, [=](Store& s) {
    return s.create(directory, name, mode, initial, verifier, caller);
  });
  Result<NewObject> made = co_await std::move(creating);
  if (made.ok() || made.status().code() != Errc::cross_device) co_return made;
  // The name is taken by an object of another shard.
  if (mode != CreateMode::unchecked) co_return error(Errc::already_exists, "file exists");
  auto looking = lookup(directory, name, caller);
  Result<LookupResult> existing = co_await std::move(looking);
  if (!existing.ok()) co_return existing.status();
  if (existing->object.type != FileType::regular) co_return error(Errc::already_exists, "exists");
  Attributes object = existing->object;
  if (initial.size && *initial.size != object.size) {
    AttributeChanges truncate;
    truncate.size = initial.size;
    auto truncating = setattr(object.inode, truncate, caller, std::nullopt);
    Result<Wcc> truncated = co_await std::move(truncating);
    if (!truncated.ok()) co_return truncated.status();
    if (truncated->after) object = *truncated->after;
  }
  co_return NewObject{object, Wcc{pre_of(existing->directory), existing->directory}};
}

awaitable<Result<Attributes>> ShardedNamespace::new_entry_in(InodeId directory, std::string name,
                                                             Caller caller) {
  auto looking = lookup(directory, name, caller);
  Result<LookupResult> existing = co_await std::move(looking);
  if (existing.ok()) co_return error(Errc::already_exists, name);
  if (existing.status().code() != Errc::not_found) co_return existing.status();
  auto getting = attributes_of(*impl_, directory);
  Result<Attributes> dir = co_await std::move(getting);
  if (!dir.ok()) co_return dir.status();
  if (dir->type != FileType::directory) co_return error(Errc::not_a_directory, "not a directory");
  TP_CO_RETURN_IF_ERROR(internal::validate_new_name(name));
  TP_CO_RETURN_IF_ERROR(check_may_add(*dir, caller));
  co_return dir;
}

awaitable<Result<NewObject>> ShardedNamespace::mkdir(InodeId directory, std::string name,
                                                     AttributeChanges initial, Caller caller) {
  const ShardId home = shard_for_directory(directory, name);
  if (home == shard_of(directory) || !impl_->coordinates(shard_of(directory))) {
    auto making = on_shard<NewObject>(
        *impl_, directory, [=](Store& s) { return s.mkdir(directory, name, initial, caller); });
    co_return co_await std::move(making);
  }
  auto checking = new_entry_in(directory, name, caller);
  Result<Attributes> dir = co_await std::move(checking);
  if (!dir.ok()) co_return dir.status();
  const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               impl_->clock().now().time_since_epoch())
                               .count();
  ShardStep make = inode_step(StepKind::make_inode, 0, 0, directory);
  make.attributes =
      new_object(*dir, FileType::directory, caller, initial, kDefaultDirectoryMode, now);
  Plan plan{shard_of(directory), {}};
  plan.parts[home].push_back(std::move(make));
  plan.add(directory, entry_step(StepKind::add_entry, directory, name, 0, +1));
  auto running = run_plan(*impl_, std::move(plan));
  TP_CO_RETURN_IF_ERROR((co_await std::move(running)).status);
  auto finding = lookup(directory, name, kWalker);
  Result<LookupResult> made = co_await std::move(finding);
  if (!made.ok()) co_return made.status();
  co_return NewObject{made->object, Wcc{pre_of(*dir), made->directory}};
}

namespace {

// The removal of directory/name, whose object is on another shard.
awaitable<Result<Wcc>> remove_across(ShardedNamespace& ns, ShardedNamespace::Impl& impl,
                                     InodeId directory, std::string name, Caller caller,
                                     bool directories) {
  auto looking = ns.lookup(directory, name, caller);
  Result<LookupResult> victim = co_await std::move(looking);
  if (!victim.ok()) co_return victim.status();
  const Attributes& object = victim->object;
  const bool is_directory = object.type == FileType::directory;
  if (directories && !is_directory) co_return error(Errc::not_a_directory, name);
  if (!directories && is_directory) co_return error(Errc::is_a_directory, name);
  TP_CO_RETURN_IF_ERROR(check_may_delete(victim->directory, object, caller));
  Plan plan{shard_of(directory), {}};
  plan.add(directory, entry_step(StepKind::remove_entry, directory, name, object.inode,
                                 is_directory ? -1 : 0));
  plan.add(object.inode, is_directory ? inode_step(StepKind::remove_directory, object.inode)
                                      : inode_step(StepKind::add_links, object.inode, -1));
  auto running = run_plan(impl, std::move(plan));
  TP_CO_RETURN_IF_ERROR((co_await std::move(running)).status);
  auto getting = attributes_of(impl, directory);
  const Result<Attributes> after = co_await std::move(getting);
  co_return wcc_of(victim->directory, after);
}

}  // namespace

awaitable<Result<Wcc>> ShardedNamespace::remove(InodeId directory, std::string name,
                                                Caller caller) {
  auto removing =
      on_shard<Wcc>(*impl_, directory, [=](Store& s) { return s.remove(directory, name, caller); });
  Result<Wcc> removed = co_await std::move(removing);
  if (removed.ok() || removed.status().code() != Errc::cross_device) co_return removed;
  auto across = remove_across(*this, *impl_, directory, name, caller, false);
  co_return co_await std::move(across);
}

awaitable<Result<Wcc>> ShardedNamespace::rmdir(InodeId directory, std::string name, Caller caller) {
  auto removing =
      on_shard<Wcc>(*impl_, directory, [=](Store& s) { return s.rmdir(directory, name, caller); });
  Result<Wcc> removed = co_await std::move(removing);
  if (removed.ok() || removed.status().code() != Errc::cross_device) co_return removed;
  auto across = remove_across(*this, *impl_, directory, name, caller, true);
  co_return co_await std::move(across);
}

namespace {

// The source directory's shard's own rename: all of it when every entry and inode it touches
// is on that shard, else cross_device.
awaitable<Result<RenameResult>> rename_on_source_shard(const ShardedNamespace::Impl& impl,
                                                       InodeId from_directory,
                                                       std::string from_name, InodeId to_directory,
                                                       std::string to_name, Caller caller) {
  return on_shard<RenameResult>(impl, from_directory, [=](Store& s) {
    return s.rename(from_directory, from_name, to_directory, to_name, caller);
  });
}

// A rename made under the namespace's locks; `refused` when it met another change under way on
// a shard and changed nothing, so that it may be made again.
struct RenameAttempt {
  Result<RenameResult> result = RenameResult{};
  bool refused = false;
};

// The rename of from_directory/from_name to to_directory/to_name whose entries or inode may lie
// on several shards, holding both directories in `mode` — and, for a directory that changes
// parent, exclusive, with the lock on such moves: known once the source is looked up under the
// first two, and then looked up again.
awaitable<RenameAttempt> rename_under_locks(ShardedNamespace& ns, ShardedNamespace::Impl& impl,
                                            InodeId from_directory, std::string from_name,
                                            InodeId to_directory, std::string to_name,
                                            Caller caller, LockMode mode) {
  std::vector<InodeId> keys{from_directory, to_directory};
  Result<std::shared_ptr<void>> held = std::shared_ptr<void>();
  Result<LookupResult> source = error(Errc::not_found, from_name);
  for (bool moves_directory = false;;) {
    held = std::shared_ptr<void>();
    auto locking = impl.locks().lock(keys, mode);
    held = co_await std::move(locking);
    if (!held.ok()) co_return RenameAttempt{held.status()};
    auto looking = ns.lookup(from_directory, from_name, caller);
    source = co_await std::move(looking);
    if (!source.ok()) co_return RenameAttempt{source.status()};
    const bool needs_moves_lock =
        source->object.type == FileType::directory && from_directory != to_directory;
    if (!needs_moves_lock || moves_directory) break;
    moves_directory = true;
    keys.push_back(kDirectoryMovesKey);
    mode = LockMode::exclusive;
  }
  // Only a rename that shared its locks can have met another one between its directories.
  const bool may_run_again = mode == LockMode::shared;
  if (shard_of(from_directory) == shard_of(to_directory) && from_directory != to_directory) {
    // Under the locks: a directory it moves cannot close a cycle with one moving across shards.
    auto renaming =
        rename_on_source_shard(impl, from_directory, from_name, to_directory, to_name, caller);
    Result<RenameResult> renamed = co_await std::move(renaming);
    if (renamed.ok() || renamed.status().code() != Errc::cross_device) {
      co_return RenameAttempt{renamed,
                              may_run_again && renamed.status().code() == Errc::unavailable};
    }
  }
  const Attributes from_dir = source->directory;
  if (Status may = check_may_delete(from_dir, source->object, caller); !may.ok()) {
    co_return RenameAttempt{may};
  }
  auto getting = attributes_of(impl, to_directory);
  Result<Attributes> to_dir = co_await std::move(getting);
  if (!to_dir.ok()) co_return RenameAttempt{to_dir.status()};
  if (to_dir->type != FileType::directory) {
    co_return RenameAttempt{error(Errc::not_a_directory, "not a directory")};
  }
  if (Status may = check_may_add(*to_dir, caller); !may.ok()) co_return RenameAttempt{may};
  const Attributes& moved = source->object;
  const bool moving_directory = moved.type == FileType::directory;
  const bool new_parent = moving_directory && from_directory != to_directory;
  if (new_parent) {
    // Its ".." changes, so it must be writable, and it must not move into its own subtree.
    if (!permits(moved, caller, kMayWrite)) {
      co_return RenameAttempt{
          error(Errc::access_denied, "no write permission on the moved directory")};
    }
    InodeId up = to_directory;
    for (int depth = 0; up != kRootInode; ++depth) {
      if (up == moved.inode) {
        co_return RenameAttempt{
            error(Errc::invalid_argument, "cannot move a directory into itself")};
      }
      if (depth == kMaxDepth) co_return RenameAttempt{error(Errc::name_too_long, "path too deep")};
      auto climbing = ns.lookup(up, "..", kWalker);
      Result<LookupResult> parent = co_await std::move(climbing);
      if (!parent.ok()) co_return RenameAttempt{parent.status()};
      up = parent->object.inode;
    }
  }
  std::optional<Attributes> replaced;
  auto finding = ns.lookup(to_directory, to_name, caller);
  Result<LookupResult> target = co_await std::move(finding);
  if (target.ok()) {
    if (target->object.inode == moved.inode) {
      co_return RenameAttempt{
          RenameResult{Wcc{pre_of(from_dir), from_dir}, Wcc{pre_of(*to_dir), *to_dir}}};
    }
    const bool target_is_directory = target->object.type == FileType::directory;
    if (moving_directory && !target_is_directory) {
      co_return RenameAttempt{
          error(Errc::not_a_directory, "cannot replace a file with a directory")};
    }
    if (!moving_directory && target_is_directory) {
      co_return RenameAttempt{
          error(Errc::is_a_directory, "cannot replace a directory with a file")};
    }
    if (Status may = check_may_delete(*to_dir, target->object, caller); !may.ok()) {
      co_return RenameAttempt{may};
    }
    replaced = target->object;
  } else if (target.status().code() != Errc::not_found) {
    co_return RenameAttempt{target.status()};
  }

  Plan plan{shard_of(from_directory), {}};
  plan.add(from_directory, entry_step(StepKind::remove_entry, from_directory, from_name,
                                      moved.inode, new_parent ? -1 : 0));
  if (replaced) {
    const bool gone_directory = replaced->type == FileType::directory;
    plan.add(to_directory, entry_step(StepKind::remove_entry, to_directory, to_name,
                                      replaced->inode, gone_directory ? -1 : 0));
  }
  plan.add(to_directory,
           entry_step(StepKind::add_entry, to_directory, to_name, moved.inode, new_parent ? 1 : 0));
  if (replaced) {
    plan.add(replaced->inode, replaced->type == FileType::directory
                                  ? inode_step(StepKind::remove_directory, replaced->inode)
                                  : inode_step(StepKind::add_links, replaced->inode, -1));
  }
  if (new_parent) {
    plan.add(moved.inode, inode_step(StepKind::set_parent, moved.inode, 0, to_directory));
  }
  auto running = run_plan(impl, std::move(plan), &*held);
  const PlanEnd ran = co_await std::move(running);
  if (!ran.status.ok()) co_return RenameAttempt{ran.status, may_run_again && ran.refused};
  auto from_after = attributes_of(impl, from_directory);
  const Result<Attributes> from_now = co_await std::move(from_after);
  auto to_after = attributes_of(impl, to_directory);
  const Result<Attributes> to_now = co_await std::move(to_after);
  co_return RenameAttempt{RenameResult{wcc_of(from_dir, from_now), wcc_of(*to_dir, to_now)}};
}

}  // namespace

awaitable<Result<RenameResult>> ShardedNamespace::rename(InodeId from_directory,
                                                         std::string from_name,
                                                         InodeId to_directory, std::string to_name,
                                                         Caller caller) {
  // Within one shard, the shard's own rename, unless it meets an inode of another shard. Within
  // one directory it needs no lock: nothing changes parent.
  auto on_source_shard = [&]() {
    return rename_on_source_shard(*impl_, from_directory, from_name, to_directory, to_name, caller);
  };
  if (!impl_->coordinates(shard_of(from_directory))) {
    auto renaming = on_source_shard();
    co_return co_await std::move(renaming);
  }
  if (from_directory == to_directory && shard_of(from_directory) == shard_of(to_directory)) {
    auto renaming = on_source_shard();
    Result<RenameResult> renamed = co_await std::move(renaming);
    if (renamed.ok() || renamed.status().code() != Errc::cross_device) co_return renamed;
  }
  if (is_dot_or_dotdot(from_name) || is_dot_or_dotdot(to_name)) {
    co_return error(Errc::invalid_argument, "cannot rename '.' or '..'");
  }
  TP_CO_RETURN_IF_ERROR(internal::validate_new_name(to_name));
  // Renames between the same directories go together, each holding its entries on the shards
  // it changes; one that met another's holds is made again alone, so that two renames to one
  // name both succeed, the later replacing the earlier, as they would on one shard.
  auto sharing = rename_under_locks(*this, *impl_, from_directory, from_name, to_directory, to_name,
                                    caller, LockMode::shared);
  RenameAttempt shared = co_await std::move(sharing);
  if (!shared.refused) co_return std::move(shared.result);
  auto alone = rename_under_locks(*this, *impl_, from_directory, from_name, to_directory, to_name,
                                  caller, LockMode::exclusive);
  RenameAttempt exclusive = co_await std::move(alone);
  co_return std::move(exclusive.result);
}

awaitable<Result<LinkResult>> ShardedNamespace::link(InodeId file, InodeId directory,
                                                     std::string name, Caller caller) {
  auto linking = on_shard<LinkResult>(
      *impl_, directory, [=](Store& s) { return s.link(file, directory, name, caller); });
  Result<LinkResult> linked = co_await std::move(linking);
  if (linked.ok() || linked.status().code() != Errc::cross_device) co_return linked;
  auto getting = attributes_of(*impl_, file);
  Result<Attributes> target = co_await std::move(getting);
  if (!target.ok()) co_return target.status();
  if (target->type == FileType::directory) {
    co_return error(Errc::is_a_directory, "cannot hard-link a directory");
  }
  auto checking = new_entry_in(directory, name, caller);
  Result<Attributes> dir = co_await std::move(checking);
  if (!dir.ok()) co_return dir.status();
  Plan plan{shard_of(directory), {}};
  plan.add(directory, entry_step(StepKind::add_entry, directory, name, file, 0));
  plan.add(file, inode_step(StepKind::add_links, file, +1));
  auto running = run_plan(*impl_, std::move(plan));
  TP_CO_RETURN_IF_ERROR((co_await std::move(running)).status);
  auto file_after = attributes_of(*impl_, file);
  Result<Attributes> file_now = co_await std::move(file_after);
  if (!file_now.ok()) co_return file_now.status();
  auto dir_after = attributes_of(*impl_, directory);
  const Result<Attributes> dir_now = co_await std::move(dir_after);
  co_return LinkResult{*file_now, wcc_of(*dir, dir_now)};
}

awaitable<Result<DirectoryPage>> ShardedNamespace::readdir(InodeId directory, std::uint64_t cookie,
                                                           std::uint64_t cookie_verifier,
                                                           std::uint32_t max_entries,
                                                           bool with_attributes, Caller caller) {
  auto listing = on_shard<DirectoryPage>(*impl_, directory, [=](Store& s) {
    return s.readdir(directory, cookie, cookie_verifier, max_entries, with_attributes, caller);
  });
  Result<DirectoryPage> page = co_await std::move(listing);
  if (!page.ok() || !with_attributes) co_return page;
  for (DirectoryEntry& entry : page->entries) {
    if (entry.attributes) continue;
    auto getting = attributes_of(*impl_, entry.inode);
    Result<Attributes> attributes = co_await std::move(getting);
    // An entry whose object is gone or out of reach is listed without its attributes, as
    // READDIRPLUS allows.
    if (attributes.ok()) entry.attributes = *attributes;
  }
  co_return page;
}

awaitable<Result<std::uint32_t>> ShardedNamespace::record_reads(std::vector<InodeId> inodes) {
  std::map<ShardId, std::vector<InodeId>> by_shard;
  for (InodeId inode : inodes) by_shard[shard_of(inode)].push_back(inode);
  std::uint32_t moved = 0;
  for (auto& [shard, those] : by_shard) {
    auto recording = on_shard<std::uint32_t>(
        *impl_, InodeId{shard} << kShardShift,
        [those = std::move(those)](Store& s) { return s.record_reads(those); });
    Result<std::uint32_t> recorded = co_await std::move(recording);
    if (!recorded.ok()) co_return recorded.status();
    moved += *recorded;
  }
  co_return moved;
}

awaitable<Result<CandidatePage>> ShardedNamespace::find_files(std::string where,
                                                              std::vector<std::int64_t> values,
                                                              InodeId after, std::uint32_t limit) {
  auto finding = on_shard<CandidatePage>(
      *impl_, after, [=](Store& s) { return s.find_files(where, values, after, limit); });
  Result<CandidatePage> page = co_await std::move(finding);
  // One shard after the other: the end of one is the start of the next.
  if (page.ok() && page->next == 0 && shard_of(after) + 1 < impl_->count()) {
    page->next = InodeId{static_cast<ShardId>(shard_of(after) + 1)} << kShardShift;
  }
  co_return page;
}

namespace {

void log_settled(ShardId shard, TransactionId id, bool decided) {
  spdlog::info("shard {}: change across shards {:x} {} after a crash", shard, id,
               decided ? "completed" : "rolled back");
}

}  // namespace

awaitable<Status> ShardedNamespace::recover() {
  Status left;  // the first reason something is left for the next run
  auto keep_first = [&left](const Status& status) {
    if (!status.ok() && left.ok()) left = status;
  };
  for (ShardId shard = 0; shard < impl_->count(); ++shard) {
    // A shard not reached now is settled by its home, here or elsewhere, when it is again.
    Result<ShardAccess> access = impl_->at(shard);
    if (!access.ok() || !access->local) continue;
    auto listing = access->participant->pending();
    Result<std::vector<PendingPart>> pending = co_await std::move(listing);
    if (!pending.ok()) {
      keep_first(pending.status());
      continue;
    }
    for (const PendingPart& part : *pending) {
      if (part.coordinator != shard) {
        Result<ShardAccess> coordinator = impl_->at(part.coordinator);
        if (!coordinator.ok()) {
          keep_first(coordinator.status());
          continue;
        }
        auto asking = coordinator->participant->outcome(part.id);
        const Result<Outcome> outcome = co_await std::move(asking);
        if (!outcome.ok()) {
          keep_first(outcome.status());
          continue;
        }
        if (*outcome == Outcome::prepared) continue;  // still driven by its coordinator
        const bool decided = *outcome == Outcome::committed;
        auto settling =
            decided ? access->participant->commit(part.id) : access->participant->abort(part.id);
        const Status settled = co_await std::move(settling);
        keep_first(settled);
        if (settled.ok()) log_settled(shard, part.id, decided);
        continue;
      }
      // A coordinator's part: a decision is carried out everywhere, anything else undone —
      // there first, so that it is never decided afterwards.
      if (!part.decided) {
        auto aborting = access->participant->abort(part.id);
        const Status aborted = co_await std::move(aborting);
        keep_first(aborted);
        if (!aborted.ok()) continue;
      }
      bool settled = true;
      for (ShardId other : part.participants) {
        Result<ShardAccess> participant = impl_->at(other);
        if (!participant.ok()) {
          keep_first(participant.status());
          settled = false;
          continue;
        }
        auto settling = part.decided ? participant->participant->commit(part.id)
                                     : participant->participant->abort(part.id);
        const Status done = co_await std::move(settling);
        keep_first(done);
        settled = settled && done.ok();
      }
      if (!settled) continue;
      if (part.decided) {
        auto finishing = access->participant->finish(part.id);
        keep_first(co_await std::move(finishing));
      }
      log_settled(shard, part.id, part.decided);
    }
  }
  co_return left;
}

}  // namespace tidepool::store
