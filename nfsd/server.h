// The node's NFS front end: NFSv3, MOUNT v3 and the portmapper over ONC RPC.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>

#include "common/config.h"
#include "common/status.h"
#include "store/store.h"

namespace tidepool::nfsd {

class NfsServer {
 public:
  // Binds every port and starts serving on `io`. Fails with a one-line reason (a port in use,
  // an unreadable handle key...) and then serves nothing.
  static Result<std::unique_ptr<NfsServer>> start(boost::asio::io_context& io,
                                                  const NodeConfig& config, store::Store& store);
  virtual ~NfsServer() = default;
  // Stops accepting, closes connections and unregisters from rpcbind. Idempotent.
  virtual void stop() = 0;
};

}  // namespace tidepool::nfsd
