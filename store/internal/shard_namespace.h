// The namespace operations of one shard as they run on its shard thread, each inside the
// transaction of its batch (store/internal/shard_executor.h): the checks POSIX and NFSv3 ask
// for, the rows they change (through ShardRows), the holds of changes across shards they meet
// (CrossShardHolds), and the file data they truncate or free once durable (FileData).
//
// Every operation takes the batch's database and its AfterCommit first, so that the store
// runs any of them the same way. Owned by the shard thread; page_from_cache() alone runs on any
// thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store/internal/catch_up.h"
#include "store/internal/cross_shard_holds.h"
#include "store/internal/file_data.h"
#include "store/internal/placement_table.h"
#include "store/internal/shard_rows.h"
#include "store/store.h"

namespace tidepool::store::internal {

class ShardNamespace {
 public:
  ShardNamespace(ShardRows& rows, CrossShardHolds& holds, FileData& data,
                 PlacementTable& placements, CatchUp& catch_up, PoolData* pools,
                 const StoreOptions& options);

  using Db = sqlite::Database;

  Result<Wcc> setattr(Db& db, AfterCommit& after, InodeId inode, AttributeChanges changes,
                      Caller caller, std::optional<std::int64_t> guard);
  Result<LookupResult> lookup(Db& db, AfterCommit& after, InodeId directory, std::string name,
                              Caller caller);
  Result<ReadlinkResult> readlink(Db& db, AfterCommit& after, InodeId inode);
  Result<Layout> layout(Db& db, AfterCommit& after, InodeId inode);
  Result<Layout> set_access_pattern(Db& db, AfterCommit& after, InodeId inode, std::string pattern);
  Result<NewObject> create(Db& db, AfterCommit& after, InodeId directory, std::string name,
                           CreateMode mode, AttributeChanges initial, CreateVerifier verifier,
                           Caller caller);
  Result<NewObject> mkdir(Db& db, AfterCommit& after, InodeId directory, std::string name,
                          AttributeChanges initial, Caller caller);
  Result<NewObject> symlink(Db& db, AfterCommit& after, InodeId directory, std::string name,
                            std::string target, AttributeChanges initial, Caller caller);
  Result<NewObject> mknod(Db& db, AfterCommit& after, InodeId directory, std::string name,
                          FileType type, std::uint32_t rdev_major, std::uint32_t rdev_minor,
                          AttributeChanges initial, Caller caller);
  Result<Wcc> remove(Db& db, AfterCommit& after, InodeId directory, std::string name,
                     Caller caller);
  Result<Wcc> rmdir(Db& db, AfterCommit& after, InodeId directory, std::string name, Caller caller);
  Result<RenameResult> rename(Db& db, AfterCommit& after, InodeId from_directory,
                              std::string from_name, InodeId to_directory, std::string to_name,
                              Caller caller);
  Result<LinkResult> link(Db& db, AfterCommit& after, InodeId file, InodeId directory,
                          std::string name, Caller caller);
  Result<DirectoryPage> readdir(Db& db, AfterCommit& after, InodeId directory, std::uint64_t cookie,
                                std::uint64_t verifier, std::uint32_t max_entries,
                                bool with_attributes, Caller caller);
  // The page readdir would return, built from a cached listing and cached attributes; nothing
  // when an attribute it needs is not cached. Any thread.
  std::optional<Result<DirectoryPage>> page_from_cache(const Attributes& dir,
                                                       const Listing& listing, std::uint64_t cookie,
                                                       std::uint64_t verifier,
                                                       std::uint32_t max_entries,
                                                       bool with_attributes) const;
  // How many of the regular files `inodes` had their atime moved (Store::record_reads).
  Result<std::uint32_t> record_reads(Db& db, AfterCommit& after, std::vector<InodeId> inodes);

  // At open, on shard 0: the root directory, if it is not there.
  Status make_root(Db& db);
  // The inode goes, and once that is durable, a regular file's data.
  Status drop_inode(Db& db, const Attributes& victim, AfterCommit& after);

 private:
  // Every change of an entry made here goes through add_entry or remove_entry, which refuse
  // what a change across shards holds; that change's own commit goes around them.
  Status add_entry(Db& db, InodeId directory, std::string_view name, InodeId inode);
  Status remove_entry(Db& db, InodeId directory, std::string_view name);
  Attributes new_attributes(const Attributes& dir, FileType type, const Caller& caller,
                            const AttributeChanges& initial, std::uint32_t default_mode);
  // A new regular file's data is kept with the shard, or in `placed`.
  Result<NewObject> add_object(Db& db, const Attributes& dir, const std::string& name,
                               const Attributes& object, std::string_view symlink_target,
                               const std::optional<CreateVerifier>& verifier,
                               const std::optional<Placement>& placed = std::nullopt);
  Result<NewObject> create_existing(Db& db, const Attributes& dir, InodeId existing,
                                    CreateMode mode, const AttributeChanges& initial,
                                    const CreateVerifier& verifier, const Caller& caller);
  // Removes name -> victim from dir (updating dir in place) and frees the victim when its last
  // link goes; its data file is deleted only after the transaction is durable.
  Status unlink_entry(Db& db, Attributes& dir, const std::string& name, const Attributes& victim,
                      AfterCommit& after);
  // Where the policy that matches a new regular file wants its data: a node pool whose every
  // node is up now (else the file starts with its shard, and the SmartPools job moves it).
  std::optional<Placement> placement_for_new_file(Db& db, InodeId directory,
                                                  const std::string& name,
                                                  const Attributes& object);

  ShardRows& rows_;
  CrossShardHolds& holds_;
  FileData& data_;
  PlacementTable& placements_;
  CatchUp& catch_up_;
  PoolData* const pools_;
  const std::shared_ptr<NewFilePlacement> placement_;
  const std::uint32_t stripe_unit_;
};

// Whether `caller` may change `a` as `changes` asks (SETATTR).
Status check_setattr(const Attributes& a, const AttributeChanges& changes, const Caller& caller);

}  // namespace tidepool::store::internal
