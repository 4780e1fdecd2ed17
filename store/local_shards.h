// The shards of the namespace a node holds as their home: one LocalStore per shard, each in its
// own directory, served as one namespace (store/namespace.h) — or, for a namespace of one
// shard, as that shard's store itself.
//
// For now every shard of the namespace has the same home and the same mirror; the namespace
// record of the group view (daemon/config_objects.h) names them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "store/namespace.h"
#include "store/shard_mirror.h"
#include "store/store.h"

namespace tidepool::store {

// Where shard `shard` of a node's namespace lives under its data directory: shard 0 in the
// directory itself (where a namespace of one shard always was), shard k in "shard-k" (hex).
std::string shard_directory(const std::string& data_dir, ShardId shard);

class LocalShards {
 public:
  // Opens (or creates) the `count` shards under options.data_dir; a rename across shards holds
  // `locks` on its directories.
  static Result<std::shared_ptr<LocalShards>> open(const StoreOptions& options, ShardId count,
                                                   std::shared_ptr<NamespaceLocks> locks);
  ~LocalShards();

  // What the node serves: the namespace over the shards.
  const std::shared_ptr<Store>& served() const { return served_; }
  ShardId count() const { return static_cast<ShardId>(stores_.size()); }

  // Keeps each shard's mirror in step from now on (LocalStore::mirror_to), `target(shard)` for
  // shard after shard; a null target stops mirroring. Fails when a shard's whole copy did not
  // complete.
  using MirrorTargetOf = std::function<std::shared_ptr<MirrorTarget>(ShardId)>;
  awaitable<Status> mirror_to(MirrorTargetOf target);
  awaitable<Status> drop_caches();
  // Settles the changes across shards a crash left (ShardedNamespace::recover).
  awaitable<Status> recover();
  void set_atime_policy(bool enabled, std::chrono::seconds grace_period);
  void close();

 private:
  LocalShards() = default;

  std::vector<std::shared_ptr<LocalStore>> stores_;
  std::shared_ptr<ShardedNamespace> namespace_;  // null for one shard
  std::shared_ptr<Store> served_;
};

}  // namespace tidepool::store
