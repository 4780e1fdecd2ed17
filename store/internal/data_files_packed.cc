// DataFiles' small files, kept in the pack (pack.h) until a write reaches past kPackedBelow.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "store/internal/data_file_format.h"
#include "store/internal/data_files.h"

namespace tidepool::store::internal {

Result<Pack::ReadOutcome> DataFiles::read_packed(std::uint64_t inode, std::uint64_t offset,
                                                 std::span<std::uint8_t> into, bool nowait) {
  const BlockSpan span = BlockSpan::of(offset, into.size());
  std::vector<std::uint8_t> bounce;
  const std::span<std::uint8_t> blocks = span.blocks_for(offset, into, bounce);
  std::vector<std::uint32_t> sums(span.count);
  TP_ASSIGN_OR_RETURN(Pack::ReadOutcome outcome,
                      pack_.read(inode, span.first, blocks, sums, nowait));
  if (outcome != Pack::ReadOutcome::read) return outcome;
  for (std::uint64_t i = 0; i < span.count; ++i) {
    if (sums[i] != 0 && sums[i] != stored_sum(blocks.subspan(i * kChecksumBlock, kChecksumBlock))) {
      TP_RETURN_IF_ERROR(report_mismatch(inode, span.first + i));
    }
  }
  if (!bounce.empty()) {
    std::memcpy(into.data(), bounce.data() + (offset - span.first * kChecksumBlock), into.size());
  }
  return outcome;
}

Result<std::shared_ptr<DataFiles::Descriptor>> DataFiles::write_packed(
    std::uint64_t inode, std::uint64_t offset, std::span<const std::uint8_t> data) {
  const std::uint64_t end = offset + data.size();
  TP_ASSIGN_OR_RETURN(std::optional<PackedData> packed, pack_.load(inode));
  if (!packed) {
    if (end >= kPackedBelow) {
      TP_RETURN_IF_ERROR(pack_.settle(inode));
      return open(inode, true);
    }
    TP_ASSIGN_OR_RETURN(auto descriptor, open(inode, false));
    if (descriptor) {
      TP_RETURN_IF_ERROR(pack_.settle(inode));
      return descriptor;
    }
    // A new small file, written from its start: packed as it came, without a copy.
    if (offset == 0) {
      const BlockSpan span = BlockSpan::of(0, data.size());
      std::vector<std::uint32_t> sums(span.count);
      for (std::uint64_t b = 0; b + 1 < span.count; ++b) {
        sums[b] = stored_sum(data.subspan(b * kChecksumBlock, kChecksumBlock));
      }
      std::array<std::uint8_t, kChecksumBlock> last{};
      const std::uint64_t last_start = (span.count - 1) * kChecksumBlock;
      std::memcpy(last.data(), data.data() + last_start, data.size() - last_start);
      sums.back() = stored_sum(last);
      TP_RETURN_IF_ERROR(pack_.put(inode, data, sums));
      return std::shared_ptr<Descriptor>();
    }
    packed.emplace();
  } else if (end >= kPackedBelow) {
    return unpack(inode, *packed);
  }
  // Into what is packed: a block written in part keeps the rest of its bytes, which must be
  // good (as a data file's partial write reads and verifies them).
  const BlockSpan span = BlockSpan::of(offset, data.size());
  const std::uint64_t blocks =
      std::max<std::uint64_t>(packed->sums.size(), span.first + span.count);
  packed->sums.resize(blocks);
  packed->blocks.resize(blocks * kChecksumBlock);
  for (std::uint64_t b = span.first; b < span.first + span.count; ++b) {
    const auto block = std::span(packed->blocks).subspan(b * kChecksumBlock, kChecksumBlock);
    const std::uint64_t from = std::max(offset, b * kChecksumBlock);
    const std::uint64_t to = std::min(end, (b + 1) * kChecksumBlock);
    if (to - from < kChecksumBlock && packed->sums[b] != 0 &&
        packed->sums[b] != stored_sum(block)) {
      return report_mismatch(inode, b);
    }
    std::memcpy(block.data() + (from - b * kChecksumBlock), data.data() + (from - offset),
                to - from);
    packed->sums[b] = stored_sum(block);
  }
  TP_RETURN_IF_ERROR(pack_.put(inode, packed->blocks, packed->sums));
  return std::shared_ptr<Descriptor>();
}

Result<std::shared_ptr<DataFiles::Descriptor>> DataFiles::unpack(std::uint64_t inode,
                                                                 const PackedData& packed) {
  TP_ASSIGN_OR_RETURN(auto descriptor, open(inode, true));
  // A data file left by an unpacking that a crash cut short is written anew.
  if (::ftruncate(descriptor->fd, 0) != 0) return errno_status("empty a data file", errno);
  std::vector<std::uint8_t> sums(packed.sums.size() * kSumBytes);
  for (std::size_t b = 0; b < packed.sums.size(); ++b) {
    put_sum(std::span(sums).subspan(b * kSumBytes, kSumBytes), packed.sums[b]);
  }
  TP_RETURN_IF_ERROR(write_at(descriptor->fd, packed.blocks, 0));
  TP_RETURN_IF_ERROR(write_at(descriptor->fd, sums, checksum_offset(0)));
  // The data file is durable before the pack lets go of the data: at no point is neither.
  TP_RETURN_IF_ERROR(sync_descriptor(*descriptor, inode));
  TP_RETURN_IF_ERROR(pack_.remove(inode));
  TP_RETURN_IF_ERROR(pack_.sync());
  // A reader that found the inode in neither place may have planned to keep units.
  forget_file(inode);
  return descriptor;
}

Status DataFiles::repack(std::uint64_t inode, PackedData changed) {
  while (!changed.sums.empty() && changed.sums.back() == 0) changed.sums.pop_back();
  if (changed.sums.empty()) {
    // A data file left by an unpacking cut short is older than what was packed: it goes too,
    // for good.
    if (drop_own_file(inode) && ::fsync(directories_[inode % kFanout]) != 0) {
      return errno_status("sync data directory", errno);
    }
    return pack_.remove(inode);
  }
  changed.blocks.resize(changed.sums.size() * kChecksumBlock);
  return pack_.put(inode, changed.blocks, changed.sums);
}

}  // namespace tidepool::store::internal
