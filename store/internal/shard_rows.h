// The rows of one shard's database as its operations read and change them, and what the shard
// keeps beside them in memory: sizes and times UNSTABLE writes changed and reads' atimes, not
// in the database yet (flushed about once a second); the caches other threads answer from
// (attributes, names, listings), which learn a batch's changes only once it committed; and the
// ranges of inode numbers and cookies claimed durably ahead of use.
//
// Thread safety: the cached_*() lookups, the atime policy and now_ns() may be called from any
// thread; everything else runs on the shard thread (store/internal/shard_executor.h), which
// owns the rest of the state, so it needs no lock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/sqlite.h"
#include "store/internal/attribute_cache.h"
#include "store/internal/shard_executor.h"
#include "store/store.h"

namespace tidepool::store::internal {

// A layout's nodes as its row keeps them: decimal ids joined by commas.
std::string nodes_text(const std::vector<std::uint64_t>& nodes);
std::vector<std::uint64_t> nodes_from_text(std::string_view text);

// A row of the inodes table, selected as load() selects it (ino first, birth 14th).
Attributes attributes_from_row(const sqlite::Statement& row);
inline Wcc wcc_of(const Attributes& before, const Attributes& after) {
  return {pre_of(before), after};
}

class ShardRows {
 public:
  ShardRows(ShardId shard, const Clock& clock, bool atime_enabled,
            std::chrono::seconds atime_grace_period);

  ShardId shard() const { return shard_; }
  bool is_foreign(InodeId inode) const { return shard_of(inode) != shard_; }
  // What an operation meeting an inode of another shard answers.
  static Status elsewhere(InodeId inode);
  std::int64_t now_ns() const;

  // Any thread.
  std::optional<Attributes> cached(InodeId inode) const { return attributes_.find(inode); }
  std::optional<InodeId> cached_entry(InodeId directory, const std::string& name) const {
    return names_.find({directory, name});
  }
  std::optional<std::shared_ptr<const Listing>> cached_listing(InodeId directory) const {
    return listings_.find(directory);
  }
  void set_atime_policy(bool enabled, std::chrono::seconds grace_period);
  // A read moves atime only when it is older than the grace period, so reads do not become
  // metadata writes.
  bool atime_due(const Attributes& a) const;

  // On the shard thread from here on.
  // At open, before the thread starts: the counters meta holds, and the first claims of
  // numbers ahead, durable with the transaction the caller commits. The boot count.
  Result<std::uint64_t> open_counters(Database& db);
  // Empties the caches (tide flush --l2).
  void clear_caches();

  // stale when the inode does not exist. With what memory holds and the database not yet.
  Result<Attributes> load(Database& db, InodeId inode);
  Result<Attributes> load_and_remember(Database& db, InodeId inode);
  // not_a_directory for any other type.
  Result<Attributes> load_directory(Database& db, InodeId inode);
  // Persists a's size, times, mode, owner and links, and what memory held of them.
  Status save(Database& db, const Attributes& a);
  // Applies what UNSTABLE writes and reads changed but the database does not hold yet.
  void overlay_memory_state(Attributes& a) const;
  // A directory's `parent` is kept (its ".."); other objects' is not.
  Status insert_inode(Database& db, const Attributes& object, std::string_view symlink_target,
                      const std::optional<CreateVerifier>& verifier, InodeId parent);
  Status set_parent(Database& db, InodeId directory, InodeId parent);
  // A regular file's layouts row; invalid_argument for any other type.
  Result<Layout> load_layout(Database& db, InodeId inode);

  std::optional<InodeId> find_entry(Database& db, InodeId directory, std::string_view name);
  bool has_entries(Database& db, InodeId directory);
  // The entry naming `inode`: its directory and name (its first, by cookie, when it has
  // several).
  struct Entry {
    InodeId directory = 0;
    std::string name;
  };
  Result<Entry> entry_of(Database& db, InodeId inode);
  // The path of a directory, "/ifs/...".
  Result<std::string> path_of(Database& db, InodeId directory);
  // The path of a file; `directories` keeps the paths of the directories worked out so far.
  Result<std::string> path_of_file(Database& db, InodeId file,
                                   std::unordered_map<InodeId, std::string>& directories);
  // May be another shard's.
  Result<InodeId> parent_of(Database& db, InodeId directory);
  // The rows alone, with the caches told; no check of what changes across shards hold.
  Status insert_entry(Database& db, InodeId directory, std::string_view name, InodeId inode);
  Status delete_entry(Database& db, InodeId directory, std::string_view name);

