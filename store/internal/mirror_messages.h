// The bodies of the messages a home sends its mirror (store/shard_mirror.h), in XDR.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "store/store.h"

namespace tidepool::store::internal {

inline constexpr std::size_t kMaxMirrorExtentBytes = 4u << 20;

// Bytes at an offset: of an inode's data (write, copy_data) or of the database image
// (copy_database, inode 0).
struct MirrorExtent {
  InodeId inode = 0;
  std::uint64_t offset = 0;
  bool durable = false;
  std::span<const std::uint8_t> bytes;
};
std::vector<std::uint8_t> encode_mirror_extent(const MirrorExtent& extent);
// Null when the body does not decode, or the extent would end past the largest file.
std::optional<MirrorExtent> decode_mirror_extent(std::span<const std::uint8_t> body);

// An inode and a number: sync and remove (0), truncate (the new size).
struct MirrorInode {
  InodeId inode = 0;
  std::uint64_t value = 0;
};
std::vector<std::uint8_t> encode_mirror_inode(const MirrorInode& message);
std::optional<MirrorInode> decode_mirror_inode(std::span<const std::uint8_t> body);

// A range of an inode's data (read), at most kMaxMirrorExtentBytes long.
struct MirrorRange {
  InodeId inode = 0;
  std::uint64_t offset = 0;
  std::uint32_t length = 0;
};
std::vector<std::uint8_t> encode_mirror_range(const MirrorRange& range);
std::optional<MirrorRange> decode_mirror_range(std::span<const std::uint8_t> body);

}  // namespace tidepool::store::internal
