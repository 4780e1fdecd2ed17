#include "cluster/tcp_transport.h"

#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/endian/conversion.hpp>

#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <set>

#include "cluster/internal/tls_stream.h"
#include "common/read_ahead.h"

namespace tidepool::cluster {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using asio::awaitable;
using asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;

namespace {

constexpr auto kUseTuple = asio::as_tuple(asio::use_awaitable);
constexpr std::uint32_t kHelloMagic = 0x54504e31;  // "TPN1"
constexpr std::size_t kHelloBytes = 20;
constexpr std::size_t kMaxAddressLength = 256;
// The answer to a hello: what it says (HelloAnswer) and the length of the reason after it.
constexpr std::size_t kAnswerBytes = 8;
constexpr std::size_t kMaxReasonLength = 512;
constexpr std::size_t kHeaderBytes = 8;
constexpr std::size_t kMaxBatch = 64;  // messages gathered into one write
// RPC bytes gathered into one write, beyond its first message: a Raft or lock message queued
// meanwhile waits for at most this much (and what the socket holds) before it goes.
constexpr std::size_t kMaxBulkBatchBytes = 1 << 20;
constexpr auto kHandshakeTimeout = std::chrono::seconds(5);
constexpr auto kWriteTimeout = std::chrono::seconds(30);

bool known_channel(std::uint32_t channel) {
  return channel >= static_cast<std::uint32_t>(Channel::raft) &&
         channel <= static_cast<std::uint32_t>(Channel::lease);
}

using internal::TlsStream;

enum class HelloAnswer : std::uint32_t { taken = 0, refused = 1, revoked = 2 };

// Whether a peer's connection is taken, and if not, why.
struct Verdict {
  HelloAnswer answer = HelloAnswer::taken;
  std::string why;
  bool taken() const { return answer == HelloAnswer::taken; }
};

// Runs `operation` (an awaitable of an error code, or of a tuple that starts with one) with a
// deadline; a timeout comes back as timed_out.
template <typename Operation>
awaitable<boost::system::error_code> with_timeout(Operation operation,
                                                  std::chrono::steady_clock::duration timeout) {
  asio::steady_timer timer(co_await asio::this_coro::executor, timeout);
  auto waited = timer.async_wait(kUseTuple);
  auto result = co_await (std::move(operation) || std::move(waited));
  if (result.index() == 1) co_return asio::error::timed_out;
  const auto& done = std::get<0>(result);
  if constexpr (std::is_same_v<std::decay_t<decltype(done)>, boost::system::error_code>) {
    co_return done;
  } else {
    co_return std::get<0>(done);
  }
}

// The connection without TLS, with TlsStream's operations.
class PlainStream {
 public:
  explicit PlainStream(tcp::socket& socket) : socket_(socket), incoming_(socket) {}
  awaitable<boost::system::error_code> write_all(std::span<const asio::const_buffer> buffers) {
    auto [ec, n] = co_await asio::async_write(socket_, buffers, kUseTuple);
    co_return ec;
  }
  awaitable<boost::system::error_code> read_exact(asio::mutable_buffer into) {
    auto [ec, n] = co_await incoming_.read_exact(into);
    co_return ec;
  }
  void idle() {}

 private:
  tcp::socket& socket_;
  ReadAhead<tcp::socket> incoming_;
};

Result<std::shared_ptr<ssl::context>> make_tls_context(const TlsFiles& files, bool server) {
  auto context = std::make_shared<ssl::context>(server ? ssl::context::tls_server
                                                       : ssl::context::tls_client);
  boost::system::error_code ec;
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                           ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                           ssl::context::no_tlsv1_1,
                       ec);
  if (!ec) context->load_verify_file(files.ca_certificate, ec);
  if (!ec) context->use_certificate_chain_file(files.certificate, ec);
  if (!ec) context->use_private_key_file(files.private_key, ssl::context::pem, ec);
  if (!ec) {
    context->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert, ec);
  }
  // A node reconnects with a full handshake; tickets would be sent on every connection unused.
  if (!ec && server) SSL_CTX_set_num_tickets(context->native_handle(), 0);
  if (ec) {
    return error(Errc::invalid_argument, "cannot load the node's TLS identity (" +
                                             files.certificate + ", " + files.private_key +
                                             ", CA " + files.ca_certificate + "): " +
                                             ec.message());
  }
  return context;
}

}  // namespace

