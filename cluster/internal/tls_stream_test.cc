#include "cluster/internal/tls_stream.h"

#include <gtest/gtest.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "cluster/tls.h"

namespace tidepool::cluster::internal {
namespace {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using asio::awaitable;
using asio::ip::tcp;
using boost::system::error_code;

constexpr auto kUseTuple = asio::as_tuple(asio::use_awaitable);

// A node's identity under a CA made for the test, as the transport configures it.
std::unique_ptr<ssl::context> context_for(const PemPair& ca, bool server) {
  auto context =
      std::make_unique<ssl::context>(server ? ssl::context::tls_server : ssl::context::tls_client);
  auto key = create_self_signed_certificate(server ? "node-1" : "node-2");
  EXPECT_TRUE(key.ok());
  auto certificate = sign_certificate(ca, server ? "node-1" : "node-2", key->certificate);
  EXPECT_TRUE(certificate.ok());
  context->add_certificate_authority(asio::buffer(ca.certificate));
  context->use_certificate_chain(asio::buffer(*certificate));
  context->use_private_key(asio::buffer(key->private_key), ssl::context::pem);
  context->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  return context;
}

// What happens to the client's bytes on their way to the server, once both ends have shaken
// hands.
enum class OnTheWay { passed, altered, cut };

// A client and a server TlsStream on loopback with a relay between them, all run on one
// io_context with a bound on the time.
class TlsStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ca = create_certificate_authority("test");
    ASSERT_TRUE(ca.ok());
    server_context_ = context_for(*ca, true);
    client_context_ = context_for(*ca, false);
  }

  // The client handshakes and writes `buffers`; the server handshakes and reads `expected`
  // bytes, which it returns (or the error that ended its read).
  std::pair<error_code, std::vector<std::uint8_t>> send(
      const std::vector<std::vector<std::uint8_t>>& buffers, std::size_t expected,
      OnTheWay on_the_way = OnTheWay::passed) {
    tcp::acceptor server_side(io_, {asio::ip::make_address("127.0.0.1"), 0});
    tcp::acceptor relay_side(io_, {asio::ip::make_address("127.0.0.1"), 0});
    std::optional<error_code> read_result;
    std::vector<std::uint8_t> received(expected);
    bool shaken = false;  // both ends have finished their handshakes
    int handshakes = 0;

    tcp::socket server_socket(io_), relay_in(io_), relay_out(io_), client_socket(io_);
    auto server = [&]() -> awaitable<void> {
      auto [ec] = co_await server_side.async_accept(server_socket, kUseTuple);
      if (ec) co_return;
      TlsStream stream(server_socket, server_context_->native_handle(), TlsStream::Role::server);
      if (error_code failed = co_await stream.handshake(); failed) {
        read_result = failed;
        co_return;
      }
      shaken = ++handshakes == 2;
      read_result = co_await stream.read_exact(asio::buffer(received));
    };
    auto client = [&]() -> awaitable<void> {
      auto [ec] = co_await client_socket.async_connect(relay_side.local_endpoint(), kUseTuple);
      if (ec) co_return;
      TlsStream stream(client_socket, client_context_->native_handle(), TlsStream::Role::client);
      if (error_code failed = co_await stream.handshake(); failed) co_return;
      shaken = ++handshakes == 2;
      std::vector<asio::const_buffer> pieces;
      for (const auto& b : buffers) pieces.push_back(asio::buffer(b));
      co_await stream.write_all(pieces);
    };
    // Forwards what `from` receives to `to`; the client's bytes, once both have shaken hands,
    // as the test asks.
    auto relay = [&](tcp::socket& from, tcp::socket& to, bool from_client) -> awaitable<void> {
      std::vector<std::uint8_t> chunk(64 << 10);
      std::size_t after_handshake = 0;
      for (;;) {
        auto [ec, n] = co_await from.async_read_some(asio::buffer(chunk), kUseTuple);
        if (ec) break;
        if (from_client && shaken && on_the_way != OnTheWay::passed) {
          after_handshake += n;
          if (on_the_way == OnTheWay::altered) chunk[n / 2] ^= 0x01;
          if (on_the_way == OnTheWay::cut) n = std::min<std::size_t>(n, 100);
        }
        auto [written, m] =
            co_await asio::async_write(to, asio::buffer(chunk.data(), n), kUseTuple);
        if (written || (on_the_way == OnTheWay::cut && after_handshake > 0)) break;
      }
      error_code ignored;
      to.shutdown(tcp::socket::shutdown_send, ignored);
    };
    auto start_relay = [&]() -> awaitable<void> {
      auto [ec] = co_await relay_side.async_accept(relay_in, kUseTuple);
      if (ec) co_return;
      auto [connect_error] =
          co_await relay_out.async_connect(server_side.local_endpoint(), kUseTuple);
      if (connect_error) co_return;
      asio::co_spawn(io_, relay(relay_in, relay_out, true), asio::detached);
      asio::co_spawn(io_, relay(relay_out, relay_in, false), asio::detached);
    };
    asio::co_spawn(io_, server(), asio::detached);
    asio::co_spawn(io_, start_relay(), asio::detached);
    asio::co_spawn(io_, client(), asio::detached);
    for (int i = 0; i < 300 && !read_result; ++i) io_.run_for(std::chrono::milliseconds(100));
    EXPECT_TRUE(read_result.has_value()) << "the server's read neither ended nor failed in 30 s";
    for (tcp::socket* s : {&server_socket, &relay_in, &relay_out, &client_socket}) {
      error_code ignored;
      s->close(ignored);
    }
    io_.run_for(std::chrono::milliseconds(100));
    return {read_result.value_or(asio::error::timed_out), std::move(received)};
  }

