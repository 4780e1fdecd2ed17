// How this node's NFS front end reaches the namespace: the shard router it serves from, the
// channels that ship operations to the namespace's home over backend RPC, and the handlers
// that run operations other nodes shipped here on the local store.
//
// The router and the channels may be used from any thread; follow(), serve() and attach() run
// on the backend strand.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <memory>
#include <optional>

#include "cluster/group.h"
#include "cluster/rpc.h"
#include "daemon/config_objects.h"
#include "store/shard_router.h"
#include "store/store.h"

namespace tidepool::daemon {

class Membership;

class NamespaceShipping {
 public:
  // Shipped operations run on `store_executor` (the NFS threads), never on the backend strand.
  NamespaceShipping(boost::asio::any_io_executor strand,
                    boost::asio::any_io_executor store_executor, store::Store& local,
                    cluster::NodeId self);

  store::Store& store() { return router_; }

  // Null detaches: calls then fail as unavailable.
  void attach(Membership* membership) { membership_ = membership; }
  // Follows the view's namespace record (null: the view has none yet): where the home is, and
  // whether it is up.
  void follow(const std::optional<NamespaceRecord>& record, const cluster::GroupView& view);
  void serve(cluster::RpcEndpoint& rpc);

 private:
  class Channel;
  cluster::RpcEndpoint* rpc() const;

  boost::asio::any_io_executor strand_;
  boost::asio::any_io_executor store_executor_;
  store::Store& local_;
  const cluster::NodeId self_;
  Membership* membership_ = nullptr;  // on the strand
  store::ShardRouter router_;
};

}  // namespace tidepool::daemon