Result<std::pair<std::string, std::uint16_t>> split_host_port(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return error(Errc::invalid_argument, "'" + address + "' is not host:port");
  }
  std::string port = address.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(port) > 65535) {
    return error(Errc::invalid_argument, "'" + address + "' has no valid port");
  }
  return std::pair{address.substr(0, colon), static_cast<std::uint16_t>(std::stoul(port))};
}

class TcpTransport::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(asio::any_io_executor executor, EventLoop& loop, TcpTransportOptions options)
      : strand_(asio::make_strand(executor)),
        loop_(loop),
        options_(std::move(options)),
        acceptor_(strand_) {}

  Status open() {
    if (options_.tls) {
      TP_ASSIGN_OR_RETURN(server_tls_, make_tls_context(*options_.tls, true));
      TP_ASSIGN_OR_RETURN(client_tls_, make_tls_context(*options_.tls, false));
    }
    TP_ASSIGN_OR_RETURN(auto host_port, split_host_port(options_.listen_address));
    boost::system::error_code ec;
    auto address = asio::ip::make_address(host_port.first, ec);
    if (ec) return error(Errc::invalid_argument, "'" + host_port.first + "' is not an IP address");
    tcp::endpoint endpoint(address, host_port.second);
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      return error(Errc::unavailable,
                   "cannot listen on " + options_.listen_address + ": " + ec.message());
    }
    local_ = acceptor_.local_endpoint(ec);
    asio::co_spawn(strand_, accept_loop(shared_from_this()), asio::detached);
    return {};
  }

  void stop() {
    {
      std::lock_guard lock(deliver_mutex_);
      stopped_ = true;
    }
    asio::post(strand_, [self = shared_from_this()] {
      boost::system::error_code ignored;
      self->acceptor_.close(ignored);
      for (Connection* connection : self->connections_) connection->socket->close(ignored);
      for (auto& [id, peer] : self->peers_) peer->wake.cancel();
    });
  }

  void set_address(NodeId node, const std::string& address) {
    asio::post(strand_, [self = shared_from_this(), node, address] {
      self->learn_address(node, address, true);
    });
  }

  void send(NodeId to, Channel channel, xdr::Buffer message) {
    asio::post(strand_, [self = shared_from_this(), to, channel,
                         message = std::move(message)]() mutable {
      self->enqueue(to, channel, std::move(message));
    });
  }

  void set_receiver(Channel channel, Receiver receiver) {
    receivers_[channel] = std::move(receiver);
  }

  void set_peer_certificates(PeerCertificates certificates) {
    asio::post(strand_, [self = shared_from_this(), certificates = std::move(certificates)] {
      self->peer_certificates_ = certificates;
      for (Connection* connection : self->connections_) {
        if (connection->peer == 0) continue;
        const Verdict verdict = self->verdict(connection->peer, connection->presented);
        if (verdict.taken()) continue;
        self->count(&Counters::connections_refused);
        spdlog::warn("backend: closing a connection with node {}: {}", connection->peer,
                     verdict.why);
        boost::system::error_code ignored;
        connection->socket->close(ignored);
      }
    });
  }

  std::string local_address() const {
    return local_.address().to_string() + ":" + std::to_string(local_.port());
  }

  Stats stats() const {
    return {counters_.messages_sent.load(),    counters_.messages_received.load(),
            counters_.messages_dropped.load(), counters_.connections_refused.load(),
            counters_.bytes_sent.load(),       counters_.bytes_received.load()};
  }

 private:
  struct Outgoing {
    std::array<std::uint8_t, kHeaderBytes> header;
    xdr::Buffer payload;
  };
  struct Peer {
    explicit Peer(asio::strand<asio::any_io_executor>& strand) : wake(strand) {}
    NodeId id = 0;
    std::string address;
    // Raft and lock messages go before RPCs queued earlier: a node sending unit data to a peer
    // faster than the peer takes it must not fall silent to the leader (which then records it
    // down) or hold up locks. Each queue keeps its own order.
    std::deque<Outgoing> control;
    std::deque<Outgoing> bulk;  // Channel::rpc
    std::size_t queued_bytes = 0;
    bool idle() const { return control.empty() && bulk.empty(); }
    Outgoing take(std::deque<Outgoing>& from) {
      queued_bytes -= from.front().payload.size();
      Outgoing out = std::move(from.front());
      from.pop_front();
      return out;
    }
    bool running = false;
    asio::steady_timer wake;  // cancelled when the queue gets work
  };

  // Counted on the strand for every message, read by stats() from any thread.
  struct Counters {
    std::atomic<std::uint64_t> messages_sent = 0;
    std::atomic<std::uint64_t> messages_received = 0;
    std::atomic<std::uint64_t> messages_dropped = 0;
    std::atomic<std::uint64_t> connections_refused = 0;
    std::atomic<std::uint64_t> bytes_sent = 0;
    std::atomic<std::uint64_t> bytes_received = 0;
  };
  void count(std::atomic<std::uint64_t> Counters::*counter, std::uint64_t n = 1) {
    (counters_.*counter).fetch_add(n, std::memory_order_relaxed);
  }

  Peer& peer(NodeId node) {
    auto& p = peers_[node];
    if (!p) {
      p = std::make_shared<Peer>(strand_);
      p->id = node;
    }
    return *p;
  }

  // Messages waiting for an address go out once it is known.
  void learn_address(NodeId node, const std::string& address, bool replace) {
    Peer& p = peer(node);
    if (p.address == address || (!replace && !p.address.empty())) return;
    p.address = address;
    p.wake.cancel();
  }

  void enqueue(NodeId to, Channel channel, xdr::Buffer message) {
    if (stopped_ || message.size() > options_.max_message_bytes) {
      count(&Counters::messages_dropped);
      return;
    }
    Peer& p = peer(to);
    Outgoing out;
    boost::endian::store_big_u32(out.header.data(), static_cast<std::uint32_t>(message.size()));
    boost::endian::store_big_u32(out.header.data() + 4, static_cast<std::uint32_t>(channel));
    out.payload = std::move(message);
    p.queued_bytes += out.payload.size();
    (channel == Channel::rpc ? p.bulk : p.control).push_back(std::move(out));
    while (p.queued_bytes > options_.max_queued_bytes && p.control.size() + p.bulk.size() > 1) {
      p.take(p.bulk.empty() ? p.control : p.bulk);
      count(&Counters::messages_dropped);
    }
    if (!p.running) {
      p.running = true;
      asio::co_spawn(strand_, run_peer(shared_from_this(), peers_[to]), asio::detached);
    } else {
      p.wake.cancel();
    }
  }

  // Sleeps until enqueue() or a new address cancels the peer's wake timer (or stop() does).
  static awaitable<void> wait_for_work(Peer& peer) {
    peer.wake.expires_after(std::chrono::hours(24));
    co_await peer.wake.async_wait(kUseTuple);
  }

  // Keeps one outgoing connection to a peer for as long as the transport runs.
  static awaitable<void> run_peer(std::shared_ptr<Impl> self, std::shared_ptr<Peer> peer) {
    auto backoff = self->options_.first_backoff;
    while (!self->stopped_) {
      if (peer->idle() || peer->address.empty()) {
        co_await wait_for_work(*peer);
        continue;
      }
      bool delivered_any = co_await self->connect_and_write(*peer);
      if (self->stopped_) break;
      if (delivered_any) backoff = self->options_.first_backoff;
      asio::steady_timer pause(self->strand_, backoff);
      co_await pause.async_wait(kUseTuple);
      backoff = std::min(backoff * 2, self->options_.max_backoff);
    }
  }

  awaitable<bool> connect_and_write(Peer& peer) {
    auto host_port = split_host_port(peer.address);
    boost::system::error_code ec;
    auto address = host_port.ok() ? asio::ip::make_address(host_port->first, ec)
                                  : asio::ip::address();
    if (!host_port.ok() || ec) {
      spdlog::warn("backend: node {} has an invalid address '{}'", peer.id, peer.address);
      co_return false;
    }
    tcp::endpoint endpoint(address, host_port->second);
    tcp::socket socket(strand_);
    Connection connection(*this, socket);
    ec = co_await with_timeout(socket.async_connect(endpoint, kUseTuple),
                               options_.connect_timeout);
    if (ec) co_return false;
    socket.set_option(tcp::no_delay(true), ec);
    if (!client_tls_) {
      PlainStream stream(socket);
      co_return co_await write_loop(stream, peer);
    }
    TlsStream stream(socket, client_tls_->native_handle(), TlsStream::Role::client);
    ec = co_await with_timeout(stream.handshake(), kHandshakeTimeout);
    if (ec) {
      spdlog::warn("backend: TLS handshake with node {} at {} failed: {}", peer.id,
                   peer.address, ec.message());
      co_return false;
    }
    connection.presented = peer_certificate(stream.native_handle());
    if (const Verdict verdict = this->verdict(peer.id, connection.presented); !verdict.taken()) {
      count(&Counters::connections_refused);
      drop_queued(peer, "not sending to node " + std::to_string(peer.id) + " at " + peer.address +
                            ": " + verdict.why);
      co_return false;
    }
    connection.peer = peer.id;
    co_return co_await write_loop(stream, peer);
  }

  // What waits for a peer that cannot take it is not sent to another: dropped, so that the
  // peer's loop rests until there is more to send.
  void drop_queued(Peer& peer, const std::string& why) {
    const std::size_t dropped = peer.control.size() + peer.bulk.size();
    count(&Counters::messages_dropped, dropped);
    spdlog::warn("backend: {}; dropped {} messages", why, dropped);
    peer.control.clear();
    peer.bulk.clear();
    peer.queued_bytes = 0;
  }

  // Reads the peer's answer to our hello: true if it took the connection.
  template <typename Stream>
  awaitable<bool> taken_by(Stream& stream, Peer& peer) {
    std::array<std::uint8_t, kAnswerBytes> answer{};
    auto ec = co_await with_timeout(stream.read_exact(asio::buffer(answer)), kHandshakeTimeout);
    const std::uint32_t said = boost::endian::load_big_u32(answer.data());
    const std::uint32_t reason_length = boost::endian::load_big_u32(answer.data() + 4);
    if (ec || said > static_cast<std::uint32_t>(HelloAnswer::revoked) ||
        reason_length > kMaxReasonLength) {
      co_return false;
    }
    if (said == static_cast<std::uint32_t>(HelloAnswer::taken)) co_return true;
    std::string why(reason_length, '\0');
    ec = co_await with_timeout(stream.read_exact(asio::buffer(why)), kHandshakeTimeout);
    if (ec) co_return false;
    drop_queued(peer, "node " + std::to_string(peer.id) + " at " + peer.address +
                          " refused this node: " + why);
    if (said == static_cast<std::uint32_t>(HelloAnswer::revoked)) report_revoked(peer.id, why);
    co_return false;
  }

  void report_revoked(NodeId by, std::string why) {
    std::lock_guard lock(deliver_mutex_);
    if (stopped_ || !options_.revoked) return;
    loop_.post([self = shared_from_this(), by, why = std::move(why)] {
      if (!self->stopped_) self->options_.revoked(by, why);
    });
  }

  // Tells the peer whether its connection is taken; false if the answer could not be sent.
  template <typename Stream>
  awaitable<bool> answer_hello(Stream& stream, const Verdict& verdict) {
    const std::string_view why = std::string_view(verdict.why).substr(0, kMaxReasonLength);
    std::array<std::uint8_t, kAnswerBytes> answer;
    boost::endian::store_big_u32(answer.data(), static_cast<std::uint32_t>(verdict.answer));
    boost::endian::store_big_u32(answer.data() + 4, static_cast<std::uint32_t>(why.size()));
    std::array<asio::const_buffer, 2> buffers{asio::buffer(answer), asio::buffer(why)};
    co_return !co_await with_timeout(stream.write_all(buffers), kHandshakeTimeout);
  }

  template <typename Stream>
  awaitable<bool> write_loop(Stream& stream, Peer& peer) {
    // The hello names the sender and where it listens, so that the receiver can answer a node
    // it has not been told about yet.
    std::string listening = local_address();
    std::array<std::uint8_t, kHelloBytes> hello;
    boost::endian::store_big_u32(hello.data(), kHelloMagic);
    boost::endian::store_big_u32(hello.data() + 4, kTcpProtocolVersion);
    boost::endian::store_big_u64(hello.data() + 8, options_.self);
    boost::endian::store_big_u32(hello.data() + 16, static_cast<std::uint32_t>(listening.size()));
    std::array<asio::const_buffer, 2> hello_buffers{asio::buffer(hello), asio::buffer(listening)};
    auto ec = co_await with_timeout(stream.write_all(hello_buffers), kWriteTimeout);
    if (ec) co_return false;
    auto answered = taken_by(stream, peer);
    if (!co_await std::move(answered)) co_return false;
    bool delivered_any = false;
    std::vector<Outgoing> batch;
    std::vector<asio::const_buffer> buffers;
    while (!stopped_) {
      if (peer.idle()) {
        stream.idle();
        co_await wait_for_work(peer);
        continue;
      }
      batch.clear();
      buffers.clear();
      while (!peer.control.empty() && batch.size() < kMaxBatch) {
        batch.push_back(peer.take(peer.control));
      }
      for (std::size_t bulk_bytes = 0; !peer.bulk.empty() && batch.size() < kMaxBatch;) {
        const std::size_t next = peer.bulk.front().payload.size();
        if (bulk_bytes > 0 && bulk_bytes + next > kMaxBulkBatchBytes) break;
        bulk_bytes += next;
        batch.push_back(peer.take(peer.bulk));
      }
      for (const auto& out : batch) {
        buffers.emplace_back(asio::buffer(out.header));
        buffers.emplace_back(asio::buffer(out.payload));
      }
      const std::size_t bytes = asio::buffer_size(buffers);
      ec = co_await with_timeout(stream.write_all(buffers), kWriteTimeout);
      if (ec) {
        // What was in this write may or may not have arrived; like any lost message, the
        // protocols on top cope.
        count(&Counters::messages_dropped, batch.size());
        co_return delivered_any;
      }
      delivered_any = true;
      count(&Counters::messages_sent, batch.size());
      count(&Counters::bytes_sent, bytes);
    }
    co_return delivered_any;
  }

  static awaitable<void> accept_loop(std::shared_ptr<Impl> self) {
    while (!self->stopped_) {
      auto [ec, socket] = co_await self->acceptor_.async_accept(kUseTuple);
      if (self->stopped_) break;
      if (ec) {
        asio::steady_timer pause(self->strand_, std::chrono::milliseconds(100));
        co_await pause.async_wait(kUseTuple);
        continue;
      }
      asio::co_spawn(self->strand_, serve_inbound(self, std::move(socket)), asio::detached);
    }
  }

  // A socket in use, in the set that stop() and set_peer_certificates() close; with the node
  // at the other end once its certificate was checked.
  struct Connection {
    Connection(Impl& impl, tcp::socket& socket) : impl(impl), socket(&socket) {
      impl.connections_.insert(this);
    }
    ~Connection() { impl.connections_.erase(this); }
    Impl& impl;
    tcp::socket* socket;
    NodeId peer = 0;
    std::optional<PeerCertificate> presented;
  };

  // Whether the peer that presented `presented` may be node `node`.
  Verdict verdict(NodeId node, const std::optional<PeerCertificate>& presented) const {
    if (!options_.tls) return {};
    if (!presented) return {HelloAnswer::refused, "it presented no certificate"};
    if (presented->common_name != node_common_name(node)) {
      return {HelloAnswer::refused, "its certificate is that of " + presented->common_name +
                                        ", not of node " + std::to_string(node)};
    }
    if (peer_certificates_.revoked.contains(presented->fingerprint)) {
      return {HelloAnswer::revoked,
              "its certificate was revoked when the node was removed from the cluster"};
    }
    const auto issued = peer_certificates_.issued.find(node);
    if (issued != peer_certificates_.issued.end() && !issued->second.empty() &&
        issued->second != presented->fingerprint) {
      return {HelloAnswer::refused,
              "the cluster issued node " + std::to_string(node) + " another certificate"};
    }
    return {};
  }

  static awaitable<void> serve_inbound(std::shared_ptr<Impl> self, tcp::socket socket) {
    Connection connection(*self, socket);
    boost::system::error_code ec;
    socket.set_option(tcp::no_delay(true), ec);
    if (!self->server_tls_) {
      PlainStream stream(socket);
      co_await self->read_loop(stream, connection);
      co_return;
    }
    TlsStream stream(socket, self->server_tls_->native_handle(), TlsStream::Role::server);
    ec = co_await with_timeout(stream.handshake(), kHandshakeTimeout);
    if (ec) {
      self->count(&Counters::connections_refused);
      boost::system::error_code ignored;
      auto peer = socket.remote_endpoint(ignored);
      spdlog::warn("backend: refused a connection from {}: TLS handshake failed ({})",
                   peer.address().to_string(), ec.message());
      co_return;
    }
    connection.presented = peer_certificate(stream.native_handle());
    co_await self->read_loop(stream, connection);
  }

  template <typename Stream>
  awaitable<void> read_loop(Stream& stream, Connection& connection) {
    std::array<std::uint8_t, kHelloBytes> hello;
    auto ec = co_await with_timeout(stream.read_exact(asio::buffer(hello)), kHandshakeTimeout);
    NodeId from = boost::endian::load_big_u64(hello.data() + 8);
    std::uint32_t address_length = boost::endian::load_big_u32(hello.data() + 16);
    if (ec || boost::endian::load_big_u32(hello.data()) != kHelloMagic ||
        boost::endian::load_big_u32(hello.data() + 4) != kTcpProtocolVersion || from == 0 ||
        address_length > kMaxAddressLength) {
      if (!ec) {
        count(&Counters::connections_refused);
        spdlog::warn("backend: refused a connection with a malformed hello");
      }
      co_return;
    }
    std::string address(address_length, '\0');
    ec = co_await with_timeout(stream.read_exact(asio::buffer(address)), kHandshakeTimeout);
    if (ec) co_return;
    const Verdict verdict = this->verdict(from, connection.presented);
    auto answering = answer_hello(stream, verdict);
    const bool answered = co_await std::move(answering);
    if (!verdict.taken()) {
      count(&Counters::connections_refused);
      boost::system::error_code ignored;
      spdlog::warn("backend: refused a connection from {} claiming to be node {}: {}",
                   connection.socket->remote_endpoint(ignored).address().to_string(), from,
                   verdict.why);
      co_return;
    }
    if (!answered) co_return;
    connection.peer = from;
    learn_address(from, address, false);
    std::array<std::uint8_t, kHeaderBytes> header;
    while (!stopped_) {
      if (auto failed = co_await stream.read_exact(asio::buffer(header)); failed) co_return;
      std::uint32_t length = boost::endian::load_big_u32(header.data());
      std::uint32_t channel = boost::endian::load_big_u32(header.data() + 4);
      if (length > options_.max_message_bytes || !known_channel(channel)) {
        count(&Counters::connections_refused);
        spdlog::warn("backend: closing the connection from node {}: {}", from,
                     known_channel(channel) ? "message over the size bound" : "unknown channel");
        co_return;
      }
      xdr::Buffer payload(length);
      if (auto failed = co_await stream.read_exact(asio::buffer(payload)); failed) co_return;
      count(&Counters::messages_received);
      count(&Counters::bytes_received, header.size() + payload.size());
      deliver(from, static_cast<Channel>(channel), std::move(payload));
    }
  }

  void deliver(NodeId from, Channel channel, xdr::Buffer payload) {
    std::lock_guard lock(deliver_mutex_);
    if (stopped_) return;
    loop_.post([self = shared_from_this(), from, channel, payload = std::move(payload)]() mutable {
      if (self->stopped_) return;
      auto it = self->receivers_.find(channel);
      if (it != self->receivers_.end() && it->second) it->second(from, payload);
    });
  }

  asio::strand<asio::any_io_executor> strand_;
  EventLoop& loop_;
  TcpTransportOptions options_;
  std::shared_ptr<ssl::context> server_tls_;
  std::shared_ptr<ssl::context> client_tls_;
  tcp::acceptor acceptor_;
  tcp::endpoint local_;
  std::map<NodeId, std::shared_ptr<Peer>> peers_;  // on the strand
  std::set<Connection*> connections_;              // on the strand
  PeerCertificates peer_certificates_;             // on the strand
  std::map<Channel, Receiver> receivers_;          // on the loop
  std::mutex deliver_mutex_;
  std::atomic<bool> stopped_ = false;  // set under deliver_mutex_
  Counters counters_;
};

