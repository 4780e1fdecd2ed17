// Bytes as lowercase hex, as the cluster writes its ids, token hashes and keys.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace tidepool {

inline std::string to_hex(std::span<const std::uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (std::uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

}  // namespace tidepool
