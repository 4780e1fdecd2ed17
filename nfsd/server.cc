#include "nfsd/server.h"

#include <spdlog/spdlog.h>

#include <mutex>
#include <optional>

#include "nfsd/internal/mount_program.h"
#include "nfsd/internal/nfs3_program.h"
#include "nfsd/internal/nlm_program.h"
#include "nfsd/internal/nsm_program.h"
#include "nfsd/internal/portmap_program.h"
#include "nfsd/internal/rpc_transport.h"

namespace tidepool::nfsd {
namespace {

namespace asio = boost::asio;

class NfsServerImpl final : public NfsServer {
 public:
  NfsServerImpl(std::vector<asio::io_context*> contexts, const NodeConfig& config,
                store::Store& store, HandleSealer sealer)
      : config_(config),
        service_(store, config_, sealer, calls_),
        nfs_(service_),
        mount_(service_),
        nlm_(service_, contexts.at(0)->get_executor()),
        nsm_(nlm_),
        portmap_(mappings()),
        executor_(contexts.at(0)->get_executor()),
        transport_(std::move(contexts), dispatcher_, udp_dispatcher_,
                   TransportLimits{config.max_record_bytes, config.max_calls_per_connection}) {
    dispatcher_.count_in(&calls_);
    udp_dispatcher_.count_in(&calls_);
    dispatcher_.add(&nfs_);
    dispatcher_.add(&mount_);
    dispatcher_.add(&portmap_);
    dispatcher_.add(&nlm_);
    dispatcher_.add(&nsm_);
    udp_dispatcher_.add(&mount_);
    udp_dispatcher_.add(&portmap_);
    udp_dispatcher_.add(&nlm_);
    udp_dispatcher_.add(&nsm_);
    nlm_.set_status_monitor({[this](const asio::ip::address_v4& host) { nsm_.monitor(host); },
                             [this] { ready_for_reclaims(false, true); }});
  }

  ~NfsServerImpl() override { stop(); }

  Status listen() {
    boost::system::error_code ec;
    auto address = asio::ip::make_address_v4(config_.frontend_address, ec);
    if (ec) return error(Errc::invalid_argument, "bad front-end address " + config_.frontend_address);
    TP_RETURN_IF_ERROR(
        transport_.listen_tcp({address, config_.nfs_port}, RpcTransport::Placement::spread));
    if (config_.mount_port != config_.nfs_port) {
      TP_RETURN_IF_ERROR(
          transport_.listen_tcp({address, config_.mount_port}, RpcTransport::Placement::first));
    }
    TP_RETURN_IF_ERROR(transport_.listen_udp({address, config_.mount_port}));
    if (config_.portmap_port == 0) return register_elsewhere();
    Status tcp =
        transport_.listen_tcp({address, config_.portmap_port}, RpcTransport::Placement::first);
    Status udp = tcp.ok() ? transport_.listen_udp({address, config_.portmap_port}) : tcp;
    if (tcp.ok() && udp.ok()) return {};
    if (tcp.code() != Errc::already_exists && udp.code() != Errc::already_exists) {
      return tcp.ok() ? udp : tcp;
    }
    spdlog::info("portmapper port {} is taken (rpcbind?): not serving PMAP ourselves",
                 config_.portmap_port);
    return register_elsewhere();
  }

  Status set_handle_key(const std::array<std::uint8_t, 32>& key) override {
    std::lock_guard lock(handle_key_mutex_);
    if (handle_key_ == key) return {};
    TP_ASSIGN_OR_RETURN(HandleSealer sealer, HandleSealer::adopt(config_.data_dir, key));
    service_.current_sealer.store(std::make_shared<const HandleSealer>(std::move(sealer)));
    handle_key_ = key;
    spdlog::info("file handles are sealed under the cluster's key");
    ready_for_reclaims(true, false);
    return {};
  }

  Traffic traffic() const override {
    return Traffic{transport_.bytes_received(), transport_.bytes_sent()};
  }

  const CallStatistics& calls() const override { return calls_; }

  void stop() override {
    if (stopped_) return;
    stopped_ = true;
    transport_.stop();
    if (registered_) (void)register_with_rpcbind(mappings(), true);
  }

  void set_advisory_locks(std::weak_ptr<lockmgr::AdvisoryLocks> locks) override {
    nlm_.set_locks(std::move(locks));
  }

