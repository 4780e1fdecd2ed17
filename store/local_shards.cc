#include "store/local_shards.h"

#include <cstdio>

#include "store/cross_shard.h"

namespace tidepool::store {

std::string shard_directory(const std::string& data_dir, ShardId shard) {
  if (shard == 0) return data_dir;
  char name[16];
  std::snprintf(name, sizeof name, "/shard-%04x", static_cast<unsigned>(shard));
  return data_dir + name;
}

Result<std::shared_ptr<LocalShards>> LocalShards::open(const StoreOptions& options, ShardId count,
                                                       std::shared_ptr<NamespaceLocks> locks) {
  if (count == 0 || count > kMaxShards) {
    return error(Errc::invalid_argument, "a namespace has 1 to 256 shards");
  }
  std::shared_ptr<LocalShards> shards(new LocalShards());
  for (ShardId shard = 0; shard < count; ++shard) {
    StoreOptions shard_options = options;
    shard_options.data_dir = shard_directory(options.data_dir, shard);
    shard_options.shard = shard;
    TP_ASSIGN_OR_RETURN(auto store, Store::open(shard_options));
    shards->stores_.push_back(std::move(store));
  }
  if (count == 1) {
    shards->served_ = shards->stores_.front();
    return shards;
  }
  // The namespace holds the stores weakly: it is served only while the shards are open.
  std::weak_ptr<LocalShards> held = shards;
  shards->namespace_ = std::make_shared<ShardedNamespace>(
      count,
      [held](ShardId shard) -> Result<ShardAccess> {
        std::shared_ptr<LocalShards> open = held.lock();
        if (!open || shard >= open->stores_.size()) {
          return error(Errc::unavailable, "the namespace's shards are closed");
        }
        const std::shared_ptr<LocalStore>& store = open->stores_[shard];
        return ShardAccess{store, std::shared_ptr<ShardParticipant>(store, &store->participant())};
      },
      std::move(locks));
  shards->served_ = shards->namespace_;
  return shards;
}

LocalShards::~LocalShards() { close(); }

awaitable<Status> LocalShards::mirror_to(MirrorTargetOf target) {
  for (ShardId shard = 0; shard < count(); ++shard) {
    auto mirroring = stores_[shard]->mirror_to(target(shard));
    TP_CO_RETURN_IF_ERROR(co_await std::move(mirroring));
  }
  co_return Status{};
}

awaitable<Status> LocalShards::drop_caches() {
  for (const auto& store : stores_) {
    auto dropping = store->drop_caches();
    TP_CO_RETURN_IF_ERROR(co_await std::move(dropping));
  }
  co_return Status{};
}

awaitable<Status> LocalShards::recover() {
  if (!namespace_) co_return Status{};
  auto recovering = namespace_->recover();
  co_return co_await std::move(recovering);
}

void LocalShards::set_atime_policy(bool enabled, std::chrono::seconds grace_period) {
  for (const auto& store : stores_) store->set_atime_policy(enabled, grace_period);
}

void LocalShards::close() {
  for (const auto& store : stores_) store->close();
}

}  // namespace tidepool::store
