// libFuzzer target: what a peer sends a node on a backend connection — its hello, then
// length-prefixed frames on the Raft, RPC, lock and lease channels — through a real socket to
// a real TcpTransport on 127.0.0.1, whose RPC frames a real RpcEndpoint decodes (the trailer:
// kind, id, epoch, method or status) and answers. The node must close the connection soon after
// the peer ends it, or the fuzzer aborts (tests/fuzz/loopback_client.h).
//
// Without TLS, so that the bytes are what the transport reads after the handshake. The node id
// the hello names (bytes 8 to 15) is folded onto nodes 2 to 5, which the node knows as a sink
// in this process: its answers go there, never to an address the input names.
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/endian/conversion.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "cluster/rpc.h"
#include "cluster/tcp_transport.h"
#include "tests/fuzz/loopback_client.h"

namespace {

using namespace tidepool;
using namespace tidepool::cluster;

constexpr Epoch kEpoch = 5;
constexpr NodeId kFirstPeer = 2;
constexpr NodeId kPeers = 4;

std::unique_ptr<TcpTransport> started(boost::asio::io_context& io, EventLoop& loop, NodeId self) {
  TcpTransportOptions options;
  options.self = self;
  options.listen_address = "127.0.0.1:0";
  auto transport = TcpTransport::start(io.get_executor(), loop, options);
  if (!transport.ok()) {
    std::fprintf(stderr, "%s\n", transport.status().to_string().c_str());
    std::abort();
  }
  return std::move(transport).value();
}

// The node under test and the sink its answers go to, run by a thread of their own. Made once and
// never destroyed: the thread runs until the process exits.
struct Backend {
  Backend()
      : work(boost::asio::make_work_guard(io)),
        loop(make_asio_event_loop(io.get_executor())),
        sink_loop(make_asio_event_loop(io.get_executor())),
        node(started(io, *loop, 1)),
        sink(started(io, *sink_loop, kFirstPeer)) {
    for (NodeId peer = kFirstPeer; peer < kFirstPeer + kPeers; ++peer) {
      node->set_address(peer, sink->local_address());
    }
    auto listening = split_host_port(node->local_address());
    if (!listening.ok()) std::abort();
    port = listening->second;
    thread = std::thread([this] { io.run(); });
    on_loop([this] {
      rpc = std::make_unique<RpcEndpoint>(*loop, *node, [] { return kEpoch; });
      rpc->handle(1, [](NodeId, std::span<const std::uint8_t> request, RpcEndpoint::Reply reply) {
        xdr::Buffer echo;
        xdr::append(echo, request);
        reply(std::move(echo));
      });
      rpc->handle(2, [](NodeId, std::span<const std::uint8_t>, RpcEndpoint::Reply reply) {
        reply(error(Errc::not_found, "nothing here"));
      });
      // Delivered and dropped: what they carry has fuzzers of its own (cluster_message_fuzzer,
      // lock_message_fuzzer).
      for (Channel channel : {Channel::raft, Channel::lock, Channel::lease}) {
        node->set_receiver(channel, [](NodeId, xdr::Buffer&) {});
      }
    });
  }

  // Runs `task` on the node's loop and waits for it: whatever the loop was given before has run.
  void on_loop(std::function<void()> task) {
    std::mutex mutex;
    std::condition_variable ran;
    bool done = false;
    loop->post([&] {
      task();
      std::lock_guard lock(mutex);
      done = true;
      ran.notify_one();
    });
    std::unique_lock lock(mutex);
    if (!ran.wait_for(lock, std::chrono::milliseconds(fuzz::kLoopbackBoundMs),
                      [&] { return done; })) {
      fuzz::hang("the node's loop did not run a task");
    }
  }

  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work;
  std::unique_ptr<EventLoop> loop;
  std::unique_ptr<EventLoop> sink_loop;
  std::unique_ptr<TcpTransport> node;
  std::unique_ptr<TcpTransport> sink;
  std::unique_ptr<RpcEndpoint> rpc;
  std::uint16_t port = 0;
  std::thread thread;
};

Backend& backend() {
  static Backend* made = new Backend;
  return *made;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::uint8_t> bytes(data, data + size);
  if (bytes.size() >= 16) {
    const NodeId claimed = boost::endian::load_big_u64(bytes.data() + 8);
    if (claimed != 0) {
      boost::endian::store_big_u64(bytes.data() + 8, kFirstPeer + claimed % kPeers);
    }
  }
  fuzz::stream_until_closed(fuzz::connect_loopback(SOCK_STREAM, backend().port), bytes);
  // What the node read was handed to its loop before it closed the connection.
  backend().on_loop([] {});
  return 0;
}
