#include "cluster/tcp_transport.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/endian/conversion.hpp>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <numeric>
#include <string_view>
#include <thread>

namespace tidepool::cluster {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Collects what a transport delivers (or, through note(), what it tells of a revoked
// certificate: by whom and why), for the test thread to wait on.
class Inbox {
 public:
  void attach(Transport& transport, Channel channel = Channel::rpc) {
    transport.set_receiver(channel, [this](NodeId from, std::span<const std::uint8_t> bytes) {
      add(from, std::string(bytes.begin(), bytes.end()));
    });
  }
  std::function<void(NodeId, const std::string&)> note() {
    return [this](NodeId by, const std::string& why) { add(by, why); };
  }
  bool wait_for(std::size_t count, std::chrono::milliseconds timeout = 5s) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return messages_.size() >= count; });
  }
  std::vector<std::pair<NodeId, std::string>> messages() {
    std::lock_guard lock(mutex_);
    return messages_;
  }

 private:
  void add(NodeId from, std::string text) {
    std::lock_guard lock(mutex_);
    messages_.emplace_back(from, std::move(text));
    changed_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::pair<NodeId, std::string>> messages_;
};

xdr::Buffer bytes(const std::string& text) { return xdr::Buffer(text.begin(), text.end()); }

class TcpTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tidepool-tcp-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    transports_.clear();
    work_.reset();
    io_.stop();
    thread_.join();
    loops_.clear();
    fs::remove_all(dir_);
  }

  // A node's TLS identity under `ca` (created on first use).
  TlsFiles identity(const std::string& ca, const std::string& name) {
    std::string ca_cert = (dir_ / (ca + ".crt")).string();
    std::string ca_key = (dir_ / (ca + ".key")).string();
    if (!fs::exists(ca_cert)) {
      EXPECT_TRUE(create_certificate_authority(ca, ca_cert, ca_key).ok());
    }
    std::string cert = (dir_ / (ca + "-" + name + ".crt")).string();
    std::string key = (dir_ / (ca + "-" + name + ".key")).string();
    EXPECT_TRUE(issue_certificate(ca_cert, ca_key, name, cert, key).ok());
    return {ca_cert, cert, key};
  }

  TcpTransport* start(NodeId id, std::optional<TlsFiles> tls, std::string address = "127.0.0.1:0",
                      std::function<void(NodeId, const std::string&)> revoked = {}) {
    loops_.push_back(make_asio_event_loop(io_.get_executor()));
    TcpTransportOptions options;
    options.self = id;
    options.revoked = std::move(revoked);
    options.listen_address = std::move(address);
    options.tls = std::move(tls);
    options.max_message_bytes = 1 << 20;
    auto started = TcpTransport::start(io_.get_executor(), *loops_.back(), options);
    EXPECT_TRUE(started.ok()) << started.status().to_string();
    if (!started.ok()) return nullptr;
    transports_.push_back(std::move(started).value());
    return transports_.back().get();
  }

  // An address nobody listens on: a port that was free, taken and closed again. A peer there
  // is down until a transport starts on it.
  std::string down_peer_address() {
    TcpTransport* probe = start(2, std::nullopt);
    std::string address = probe->local_address();
    transports_.pop_back();
    return address;
  }

  // Sends raw bytes to `address` as an impostor would; returns once the server closed it (what
  // it answered before, read and left).
  bool server_closes_after(const std::string& address, const std::vector<std::uint8_t>& data) {
    asio::io_context io;
    asio::ip::tcp::socket socket(io);
    auto host_port = split_host_port(address);
    boost::system::error_code ec;
    socket.connect({asio::ip::make_address(host_port->first), host_port->second}, ec);
    if (ec) return false;
    asio::write(socket, asio::buffer(data), ec);
    std::array<char, 4096> answer;
    socket.non_blocking(false);
    struct timeval tv = {5, 0};
    ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (int reads = 0; reads < 16 && !ec; ++reads) socket.read_some(asio::buffer(answer), ec);
    return ec == asio::error::eof || ec == asio::error::connection_reset;
  }

  fs::path dir_;
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_{
      io_.get_executor()};
  std::thread thread_;
  std::vector<std::unique_ptr<EventLoop>> loops_;
  std::vector<std::unique_ptr<TcpTransport>> transports_;
};

