// A node's RPC programs over a real store in a scratch directory on tmpfs, with a fixed handle
// key so that seed calls can carry valid file handles. Shared by the fuzzer and the seed writer.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "nfsd/internal/mount_program.h"
#include "nfsd/internal/nfs3_program.h"
#include "nfsd/internal/nlm_program.h"
#include "nfsd/internal/nsm_program.h"
#include "nfsd/internal/portmap_program.h"
#include "store/store.h"

namespace tidepool::fuzz {

class FuzzNode {
 public:
  explicit FuzzNode(const std::string& data_dir);
  ~FuzzNode();

  // Dispatches one RPC message; returns the reply (empty when none is sent).
  tidepool::xdr::Buffer dispatch(std::span<const std::uint8_t> message);
  // The sealed handle of the export root.
  nfsd::FileHandle root_handle() const;

  // For serving over a real RpcTransport instead of dispatch(): then io() must be run by one
  // thread of the caller's, and dispatch() not be called. Over UDP, MOUNT, PMAP, NLM and NSM
  // answer, as in the daemon (nfsd/server.cc).
  boost::asio::io_context& io() { return io_; }
  const nfsd::RpcDispatcher& dispatcher() const { return dispatcher_; }
  const nfsd::RpcDispatcher& udp_dispatcher() const { return udp_dispatcher_; }

 private:
  NodeConfig config_;
  std::unique_ptr<store::Store> store_;
  nfsd::CallStatistics calls_;
  std::unique_ptr<nfsd::Service> service_;
  std::unique_ptr<nfsd::Nfs3Program> nfs_;
  std::unique_ptr<nfsd::MountProgram> mount_;
  std::unique_ptr<nfsd::PortmapProgram> portmap_;
  // Without a cluster's locks: decoding is what is under test.
  std::unique_ptr<nfsd::NlmProgram> nlm_;
  std::unique_ptr<nfsd::NsmProgram> nsm_;
  nfsd::RpcDispatcher dispatcher_;
  nfsd::RpcDispatcher udp_dispatcher_;
  boost::asio::io_context io_;
};

}  // namespace tidepool::fuzz
