// CRC32C (Castagnoli), the checksum every stripe unit carries.
#pragma once

#include <cstdint>
#include <span>

namespace tidepool {

// The standard CRC32C of `data` (crc32c("123456789") == 0xE3069283). Pass the CRC of the
// preceding bytes as `crc` to continue it: crc32c(b, crc32c(a)) == crc32c(a + b).
std::uint32_t crc32c(std::span<const std::uint8_t> data, std::uint32_t crc = 0);

}  // namespace tidepool
