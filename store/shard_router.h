// The namespace as the NFS front end of one node sees it: every operation runs on the home of
// the shard — on this node's own store when it is the home, shipped to the home otherwise, and
// refused as unavailable (NFS3ERR_JUKEBOX: retry later) while the home is unknown or down.
//
// A namespace of one shard is routed so as a whole; one of several is routed to the node's
// ShardedNamespace (store/namespace.h), which reaches each shard at its own home.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "cluster/types.h"
#include "store/forwarding_store.h"
#include "store/remote_store.h"

namespace tidepool::store {

class ShardRouter final : public ForwardingStore {
 public:
  using ChannelTo = std::function<std::shared_ptr<ShardChannel>(cluster::NodeId home)>;

  // Until set_home(), there is no home: every operation is unavailable.
  ShardRouter(cluster::NodeId self, ChannelTo channel_to);

  // Where the shard's home is now: 0 when there is none to reach; this node with the store it
  // serves from (none yet: unavailable); or another node, reached through its channel.
  // Callable from any thread; operations already under way finish where they started.
  void set_home(cluster::NodeId home, std::shared_ptr<Store> local = nullptr);
  cluster::NodeId home() const { return home_.load(); }

  // Stops routing: every later operation is unavailable.
  void close() override;
  // The sysctls go to this node's own store only: a remote home runs under its own.
  void set_atime_policy(bool enabled, std::chrono::seconds grace_period) override;

 protected:
  Result<std::shared_ptr<Store>> next(InodeId addressed) const override;

 private:
  const cluster::NodeId self_;
  const ChannelTo channel_to_;
  std::atomic<cluster::NodeId> home_ = 0;
  std::atomic<std::shared_ptr<Store>> target_;
  std::atomic<std::shared_ptr<Store>> local_;  // set while this node is the home
};

}  // namespace tidepool::store
