// The TCP transport's deadlines, against a real socket: a client that stalls inside a record
// or stays silent is cut off in time, and one that keeps calling is not.
#include "nfsd/internal/rpc_transport.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/endian/conversion.hpp>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

namespace tidepool::nfsd {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A NULL call to a program nobody serves (the reply says PROG_UNAVAIL: a reply all the same),
// in one record.
std::vector<std::uint8_t> null_call(std::uint32_t xid) {
  std::vector<std::uint8_t> record(4 + 40, 0);
  boost::endian::store_big_u32(record.data(), 0x80000000u | 40);
  const std::array<std::uint32_t, 10> words = {xid, 0, 2, 400999, 1, 0, 0, 0, 0, 0};
  for (std::size_t i = 0; i < words.size(); ++i) {
    boost::endian::store_big_u32(record.data() + 4 + 4 * i, words[i]);
  }
  return record;
}

class RpcTransportTest : public ::testing::Test {
 protected:
  void start(TransportLimits limits) {
    transport_.emplace(std::vector<asio::io_context*>{&io_}, dispatcher_, dispatcher_, limits);
    tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), 0);
    tcp::acceptor probe(io_, endpoint);  // a free port, given back at once
    port_ = probe.local_endpoint().port();
    probe.close();
    ASSERT_TRUE(
        transport_->listen_tcp({endpoint.address(), port_}, RpcTransport::Placement::spread).ok());
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    if (transport_) transport_->stop();
    work_.reset();
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }

  tcp::socket connect() {
    tcp::socket socket(client_io_);
    socket.connect({asio::ip::make_address("127.0.0.1"), port_});
    struct timeval tv = {10, 0};  // no read in these tests waits longer
    ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return socket;
  }
  // How long until the server closes `socket`, reading (and dropping) what it sends.
  static std::optional<Clock::duration> time_until_closed(tcp::socket& socket) {
    const auto start = Clock::now();
    std::array<std::uint8_t, 512> sink;
    boost::system::error_code ec;
    while (!ec) socket.read_some(asio::buffer(sink), ec);
    if (ec != asio::error::eof && ec != asio::error::connection_reset) return std::nullopt;
    return Clock::now() - start;
  }
  // Sends a call and reads its reply whole; false if the connection is gone.
  static bool call(tcp::socket& socket, std::uint32_t xid) {
    boost::system::error_code ec;
    asio::write(socket, asio::buffer(null_call(xid)), ec);
    std::array<std::uint8_t, 4> mark;
    if (!ec) asio::read(socket, asio::buffer(mark), ec);
    if (ec) return false;
    std::vector<std::uint8_t> body(boost::endian::load_big_u32(mark.data()) & 0x7fffffffu);
    asio::read(socket, asio::buffer(body), ec);
    return !ec && body.size() >= 4 && boost::endian::load_big_u32(body.data()) == xid;
  }

  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_{
      io_.get_executor()};
  asio::io_context client_io_;
  RpcDispatcher dispatcher_;
  std::optional<RpcTransport> transport_;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

TEST_F(RpcTransportTest, AClientThatStallsInsideARecordIsCutOffAtTheRecordTimeout) {
  TransportLimits limits;
  limits.record_timeout = 1s;
  start(limits);
  tcp::socket stalled = connect();
  std::vector<std::uint8_t> part = null_call(1);
  part.resize(20);  // the mark promises 40 bytes; 16 come
  asio::write(stalled, asio::buffer(part));
  const auto closed_after = time_until_closed(stalled);
  ASSERT_TRUE(closed_after.has_value());
  EXPECT_GE(*closed_after, 900ms);
  EXPECT_LE(*closed_after, 3s);
}

// The deadline moves with every call: the watchdog must let a busy connection be, and still
// close a silent one on time.
TEST_F(RpcTransportTest, ASilentConnectionIsClosedAtTheIdleTimeoutAndABusyOneIsNot) {
  TransportLimits limits;
  limits.idle_timeout = 1s;
  limits.record_timeout = 1s;
  start(limits);
  tcp::socket busy = connect();
  tcp::socket silent = connect();
  ASSERT_TRUE(call(busy, 1));
  std::optional<Clock::duration> silent_closed_after;
  std::thread watching([&] { silent_closed_after = time_until_closed(silent); });
  const auto start = Clock::now();
  for (std::uint32_t xid = 2; Clock::now() - start < 2500ms; ++xid) {
    ASSERT_TRUE(call(busy, xid)) << "the busy connection was closed after "
                                 << std::chrono::duration<double>(Clock::now() - start).count()
                                 << " s";
    std::this_thread::sleep_for(200ms);
  }
  watching.join();
  ASSERT_TRUE(silent_closed_after.has_value());
  EXPECT_GE(*silent_closed_after, 900ms);
  EXPECT_LE(*silent_closed_after, 3s);
}

}  // namespace
}  // namespace tidepool::nfsd
