#include "tests/fuzz/fuzz_node.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace tidepool::fuzz {

FuzzNode::FuzzNode(const std::string& data_dir) {
  std::filesystem::remove_all(data_dir);
  std::filesystem::create_directories(data_dir);
  std::ofstream(data_dir + "/handle.key") << std::string(32, 'k');
  config_.data_dir = data_dir;
  ExportConfig e;
  e.path = "/ifs";
  e.root_squash = false;
  config_.exports = {e};
  store::StoreOptions options;
  options.data_dir = data_dir;
  options.threads = 1;
  auto opened = store::Store::open(options);
  auto sealer = nfsd::HandleSealer::load_or_create(data_dir);
  if (!opened.ok() || !sealer.ok()) std::abort();
  store_ = std::move(opened).value();
  service_ = std::make_unique<nfsd::Service>(*store_, config_, *sealer, calls_);
  nfs_ = std::make_unique<nfsd::Nfs3Program>(*service_);
  mount_ = std::make_unique<nfsd::MountProgram>(*service_);
  portmap_ = std::make_unique<nfsd::PortmapProgram>(std::vector<nfsd::PortMapping>{
      {100003, 3, nfsd::kProtocolTcp, 2049}, {100005, 3, nfsd::kProtocolTcp, 20048}});
  dispatcher_.add(nfs_.get());
  dispatcher_.add(mount_.get());
  dispatcher_.add(portmap_.get());
  udp_dispatcher_.add(mount_.get());
  udp_dispatcher_.add(portmap_.get());
  nlm_ = std::make_unique<nfsd::NlmProgram>(*service_, io_.get_executor());
  nsm_ = std::make_unique<nfsd::NsmProgram>(*nlm_);
  dispatcher_.add(nlm_.get());
  dispatcher_.add(nsm_.get());
  udp_dispatcher_.add(nlm_.get());
  udp_dispatcher_.add(nsm_.get());
}

FuzzNode::~FuzzNode() { store_->close(); }

tidepool::xdr::Buffer FuzzNode::dispatch(std::span<const std::uint8_t> message) {
  tidepool::xdr::Buffer reply;
  bool send = false;
  boost::asio::co_spawn(
      io_,
      [&]() -> boost::asio::awaitable<void> {
        send = co_await dispatcher_.dispatch(
            message, nfsd::RpcPeer{boost::asio::ip::address_v4::loopback(), 800, false},
            reply);
      },
      boost::asio::detached);
  io_.restart();
  io_.run();
  if (!send) reply.clear();
  return reply;
}

nfsd::FileHandle FuzzNode::root_handle() const {
  return service_->sealer()->seal({service_->exports.snapshot()->all().front().id(), store::kRootInode, 1});
}

}  // namespace tidepool::fuzz
