#include "nfsd/internal/rpc_transport.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/endian/conversion.hpp>
#include <cerrno>
#include <deque>
#include <optional>

#include "common/read_ahead.h"

namespace tidepool::nfsd {

namespace asio = boost::asio;
using asio::ip::tcp;
using asio::ip::udp;

namespace {

constexpr auto kUseTuple = asio::as_tuple(asio::use_awaitable);
constexpr std::uint32_t kLastFragment = 0x80000000u;
constexpr std::size_t kRecordMarkBytes = 4;
// Room a reply starts with: what a metadata reply needs, so that one allocation serves it
// rather than a doubling from the record mark up.
constexpr std::size_t kReplyStartBytes = 1024;
constexpr std::size_t kMaxDatagram = 65536;
constexpr std::size_t kMaxDatagramReply = 65507;  // the most one UDP/IPv4 datagram carries
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);

boost::asio::ip::address_v4 v4_of(const asio::ip::address& a) {
  return a.is_v4() ? a.to_v4() : asio::ip::address_v4();
}

}  // namespace

class RpcTransport::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, RpcTransport& transport, std::optional<std::size_t> context)
      : transport_(transport),
        context_(context),
        executor_(socket.get_executor()),
        socket_(std::move(socket)),
        incoming_(socket_),
        slot_free_(executor_),
        watchdog_(executor_) {
    boost::system::error_code ec;
    auto peer = socket_.remote_endpoint(ec);
    if (!ec) {
      client_ = v4_of(peer.address());
      client_port_ = peer.port();
    }
    socket_.set_option(tcp::no_delay(true), ec);
    // Replies spliced from pipes are written with system calls of our own, which must never
    // block the connection's thread.
    socket_.native_non_blocking(true, ec);
  }

  void start() {
    auto self = shared_from_this();
    asio::co_spawn(
        executor_, [self]() { return self->read_loop(); }, asio::detached);
    asio::co_spawn(
        executor_, [self]() { return self->watch_deadline(); }, asio::detached);
  }

  // Safe from any thread.
  void close() {
    asio::post(executor_, [self = shared_from_this()] { self->close_on_thread(); });
  }

 private:
  void close_on_thread() {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    slot_free_.cancel();
    watchdog_.cancel();
  }

  using TimePoint = std::chrono::steady_clock::time_point;
  static constexpr TimePoint kNever = TimePoint::max();

  TimePoint next_deadline() const { return std::min(read_deadline_, write_deadline_); }

  // Moves a deadline. The watchdog is woken to re-arm only when a deadline comes before the
  // time it sleeps until: every call moves the deadlines later, and cancelling the watchdog
  // for each cost a timer update and a wake-up of its coroutine per call. A watchdog that wakes
  // before the deadlines it sleeps for sleeps again.
  void set_deadline(TimePoint& deadline, TimePoint when) {
    deadline = when;
    if (when < watchdog_until_) watchdog_.cancel();
  }
  void arm_read_deadline(std::chrono::seconds timeout) {
    set_deadline(read_deadline_, std::chrono::steady_clock::now() + timeout);
  }

  awaitable<void> watch_deadline() {
    while (!closed_) {
      watchdog_until_ = next_deadline();
      watchdog_.expires_at(watchdog_until_);
      co_await watchdog_.async_wait(kUseTuple);
      if (!closed_ && std::chrono::steady_clock::now() >= next_deadline()) {
        spdlog::debug("closing idle or stalled connection from {}", client_.to_string());
        close_on_thread();
      }
    }
  }

  // Reads one whole record (all its fragments). False ends the connection.
  awaitable<bool> read_record(xdr::Buffer& record) {
    record.clear();
    const auto& limits = transport_.limits_;
    for (bool first = true;; first = false) {
      arm_read_deadline(first ? limits.idle_timeout : limits.record_timeout);
      std::uint8_t mark[kRecordMarkBytes];
      auto [ec, n] = co_await incoming_.read_exact(asio::buffer(mark));
      transport_.bytes_received_.fetch_add(n, std::memory_order_relaxed);
      if (ec) co_return false;
      std::uint32_t header = boost::endian::load_big_u32(mark);
      std::size_t length = header & ~kLastFragment;
      if (length > limits.max_record_bytes - record.size()) {
        spdlog::warn("closing connection from {}: record larger than {} bytes",
                     client_.to_string(), limits.max_record_bytes);
        co_return false;
      }
      arm_read_deadline(limits.record_timeout);
      // Buffers do not zero what resize() adds, so a length the client claims but never sends
      // costs address space, not memory: pages are backed only as the bytes arrive.
      std::size_t at = record.size();
      record.resize(at + length);
      auto [ec2, n2] = co_await incoming_.read_exact(asio::buffer(record.data() + at, length));
      transport_.bytes_received_.fetch_add(n2, std::memory_order_relaxed);
      if (ec2) co_return false;
      if (header & kLastFragment) co_return true;
    }
  }

  awaitable<void> read_loop() {
    auto self = shared_from_this();
    xdr::Buffer record;
    while (!closed_ && co_await read_record(record)) {
      if (incoming_.receives() != acknowledged_receives_) {
        acknowledged_receives_ = incoming_.receives();
        acknowledge_at_once();
      }
      // A slot is held from the call's arrival until its reply is written, so a client that
      // does not read its replies stops being read instead of piling them up here.
      while (in_flight_ >= transport_.limits_.max_calls_in_flight && !closed_) {
        set_deadline(read_deadline_, kNever);
        slot_free_.expires_at(kNever);
        co_await slot_free_.async_wait(kUseTuple);
      }
      if (closed_) break;
      ++in_flight_;
      asio::co_spawn(executor_, handle(self, std::move(record)), asio::detached);
      record = {};
    }
    close_on_thread();
    transport_.forget(self, context_);
  }

  // Acknowledges what arrived now rather than with the next reply. A client that leaves Nagle's
  // algorithm on, as libnfs does, holds each call made while an earlier one is unacknowledged
  // until that ACK comes, and Linux delays it until the next segment we send: with calls in
  // flight, every call then waited for a reply to some other call. The mode lasts until TCP
  // sees an exchange of requests and replies again, so it is set after every receive.
  void acknowledge_at_once() {
    const int on = 1;
    ::setsockopt(socket_.native_handle(), IPPROTO_TCP, TCP_QUICKACK, &on, sizeof on);
  }

  // A reply on its way out: its bytes, and those it sends from where they lie.
  struct Outgoing {
    xdr::Buffer bytes;
    ReplyPieces pieces;
  };

  // Runs on the connection's thread, concurrently with its other calls.
  static awaitable<void> handle(std::shared_ptr<Connection> self,
                                xdr::Buffer record) {
    Outgoing reply;
    reply.bytes.reserve(kReplyStartBytes);
    reply.bytes.resize(kRecordMarkBytes);
    bool send = co_await self->transport_.dispatcher_.dispatch(
        record, RpcPeer{self->client_, self->client_port_, false}, reply.bytes, &reply.pieces);
    if (send) {
      const std::size_t length = reply.bytes.size() - kRecordMarkBytes + reply.pieces.bytes();
      boost::endian::store_big_u32(reply.bytes.data(),
                                   kLastFragment | static_cast<std::uint32_t>(length));
    } else {
      reply.bytes.clear();
    }
    // Inline when the call ended on the connection's thread, as it does unless a completion
    // came from elsewhere.
    asio::dispatch(self->executor_, [self, reply = std::move(reply)]() mutable {
      if (reply.bytes.empty()) {
        self->release_slots(1);
      } else {
        self->send(std::move(reply));
      }
    });
  }

  void release_slots(std::uint32_t n) {
    in_flight_ -= n;
    slot_free_.cancel();
  }

  void send(Outgoing reply) {
    if (closed_) {
      release_slots(1);
      return;
    }
    outbox_.push_back(std::move(reply));
    if (!writing_) {
      writing_ = true;
      asio::co_spawn(executor_, write_loop(shared_from_this()), asio::detached);
    }
  }

  static awaitable<void> write_loop(std::shared_ptr<Connection> self) {
    std::vector<Outgoing> batch;
    std::vector<asio::const_buffer> buffers;
    while (!self->outbox_.empty() && !self->closed_) {
      batch.clear();
      while (!self->outbox_.empty()) {
        batch.push_back(std::move(self->outbox_.front()));
        self->outbox_.pop_front();
      }
      self->set_deadline(self->write_deadline_, std::chrono::steady_clock::now() +
                                                    self->transport_.limits_.record_timeout);
      const bool written = co_await self->write_batch(batch, buffers);
      self->write_deadline_ = kNever;
      self->release_slots(static_cast<std::uint32_t>(batch.size()));
      if (!written) self->close_on_thread();
    }
    self->release_slots(static_cast<std::uint32_t>(self->outbox_.size()));
    self->outbox_.clear();
    self->writing_ = false;
  }

  // The replies' bytes in order, their pieces in their places: what lies in memory in as few
  // writes as it takes, and what lies in a pipe spliced from there between them.
  awaitable<bool> write_batch(const std::vector<Outgoing>& batch,
                              std::vector<asio::const_buffer>& buffers) {
    buffers.clear();
    for (const Outgoing& reply : batch) {
      std::size_t from = 0;
      for (const ReplyPieces::Piece& piece : reply.pieces.pieces) {
        if (piece.at > from) buffers.emplace_back(reply.bytes.data() + from, piece.at - from);
        from = piece.at;
        if (!piece.piped) {
          buffers.emplace_back(piece.bytes.data(), piece.bytes.size());
          continue;
        }
        if (!co_await send_ahead_of_splice(buffers) || !co_await splice_out(*piece.piped)) {
          co_return false;
        }
        buffers.clear();
      }
      if (reply.bytes.size() > from) {
        buffers.emplace_back(reply.bytes.data() + from, reply.bytes.size() - from);
      }
    }
    if (buffers.empty()) co_return true;
    auto [ec, n] = co_await asio::async_write(socket_, buffers, kUseTuple);
    transport_.bytes_sent_.fetch_add(n, std::memory_order_relaxed);
    co_return !ec;
  }

  // Sends `buffers` whole (consuming them), telling TCP that more follows at once
  // (MSG_MORE): a reply's header then goes out with the first of the bytes spliced after it,
  // not in a segment of its own.
  awaitable<bool> send_ahead_of_splice(std::vector<asio::const_buffer>& buffers) {
    std::size_t first = 0;
    std::array<iovec, 64> iov;
    for (;;) {
      while (first < buffers.size() && buffers[first].size() == 0) ++first;
      if (first == buffers.size()) co_return true;
      std::size_t count = 0;
      for (std::size_t i = first; i < buffers.size() && count < iov.size(); ++i) {
        iov[count++] = {const_cast<void*>(buffers[i].data()), buffers[i].size()};
      }
      msghdr message{};
      message.msg_iov = iov.data();
      message.msg_iovlen = count;
      const ssize_t n =
          ::sendmsg(socket_.native_handle(), &message, MSG_MORE | MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) co_return false;
        if (!co_await writable()) co_return false;
        continue;
      }
      transport_.bytes_sent_.fetch_add(static_cast<std::size_t>(n), std::memory_order_relaxed);
      for (auto left = static_cast<std::size_t>(n); left > 0;) {
        const std::size_t step = std::min(left, buffers[first].size());
        buffers[first] += step;
        left -= step;
        if (buffers[first].size() == 0) ++first;
      }
    }
  }

  // Splices every byte the pipe holds to the socket.
  awaitable<bool> splice_out(PipedBytes& piped) {
    while (piped.size() > 0) {
      const ssize_t n = ::splice(piped.read_end(), nullptr, socket_.native_handle(), nullptr,
                                 piped.size(), SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        piped.taken(static_cast<std::size_t>(n));
        transport_.bytes_sent_.fetch_add(static_cast<std::size_t>(n), std::memory_order_relaxed);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      // The pipe holds bytes, so only the socket can be full.
      if (n < 0 && errno == EAGAIN && co_await writable()) continue;
      co_return false;
    }
    co_return true;
  }

  // Waits until the socket takes bytes again; false when it never will (closed, or the write
  // deadline closed it).
  awaitable<bool> writable() {
    if (closed_) co_return false;
    auto [ec] = co_await socket_.async_wait(tcp::socket::wait_write, kUseTuple);
    co_return !ec && !closed_;
  }

  RpcTransport& transport_;
  // Which of the transport's contexts it was spread to; none when it was not spread.
  const std::optional<std::size_t> context_;
  // The one thread of the connection's io_context: everything below is touched there only.
  asio::any_io_executor executor_;
  tcp::socket socket_;
  ReadAhead<tcp::socket> incoming_;  // pipelined calls come in with one receive
  std::uint64_t acknowledged_receives_ = 0;  // incoming_'s receives when ACKs were last sped up
  asio::ip::address_v4 client_;
  std::uint16_t client_port_ = 0;
  asio::steady_timer slot_free_;  // cancelled when a call finishes
  asio::steady_timer watchdog_;
  TimePoint read_deadline_ = kNever;
  TimePoint write_deadline_ = kNever;
  TimePoint watchdog_until_ = kNever;  // what the watchdog's timer is set to
  std::uint32_t in_flight_ = 0;
  std::deque<Outgoing> outbox_;
  bool writing_ = false;
  bool closed_ = false;
};

