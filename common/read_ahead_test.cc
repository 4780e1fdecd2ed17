#include "common/read_ahead.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <random>
#include <thread>
#include <vector>

namespace tidepool {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

class ReadAheadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tcp::acceptor acceptor(io_, {asio::ip::make_address("127.0.0.1"), 0});
    writer_.connect(acceptor.local_endpoint());
    acceptor.accept(reader_);
  }

  // Reads pieces of the sizes given, in order, until one fails; what each read returned.
  std::vector<std::pair<boost::system::error_code, std::vector<std::uint8_t>>> read(
      std::vector<std::size_t> sizes) {
    std::vector<std::pair<boost::system::error_code, std::vector<std::uint8_t>>> got;
    auto reading = [&]() -> asio::awaitable<void> {
      ReadAhead<tcp::socket> incoming(reader_);
      for (std::size_t size : sizes) {
        std::vector<std::uint8_t> piece(size);
        auto [ec, n] = co_await incoming.read_exact(asio::buffer(piece));
        piece.resize(n);
        got.emplace_back(ec, std::move(piece));
        if (ec) break;
      }
    };
    asio::co_spawn(io_, reading(), asio::detached);
    for (int i = 0; i < 100 && !io_.stopped(); ++i) io_.run_for(std::chrono::milliseconds(100));
    return got;
  }

  asio::io_context io_;
  tcp::socket writer_{io_};
  tcp::socket reader_{io_};
};

TEST_F(ReadAheadTest, SmallAndLargePiecesComeOutAsTheyWentIn) {
  const std::vector<std::size_t> sizes = {4,     0,       1, 100,   40'000, 4,
                                          65537, 1 << 20, 3, 32768, 32767,  12};
  std::mt19937 random(3);
  std::vector<std::uint8_t> sent;
  for (std::size_t size : sizes) {
    for (std::size_t i = 0; i < size; ++i) sent.push_back(static_cast<std::uint8_t>(random()));
  }
  // More than the socket buffers hold: written while the test reads.
  std::thread writing([&] { asio::write(writer_, asio::buffer(sent)); });
  auto got = read(sizes);
  writing.join();
  ASSERT_EQ(got.size(), sizes.size());
  std::size_t at = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_FALSE(got[i].first) << i;
    ASSERT_EQ(got[i].second.size(), sizes[i]) << i;
    EXPECT_TRUE(std::equal(got[i].second.begin(), got[i].second.end(), sent.begin() + at)) << i;
    at += sizes[i];
  }
}

TEST_F(ReadAheadTest, AStreamThatEndsInAPieceReturnsTheErrorAndWhatCame) {
  std::vector<std::uint8_t> sent(50, 7);
  asio::write(writer_, asio::buffer(sent));
  writer_.close();
  auto got = read({20, 100});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_FALSE(got[0].first);
  EXPECT_EQ(got[1].first, asio::error::eof);
  EXPECT_EQ(got[1].second, std::vector<std::uint8_t>(30, 7));
}

TEST_F(ReadAheadTest, CountsTheReceivesItsReadsTook) {
  // Three small pieces sent in one write arrive together: one receive serves all three.
  asio::write(writer_, asio::buffer(std::vector<std::uint8_t>(300, 1)));
  std::vector<std::uint64_t> receives;
  auto reading = [&]() -> asio::awaitable<void> {
    ReadAhead<tcp::socket> incoming(reader_);
    receives.push_back(incoming.receives());
    std::vector<std::uint8_t> piece(100);
    for (int i = 0; i < 3; ++i) {
      co_await incoming.read_exact(asio::buffer(piece));
      receives.push_back(incoming.receives());
    }
    asio::write(writer_, asio::buffer(piece));
    co_await incoming.read_exact(asio::buffer(piece));
    receives.push_back(incoming.receives());
  };
  asio::co_spawn(io_, reading(), asio::detached);
  for (int i = 0; i < 100 && !io_.stopped(); ++i) io_.run_for(std::chrono::milliseconds(100));
  EXPECT_EQ(receives, (std::vector<std::uint64_t>{0, 1, 1, 1, 2}));
}

}  // namespace
}  // namespace tidepool
