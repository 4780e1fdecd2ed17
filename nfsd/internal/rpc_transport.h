// ONC RPC over TCP (record marking, RFC 5531 section 11) and UDP.
//
// One coroutine reads each TCP connection; every complete record becomes a call that runs
// concurrently with the connection's others, and replies are written in the order they finish.
// Each connection lives on one of the transport's io_contexts (see Placement), each run by a
// single thread: a
// call, its store completions and its reply stay on that thread, so a busy connection costs no
// wake-ups of other threads and no strand (measured: 4 KiB reads from 4 connections on one
// io_context run by 2 threads made 30 % fewer calls per second than on one thread). A connection
// has at most max_calls_in_flight calls whose replies are not written yet (then it stops reading),
// a record larger than max_record_bytes closes it, every read and write has a deadline, and at most
// max_connections are open.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "common/status.h"
#include "nfsd/internal/rpc.h"

namespace tidepool::nfsd {

struct TransportLimits {
  std::uint32_t max_record_bytes = 2u << 20;
  std::uint32_t max_calls_in_flight = 64;
  std::size_t max_connections = 4096;
  std::chrono::seconds idle_timeout{15 * 60};
  std::chrono::seconds record_timeout{60};
};

class RpcTransport {
 public:
  // Connections live on `contexts` as their listener's Placement says; each context must be
  // run by exactly one thread. Listening and UDP run on the first. UDP datagrams go to
  // udp_dispatcher (MOUNT and PMAP only: NFS is served over TCP).
  RpcTransport(std::vector<boost::asio::io_context*> contexts, const RpcDispatcher& dispatcher,
               const RpcDispatcher& udp_dispatcher, TransportLimits limits);
  ~RpcTransport();

  // Where a listener's connections live: spread over the contexts (for long-lived, busy
  // connections: NFS), or on the first (short ones: MOUNT, PMAP), which are then not counted
  // when spreading, so that a client's MOUNT connections never crowd its NFS connections onto
  // one thread.
  enum class Placement { spread, first };
  // Binds and listens; the error names the address and port.
  Status listen_tcp(const boost::asio::ip::tcp::endpoint& endpoint, Placement placement);
  Status listen_udp(const boost::asio::ip::udp::endpoint& endpoint);
  // Stops accepting and closes every connection; calls in flight finish on their own.
  void stop();
  // Bytes read from and written to clients since the start, record marks included.
  std::uint64_t bytes_received() const { return bytes_received_.load(std::memory_order_relaxed); }
  std::uint64_t bytes_sent() const { return bytes_sent_.load(std::memory_order_relaxed); }

  class Connection;

 private:
  awaitable<void> accept_loop(boost::asio::ip::tcp::acceptor& acceptor, Placement placement);
  awaitable<void> udp_loop(boost::asio::ip::udp::socket& socket);
  void forget(const std::shared_ptr<Connection>& connection, std::optional<std::size_t> context);

  std::size_t least_loaded_context() const;  // holding mutex_

  const std::vector<boost::asio::io_context*> contexts_;
  boost::asio::io_context& io_;  // the first of contexts_
  const RpcDispatcher& dispatcher_;
  const RpcDispatcher& udp_dispatcher_;
  TransportLimits limits_;
  std::vector<std::unique_ptr<boost::asio::ip::tcp::acceptor>> acceptors_;
  std::vector<std::unique_ptr<boost::asio::ip::udp::socket>> udp_sockets_;
  std::mutex mutex_;
  std::set<std::shared_ptr<Connection>> connections_;  // guarded by mutex_, as the next
  std::vector<std::size_t> connections_on_;            // per context
  std::atomic<std::uint64_t> bytes_received_{0};
  std::atomic<std::uint64_t> bytes_sent_{0};
};

}  // namespace tidepool::nfsd