Result<std::unique_ptr<TcpTransport>> TcpTransport::start(asio::any_io_executor executor,
                                                          EventLoop& loop,
                                                          TcpTransportOptions options) {
  if (options.self == 0) return error(Errc::invalid_argument, "node id must not be 0");
  auto impl = std::make_shared<Impl>(std::move(executor), loop, std::move(options));
  TP_RETURN_IF_ERROR(impl->open());
  return std::unique_ptr<TcpTransport>(new TcpTransport(std::move(impl)));
}

TcpTransport::TcpTransport(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
TcpTransport::~TcpTransport() { impl_->stop(); }
void TcpTransport::stop() { impl_->stop(); }

void TcpTransport::set_address(NodeId node, const std::string& address) {
  impl_->set_address(node, address);
}
void TcpTransport::send(NodeId to, Channel channel, xdr::Buffer message) {
  impl_->send(to, channel, std::move(message));
}
void TcpTransport::set_receiver(Channel channel, Receiver receiver) {
  impl_->set_receiver(channel, std::move(receiver));
}
void TcpTransport::set_peer_certificates(PeerCertificates certificates) {
  impl_->set_peer_certificates(std::move(certificates));
}
std::string TcpTransport::local_address() const { return impl_->local_address(); }
TcpTransport::Stats TcpTransport::stats() const { return impl_->stats(); }

}  // namespace tidepool::cluster