RpcTransport::RpcTransport(std::vector<asio::io_context*> contexts, const RpcDispatcher& dispatcher,
                           const RpcDispatcher& udp_dispatcher, TransportLimits limits)
    : contexts_(std::move(contexts)),
      io_(*contexts_.at(0)),
      dispatcher_(dispatcher),
      udp_dispatcher_(udp_dispatcher),
      limits_(limits),
      connections_on_(contexts_.size(), 0) {}

// Ties go to the last: the first also runs listening, UDP and what other nodes ship here.
std::size_t RpcTransport::least_loaded_context() const {
  std::size_t least = contexts_.size() - 1;
  for (std::size_t i = contexts_.size() - 1; i-- > 0;) {
    if (connections_on_[i] < connections_on_[least]) least = i;
  }
  return least;
}

RpcTransport::~RpcTransport() { stop(); }

Status RpcTransport::listen_tcp(const tcp::endpoint& endpoint, Placement placement) {
  auto acceptor = std::make_unique<tcp::acceptor>(io_);
  boost::system::error_code ec;
  std::string where = endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
  acceptor->open(endpoint.protocol(), ec);
  if (!ec) acceptor->set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor->bind(endpoint, ec);
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    Errc code = ec == asio::error::address_in_use ? Errc::already_exists : Errc::unavailable;
    return error(code, "cannot listen on tcp " + where + ": " + ec.message());
  }
  auto& ref = *acceptor;
  acceptors_.push_back(std::move(acceptor));
  asio::co_spawn(io_, accept_loop(ref, placement), asio::detached);
  return {};
}

