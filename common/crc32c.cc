#include "common/crc32c.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <limits>

namespace tidepool {

std::uint32_t crc32c(std::span<const std::uint8_t> data, std::uint32_t crc) {
  // ISA-L neither pre- nor post-inverts, and takes an int length and a non-const pointer it only
  // reads.
  crc = ~crc;
  while (!data.empty()) {
    const std::size_t chunk = std::min<std::size_t>(data.size(), std::numeric_limits<int>::max());
    crc = crc32_iscsi(const_cast<std::uint8_t*>(data.data()), static_cast<int>(chunk), crc);
    data = data.subspan(chunk);
  }
  return ~crc;
}

}  // namespace tidepool
