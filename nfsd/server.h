// The node's NFS front end: NFSv3, MOUNT v3, NLM v4 and the portmapper over ONC RPC.
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cluster/lease.h"
#include "common/config.h"
#include "common/status.h"
#include "lockmgr/advisory_locks.h"
#include "nfsd/call_statistics.h"
#include "store/store.h"

namespace tidepool::nfsd {

// A client that used NLM through this node, and what it holds here.
struct NlmSession {
  std::string client;   // its caller_name
  std::string address;  // where its calls last came from
  std::chrono::system_clock::time_point first_seen;
  std::chrono::system_clock::time_point last_seen;
  std::size_t locks = 0;
  std::size_t waiting = 0;
  std::size_t shares = 0;
};

class NfsServer {
 public:
  // Binds every port and starts serving: client connections spread over `contexts`, each run
  // by exactly one thread; everything else on the first. Fails with a one-line reason (a port
  // in use, an unreadable handle key...) and then serves nothing.
  static Result<std::unique_ptr<NfsServer>> start(std::vector<boost::asio::io_context*> contexts,
                                                  const NodeConfig& config, store::Store& store);
  virtual ~NfsServer() = default;
  // Stops accepting, closes connections and unregisters from rpcbind. Idempotent.
  virtual void stop() = 0;
  // Bytes from and to clients since the start, over every protocol and port.
  struct Traffic {
    std::uint64_t bytes_received = 0;
    std::uint64_t bytes_sent = 0;
  };
  virtual Traffic traffic() const = 0;
  // The calls served since the start, by NFSv3 procedure and by client.
  virtual const CallStatistics& calls() const = 0;
  // Replaces the export list; callable from any thread. Calls already running finish under the
  // list they started with; file handles stay valid for exports whose path is unchanged (an
  // export's id derives from its path) and become stale for the others. Entries are valid as
  // parse_config would have them.
  virtual void set_exports(std::vector<ExportConfig> exports) = 0;
  // Seals and checks file handles under `key` from now on (the cluster's, shared by every node
  // so that a handle one node gave out is good on all); handles sealed under another key become
  // bad handles. Keeps it for the next start. Callable from any thread; the same key again does
  // nothing.
  virtual Status set_handle_key(const std::array<std::uint8_t, 32>& key) = 0;
  // The cluster's advisory locks, which NLM's locks become; until the node is a member (and
  // after it left) NLM refuses locks. Callable from any thread.
  virtual void set_advisory_locks(std::weak_ptr<lockmgr::AdvisoryLocks> locks) = 0;
  // This node's lease once it is a cluster member (null: none applies): while it is not held,
  // NFS calls but NULL answer JUKEBOX and NLM refuses locks as in a grace period, and an
  // answer read while it lapsed is replaced by JUKEBOX. Callable from any thread.
  virtual void set_lease(std::shared_ptr<const cluster::Lease> lease) = 0;
  // NLM locks held through this node were lost (it was fenced): toward its NLM clients it
  // behaves as a restarted server — a new NSM state, SM_NOTIFY to every host that held locks
  // through it, a new grace period for their reclaims (a reclaim of a lock another client took
  // meanwhile is denied, so theirs is reported lost). Callable from any thread.
  virtual void nlm_locks_lost() = 0;
  // The clients that used NLM through this node; `done` may run on another thread.
  virtual void nlm_sessions(std::function<void(std::vector<NlmSession>)> done) const = 0;
};

}  // namespace tidepool::nfsd