// B is never told where A is: it learns it from A's hello.
TEST_F(TcpTransportTest, MessagesArriveInOrderBothWays) {
  TcpTransport* a = start(1, std::nullopt);
  TcpTransport* b = start(2, std::nullopt);
  Inbox at_a, at_b;
  at_a.attach(*a);
  at_b.attach(*b);
  a->set_address(2, b->local_address());
  for (int i = 0; i < 1000; ++i) a->send(2, Channel::rpc, bytes("m" + std::to_string(i)));
  b->send(1, Channel::rpc, bytes("hello"));
  ASSERT_TRUE(at_b.wait_for(1000));
  ASSERT_TRUE(at_a.wait_for(1));
  auto got = at_b.messages();
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(got[i].first, 1u);
    ASSERT_EQ(got[i].second, "m" + std::to_string(i));
  }
  EXPECT_EQ(at_a.messages()[0], std::make_pair(NodeId{2}, std::string("hello")));
}

TEST_F(TcpTransportTest, MutualTlsUnderTheClusterCaCarriesMessages) {
  TcpTransport* a = start(1, identity("cluster", "node-1"));
  TcpTransport* b = start(2, identity("cluster", "node-2"));
  Inbox at_b;
  at_b.attach(*b);
  a->set_address(2, b->local_address());
  a->send(2, Channel::rpc, bytes("secret"));
  ASSERT_TRUE(at_b.wait_for(1));
  EXPECT_EQ(at_b.messages()[0].second, "secret");
}

TEST_F(TcpTransportTest, APeerWithoutACertificateFromTheClusterCaIsRefused) {
  TcpTransport* server = start(1, identity("cluster", "node-1"));
  TcpTransport* impostor = start(2, identity("other", "node-2"));
  TcpTransport* plain = start(3, std::nullopt);
  TcpTransport* member = start(4, identity("cluster", "node-4"));
  Inbox at_server;
  at_server.attach(*server);
  for (TcpTransport* t : {impostor, plain, member}) {
    t->set_address(1, server->local_address());
    t->send(1, Channel::rpc, bytes("from " + t->local_address()));
  }
  ASSERT_TRUE(at_server.wait_for(1));
  std::this_thread::sleep_for(200ms);
  auto got = at_server.messages();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].first, 4u);
  EXPECT_GE(server->stats().connections_refused, 2u);
}

// A node cannot claim to be another: the id its hello names, and the id it is dialled as, must be
// the one its certificate names.
TEST_F(TcpTransportTest, APeerIsTheNodeItsCertificateNamesAndNoOther) {
  TcpTransport* server = start(1, identity("cluster", "node-1"));
  TcpTransport* liar = start(2, identity("cluster", "node-3"));
  TcpTransport* honest = start(4, identity("cluster", "node-4"));
  Inbox at_server, at_liar;
  at_server.attach(*server);
  at_liar.attach(*liar);
  liar->set_address(1, server->local_address());
  liar->send(1, Channel::rpc, bytes("node 3's certificate, saying it is node 2"));
  honest->set_address(1, server->local_address());
  honest->send(1, Channel::rpc, bytes("node 4"));
  server->set_address(2, liar->local_address());
  server->send(2, Channel::rpc, bytes("for node 2 only"));
  ASSERT_TRUE(at_server.wait_for(1));
  std::this_thread::sleep_for(300ms);
  ASSERT_EQ(at_server.messages().size(), 1u);
  EXPECT_EQ(at_server.messages()[0].first, 4u);
  EXPECT_TRUE(at_liar.messages().empty());
  EXPECT_GE(server->stats().connections_refused, 2u) << "the liar's hello and the dialled node";
}

