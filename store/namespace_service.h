// How this node takes part in the namespace: the front end its NFS server serves from, the
// channels that ship operations to the shards' homes over backend RPC, and this node's own
// copies of shards — the LocalStore of each shard it is the home of (kept in step with its
// copy on the shard's mirror), and the ShardCopy of each shard it is the mirror of. It also
// keeps the stripe units of files placed in node pools that this node holds (pool_data.h), and
// carries the homes' messages to the other nodes' units. The backend protocol of all of it —
// what each method number carries, who may send it, what answers it — lives here
// (backend_endpoints.cc serves it, internal/backend_links.h sends it).
//
// The front end is a ShardRouter: for a namespace of one shard, to that shard's home; for
// several, to this node's ShardedNamespace (namespace.h), which reaches each shard here or,
// through the namespace at its home, there.
//
// It follows the namespace record of the group view (namespace_record.h): it opens and closes
// each shard's copy as the node's role in it changes, and on the group leader it makes the
// record's next change (naming mirrors, promoting them when a home dies, spreading the
// shards).
//
// The front end and the channels may be used from any thread; everything else runs on the
// backend strand.
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cluster/group.h"
#include "cluster/group_client.h"
#include "cluster/rpc.h"
#include "common/thread_name.h"
#include "store/namespace.h"
#include "store/namespace_record.h"
#include "store/pool_data.h"
#include "store/shard_mirror.h"
#include "store/shard_router.h"
#include "store/store.h"
#include "store/unit_client.h"

namespace tidepool::store {

namespace internal {
class Resends;
}

// What this node's membership of a cluster offers the namespace. Called on the strand.
class ClusterAccess {
 public:
  virtual ~ClusterAccess() = default;
  // Whether this node belongs to a cluster: a member serves only what the view says.
  virtual bool is_member() const = 0;
  // Null while the node runs no group.
  virtual cluster::RpcEndpoint* rpc() = 0;
  virtual cluster::GroupMember* group() = 0;
  virtual cluster::GroupClient* client() = 0;
};

class NamespaceService {
 public:
  // The nodes of each node pool that file data is placed on, as a view has them.
  using PoolsOf =
      std::function<std::map<std::string, std::vector<cluster::NodeId>>(const cluster::GroupView&)>;
  // The nodes leaving the cluster (being SmartFailed), as a view has them: the leader moves
  // every shard's home and mirror off them.
  using LeavingOf = std::function<std::set<cluster::NodeId>(const cluster::GroupView&)>;

  // Shipped operations run on `store_executor` (the NFS threads), never on the backend strand.
  // `options.placement` places new files (followed by its owner). `shards`: how many shards a
  // namespace this node makes has (store.shards); one it joins says its own. `locks`: the
  // cluster's locks on directories, which renames across shards hold.
  NamespaceService(boost::asio::any_io_executor strand, boost::asio::any_io_executor store_executor,
                   StoreOptions options, cluster::NodeId self, std::uint32_t shards,
                   std::shared_ptr<NamespaceLocks> locks, PoolsOf pools_of, LeavingOf leaving_of);
  ~NamespaceService();

  // Opens this node's copy as the store it serves from, as a node outside any cluster does
  // (a member serves it only once the view makes it the home), with as many shards as its data
  // directory was made with (or `shards`, for a new one). Fails with the reason the store
  // cannot open. Call once, before the strand runs.
  Status open_local();
  Store& store() { return router_; }
  // How this node reads and writes the units of placed files at their owners directly.
  std::shared_ptr<UnitClient> unit_client() const { return unit_client_; }
  // Whether `inode`'s data is this node's to serve from its own disks now: it serves the
  // inode's shard, which keeps the file's data with it. A file placed in a node pool is read and
  // written at its units' owners, by its home as by any other node.
  bool data_is_local(InodeId inode) const;
  void set_atime_policy(bool enabled, std::chrono::seconds grace_period);
  // What the checks of this node's copies of file data found since the daemon started.
  const IntegrityCounters& integrity() const { return *options_.integrity; }
  // How this node's copies of the namespace answered reads from their own caches (its L2).
  const ReadCounters& reads() const { return options_.l2->reads(); }
  // What the node's L2 holds, of its shard's data and of the units it holds for node pools.
  L2Usage l2_usage() const { return options_.l2->usage(); }
  // On the strand: empties the L2 of the units this node holds, and the caches of the store
  // this node serves from, if it holds one; `done` runs on the store's executor.
  void drop_caches(std::function<void(Status)> done);

  // Null detaches: calls then fail as unavailable. A node that is a member serves nothing
  // until it has followed a view.
  void attach(ClusterAccess* cluster);
  // Follows the view's namespace record (null: the view has none yet).
  void follow(const std::optional<NamespaceRecord>& record, const cluster::GroupView& view);
  // Answers the backend protocol's methods on `rpc` (backend_endpoints.cc).
  void serve(cluster::RpcEndpoint& rpc);
  // On the strand, first of a node's stop: closes the stores this node homes while the
  // backend still runs, so that their last flush reaches their mirrors, then runs `done` on
  // the strand. Closing blocks on those deliveries, which need the strand: it runs on the
  // blocking pool. Calls to a closed store fail as unavailable.
  void close_stores(std::function<void()> done);
  // Stops serving and closes this node's copy; blocks until it is closed. After the strand
  // stopped.
  void close();

 private:
  class Channel;
  class MirrorLink;
  class UnitPeers;
  class Routes;
  struct Shard;
  enum class Role { none, home, mirror };