Status RpcTransport::listen_udp(const udp::endpoint& endpoint) {
  auto socket = std::make_unique<udp::socket>(io_);
  boost::system::error_code ec;
  std::string where = endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
  socket->open(endpoint.protocol(), ec);
  if (!ec) socket->bind(endpoint, ec);
  if (ec) {
    Errc code = ec == asio::error::address_in_use ? Errc::already_exists : Errc::unavailable;
    return error(code, "cannot bind udp " + where + ": " + ec.message());
  }
  auto& ref = *socket;
  udp_sockets_.push_back(std::move(socket));
  asio::co_spawn(io_, udp_loop(ref), asio::detached);
  return {};
}

void RpcTransport::stop() {
  boost::system::error_code ignored;
  for (auto& a : acceptors_) a->close(ignored);
  for (auto& s : udp_sockets_) s->close(ignored);
  std::set<std::shared_ptr<Connection>> open;
  {
    std::lock_guard lock(mutex_);
    open.swap(connections_);
  }
  for (auto& c : open) c->close();
}

void RpcTransport::forget(const std::shared_ptr<Connection>& connection,
                          std::optional<std::size_t> context) {
  std::lock_guard lock(mutex_);
  if (connections_.erase(connection) != 0 && context) --connections_on_[*context];
}

