// This node's place in a cluster: its identity on disk (cluster name and id, the CA and the
// node's certificate), the backend transport, its member of the group view, backend RPC, and
// the ways a node becomes a member: creating a cluster or being joined to one.
//
// Not thread-safe: a Membership and everything it owns live on one strand, where it is also
// destroyed.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "cluster/group.h"
#include "cluster/group_client.h"
#include "cluster/tcp_transport.h"
#include "cluster/tls.h"
#include "common/config.h"
#include "common/status.h"
#include "daemon/lock_reports.h"
#include "lockmgr/advisory_locks.h"
#include "lockmgr/lock_manager.h"
#include "store/namespace_service.h"

namespace tidepool::daemon {

struct ClusterIdentity {
  std::string name;
  std::string id;  // random, made at creation: tells two clusters of the same name apart
};

// What one node reports for `tide status`.
struct NodeStats {
  std::uint64_t in_bytes_per_second = 0;
  std::uint64_t out_bytes_per_second = 0;
  std::uint64_t used_bytes = 0;
  std::uint64_t size_bytes = 0;
};

struct CreatedCluster {
  ClusterIdentity identity;
  std::string token;  // the admin API's bearer token; nodes keep only its hash
  std::string ca_certificate;
};

// What a member sends a node it adds.
struct JoinPackage {
  ClusterIdentity identity;
  std::string ca_certificate;
  std::string certificate;  // for this node's own key, signed by the cluster CA
};

// A new admin token, and the cluster identity object's body `identity_body` with it in place of
// `current_token`, the CA's key sealed under it instead: the old token stops working on each
// node as the node applies the change.
struct RotatedToken {
  std::string token;
  std::string identity_body;
};
Result<RotatedToken> rotate_token(std::string_view identity_body, std::string_view current_token);

class Membership final : public store::ClusterAccess {
 public:
  struct Hooks {
    // After changes were applied (coalesced: once for a burst), with the current view.
    std::function<void(const cluster::GroupView&)> view_changed;
    std::function<NodeStats()> local_stats;
    // When backend RPC starts (the node became a member), to add the node's services to it.
    std::function<void(cluster::RpcEndpoint&)> serve_rpc;
    // When the lock manager starts (the node became a member) and, with null, when it stops.
    std::function<void(std::shared_ptr<lockmgr::AdvisoryLocks>)> advisory_locks;
    // NLM locks held through this node were lost (it was fenced); on the strand.
    std::function<void()> nlm_locks_lost;
    // This node's lease when it becomes a member, and null when it stops being one.
    std::function<void(std::shared_ptr<const cluster::Lease>)> lease;
    // The same for the file system's own locks: with the lock manager and the loop it runs on
    // (the strand) when it starts, and with nulls before it stops.
    std::function<void(cluster::EventLoop*, lockmgr::LockManager*)> lock_manager;
    // The NLM clients of this node; `done` may run on any thread.
    std::function<void(std::function<void(std::vector<nfsd::NlmSession>)> done)> nlm_sessions;
    // This node's cache statistics report (daemon/cache_reports.h).
    std::function<nlohmann::json()> cache_statistics;
    // This node's activity and NFS clients reports (daemon/activity.h); on the strand.
    std::function<nlohmann::json()> system_statistics;
    std::function<nlohmann::json()> client_statistics;
    // Empties this node's L1, and its L2 (the caches of its copy of the namespace); on the
    // strand; `done` may run on any thread.
    std::function<void(bool l1, bool l2, std::function<void(Status)> done)> flush_cache;
    // A member refused this node because the cluster removed it (`why`, in words): the node
    // stops serving. On the strand, once, before the backend transport stops.
    std::function<void(const std::string& why)> removed;
  };

  // Makes the node's key at its first start. A data directory that belongs to another node id
  // or to another cluster than config.cluster_name is refused, as is a backend address in use,
  // and one whose node the cluster removed.
  static Result<std::unique_ptr<Membership>> open(boost::asio::any_io_executor strand,
                                                  const NodeConfig& config, Hooks hooks);
  ~Membership();
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  const NodeConfig& config() const { return config_; }
  cluster::NodeInfo self() const;
  const std::optional<ClusterIdentity>& identity() const { return identity_; }
  // What the admin API presents: the CA-signed certificate once a member, else self-signed.
  cluster::PemPair admin_certificate() const;
  // The self-signed certificate: its public key is what a cluster certifies when it adds us.
  const std::string& self_signed_certificate() const { return self_signed_.certificate; }