// Counts up to `count` refused connections on `transport`, for five seconds at most.
bool refused_at_least(TcpTransport& transport, std::uint64_t count) {
  for (int i = 0; i < 500 && transport.stats().connections_refused < count; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  return transport.stats().connections_refused >= count;
}

// The fingerprint of the certificate in `identity`, as the group view records it.
std::string fingerprint_of(const TlsFiles& identity) {
  std::ifstream file(identity.certificate);
  const std::string pem((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const Result<std::string> fingerprint = certificate_fingerprint(pem);
  EXPECT_TRUE(fingerprint.ok()) << fingerprint.status().to_string();
  return fingerprint.ok() ? *fingerprint : std::string();
}

// ... and the node refused learns that its certificate was revoked, from the peer's answer to
// its hello: it is how a node the cluster removed learns it.
TEST_F(TcpTransportTest, ARevokedCertificateIsRefusedAndItsOpenConnectionClosedAtOnce) {
  TcpTransport* server = start(1, identity("cluster", "node-1"));
  const TlsFiles removed_identity = identity("cluster", "node-2");
  Inbox told;
  TcpTransport* removed = start(2, removed_identity, "127.0.0.1:0", told.note());
  Inbox at_server;
  at_server.attach(*server);
  removed->set_address(1, server->local_address());
  removed->send(1, Channel::rpc, bytes("while a member"));
  ASSERT_TRUE(at_server.wait_for(1));

  server->set_peer_certificates(PeerCertificates{{}, {fingerprint_of(removed_identity)}});
  ASSERT_TRUE(refused_at_least(*server, 1)) << "the open connection is closed";
  EXPECT_TRUE(told.messages().empty()) << "a connection closed says nothing of why";
  // The first write after the close may go into the closed connection, unseen: it takes a new
  // connection, as the node's protocols make by sending again, to hear the answer.
  for (int attempt = 0; attempt < 50 && told.messages().empty(); ++attempt) {
    removed->send(1, Channel::rpc, bytes("after its removal"));
    told.wait_for(1, 100ms);
  }
  ASSERT_FALSE(told.messages().empty());
  EXPECT_EQ(told.messages()[0].first, 1u);
  EXPECT_NE(told.messages()[0].second.find("revoked"), std::string::npos)
      << told.messages()[0].second;
  EXPECT_EQ(at_server.messages().size(), 1u);
}

TEST_F(TcpTransportTest, AMemberIsTakenOnlyWithTheCertificateTheViewRecordsForIt) {
  TcpTransport* server = start(1, identity("cluster", "node-1"));
  const TlsFiles current = identity("cluster", "node-3");
  Inbox told;
  TcpTransport* member = start(3, current, "127.0.0.1:0", told.note());
  Inbox at_server;
  at_server.attach(*server);
  server->set_peer_certificates(PeerCertificates{{{3, "the fingerprint of another"}}, {}});
  member->set_address(1, server->local_address());
  member->send(1, Channel::rpc, bytes("with its certificate"));
  ASSERT_TRUE(refused_at_least(*server, 1));
  EXPECT_TRUE(at_server.messages().empty());

  server->set_peer_certificates(PeerCertificates{{{3, fingerprint_of(current)}}, {}});
  // The connection the server closed swallows what is written to it before the sender sees
  // that it is closed: as after any lost connection, the sender's protocol sends again.
  for (int attempt = 0; attempt < 50 && at_server.messages().empty(); ++attempt) {
    member->send(1, Channel::rpc, bytes("with the certificate the view records"));
    at_server.wait_for(1, 100ms);
  }
  ASSERT_FALSE(at_server.messages().empty());
  EXPECT_EQ(at_server.messages()[0].first, 3u);
  EXPECT_TRUE(told.messages().empty()) << "refused, but not for a revoked certificate";
}

TEST_F(TcpTransportTest, ForgedOrOversizedFramesCloseTheConnectionAndTheNodeKeepsServing) {
  TcpTransport* server = start(1, std::nullopt);
  Inbox at_server;
  at_server.attach(*server);
  std::vector<std::uint8_t> bad_hello(20, 0xee);
  EXPECT_TRUE(server_closes_after(server->local_address(), bad_hello));

  auto hello = [](std::uint32_t version) {
    std::vector<std::uint8_t> bytes(20);
    boost::endian::store_big_u32(bytes.data(), 0x54504e31);
    boost::endian::store_big_u32(bytes.data() + 4, version);
    boost::endian::store_big_u64(bytes.data() + 8, 9);
    boost::endian::store_big_u32(bytes.data() + 16, 0);  // no listening address
    return bytes;
  };
  auto frame = [](std::vector<std::uint8_t>& out, std::uint32_t length, std::string_view body) {
    const std::size_t at = out.size();
    out.resize(at + 8);
    boost::endian::store_big_u32(out.data() + at, length);
    boost::endian::store_big_u32(out.data() + at + 4, static_cast<std::uint32_t>(Channel::rpc));
    out.insert(out.end(), body.begin(), body.end());
  };
  // A node of another protocol version is refused at its hello: its message never arrives.
  std::vector<std::uint8_t> old_version = hello(kTcpProtocolVersion - 1);
  frame(old_version, 2, "v1");
  EXPECT_TRUE(server_closes_after(server->local_address(), old_version));
  // One of this version is heard, up to the frame over the size bound.
  std::vector<std::uint8_t> oversized = hello(kTcpProtocolVersion);
  frame(oversized, 2, "v2");
  frame(oversized, 0x7fffffff, "");
  EXPECT_TRUE(server_closes_after(server->local_address(), oversized));
  ASSERT_TRUE(at_server.wait_for(1));
  EXPECT_EQ(at_server.messages().size(), 1u);
  EXPECT_EQ(at_server.messages()[0].second, "v2");
  EXPECT_GE(server->stats().connections_refused, 3u);

  TcpTransport* good = start(2, std::nullopt);
  good->set_address(1, server->local_address());
  good->send(1, Channel::rpc, bytes("still here"));
  ASSERT_TRUE(at_server.wait_for(2));
  EXPECT_EQ(at_server.messages()[1].second, "still here");
}

TEST_F(TcpTransportTest, MessagesQueuedWhileAPeerIsDownArriveWhenItReturns) {
  TcpTransport* a = start(1, std::nullopt);
  const std::string address = down_peer_address();
  a->set_address(2, address);
  a->send(2, Channel::rpc, bytes("while you were out"));
  std::this_thread::sleep_for(300ms);
  TcpTransport* b = start(2, std::nullopt, address);
  ASSERT_NE(b, nullptr);
  Inbox at_b;
  at_b.attach(*b);
  ASSERT_TRUE(at_b.wait_for(1, 10s));
  EXPECT_EQ(at_b.messages()[0].second, "while you were out");
}

// Unit data queued for a peer slow to take it must not hold up Raft's heartbeats: the leader
// would record the sender down.
TEST_F(TcpTransportTest, RaftAndLockMessagesOvertakeRpcsStillQueued) {
  TcpTransport* a = start(1, std::nullopt);
  const std::string address = down_peer_address();
  a->set_address(2, address);
  const std::string bulk(512 * 1024, 'd');
  constexpr int kRpcs = 16;
  for (int i = 0; i < kRpcs; ++i) a->send(2, Channel::rpc, bytes(std::to_string(i) + bulk));
  a->send(2, Channel::raft, bytes("heartbeat"));
  a->send(2, Channel::lock, bytes("grant"));
  TcpTransport* b = start(2, std::nullopt, address);
  ASSERT_NE(b, nullptr);
  Inbox at_b;
  for (Channel channel : {Channel::rpc, Channel::raft, Channel::lock}) at_b.attach(*b, channel);
  ASSERT_TRUE(at_b.wait_for(kRpcs + 2, 10s));
  std::vector<std::string> order;
  for (const auto& [from, message] : at_b.messages()) order.push_back(message.substr(0, 9));
  const auto heartbeat = std::find(order.begin(), order.end(), "heartbeat") - order.begin();
  const auto grant = std::find(order.begin(), order.end(), "grant") - order.begin();
  EXPECT_LE(heartbeat, 2) << "behind at most the RPCs of the write under way";
  EXPECT_EQ(grant, heartbeat + 1) << "Raft and lock messages keep their own order";
  std::vector<int> rpcs;
  for (const std::string& message : order) {
    if (message != "heartbeat" && message != "grant") rpcs.push_back(std::stoi(message));
  }
  std::vector<int> expected(kRpcs);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(rpcs, expected) << "RPCs keep theirs";
}

TEST_F(TcpTransportTest, AnAddressInUseIsAClearError) {
  TcpTransport* a = start(1, std::nullopt);
  loops_.push_back(make_asio_event_loop(io_.get_executor()));
  TcpTransportOptions options;
  options.self = 2;
  options.listen_address = a->local_address();
  auto second = TcpTransport::start(io_.get_executor(), *loops_.back(), options);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("cannot listen on"), std::string::npos);
  options.listen_address = "not-an-address";
  EXPECT_EQ(TcpTransport::start(io_.get_executor(), *loops_.back(), options).code(),
            Errc::invalid_argument);
}

}  // namespace
}  // namespace tidepool::cluster