  void nlm_locks_lost() override {
    nlm_.start_grace_period(true);
    nsm_.restarted(executor_);
  }

  void set_lease(std::shared_ptr<const cluster::Lease> lease) override {
    service_.lease.store(std::move(lease));
  }

  void nlm_sessions(std::function<void(std::vector<NlmSession>)> done) const override {
    nlm_.sessions(std::move(done));
  }

  void set_exports(std::vector<ExportConfig> exports) override {
    if (service_.exports.replace(exports)) {
      spdlog::info("export list replaced: {} exports", exports.size());
    }
  }

 private:
  // Once the node opens the cluster's file handles and can lock, the grace period starts and the
  // lock holders of its last run are told it restarted, so that they reclaim their locks
  // through it in time.
  void ready_for_reclaims(bool handles, bool locks) {
    {
      std::lock_guard lock(reclaim_mutex_);
      handles_ready_ = handles_ready_ || handles;
      locks_ready_ = locks_ready_ || locks;
      if (!handles_ready_ || !locks_ready_ || holders_told_) return;
      holders_told_ = true;
    }
    nlm_.start_grace_period();
    nsm_.start(executor_, config_.data_dir, config_.frontend_address);
  }

  std::vector<PortMapping> mappings() const {
    std::vector<PortMapping> m{
        {Nfs3Program::kProgram, 3, kProtocolTcp, config_.nfs_port},
        {MountProgram::kProgram, 3, kProtocolTcp, config_.mount_port},
        {MountProgram::kProgram, 3, kProtocolUdp, config_.mount_port},
        // NLM shares the NFS port over TCP and MOUNT's over UDP.
        {NlmProgram::kProgram, NlmProgram::kVersion, kProtocolTcp, config_.nfs_port},
        {NlmProgram::kProgram, NlmProgram::kVersion, kProtocolUdp, config_.mount_port},
        {NsmProgram::kProgram, NsmProgram::kVersion, kProtocolTcp, config_.nfs_port},
        {NsmProgram::kProgram, NsmProgram::kVersion, kProtocolUdp, config_.mount_port},
    };
    if (config_.portmap_port != 0) {
      m.push_back({PortmapProgram::kProgram, 2, kProtocolTcp, config_.portmap_port});
      m.push_back({PortmapProgram::kProgram, 2, kProtocolUdp, config_.portmap_port});
    }
    return m;
  }

  Status register_elsewhere() {
    if (!config_.register_with_rpcbind) return {};
    std::vector<PortMapping> ours = mappings();
    // A host with rpcbind has its own rpc.statd, which owns NSM there.
    std::erase_if(ours, [](const PortMapping& m) {
      return m.program == PortmapProgram::kProgram || m.program == NsmProgram::kProgram;
    });
    if (Status s = register_with_rpcbind(ours, false); !s.ok()) {
      spdlog::warn("not registered with rpcbind: {}", s.message());
      return {};
    }
    registered_ = true;
    spdlog::info("registered NFS, MOUNT and NLM with rpcbind");
    return {};
  }

  NodeConfig config_;
  CallStatistics calls_;
  Service service_;
  Nfs3Program nfs_;
  MountProgram mount_;
  NlmProgram nlm_;
  NsmProgram nsm_;
  PortmapProgram portmap_;
  RpcDispatcher dispatcher_;
  RpcDispatcher udp_dispatcher_;
  asio::any_io_executor executor_;
  RpcTransport transport_;
  bool registered_ = false;
  bool stopped_ = false;
  std::mutex reclaim_mutex_;
  bool handles_ready_ = false;  // guarded by reclaim_mutex_, as the two below
  bool locks_ready_ = false;
  bool holders_told_ = false;
  std::mutex handle_key_mutex_;
  std::optional<std::array<std::uint8_t, 32>> handle_key_;  // guarded by handle_key_mutex_
};

}  // namespace

Result<std::unique_ptr<NfsServer>> NfsServer::start(std::vector<asio::io_context*> contexts,
                                                    const NodeConfig& config, store::Store& store) {
  TP_ASSIGN_OR_RETURN(HandleSealer sealer, HandleSealer::load_or_create(config.data_dir));
  auto server = std::make_unique<NfsServerImpl>(std::move(contexts), config, store, sealer);
  TP_RETURN_IF_ERROR(server->listen());
  return std::unique_ptr<NfsServer>(std::move(server));
}

}  // namespace tidepool::nfsd