  bool is_member() const override { return identity_.has_value(); }
  // Why this node serves nothing any more, once a member told it the cluster removed it. The
  // node keeps its identity and its group member, but its backend transport is stopped.
  const std::optional<std::string>& removed() const { return removed_; }
  // Null until the node is a member.
  cluster::GroupMember* group() override { return group_.get(); }
  cluster::GroupClient* client() override { return client_.get(); }
  cluster::RpcEndpoint* rpc() override { return rpc_.get(); }
  lockmgr::LockManager* lock_manager() { return lock_manager_.get(); }
  cluster::TcpTransport::Stats transport_stats() const;

  // While the node is in no cluster: whether `secret` is its setup secret (the file
  // config.setup_secret_file names), which making it a member asks for. Always false once a
  // member.
  bool setup_secret_valid(std::string_view secret) const;
  // While in no cluster, this node's setup_proof() (common/tls_identity.h) for the certificate
  // it presents; else empty.
  std::string own_setup_proof() const;

  // Whether `token` is the cluster's admin token.
  bool token_valid(std::string_view token) const;
  // Whether the cluster's configuration, which holds the admin token, has reached this node: a
  // member that has just started serves its admin API before it has caught up.
  bool admin_token_known() const;

  // Makes this node the first member of a new cluster named `name`.
  // A crash before the cluster's records are written leaves it half made: the next start
  // undoes it (roll_back_half_made_cluster), and the command can be run again.
  boost::asio::awaitable<Result<CreatedCluster>> create(std::string name);
  // Joins the cluster a member invited us to; the member then adds us to the group.
  Status join(const JoinPackage& package);
  // A certificate for node `node`, serving its admin API at `admin_address` ("IP:PORT"), and
  // the key in `subject_certificate`, under the cluster CA, whose key `token` (the admin token
  // the request showed) unseals.
  Result<std::string> sign_node_certificate(cluster::NodeId node,
                                            const std::string& subject_certificate,
                                            const std::string& admin_address,
                                            std::string_view token) const;
  // The cluster CA certificate; empty until a member.
  std::string ca_certificate() const;

  // Asks node `node` (this one included) for its stats.
  boost::asio::awaitable<Result<NodeStats>> stats_of(cluster::NodeId node,
                                                    std::chrono::milliseconds deadline);
  // Asks node `node` (this one included) for one of its reports (daemon/lock_reports.h), with
  // the report's parameters (a LocksFilter's JSON for the locks).
  boost::asio::awaitable<Result<nlohmann::json>> report_of(cluster::NodeId node, NodeReport report,
                                                           nlohmann::json parameters,
                                                           std::chrono::milliseconds deadline);

 private:
  Membership(boost::asio::any_io_executor strand, const NodeConfig& config, Hooks hooks);
  Status install(const JoinPackage& package, bool bootstrap);
  // At open: a cluster whose creation a crash cut short (identity.json still says "creating")
  // is undone — its group, certificates and identity removed — so the node is in no cluster.
  Status roll_back_half_made_cluster();
  Status start_member(bool bootstrap);
  void stop_member();
  // Node `by` refused this node: its certificate was revoked (`why`). Leaves for good.
  void leave_removed(cluster::NodeId by, const std::string& why);
  void changes_applied();
  // A change to who is up: every node's lock manager rebuilds its tables for the new view.
  void membership_changed(const cluster::AppliedChange& applied);
  // Says this node is up, so that every lock manager rebuilds: a node that restarted before
  // the group marked it down has lost its locks and its coordinator's table.
  void announce_up();
  // This node's report, to `done` on the strand.
  void local_report(NodeReport report, const nlohmann::json& parameters,
                    std::function<void(Result<nlohmann::json>)> done);

  boost::asio::any_io_executor strand_;
  NodeConfig config_;
  Hooks hooks_;
  std::string dir_;
  cluster::PemPair self_signed_;
  std::string self_signed_fingerprint_;
  std::string setup_secret_;  // asked for only while in no cluster
  std::optional<ClusterIdentity> identity_;
  std::optional<std::string> removed_;
  std::string certificate_;  // CA-signed, once a member
  std::string certificate_fingerprint_;
  // What the transport was last given, from the view.
  cluster::PeerCertificates peer_certificates_;
  std::string ca_certificate_;
  std::unique_ptr<cluster::EventLoop> loop_;
  std::unique_ptr<cluster::TcpTransport> transport_;
  std::unique_ptr<cluster::GroupMember> group_;
  std::unique_ptr<cluster::RpcEndpoint> rpc_;
  std::unique_ptr<cluster::GroupClient> client_;
  std::unique_ptr<lockmgr::LockManager> lock_manager_;
  std::shared_ptr<lockmgr::AdvisoryLocks> advisory_locks_;
  bool refresh_posted_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace tidepool::daemon