  // In every changing operation that takes an inode number or a cookie (at most one of each),
  // before it takes them. Unavailable (retry later) in the unlikely case that the claimed range
  // ran out before its claim was durable.
  Status reserve_numbers(Database& db, AfterCommit& after);
  // Claims cookies ahead, as reserve_numbers does, for entries a commit adds.
  Status claim_cookies(Database& db, AfterCommit& after);
  // A new inode's number and generation, after reserve_numbers.
  InodeId take_inode_number() { return next_inode_++; }
  std::uint32_t new_generation() { return static_cast<std::uint32_t>(random_()); }
  // The next inode number not handed out yet.
  InodeId next_inode() const { return next_inode_; }
  std::uint64_t random() { return random_(); }

  // What an UNSTABLE write changed, kept in memory until a flush or a durable change saves it.
  void keep_unstable(const Attributes& after);
  bool has_unstable(InodeId inode) const { return dirty_.contains(inode); }
  // A regular file read: its atime moves in memory when due.
  void note_access(const Attributes& a);
  // The inode is gone: what memory held of it goes too.
  void forget_memory_state(InodeId inode);
  // Persists what UNSTABLE writes and reads left in memory, in a transaction of its own;
  // bounded staleness, not durability. Whether there was anything, and whether it committed.
  struct Flush {
    bool any = false;
    bool committed = false;
  };
  Flush flush_memory_state(Database& db);

  // What the batch under way read and changed, for the caches once it committed.
  void remember(const Attributes& a) { attribute_changes_.emplace_back(a.inode, a); }
  void forget(InodeId inode) { attribute_changes_.emplace_back(inode, std::nullopt); }
  void remember_entry(InodeId directory, std::string_view name, InodeId inode);
  void forget_entry(InodeId directory, std::string_view name);
  void remember_listing(InodeId directory, std::shared_ptr<const Listing> listing);
  void forget_listing(InodeId directory) { listing_changes_.emplace_back(directory, nullptr); }
  // After each batch: the caches learn what it read and changed, or, when it did not commit,
  // start over.
  void batch_done(bool committed);

 private:
  enum class Counter { inode, cookie };
  static Status raise_counter(Database& db, Counter counter, std::uint64_t value);
  Status claim_ahead(Database& db, AfterCommit& after, Counter counter, std::uint64_t next,
                     std::atomic<std::uint64_t>& limit);

  // Size and times an UNSTABLE write changed that are not in the database yet.
  struct DirtyAttributes {
    std::uint64_t size;
    std::int64_t mtime_ns;
    std::int64_t ctime_ns;
  };

  const ShardId shard_;
  const Clock& clock_;
  std::atomic<bool> atime_enabled_;
  std::atomic<std::int64_t> atime_grace_ns_;

  AttributeCache attributes_;
  NameCache names_;
  ListingCache listings_;

  // The shard thread's.
  std::mt19937_64 random_;
  InodeId next_inode_ = kRootInode + 1;
  std::uint64_t next_cookie_ = 1;
  // Below these, numbers are claimed durably in meta (reserve_numbers); raised on the sync
  // thread.
  std::atomic<std::uint64_t> inode_limit_ = 0;
  std::atomic<std::uint64_t> cookie_limit_ = 0;
  std::unordered_map<InodeId, DirtyAttributes> dirty_;
  std::unordered_map<InodeId, std::int64_t> pending_atimes_;
  // Changes for the caches, applied once the batch that made them committed (empty: drop).
  std::vector<std::pair<InodeId, std::optional<Attributes>>> attribute_changes_;
  std::vector<std::pair<EntryName, std::optional<InodeId>>> name_changes_;
  std::vector<std::pair<InodeId, std::shared_ptr<const Listing>>> listing_changes_;
};

}  // namespace tidepool::store::internal
