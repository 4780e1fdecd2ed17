// libFuzzer target: what NFS clients send a node's RPC transport, and what a client's lock
// manager answers to the node's NLM callbacks, through real sockets on 127.0.0.1. The first
// byte picks the path, the rest is what arrives on it:
//   0  a TCP connection's bytes, record marks included (RFC 5531 section 11), then its end:
//      the transport must reply to what decodes, refuse what does not, and close the connection
//      soon after its end, or the fuzzer aborts (tests/fuzz/loopback_client.h);
//   1  one UDP datagram (MOUNT, PMAP, NLM, NSM), followed by a PMAP NULL call whose reply must
//      come back: the datagram neither stopped the UDP loop nor killed it;
//   2  the reply to a GRANTED callback, as the client's lock manager sends it (record marks
//      included; xid kCallbackXid), read as the node reads it and judged as NLM judges it.
// The programs behind the transport run against a real store (tests/fuzz/fuzz_node.h).
#include <unistd.h>

#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/write.hpp>
#include <boost/endian/conversion.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <thread>

#include "nfsd/internal/nlm_program.h"
#include "nfsd/internal/rpc_client.h"
#include "nfsd/internal/rpc_transport.h"
#include "tests/fuzz/fuzz_node.h"
#include "tests/fuzz/loopback_client.h"

namespace {

using namespace tidepool;
namespace asio = boost::asio;
using asio::ip::tcp;
using asio::ip::udp;

constexpr std::uint32_t kCallbackXid = 0x6e6c6d00u;
constexpr std::uint32_t kSentinelXid = 0x5e471e1u;

// A free port on 127.0.0.1 for `Protocol`, given back at once.
template <typename Protocol>
std::uint16_t free_port(asio::io_context& io) {
  typename Protocol::socket probe(io,
                                  typename Protocol::endpoint(asio::ip::address_v4::loopback(), 0));
  return probe.local_endpoint().port();
}

// The node's programs behind a real transport, served by a thread of their own. Made once and
// never destroyed: the thread runs until the process exits.
struct Node {
  Node()
      : programs("/dev/shm/tidepool-transport-fuzz-" + std::to_string(::getpid())),
        work(asio::make_work_guard(programs.io())),
        transport({&programs.io()}, programs.dispatcher(), programs.udp_dispatcher(),
                  nfsd::TransportLimits{}) {
    tcp_port = free_port<tcp>(programs.io());
    udp_port = free_port<udp>(programs.io());
    const auto loopback = asio::ip::address_v4::loopback();
    if (!transport.listen_tcp({loopback, tcp_port}, nfsd::RpcTransport::Placement::spread).ok() ||
        !transport.listen_udp({loopback, udp_port}).ok()) {
      std::abort();
    }
    thread = std::thread([this] { programs.io().run(); });
  }
  fuzz::FuzzNode programs;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  nfsd::RpcTransport transport;
  std::uint16_t tcp_port = 0;
  std::uint16_t udp_port = 0;
  std::thread thread;
};

Node& node() {
  static Node* made = new Node;
  return *made;
}

std::array<std::uint8_t, 40> pmap_null_call() {
  std::array<std::uint8_t, 40> call{};
  const std::array<std::uint32_t, 10> words = {kSentinelXid, 0, 2, 100000, 2, 0, 0, 0, 0, 0};
  for (std::size_t i = 0; i < words.size(); ++i) {
    boost::endian::store_big_u32(call.data() + 4 * i, words[i]);
  }
  return call;
}

void datagram_to_node(std::span<const std::uint8_t> datagram) {
  static const int fd = fuzz::connect_loopback(SOCK_DGRAM, node().udp_port);
  static const auto sentinel = pmap_null_call();
  (void)::send(fd, datagram.data(), datagram.size(), 0);
  (void)::send(fd, sentinel.data(), sentinel.size(), 0);
  std::uint8_t reply[65536];
  const fuzz::Deadline deadline;
  for (;;) {
    deadline.wait(fd, POLLIN, "no reply to a PMAP NULL call over UDP");
    const ssize_t n = ::recv(fd, reply, sizeof reply, MSG_DONTWAIT);
    if (n >= 4 && boost::endian::load_big_u32(reply) == kSentinelXid) return;
  }
}

// The client's lock manager: a connection whose other end the node reads the reply from.
void callback_reply(std::span<const std::uint8_t> bytes) {
  static asio::io_context io;
  static tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  boost::system::error_code failed;
  tcp::socket client(io, tcp::v4(),
                     fuzz::connect_loopback(SOCK_STREAM, acceptor.local_endpoint().port()));
  tcp::socket server = acceptor.accept(failed);
  if (failed) {
    std::fprintf(stderr, "transport_fuzzer: accept: %s\n", failed.message().c_str());
    std::abort();
  }
  asio::write(server, asio::buffer(bytes.data(), bytes.size()), failed);
  server.shutdown(tcp::socket::shutdown_send, failed);
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        const Result<xdr::Buffer> results = co_await nfsd::read_reply(client, kCallbackXid, "fuzz");
        if (results.ok()) (void)nfsd::client_took_grant(*results);
      },
      asio::detached);
  io.restart();
  io.run();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::span<const std::uint8_t> rest(data + 1, size - 1);
  switch (data[0]) {
    case 0:
      fuzz::stream_until_closed(fuzz::connect_loopback(SOCK_STREAM, node().tcp_port), rest);
      break;
    case 1:
      datagram_to_node(rest);
      break;
    case 2:
      // Larger than the socket's buffers, the writer would wait for a reader that is not there.
      if (rest.size() <= 65536) callback_reply(rest);
      break;
  }
  return 0;
}
