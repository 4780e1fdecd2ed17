// How a data file lies on the disk (data_files.h): its blocks at their natural offsets, then
// the table of their checksums where file data cannot reach; and what DataFiles' parts
// (data_files.cc, data_files_packed.cc) share to read and write them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "store/internal/data_files.h"
#include "store/store.h"

namespace tidepool::store::internal {

// The checksum table starts where file data cannot reach: 4 bytes per block, little-endian.
inline constexpr std::uint64_t kChecksumTableOffset = kMaxFileSize;
inline constexpr std::size_t kSumBytes = 4;

inline std::uint64_t checksum_offset(std::uint64_t block) {
  return kChecksumTableOffset + block * kSumBytes;
}

inline std::uint32_t get_sum(std::span<const std::uint8_t> bytes) {
  return std::uint32_t{bytes[0]} | std::uint32_t{bytes[1]} << 8 | std::uint32_t{bytes[2]} << 16 |
         std::uint32_t{bytes[3]} << 24;
}

inline void put_sum(std::span<std::uint8_t> bytes, std::uint32_t sum) {
  for (int i = 0; i < 4; ++i) bytes[i] = static_cast<std::uint8_t>(sum >> (8 * i));
}

// An error of the data files' I/O, named by `what`, from errno `err`.
Status errno_status(const char* what, int err);
Status write_at(int fd, std::span<const std::uint8_t> data, std::uint64_t offset);

// The whole checksum blocks a byte range touches.
struct DataFiles::BlockSpan {
  std::uint64_t first;
  std::uint64_t count;
  static BlockSpan of(std::uint64_t offset, std::uint64_t length) {
    std::uint64_t first = offset / kChecksumBlock;
    return {first, (offset + length - 1) / kChecksumBlock - first + 1};
  }
  bool aligned(std::uint64_t offset, std::uint64_t length) const {
    return offset % kChecksumBlock == 0 && length == count * kChecksumBlock;
  }
  // Where a read into `into` from `offset` reads the whole blocks: `into` itself when it is
  // they, else `bounce`, sized for them.
  std::span<std::uint8_t> blocks_for(std::uint64_t offset, std::span<std::uint8_t> into,
                                     std::vector<std::uint8_t>& bounce) const {
    if (aligned(offset, into.size())) return into;
    bounce.resize(count * kChecksumBlock);
    return bounce;
  }
};

}  // namespace tidepool::store::internal
