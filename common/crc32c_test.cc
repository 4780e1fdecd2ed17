#include "common/crc32c.h"

#include <gtest/gtest.h>

#include <random>
#include <string_view>
#include <vector>

namespace tidepool {
namespace {

std::span<const std::uint8_t> bytes_of(std::string_view text) {
  return {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()};
}

// Bit at a time, straight from the definition (reflected polynomial 0x82F63B78).
std::uint32_t reference_crc32c(std::span<const std::uint8_t> data) {
  std::uint32_t crc = 0xFFFFFFFF;
  for (std::uint8_t byte : data) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78 & (0u - (crc & 1)));
  }
  return ~crc;
}

TEST(Crc32c, MatchesTheStandardCheckValue) {
  EXPECT_EQ(crc32c(bytes_of("123456789")), 0xE3069283u);
}

TEST(Crc32c, OfNothingIsZeroAndLeavesARunningCrcUnchanged) {
  EXPECT_EQ(crc32c({}), 0u);
  EXPECT_EQ(crc32c({}, 0xE3069283u), 0xE3069283u);
}

TEST(Crc32c, ChainsAcrossPieces) {
  EXPECT_EQ(crc32c(bytes_of("6789"), crc32c(bytes_of("12345"))), 0xE3069283u);
  std::uint32_t crc = 0;
  for (char c : std::string_view("123456789")) crc = crc32c(bytes_of({&c, 1}), crc);
  EXPECT_EQ(crc, 0xE3069283u);
}

TEST(Crc32c, AgreesWithABitwiseReferenceOnRandomBuffers) {
  std::mt19937 rng(20240521);  // fixed: a failure replays exactly
  std::vector<std::uint8_t> buffer(70'000);
  for (auto& byte : buffer) byte = static_cast<std::uint8_t>(rng());
  for (int round = 0; round < 200; ++round) {
    // Random offsets and lengths exercise unaligned heads and tails of the vectorised code.
    const std::size_t offset = rng() % 64;
    const std::size_t length = round < 100 ? rng() % 300 : rng() % (buffer.size() - offset);
    auto piece = std::span<const std::uint8_t>(buffer).subspan(offset, length);
    ASSERT_EQ(crc32c(piece), reference_crc32c(piece))
        << "offset " << offset << " length " << length;
    const std::size_t split = length == 0 ? 0 : rng() % length;
    ASSERT_EQ(crc32c(piece.subspan(split), crc32c(piece.first(split))), crc32c(piece));
  }
}

}  // namespace
}  // namespace tidepool
