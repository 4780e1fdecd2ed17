#include "common/piped_bytes.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace tidepool {
namespace {

constexpr std::size_t kPage = 4096;

class PipedBytesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937 random(7);
    bytes_.resize(64 * kPage);
    for (auto& b : bytes_) b = static_cast<std::uint8_t>(random());
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(fd_, 0);
    ASSERT_EQ(::pwrite(fd_, bytes_.data(), bytes_.size(), 0), static_cast<ssize_t>(bytes_.size()));
  }
  void TearDown() override {
    ::close(fd_);
    std::remove(path_.c_str());
  }

  const std::string path_ =
      testing::TempDir() + "tidepool_piped_bytes_test." + std::to_string(::getpid());
  std::vector<std::uint8_t> bytes_;
  int fd_ = -1;
};

TEST_F(PipedBytesTest, BytesSplicedInComeOutAsTheFileHasThem) {
  auto pipe = PipedBytes::make(16 * kPage);
  ASSERT_TRUE(pipe.ok()) << pipe.status().to_string();
  ASSERT_TRUE((*pipe)->splice_in(fd_, 8 * kPage, 16 * kPage).ok());
  EXPECT_EQ((*pipe)->size(), 16 * kPage);
  std::vector<std::uint8_t> out(16 * kPage);
  ASSERT_TRUE((*pipe)->copy_out(out).ok());
  EXPECT_EQ((*pipe)->size(), 0u);
  EXPECT_TRUE(std::equal(out.begin(), out.end(), bytes_.begin() + 8 * kPage));
}

TEST_F(PipedBytesTest, ADuplicateReadsTheSameBytesAndLeavesThemInTheOriginal) {
  auto pipe = PipedBytes::make(16 * kPage);
  ASSERT_TRUE(pipe.ok());
  ASSERT_TRUE((*pipe)->splice_in(fd_, 3 * kPage, 16 * kPage).ok());
  auto copy = (*pipe)->duplicate();
  ASSERT_TRUE(copy.ok()) << copy.status().to_string();
  std::vector<std::uint8_t> through_copy(16 * kPage);
  ASSERT_TRUE((*copy)->copy_out(through_copy).ok());
  EXPECT_EQ((*pipe)->size(), 16 * kPage);
  std::vector<std::uint8_t> through_original(16 * kPage);
  ASSERT_TRUE((*pipe)->copy_out(through_original).ok());
  EXPECT_EQ(through_copy, through_original);
  EXPECT_TRUE(std::equal(through_copy.begin(), through_copy.end(), bytes_.begin() + 3 * kPage));
}

TEST_F(PipedBytesTest, BytesSplicedOutToASocketArriveWhole) {
  auto pipe = PipedBytes::make(32 * kPage);
  ASSERT_TRUE(pipe.ok());
  ASSERT_TRUE((*pipe)->splice_in(fd_, 0, 32 * kPage).ok());
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  std::vector<std::uint8_t> received;
  std::vector<std::uint8_t> chunk(kPage);
  // Bounded: one splice a round, each moving at least a byte while the socket has room.
  for (int round = 0; round < 10'000 && (*pipe)->size() > 0; ++round) {
    const ssize_t n = ::splice((*pipe)->read_end(), nullptr, pair[0], nullptr, (*pipe)->size(),
                               SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n > 0) (*pipe)->taken(static_cast<std::size_t>(n));
    const ssize_t got = ::recv(pair[1], chunk.data(), chunk.size(), MSG_DONTWAIT);
    if (got > 0) received.insert(received.end(), chunk.begin(), chunk.begin() + got);
  }
  ::shutdown(pair[0], SHUT_WR);
  for (ssize_t got; (got = ::recv(pair[1], chunk.data(), chunk.size(), 0)) > 0;) {
    received.insert(received.end(), chunk.begin(), chunk.begin() + got);
  }
  ::close(pair[0]);
  ::close(pair[1]);
  EXPECT_EQ((*pipe)->size(), 0u);
  ASSERT_EQ(received.size(), 32 * kPage);
  EXPECT_TRUE(std::equal(received.begin(), received.end(), bytes_.begin()));
}

TEST_F(PipedBytesTest, ARangePastTheEndOfTheFileIsRefused) {
  auto pipe = PipedBytes::make(16 * kPage);
  ASSERT_TRUE(pipe.ok());
  Status spliced = (*pipe)->splice_in(fd_, 60 * kPage, 8 * kPage);
  EXPECT_EQ(spliced.code(), Errc::unavailable) << spliced.to_string();
}

TEST_F(PipedBytesTest, MoreBytesThanThePipeHoldsAreRefusedWithoutWaiting) {
  auto pipe = PipedBytes::make(16 * kPage);
  ASSERT_TRUE(pipe.ok());
  Status spliced = (*pipe)->splice_in(fd_, 0, 64 * kPage);
  EXPECT_EQ(spliced.code(), Errc::unavailable) << spliced.to_string();
}

TEST_F(PipedBytesTest, CopyingOutMoreThanThePipeHoldsIsRefusedWithoutWaiting) {
  auto pipe = PipedBytes::make(16 * kPage);
  ASSERT_TRUE(pipe.ok());
  ASSERT_TRUE((*pipe)->splice_in(fd_, 0, kPage).ok());
  std::vector<std::uint8_t> out(2 * kPage);
  EXPECT_EQ((*pipe)->copy_out(out).code(), Errc::internal);
}

}  // namespace
}  // namespace tidepool
