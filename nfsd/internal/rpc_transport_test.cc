// The TCP transport against a real socket: a client that stalls inside a record or stays silent
// is cut off in time, and one that keeps calling is not; bytes a reply leaves in a pipe arrive
// in their place.
#include "nfsd/internal/rpc_transport.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/endian/conversion.hpp>
#include <chrono>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
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

// Program 400001: procedure 1 with a u32 offset answers 1, the file's bytes
// [offset, offset + kPipedBytes) in a pipe, then 2.
class PipingProgram final : public RpcProgram {
 public:
  static constexpr std::size_t kPipedBytes = 1u << 20;
  explicit PipingProgram(int file) : file_(file) {}
  std::uint32_t number() const override { return 400001; }
  std::uint32_t min_version() const override { return 1; }
  std::uint32_t max_version() const override { return 1; }
  awaitable<std::optional<AcceptStatus>> call(const CallContext& c, xdr::Decoder& in,
                                              xdr::Encoder& out) override {
    const std::uint32_t offset = in.u32();
    if (!in.ok() || c.procedure != 1 || !c.pieces) co_return AcceptStatus::garbage_args;
    auto piped = PipedBytes::make(kPipedBytes);
    if (!piped.ok() || !(*piped)->splice_in(file_, offset, kPipedBytes).ok()) {
      co_return AcceptStatus::system_err;
    }
    out.u32(1);
    c.pieces->pieces.push_back({out.size(), {}, nullptr, std::move(*piped)});
    out.u32(2);
    co_return AcceptStatus::success;
  }

 private:
  int file_;
};

// A call of procedure 1 of program 400001 with one u32 argument, in one record.
std::vector<std::uint8_t> piping_call(std::uint32_t xid, std::uint32_t offset) {
  std::vector<std::uint8_t> record(4 + 44, 0);
  boost::endian::store_big_u32(record.data(), 0x80000000u | 44);
  const std::array<std::uint32_t, 11> words = {xid, 0, 2, 400001, 1, 1, 0, 0, 0, 0, offset};
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

// Eight replies of 1 MiB from pipes, called at once and read only after a pause: the socket
// fills, the splices wait for room, and each reply's bytes arrive whole and in place.
TEST_F(RpcTransportTest, BytesARepliesLeavesInAPipeArriveInTheirPlace) {
  const std::string path =
      testing::TempDir() + "tidepool_rpc_transport_test." + std::to_string(::getpid());
  std::vector<std::uint8_t> file_bytes(4u << 20);
  std::mt19937 random(3);
  for (auto& b : file_bytes) b = static_cast<std::uint8_t>(random());
  const int file = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(file, 0);
  std::remove(path.c_str());
  ASSERT_EQ(::pwrite(file, file_bytes.data(), file_bytes.size(), 0),
            static_cast<ssize_t>(file_bytes.size()));
  PipingProgram program(file);
  dispatcher_.add(&program);
  start(TransportLimits{});
  tcp::socket socket = connect();
  constexpr std::uint32_t kCalls = 8;
  std::vector<std::uint8_t> calls;
  for (std::uint32_t i = 0; i < kCalls; ++i) {
    const auto call = piping_call(100 + i, i * 4096 * 97);
    calls.insert(calls.end(), call.begin(), call.end());
  }
  asio::write(socket, asio::buffer(calls));
  std::this_thread::sleep_for(200ms);
  std::vector<bool> answered(kCalls, false);
  for (std::uint32_t i = 0; i < kCalls; ++i) {
    std::array<std::uint8_t, 4> mark;
    asio::read(socket, asio::buffer(mark));
    const std::uint32_t header = boost::endian::load_big_u32(mark.data());
    ASSERT_NE(header & 0x80000000u, 0u);
    std::vector<std::uint8_t> body(header & 0x7fffffffu);
    ASSERT_EQ(body.size(), 24 + 4 + PipingProgram::kPipedBytes + 4);
    asio::read(socket, asio::buffer(body));
    const std::uint32_t call = boost::endian::load_big_u32(body.data()) - 100;
    ASSERT_LT(call, kCalls);
    answered[call] = true;
    EXPECT_EQ(boost::endian::load_big_u32(body.data() + 20), 0u) << "accepted: success";
    EXPECT_EQ(boost::endian::load_big_u32(body.data() + 24), 1u);
    EXPECT_TRUE(
        std::equal(body.begin() + 28, body.end() - 4, file_bytes.begin() + call * 4096 * 97))
        << "call " << call;
    EXPECT_EQ(boost::endian::load_big_u32(body.data() + body.size() - 4), 2u);
  }
  EXPECT_EQ(answered, std::vector<bool>(kCalls, true));
  transport_->stop();
  transport_.reset();
  ::close(file);
}

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
