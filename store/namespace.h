// The namespace over many shards, as one Store: every operation goes to the shard of the inode
// it names, and the operations whose entries and inodes lie on different shards are changes
// across shards (store/cross_shard.h), coordinated here.
//
// Where things live: a new file, symlink or device goes on its parent directory's shard, so
// create, lookup and remove touch one shard; a new directory goes on a shard chosen by hashing
// its parent and name, so the tree spreads. A directory's entries live on its shard; an entry
// may name an inode of another shard (a subdirectory, or a file renamed or linked there), and
// keeps naming it: inode numbers, and so file handles, never change.
//
// Changes across shards: mkdir on another shard, rmdir, and remove, link or rename whose
// entries and inodes are not all on one shard. A rename across shards first takes the
// namespace's locks on both directories — shared for a file, so that renames between the same
// directories go together; exclusive, with the lock on such moves, when a directory changes
// parent, as a kernel's rename lock: two of them cannot make a cycle — then prepares every
// shard's part, then commits: the coordinator — the source directory's shard — first. A crash
// between the phases leaves prepared parts that recover() settles: the file ends up under
// exactly one of its names.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/status.h"
#include "store/cross_shard.h"
#include "store/forwarding_store.h"
#include "store/store.h"

namespace tidepool::store {

// One shard as the namespace reaches it now: its store, and its part in changes across shards.
// A shard this process is not the home of (`local` false) is reached through the namespace as
// its home serves it, not through the shard alone: every operation on its inodes, and every
// change across shards it coordinates, runs there whole, so that the home of the coordinating
// shard drives the change and its recovery settles it (store/cross_shard.h).
struct ShardAccess {
  std::shared_ptr<Store> store;
  std::shared_ptr<ShardParticipant> participant;
  bool local = true;
};

// Locks on directories held across the phases of a rename between shards. Renames of files
// hold their directories shared: the shards' own holds keep two of them from changing one
// entry, and one that meets another's is run again holding them exclusive. A directory that
// changes parent holds them exclusive.
enum class LockMode : std::uint8_t { shared, exclusive };
class NamespaceLocks {
 public:
  virtual ~NamespaceLocks() = default;
  // Held until the returned object goes. Waits while any of `keys` is held in a mode that
  // excludes `mode`, or is waited for by an earlier lock(): waiters are served in turn, so a
  // stream of shared holders never keeps an exclusive one waiting for ever.
  virtual awaitable<Result<std::shared_ptr<void>>> lock(std::vector<InodeId> keys,
                                                        LockMode mode) = 0;
};
// The locks of a namespace whose operations all run in this process.
std::shared_ptr<NamespaceLocks> make_process_locks();
// The key held while a directory moves to another parent.
inline constexpr InodeId kDirectoryMovesKey = 0;

class ShardedNamespace final : public ForwardingStore {
 public:
  // `shard_count` shards, 0 to shard_count - 1; `shard(id)` fails (unavailable) while a shard
  // cannot be reached.
  using ShardOf = std::function<Result<ShardAccess>(ShardId)>;
  // `clock` stamps the directories made on a shard other than their parent's.
  ShardedNamespace(ShardId shard_count, ShardOf shard, std::shared_ptr<NamespaceLocks> locks,
                   Clock& clock = real_clock());

  // Settles what crashes left of changes across shards on the shards this process is the home
  // of: a coordinator's prepared part is aborted on every shard, a decision is committed on
  // every shard, another part is settled as its coordinator says. Run when shards come back,
  // or change home. A shard not reached now is left alone (its home settles it once it is
  // served); a part whose other shards cannot be reached is left for the next run
  // (unavailable).
  awaitable<Status> recover();
  // The shard a new directory named `name` in `parent` goes on.
  ShardId shard_for_directory(InodeId parent, std::string_view name) const;

  // Operations addressed to one inode go to its shard (ForwardingStore); those below change
  // behaviour: they span shards, or answer for the whole namespace.
  std::uint64_t write_verifier() const override;
  void close() override;
  void set_atime_policy(bool enabled, std::chrono::seconds grace_period) override;
  awaitable<Result<LookupResult>> lookup(InodeId directory, std::string name,
                                         Caller caller) override;
  // Its verifier is the namespace's (write_verifier(): every shard's, folded), not its shard's.
  awaitable<Result<WriteResult>> write(InodeId inode, std::uint64_t offset,
                                       std::span<const std::uint8_t> data, Stability stability,
                                       Caller caller) override;
  awaitable<Result<WriteResult>> record_write(InodeId inode, std::uint64_t offset,
                                              std::uint32_t count, Stability stability,
                                              Caller caller, Layout written_under) override;
  awaitable<Result<NewObject>> create(InodeId directory, std::string name, CreateMode mode,
                                      AttributeChanges initial, CreateVerifier verifier,
                                      Caller caller) override;
  awaitable<Result<NewObject>> mkdir(InodeId directory, std::string name, AttributeChanges initial,
                                     Caller caller) override;
  awaitable<Result<Wcc>> remove(InodeId directory, std::string name, Caller caller) override;
  awaitable<Result<Wcc>> rmdir(InodeId directory, std::string name, Caller caller) override;
  awaitable<Result<RenameResult>> rename(InodeId from_directory, std::string from_name,
                                         InodeId to_directory, std::string to_name,
                                         Caller caller) override;
  awaitable<Result<LinkResult>> link(InodeId file, InodeId directory, std::string name,
                                     Caller caller) override;
  awaitable<Result<DirectoryPage>> readdir(InodeId directory, std::uint64_t cookie,
                                           std::uint64_t cookie_verifier, std::uint32_t max_entries,
                                           bool with_attributes, Caller caller) override;
  awaitable<Result<std::uint32_t>> record_reads(std::vector<InodeId> inodes) override;
  awaitable<Result<CandidatePage>> find_files(std::string where, std::vector<std::int64_t> values,
                                              InodeId after, std::uint32_t limit) override;

  class Impl;  // namespace.cc's

 protected:
  Result<std::shared_ptr<Store>> next(InodeId addressed) const override;

 private:
  // The attributes of `directory`, where `caller` may add the new entry `name`.
  awaitable<Result<Attributes>> new_entry_in(InodeId directory, std::string name, Caller caller);

  std::shared_ptr<Impl> impl_;
};

}  // namespace tidepool::store
