// How nodes send each other messages. Implementations: TCP between processes (later with
// mutual TLS), and the simulated network of cluster/sim.h for tests.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "cluster/types.h"
#include "common/xdr.h"

namespace tidepool::cluster {

// Each component that talks to its peers has a channel of its own, so that one transport
// carries them all.
enum class Channel : std::uint8_t { raft = 1, rpc = 2, lock = 3, lease = 4 };

class Transport {
 public:
  // The message is the receiver's to keep: it may move it away.
  using Receiver = std::function<void(NodeId from, xdr::Buffer& message)>;

  virtual ~Transport() = default;

  // Where `node` is reached ("127.0.0.3:7100"); called before the first send to it.
  virtual void set_address(NodeId node, const std::string& address) = 0;
  // Best-effort delivery: a message to a node that is down or cut off is lost without a word,
  // as is one that exceeds the transport's message bound. The caller's protocol retries.
  virtual void send(NodeId to, Channel channel, xdr::Buffer message) = 0;
  // The receiver of `channel` runs on the receiving node's EventLoop.
  virtual void set_receiver(Channel channel, Receiver receiver) = 0;
};

}  // namespace tidepool::cluster