  cluster::RpcEndpoint* rpc() const;
  // On the strand: how many times this node was fenced (cluster/lease.h); 0 outside a group.
  std::uint64_t fences() const;
  // `reply`, for a call served only while this node holds its lease (cluster/lease.h): a node
  // whose lease lapsed may have been replaced as a shard's home or left behind as an owner, so
  // what it would answer may be old; "unavailable" instead, which the caller retries. Nothing
  // when the lease is not held now: `reply` was answered so. For a call that `reads`, the
  // answer is replaced too unless the lease held until it was ready; one that changes
  // something is answered as it went (retried, it could fail for having been done).
  std::optional<cluster::RpcEndpoint::Reply> while_leased(cluster::RpcEndpoint::Reply reply,
                                                          bool reads) const;
  // `message` to `node` as RPC `method`, through the backend strand; sent again after a pause
  // while the node answers `behind` (this node's view lags the callee's), a bounded number of
  // times, unless this node was fenced meanwhile (internal::Resends).
  boost::asio::awaitable<Result<xdr::Buffer>> call_peer(cluster::NodeId node, std::uint32_t method,
                                                        std::shared_ptr<const xdr::Buffer> message,
                                                        std::chrono::milliseconds deadline);
  Role role(ShardId shard) const;  // this node's, by the last record followed
  // Lowers the node's low-water mark of shard copies to the fewest any shard has by `record`.
  void note_shard_copies(const NamespaceRecord& record, const cluster::GroupView& view);
  // Lowers its mark of unit copies by the shards it homes, when the nodes up or those shards
  // changed since the last time.
  void note_unit_copies(const cluster::GroupView& view);
  // Makes room for `count` shards, releasing the copies of a namespace of another count.
  void reshape(ShardId count);
  void lead(const NamespaceRecord& record, const cluster::GroupView& view);
  void take_role(ShardId shard, Role role, const NamespaceRecord& record);
  void keep_mirror_in_step(ShardId shard, const NamespaceRecord& record);
  // Points the front end at each shard's home as `record` and `view` have it (null: nowhere).
  void route(const NamespaceRecord* record, const cluster::GroupView* view);
  void hand_over(const NamespaceRecord& record, const cluster::GroupView& view);
  void propose(const NamespaceRecord& next, const std::string& why);
  // Follows the current view again: after something this node waited for ended.
  void follow_again_after(std::chrono::milliseconds delay);
  // Settles, in the background, the changes across shards that the shards served here hold:
  // after a shard opens here and when a shard's home changes; again, later, until it succeeds.
  void settle();
  // Releases a shard's store or copy; the other opens only once the first is gone.
  void release_store(ShardId shard);
  void release_copy(ShardId shard);
  void open_when_released(ShardId shard, Role role);
  Result<std::shared_ptr<LocalStore>> open_store(ShardId shard) const;
  // What serves the calls shipped to this node as a shard's home: the one shard, or the
  // namespace over them all.
  std::shared_ptr<Store> served() const;
  // Blocking, from the store's threads: sends one mirror message (shared: the strand may still
  // send it after the caller gave up waiting); asks the cluster to stop counting on `mirror` as
  // `shard`'s mirror.
  Result<xdr::Buffer> send_to_mirror(cluster::NodeId mirror, MirrorMethod method,
                                     std::shared_ptr<const xdr::Buffer> message,
                                     std::shared_ptr<internal::Resends> resends);
  Status drop_mirror(ShardId shard, cluster::NodeId mirror);
  Status try_drop_mirror(ShardId shard, cluster::NodeId mirror);

  boost::asio::any_io_executor strand_;
  boost::asio::any_io_executor store_executor_;
  // The stripe units this node holds, and how this node's store reaches every node's.
  const std::unique_ptr<UnitStore> units_;
  const std::shared_ptr<UnitPeers> peers_;
  const std::shared_ptr<UnitClient> unit_client_;
  const StoreOptions options_;  // with peers_
  const cluster::NodeId self_;
  const std::uint32_t configured_shards_;
  const std::shared_ptr<NamespaceLocks> locks_;
  const PoolsOf pools_of_;
  const LeavingOf leaving_of_;
  ClusterAccess* cluster_ = nullptr;  // on the strand
  ShardRouter router_;
  // Where each shard is reached from this node: set on the strand, read from any thread.
  const std::shared_ptr<Routes> routes_;

  // On the strand.
  std::optional<NamespaceRecord> record_;  // the last record followed
  std::vector<Shard> shards_;
  std::shared_ptr<ShardedNamespace> namespace_;  // null for one shard
  boost::asio::steady_timer retry_timer_;
  // Whether every shard of the namespace was seen with two whole copies since the start: the
  // shard copies' low-water mark counts from then.
  bool every_shard_protected_ = false;
  std::set<cluster::NodeId> noted_up_;  // as note_unit_copies() last saw them
  std::set<ShardId> noted_homes_;
  bool proposing_ = false;
  bool settling_ = false;
  bool settle_again_ = false;
  std::chrono::milliseconds settle_backoff_{0};
  boost::asio::steady_timer settle_timer_;
  bool atime_enabled_;
  std::chrono::seconds atime_grace_period_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);

  // Runs the blocking work off the strand: opening, closing and applying to copies, and serving
  // unit messages from this node's own stripe units.
  NamedThreadPool blocking_{"ship-blocking", 4};
};

}  // namespace tidepool::store