  asio::io_context io_;
  std::unique_ptr<ssl::context> server_context_;
  std::unique_ptr<ssl::context> client_context_;
};

std::vector<std::uint8_t> random_bytes(std::size_t n, std::mt19937& random) {
  std::vector<std::uint8_t> bytes(n);
  for (auto& b : bytes) b = static_cast<std::uint8_t>(random());
  return bytes;
}

// Small writes are gathered into records and large ones cut into sends; the bytes arrive as
// they were written.
TEST_F(TlsStreamTest, WritesOfEverySizeArriveIntactAndInOrder) {
  std::mt19937 random(7);
  std::vector<std::vector<std::uint8_t>> buffers;
  std::vector<std::uint8_t> all;
  for (std::size_t size : {std::size_t{8}, std::size_t{0}, std::size_t{1}, std::size_t{4095},
                           std::size_t{4096}, std::size_t{16384}, std::size_t{100'000},
                           TlsStream::kSendBytes + 3, std::size_t{3} << 20, std::size_t{8}}) {
    buffers.push_back(random_bytes(size, random));
    all.insert(all.end(), buffers.back().begin(), buffers.back().end());
  }
  for (int i = 0; i < 3000; ++i) {  // a batch of small messages, each its header and body
    buffers.push_back(random_bytes(8, random));
    buffers.push_back(random_bytes(static_cast<std::size_t>(random() % 200), random));
    all.insert(all.end(), buffers[buffers.size() - 2].begin(), buffers[buffers.size() - 2].end());
    all.insert(all.end(), buffers.back().begin(), buffers.back().end());
  }
  auto [result, received] = send(buffers, all.size());
  EXPECT_FALSE(result) << result.message();
  EXPECT_TRUE(received == all);
}

TEST_F(TlsStreamTest, CiphertextAlteredOnTheWayIsAnErrorNeverData) {
  std::mt19937 random(8);
  std::vector<std::uint8_t> message = random_bytes(200'000, random);
  auto [result, received] = send({message}, message.size(), OnTheWay::altered);
  ASSERT_TRUE(result);
  EXPECT_EQ(result.category(), asio::error::get_ssl_category()) << result.message();
}

TEST_F(TlsStreamTest, AConnectionCutInARecordIsAnErrorNotAWait) {
  std::mt19937 random(9);
  std::vector<std::uint8_t> message = random_bytes(200'000, random);
  auto [result, received] = send({message}, message.size(), OnTheWay::cut);
  EXPECT_EQ(result, asio::error::eof) << result.message();
}

// The transport bounds a handshake with a timer raced against it: the handshake must give way
// when the timer fires, however long the peer stays silent.
TEST_F(TlsStreamTest, AHandshakeWithASilentPeerEndsWhenItsDeadlineCancelsIt) {
  using namespace asio::experimental::awaitable_operators;
  tcp::acceptor acceptor(io_, {asio::ip::make_address("127.0.0.1"), 0});
  tcp::socket silent(io_), server_socket(io_);
  silent.connect(acceptor.local_endpoint());
  acceptor.accept(server_socket);
  std::optional<std::size_t> winner;
  auto serve = [&]() -> awaitable<void> {
    TlsStream stream(server_socket, server_context_->native_handle(), TlsStream::Role::server);
    asio::steady_timer deadline(io_, std::chrono::milliseconds(200));
    auto raced = co_await (stream.handshake() || deadline.async_wait(kUseTuple));
    winner = raced.index();
  };
  asio::co_spawn(io_, serve(), asio::detached);
  for (int i = 0; i < 50 && !winner; ++i) io_.run_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(winner.has_value()) << "the handshake outlived its deadline";
  EXPECT_EQ(*winner, 1u);
}

}  // namespace
}  // namespace tidepool::cluster::internal
