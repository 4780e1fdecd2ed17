#include "store/shard_router.h"

namespace tidepool::store {

ShardRouter::ShardRouter(cluster::NodeId self, ChannelTo channel_to)
    : self_(self), channel_to_(std::move(channel_to)) {}

void ShardRouter::set_home(cluster::NodeId home, std::shared_ptr<Store> local) {
  if (home == self_) {
    local_.store(local);
    target_.store(std::move(local));
    home_.store(home);
    return;
  }
  local_.store(nullptr);
  if (home_.exchange(home) == home && home != 0) return;
  target_.store(home == 0 ? nullptr : std::shared_ptr<Store>(make_remote_store(channel_to_(home))));
}

Result<std::shared_ptr<Store>> ShardRouter::next(InodeId) const {
  std::shared_ptr<Store> to = target_.load();
  if (!to) return error(Errc::unavailable, "the namespace's home node is down");
  return to;
}

void ShardRouter::close() { target_.store(nullptr); }

void ShardRouter::set_atime_policy(bool enabled, std::chrono::seconds grace_period) {
  if (std::shared_ptr<Store> local = local_.load()) local->set_atime_policy(enabled, grace_period);
}

}  // namespace tidepool::store