awaitable<void> RpcTransport::accept_loop(tcp::acceptor& acceptor, Placement placement) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(kUseTuple);
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
      // Out of descriptors or memory: the listener stays readable, so pause instead of spinning.
      spdlog::warn("accept failed: {}", ec.message());
      asio::steady_timer pause(io_, kAcceptBackoff);
      co_await pause.async_wait(kUseTuple);
      continue;
    }
    std::shared_ptr<Connection> connection;
    {
      std::lock_guard lock(mutex_);
      if (connections_.size() >= limits_.max_connections) {
        spdlog::warn("refusing a connection: {} open already", connections_.size());
        continue;  // the socket closes as it goes out of scope
      }
      const std::size_t context = placement == Placement::spread ? least_loaded_context() : 0;
      // The socket moves to its context's reactor; a failure there refuses the connection and
      // leaves the listener accepting.
      boost::system::error_code moved;
      const tcp::endpoint local = socket.local_endpoint(moved);
      const int fd = moved ? -1 : socket.release(moved);
      tcp::socket on_context(*contexts_[context]);
      if (!moved) on_context.assign(local.protocol(), fd, moved);
      if (moved) {
        if (fd >= 0 && !on_context.is_open()) ::close(fd);
        spdlog::warn("refusing a connection: {}", moved.message());
        continue;
      }
      connection = std::make_shared<Connection>(
          std::move(on_context), *this,
          placement == Placement::spread ? std::optional<std::size_t>(context) : std::nullopt);
      connections_.insert(connection);
      if (placement == Placement::spread) ++connections_on_[context];
    }
    connection->start();
  }
}

awaitable<void> RpcTransport::udp_loop(udp::socket& socket) {
  xdr::Buffer datagram(kMaxDatagram);
  xdr::Buffer reply;
  for (;;) {
    udp::endpoint peer;
    auto [ec, n] = co_await socket.async_receive_from(asio::buffer(datagram), peer, kUseTuple);
    if (ec) {
      if (ec == asio::error::operation_aborted || !socket.is_open()) co_return;
      continue;
    }
    bytes_received_.fetch_add(n, std::memory_order_relaxed);
    reply.clear();
    bool send = co_await udp_dispatcher_.dispatch(
        {datagram.data(), n}, RpcPeer{v4_of(peer.address()), peer.port(), true}, reply);
    if (send && reply.size() <= kMaxDatagramReply) {
      auto [send_error, sent] =
          co_await socket.async_send_to(asio::buffer(reply), peer, kUseTuple);
      if (!send_error) bytes_sent_.fetch_add(sent, std::memory_order_relaxed);
    }
  }
}

}  // namespace tidepool::nfsd
