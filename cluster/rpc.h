// Backend RPC: requests and replies between nodes over a Transport's rpc channel. Calls are
// matched to replies by id, so many can be in flight to one peer and replies come back in any
// order; every call has a deadline; and every message carries the sender's group epoch, so a
// node refuses a request decided under an older view of the group than its own (fencing).
//
// Not thread-safe: an RpcEndpoint, its handlers and its callbacks live on its EventLoop.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>

#include "cluster/event_loop.h"
#include "cluster/transport.h"
#include "cluster/types.h"
#include "common/status.h"
#include "common/xdr.h"

namespace tidepool::cluster {

// Every message ends with this many bytes of the RPC's own (kind, id, epoch, method or
// status), after the body: a reply's body then reaches the caller without being copied, and a
// callee that leaves this much room after its reply's body spares a copy on its side too.
inline constexpr std::size_t kRpcTrailerBytes = 24;

class RpcEndpoint {
 public:
  // A reply: the callee's body, or why there is none. Runs exactly once.
  using Reply = std::function<void(Result<xdr::Buffer>)>;
  // Serves one request; `reply` may be called later, from the loop, but only once.
  using Handler =
      std::function<void(NodeId from, std::span<const std::uint8_t> request, Reply reply)>;

  // `epoch` tells the node's current group epoch.
  RpcEndpoint(EventLoop& loop, Transport& transport, std::function<Epoch()> epoch);
  // Calls still waiting fail with `unavailable`.
  ~RpcEndpoint();
  RpcEndpoint(const RpcEndpoint&) = delete;
  RpcEndpoint& operator=(const RpcEndpoint&) = delete;

  void handle(std::uint32_t method, Handler handler);

  // Calls `method` on node `to`. `done` gets the reply, or: timed_out when none came within
  // `deadline` (the call may still have run), not_supported for a method the callee does not
  // serve, behind when the callee's epoch is newer than ours, or the error the
  // callee's handler returned.
  void call(NodeId to, std::uint32_t method, std::span<const std::uint8_t> request,
            std::chrono::milliseconds deadline, Reply done);
  // Ends every call waiting for `to` now, timed_out as at a deadline (the call may still have
  // run): the group recorded the node down, and its callers need not wait out their deadlines
  // to go to whoever takes its place.
  void abandon_calls_to(NodeId to, const std::string& why);

 private:
  struct Pending {
    NodeId to;
    Reply done;
    EventLoop::TimerId timer;
  };
  void receive(NodeId from, xdr::Buffer& message);
  void serve(NodeId from, std::uint64_t id, Epoch epoch, std::uint32_t method,
             std::span<const std::uint8_t> body);
  void send_reply(NodeId to, std::uint64_t id, Result<xdr::Buffer> reply);

  EventLoop& loop_;
  Transport& transport_;
  std::function<Epoch()> epoch_;
  std::map<std::uint32_t, Handler> handlers_;
  std::map<std::uint64_t, Pending> pending_;
  std::uint64_t next_id_ = 1;
  // Replies made after this endpoint is gone are dropped.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace tidepool::cluster
