#include "store/internal/data_files.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>
#include <vector>

#include "store/internal/data_file_format.h"
#include "store/store.h"

namespace tidepool::store::internal {

namespace {

constexpr std::uint64_t kMaxBlocks = kMaxFileSize / kChecksumBlock;
constexpr const char* kPacksPath = "/packs";
static_assert(kPackBlock == kChecksumBlock);
// Blocks per lock region: a stripe unit's worth, and the L2's block.
constexpr std::uint64_t kRegionBlocks = 32;
static_assert(kRegionBlocks * kChecksumBlock == kCachedUnitBytes);

// Whether block `i` of `blocks` has a checksum in `sums` that it does not match.
bool mismatches(std::span<const std::uint8_t> blocks, std::span<const std::uint8_t> sums,
                std::uint64_t i) {
  std::uint32_t expected = get_sum(sums.subspan(i * kSumBytes, kSumBytes));
  return expected != 0 &&
         expected != stored_sum(blocks.subspan(i * kChecksumBlock, kChecksumBlock));
}

// The index of the first block that has a checksum it does not match.
std::optional<std::uint64_t> first_mismatch(std::span<const std::uint8_t> blocks,
                                            std::span<const std::uint8_t> sums) {
  for (std::uint64_t i = 0; i * kSumBytes < sums.size(); ++i) {
    if (mismatches(blocks, sums, i)) return i;
  }
  return std::nullopt;
}

// Fills `into` from `offset`; what lies past the end of the file reads as zeros. With
// `nowait`, false when the page cache does not hold it all.
Result<bool> read_at(int fd, std::span<std::uint8_t> into, std::uint64_t offset, bool nowait,
                     const char* what) {
  std::size_t done = 0;
  while (done < into.size()) {
    iovec v{into.data() + done, into.size() - done};
    ssize_t n = ::preadv2(fd, &v, 1, static_cast<off_t>(offset + done), nowait ? RWF_NOWAIT : 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (nowait && (errno == EAGAIN || errno == EOPNOTSUPP)) return false;
      return errno_status(what, errno);
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  std::memset(into.data() + done, 0, into.size() - done);
  return true;
}

Status punch(int fd, std::uint64_t offset, std::uint64_t length) {
  if (length == 0) return {};
  if (::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                  static_cast<off_t>(length)) != 0) {
    return errno_status("punch a hole in a data file", errno);
  }
  return {};
}

}  // namespace

Status errno_status(const char* what, int err) {
  Errc code = err == ENOSPC || err == EDQUOT ? Errc::no_space
              : err == EFBIG                 ? Errc::file_too_large
                                             : Errc::io_error;
  return error(code, std::string(what) + ": " + std::strerror(err));
}

Status write_at(int fd, std::span<const std::uint8_t> data, std::uint64_t offset) {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::pwrite(fd, data.data() + done, data.size() - done,
                         static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status("write data file", errno);
    }
    done += static_cast<std::size_t>(n);
  }
  return {};
}


// Holds the locks of the regions a block span touches, taken in index order.
class DataFiles::RegionLocks {
 public:
  RegionLocks(std::array<std::mutex, kRegionLocks>& locks, std::uint64_t inode,
              const BlockSpan& span) {
    for (std::uint64_t r = span.first / kRegionBlocks; r <= (span.first + span.count - 1) / kRegionBlocks;
         ++r) {
      indexes_.push_back(region_index(inode, r));
    }
    std::sort(indexes_.begin(), indexes_.end());
    indexes_.erase(std::unique(indexes_.begin(), indexes_.end()), indexes_.end());
    for (std::size_t i : indexes_) {
      locks[i].lock();
      held_.push_back(&locks[i]);
    }
  }
  ~RegionLocks() {
    for (std::mutex* m : held_) m->unlock();
  }
  RegionLocks(const RegionLocks&) = delete;
  RegionLocks& operator=(const RegionLocks&) = delete;

  static std::size_t region_index(std::uint64_t inode, std::uint64_t region) {
    return static_cast<std::size_t>((inode * 0x9e3779b97f4a7c15ull + region) % kRegionLocks);
  }

 private:
  std::vector<std::size_t> indexes_;
  std::vector<std::mutex*> held_;
};

struct DataFiles::UnitsToKeep {
  std::uint64_t first = 0;  // units [first, end)
  std::uint64_t end = 0;
  std::uint64_t file_changes = 0;
  std::vector<std::uint64_t> region_changes;  // one per unit
};

DataFiles::Descriptor::~Descriptor() {
  ::close(fd);
  ::close(sums_fd);
}

DataFiles::DataFiles(std::string root, std::shared_ptr<L2> l2, std::size_t max_open)
    : root_(std::move(root)),
      max_open_(max_open),
      l2_(l2 && l2->keeps_units() ? std::move(l2) : nullptr),
      space_(l2_ ? l2_->new_space() : 0),
      pack_(root_ + kPacksPath) {
  directories_.fill(-1);
}

DataFiles::~DataFiles() {
  for (int fd : directories_) {
    if (fd >= 0) ::close(fd);
  }
}

bool file_sync_covers_new_entry(std::int64_t filesystem_type) {
  // ext4 syncs a new file's parent directory with the file in both its modes (ext4_sync_parent
  // without a journal; with one, the transaction that created the entry commits first); ext2
  // and ext3 share its magic and are mounted by the ext4 driver on Debian's kernels
  // (EXT4_USE_FOR_EXT2). XFS's and btrfs's logs carry the entry with the new inode up to the
  // point the sync forces.
  constexpr std::int64_t kExt4 = 0xEF53;
  constexpr std::int64_t kXfs = 0x58465342;
  constexpr std::int64_t kBtrfs = 0x9123683E;
  return filesystem_type == kExt4 || filesystem_type == kXfs || filesystem_type == kBtrfs;
}

Status DataFiles::prepare() {
  std::error_code ec;
  for (unsigned i = 0; i < kFanout; ++i) {
    char name[8];
    std::snprintf(name, sizeof name, "%02x", i);
    std::string path = root_ + "/" + name;
    std::filesystem::create_directories(path, ec);
    if (ec) return error(Errc::io_error, "cannot create " + path + ": " + ec.message());
    directories_[i] = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (directories_[i] < 0) return errno_status("open data directory", errno);
  }
  struct statfs filesystem {};
  if (::fstatfs(directories_[0], &filesystem) != 0) return errno_status("statfs data directory", errno);
  file_sync_covers_entry_ = file_sync_covers_new_entry(filesystem.f_type);
  return pack_.open();
}

std::string DataFiles::path_under(const std::string& root, std::uint64_t inode) {
  char name[32];
  std::snprintf(name, sizeof name, "/%02x/%016llx", static_cast<unsigned>(inode % kFanout),
                static_cast<unsigned long long>(inode));
  return root + name;
}

Result<ByteOnDisk> DataFiles::locate_on_disk(const std::string& root, std::uint64_t inode,
                                             std::uint64_t offset) {
  TP_ASSIGN_OR_RETURN(std::optional<ByteOnDisk> packed,
                      Pack::locate_on_disk(root + kPacksPath, inode, offset));
  if (packed) return *packed;
  return ByteOnDisk{path_under(root, inode), offset};
}

Result<std::shared_ptr<DataFiles::Descriptor>> DataFiles::open(std::uint64_t inode, bool create) {
  {
    std::lock_guard lock(mutex_);
    if (auto it = open_.find(inode); it != open_.end()) {
      recently_used_.splice(recently_used_.begin(), recently_used_, it->second);
      return it->second->second;
    }
  }
  std::string path = path_of(inode);
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
  if (fd < 0) {
    if (errno == ENOENT && !create) return std::shared_ptr<Descriptor>();
    return errno_status("open data file", errno);
  }
  int sums_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (sums_fd < 0) {
    const int failure = errno;
    ::close(fd);
    return errno_status("open data file", failure);
  }
  auto descriptor = std::make_shared<Descriptor>(fd, sums_fd);
  std::lock_guard lock(mutex_);
  // Another thread may have opened it meanwhile: keep one descriptor per inode.
  if (auto it = open_.find(inode); it != open_.end()) return it->second->second;
  if (open_.size() >= max_open_) {
    open_.erase(recently_used_.back().first);
    recently_used_.pop_back();
  }
  recently_used_.emplace_front(inode, std::move(descriptor));
  open_.emplace(inode, recently_used_.begin());
  return recently_used_.front().second;
}

Status DataFiles::read(std::uint64_t inode, std::uint64_t offset, std::span<std::uint8_t> into) {
  if (into.empty()) return {};
  TP_ASSIGN_OR_RETURN(Pack::ReadOutcome packed, read_packed(inode, offset, into, false));
  if (packed == Pack::ReadOutcome::read) return {};
  TP_ASSIGN_OR_RETURN(auto descriptor, open(inode, false));
  if (!descriptor) {
    std::memset(into.data(), 0, into.size());
    return {};
  }
  return read_verified(*descriptor, inode, offset, into, ReadMode::blocking).status();
}

Result<bool> DataFiles::holds(std::uint64_t inode) {
  if (pack_.contains(inode)) return true;
  TP_ASSIGN_OR_RETURN(auto descriptor, open(inode, false));
  return descriptor != nullptr;
}

Result<bool> DataFiles::read_cached(std::uint64_t inode, std::uint64_t offset,
                                    std::span<std::uint8_t> into) {
  if (into.empty()) return true;
  TP_ASSIGN_OR_RETURN(Pack::ReadOutcome packed, read_packed(inode, offset, into, true));
  if (packed != Pack::ReadOutcome::not_packed) return packed == Pack::ReadOutcome::read;
  // Before the file is opened: a removal between the two would otherwise go unseen.
  const std::optional<UnitsToKeep> plan = units_to_keep(inode, offset, into.size());
  TP_ASSIGN_OR_RETURN(auto descriptor, open(inode, false));
  if (!descriptor) {
    std::memset(into.data(), 0, into.size());
    return true;
  }
  TP_ASSIGN_OR_RETURN(bool read, read_verified(*descriptor, inode, offset, into, ReadMode::cached));
  if (read && plan) keep_units(inode, offset, into, *plan);
  return read;
}

Result<std::unique_ptr<PipedBytes>> DataFiles::lend(std::uint64_t inode, std::uint64_t offset,
                                                    std::uint64_t length) {
  if (length == 0 || length > kMaxLentBytes || offset % kChecksumBlock != 0 ||
      length % kChecksumBlock != 0 || offset > kChecksumTableOffset - length) {
    return error(Errc::invalid_argument, "a lend of whole checksum blocks, 1 MiB at most");
  }
  if (pack_.contains(inode)) return std::unique_ptr<PipedBytes>();
  // Before the file is opened: a removal between the two would otherwise go unseen.
  const std::optional<UnitsToKeep> plan = units_to_keep(inode, offset, length);
  TP_ASSIGN_OR_RETURN(auto descriptor, open(inode, false));
  if (!descriptor) return std::unique_ptr<PipedBytes>();
  TP_ASSIGN_OR_RETURN(std::unique_ptr<PipedBytes> lent, PipedBytes::make(length));
  if (Status in = lent->splice_in(descriptor->fd, offset, length); !in.ok()) {
    if (in.code() == Errc::unavailable) return std::unique_ptr<PipedBytes>();
    return in;
  }
  const BlockSpan span = BlockSpan::of(offset, length);
  std::vector<std::uint8_t> sums(span.count * kSumBytes);
  TP_RETURN_IF_ERROR(
      read_at(descriptor->sums_fd, sums, checksum_offset(span.first), false, "read checksums")
          .status());
  TP_ASSIGN_OR_RETURN(std::unique_ptr<PipedBytes> checked, lent->duplicate());
  // A unit at a time, so that what is checked is still in the processor's cache.
  thread_local std::vector<std::uint8_t> unit(kCachedUnitBytes);
  for (std::uint64_t at = offset; at < offset + length;) {
    const std::uint64_t end =
        std::min(offset + length, (at / kCachedUnitBytes + 1) * kCachedUnitBytes);
    const std::span<std::uint8_t> bytes = std::span(unit).first(end - at);
    TP_RETURN_IF_ERROR(checked->copy_out(bytes));
    const std::span<const std::uint8_t> bytes_sums = std::span(sums).subspan(
        (at - offset) / kChecksumBlock * kSumBytes, bytes.size() / kChecksumBlock * kSumBytes);
    if (first_mismatch(bytes, bytes_sums)) return std::unique_ptr<PipedBytes>();
    if (plan && bytes.size() == kCachedUnitBytes) {
      keep_unit(inode, at / kCachedUnitBytes, bytes, *plan);
    }
    at = end;
  }
  return lent;
}

CachedUnits DataFiles::cached_units(std::uint64_t inode, std::uint64_t offset,
                                    std::uint64_t length) {
  if (!l2_) return {};
  return l2_->lookup(space_, inode, offset, length);
}

bool DataFiles::read_from_l2(std::uint64_t inode, std::uint64_t offset,
                             std::span<std::uint8_t> into) {
  const CachedUnits cached = cached_units(inode, offset, into.size());
  if (cached.units.empty()) return into.empty();
  std::uint8_t* out = into.data();
  for (std::span<const std::uint8_t> piece : cached.pieces(offset, into.size())) {
    out = std::copy(piece.begin(), piece.end(), out);
  }
  return true;
}

std::optional<DataFiles::UnitsToKeep> DataFiles::units_to_keep(std::uint64_t inode,
                                                               std::uint64_t offset,
                                                               std::uint64_t length) {
  if (!l2_) return std::nullopt;
  UnitsToKeep plan;
  plan.first = (offset + kCachedUnitBytes - 1) / kCachedUnitBytes;
  plan.end = (offset + length) / kCachedUnitBytes;
  if (plan.first >= plan.end) return std::nullopt;
  plan.file_changes = file_changes_[inode % kFileSlots].load();
  for (std::uint64_t u = plan.first; u < plan.end; ++u) {
    plan.region_changes.push_back(region_changes_[RegionLocks::region_index(inode, u)].load());
  }
  return plan;
}

void DataFiles::keep_units(std::uint64_t inode, std::uint64_t offset,
                           std::span<const std::uint8_t> read, const UnitsToKeep& plan) {
  for (std::uint64_t u = plan.first; u < plan.end; ++u) {
    keep_unit(inode, u, read.subspan(u * kCachedUnitBytes - offset, kCachedUnitBytes), plan);
  }
}

void DataFiles::keep_unit(std::uint64_t inode, std::uint64_t u, std::span<const std::uint8_t> bytes,
                          const UnitsToKeep& plan) {
  if (u < plan.first || u >= plan.end || !l2_->read_before(space_, inode, u)) return;
  BlockCache::Filling unit = L2::allocate(space_, inode, u);
  std::memcpy(unit.bytes().data(), bytes.data(), kCachedUnitBytes);
  // A reader on a client's thread does not wait for a writer: a busy unit is not kept.
  const std::size_t region = RegionLocks::region_index(inode, u);
  std::unique_lock region_lock(region_locks_[region], std::try_to_lock);
  if (!region_lock.owns_lock()) return;
  std::unique_lock file_lock(file_locks_[inode % kFileSlots], std::try_to_lock);
  if (!file_lock.owns_lock()) return;
  if (file_changes_[inode % kFileSlots].load() != plan.file_changes ||
      region_changes_[region].load() != plan.region_changes[u - plan.first]) {
    return;
  }
  l2_->keep(std::move(unit));
}

void DataFiles::forget_units(std::uint64_t inode, const BlockSpan& span) {
  if (!l2_) return;
  for (std::uint64_t r = span.first / kRegionBlocks;
       r <= (span.first + span.count - 1) / kRegionBlocks; ++r) {
    l2_->forget(space_, inode, r);
    region_changes_[RegionLocks::region_index(inode, r)].fetch_add(1);
  }
}

void DataFiles::forget_file(std::uint64_t inode) {
  if (!l2_) return;
  std::lock_guard file(file_locks_[inode % kFileSlots]);
  file_changes_[inode % kFileSlots].fetch_add(1);
  // Every DataFiles' units of the inode: more than this one's, which is only a few misses.
  l2_->forget_file(inode);
}

Result<bool> DataFiles::read_verified(const Descriptor& d, std::uint64_t inode,
                                      std::uint64_t offset, std::span<std::uint8_t> into,
                                      ReadMode mode) {
  if (into.empty()) return true;
  const BlockSpan span = BlockSpan::of(offset, into.size());
  std::vector<std::uint8_t> bounce;
  const std::span<std::uint8_t> blocks = span.blocks_for(offset, into, bounce);
  std::vector<std::uint8_t> sums(span.count * kSumBytes);
  const bool nowait = mode == ReadMode::cached;
  for (int attempt = mode == ReadMode::holding_locks ? 1 : 0;; ++attempt) {
    // The second look holds the regions' locks, so no writer is between data and checksum.
    std::optional<RegionLocks> locked;
    if (attempt == 1 && mode != ReadMode::holding_locks) locked.emplace(region_locks_, inode, span);
    TP_ASSIGN_OR_RETURN(bool data_read,
                        read_at(d.fd, blocks, span.first * kChecksumBlock, nowait, "read data file"));
    TP_ASSIGN_OR_RETURN(bool sums_read, read_at(d.sums_fd, sums, checksum_offset(span.first),
                                                nowait, "read checksums"));
    if (!data_read || !sums_read) return false;
    std::optional<std::uint64_t> bad = first_mismatch(blocks, sums);
    if (!bad) break;
    if (attempt == 1) return report_mismatch(inode, span.first + *bad);
  }
  if (!bounce.empty()) {
    std::memcpy(into.data(), bounce.data() + (offset - span.first * kChecksumBlock), into.size());
  }
  return true;
}

Status DataFiles::report_mismatch(std::uint64_t inode, std::uint64_t block) {
  checksum_failures_.fetch_add(1);
  std::string what = "checksum mismatch in the data of inode " + std::to_string(inode) +
                     " at offset " + std::to_string(block * kChecksumBlock) + " (" +
                     std::to_string(kChecksumBlock) + " bytes)";
  spdlog::error("{}", what);
  return error(Errc::corrupt, std::move(what));
}

Status DataFiles::write(std::uint64_t inode, std::uint64_t offset,
                        std::span<const std::uint8_t> data) {
  if (data.empty()) return {};
  std::shared_ptr<Descriptor> descriptor;
  {
    std::lock_guard slot(pack_slots_[inode % kFileSlots]);
    TP_ASSIGN_OR_RETURN(descriptor, write_packed(inode, offset, data));
  }
  if (!descriptor) return {};
  const BlockSpan span = BlockSpan::of(offset, data.size());
  RegionLocks locked(region_locks_, inode, span);
  Status written = write_blocks(*descriptor, inode, offset, data, span);
  // Even a failed write may have changed some of the data.
  forget_units(inode, span);
  return written;
}

Status DataFiles::write_blocks(const Descriptor& d, std::uint64_t inode, std::uint64_t offset,
                               std::span<const std::uint8_t> data, const BlockSpan& span) {
  // A block written in part is read, verified and patched so its checksum covers all of it.
  std::vector<std::uint8_t> sums(span.count * kSumBytes);
  std::vector<std::uint8_t> patched;
  for (std::uint64_t i = 0; i < span.count; ++i) {
    const std::uint64_t block_start = (span.first + i) * kChecksumBlock;
    const std::uint64_t from = std::max(offset, block_start);
    const std::uint64_t to = std::min(offset + data.size(), block_start + kChecksumBlock);
    std::span<const std::uint8_t> block;
    if (to - from == kChecksumBlock) {
      block = data.subspan(from - offset, kChecksumBlock);
    } else {
      patched.resize(kChecksumBlock);
      TP_RETURN_IF_ERROR(
          read_verified(d, inode, block_start, patched, ReadMode::holding_locks).status());
      std::memcpy(patched.data() + (from - block_start), data.data() + (from - offset), to - from);
      block = patched;
    }
    put_sum(std::span(sums).subspan(i * kSumBytes, kSumBytes), stored_sum(block));
  }
  TP_RETURN_IF_ERROR(write_at(d.fd, data, offset));
  return write_at(d.fd, sums, checksum_offset(span.first));
}

Result<std::uint64_t> DataFiles::repair(std::uint64_t inode, std::uint64_t offset,
                                        std::span<const std::uint8_t> good) {
  if (good.empty()) return 0;
  const BlockSpan span = BlockSpan::of(offset, good.size());
  if (!span.aligned(offset, good.size())) {
    return error(Errc::invalid_argument, "a repair covers whole checksum blocks");
  }
  {
    std::lock_guard slot(pack_slots_[inode % kFileSlots]);
    TP_ASSIGN_OR_RETURN(std::optional<PackedData> packed, pack_.load(inode));
    if (packed) {
      std::uint64_t repaired = 0;
      for (std::uint64_t i = 0; i < span.count && span.first + i < packed->sums.size(); ++i) {
        const std::uint64_t b = span.first + i;
        const auto block = std::span(packed->blocks).subspan(b * kChecksumBlock, kChecksumBlock);
        if (packed->sums[b] == 0 || packed->sums[b] == stored_sum(block)) continue;
        std::memcpy(block.data(), good.data() + i * kChecksumBlock, kChecksumBlock);
        packed->sums[b] = stored_sum(block);
        ++repaired;
      }
      if (repaired > 0) {
        TP_RETURN_IF_ERROR(pack_.put(inode, packed->blocks, packed->sums));
        TP_RETURN_IF_ERROR(pack_.sync(inode));
      }
      return repaired;
    }
  }
  TP_ASSIGN_OR_RETURN(auto descriptor, open(inode, false));
  if (!descriptor) return 0;
  RegionLocks locked(region_locks_, inode, span);
  std::vector<std::uint8_t> blocks(good.size());
  std::vector<std::uint8_t> sums(span.count * kSumBytes);
  TP_RETURN_IF_ERROR(read_at(descriptor->fd, blocks, offset, false, "read data file").status());
  TP_RETURN_IF_ERROR(
      read_at(descriptor->sums_fd, sums, checksum_offset(span.first), false, "read checksums")
          .status());
  std::uint64_t repaired = 0;
  for (std::uint64_t i = 0; i < span.count; ++i) {
    if (!mismatches(blocks, sums, i)) continue;
    std::span<const std::uint8_t> block = good.subspan(i * kChecksumBlock, kChecksumBlock);
    std::uint8_t sum[kSumBytes];
    put_sum(sum, stored_sum(block));
    // The L2 keeps only verified bytes, which these are too; dropped all the same, in case the
    // copies disagree.
    forget_units(inode, BlockSpan::of(offset + i * kChecksumBlock, kChecksumBlock));
    TP_RETURN_IF_ERROR(write_at(descriptor->fd, block, offset + i * kChecksumBlock));
    TP_RETURN_IF_ERROR(write_at(descriptor->fd, sum, checksum_offset(span.first + i)));
    ++repaired;
  }
  if (repaired > 0 && ::fdatasync(descriptor->fd) != 0) {
    return errno_status("sync data file", errno);
  }
  return repaired;
}

Status DataFiles::sync(std::uint64_t inode) {
  if (pack_.contains(inode)) return pack_.sync(inode);
  TP_ASSIGN_OR_RETURN(auto descriptor, open(inode, false));
  // Nothing of its own: what it may have left is a removal from the pack, or a cut there.
  if (!descriptor) return pack_.sync(inode);
  return sync_descriptor(*descriptor, inode);
}

Status DataFiles::sync_and_release(std::uint64_t inode) {
  TP_RETURN_IF_ERROR(sync(inode));
  if (pack_.contains(inode)) return {};
  TP_ASSIGN_OR_RETURN(auto descriptor, open(inode, false));
  // Written back by the sync, so the pages are clean and go; advice only, so its failure
  // costs memory, not data.
  if (descriptor) ::posix_fadvise(descriptor->fd, 0, 0, POSIX_FADV_DONTNEED);
  return {};
}

Status DataFiles::sync_descriptor(Descriptor& d, std::uint64_t inode) {
  if (::fdatasync(d.fd) != 0) return errno_status("sync data file", errno);
  if (!d.entry_synced && !file_sync_covers_entry_) {
    if (::fsync(directories_[inode % kFanout]) != 0) {
      return errno_status("sync data directory", errno);
    }
    d.entry_synced = true;
  }
  return {};
}

Status DataFiles::sync_all() {
  if (directories_[0] < 0) return error(Errc::io_error, "the data directory is not prepared");
  if (::syncfs(directories_[0]) != 0) return errno_status("sync the data files", errno);
  return {};
}

Status DataFiles::truncate(std::uint64_t inode, std::uint64_t size) {
  {
    std::lock_guard slot(pack_slots_[inode % kFileSlots]);
    TP_ASSIGN_OR_RETURN(std::optional<PackedData> packed, pack_.load(inode));
    if (packed) {
      const std::uint64_t kept = (size + kChecksumBlock - 1) / kChecksumBlock;
      if (kept > packed->sums.size()) return {};  // nothing packed past the cut
      bool cut = kept < packed->sums.size();
      packed->sums.resize(kept);
      packed->blocks.resize(kept * kChecksumBlock);
      // The block the cut falls in ends in zeros; it keeps a checksum only if it had a good
      // one, and a bad one stays bad.
      if (size % kChecksumBlock != 0) {
        const auto last = std::span(packed->blocks).last(kChecksumBlock);
        const auto tail = last.subspan(size % kChecksumBlock);
        if ((packed->sums.back() == 0 || packed->sums.back() == stored_sum(last)) &&
            std::any_of(tail.begin(), tail.end(), [](std::uint8_t b) { return b != 0; })) {
          std::fill(tail.begin(), tail.end(), 0);
          if (packed->sums.back() != 0) packed->sums.back() = stored_sum(last);
          cut = true;
        }
      }
      if (!cut) return {};
      TP_RETURN_IF_ERROR(repack(inode, std::move(*packed)));
      return pack_.sync();
    }
  }
  TP_ASSIGN_OR_RETURN(auto descriptor, open(inode, false));
  if (!descriptor) return {};
  const int fd = descriptor->fd;
  const BlockSpan last = BlockSpan::of(size, 1);
  RegionLocks locked(region_locks_, inode, last);
  // The block the cut falls in will end in zeros; it keeps a checksum only if it had a good one.
  std::optional<std::vector<std::uint8_t>> partial;
  if (size % kChecksumBlock != 0) {
    std::vector<std::uint8_t> block(kChecksumBlock);
    std::vector<std::uint8_t> sum(kSumBytes);
    TP_ASSIGN_OR_RETURN(bool data_read,
                        read_at(fd, block, last.first * kChecksumBlock, false, "read data file"));
    TP_ASSIGN_OR_RETURN(bool sum_read,
                        read_at(descriptor->sums_fd, sum, checksum_offset(last.first), false,
                                "read checksums"));
    if (data_read && sum_read && get_sum(sum) != 0 && get_sum(sum) == stored_sum(block)) {
      std::memset(block.data() + size % kChecksumBlock, 0, kChecksumBlock - size % kChecksumBlock);
      partial = std::move(block);
    }
  }
  // The data past `size` and the checksums of the blocks wholly past it become holes.
  const std::uint64_t kept_blocks = (size + kChecksumBlock - 1) / kChecksumBlock;
  auto cut = [&]() -> Status {
    TP_RETURN_IF_ERROR(punch(fd, size, kChecksumTableOffset - size));
    TP_RETURN_IF_ERROR(punch(fd, checksum_offset(kept_blocks),
                             checksum_offset(kMaxBlocks) - checksum_offset(kept_blocks)));
    if (!partial) return {};
    std::vector<std::uint8_t> sum(kSumBytes);
    put_sum(sum, stored_sum(*partial));
    return write_at(fd, sum, checksum_offset(last.first));
  };
  const Status cut_status = cut();
  // Even a cut that failed half-way may have changed some of the data.
  forget_file(inode);
  TP_RETURN_IF_ERROR(cut_status);
  if (::fdatasync(fd) != 0) return errno_status("sync data file", errno);
  return {};
}

Status DataFiles::drop(std::uint64_t inode, std::uint64_t offset, std::uint64_t length) {
  if (offset % kChecksumBlock != 0 || length % kChecksumBlock != 0 ||
      offset > kChecksumTableOffset || length > kChecksumTableOffset - offset) {
    return error(Errc::invalid_argument, "a hole of whole checksum blocks within the data");
  }
  if (length == 0) return {};
  const BlockSpan span = BlockSpan::of(offset, length);
  {
    std::lock_guard slot(pack_slots_[inode % kFileSlots]);
    TP_ASSIGN_OR_RETURN(std::optional<PackedData> packed, pack_.load(inode));
    if (packed) {
      const std::uint64_t end =
          std::min<std::uint64_t>(span.first + span.count, packed->sums.size());
      for (std::uint64_t b = span.first; b < end; ++b) {
        packed->sums[b] = 0;
        std::fill_n(packed->blocks.begin() + static_cast<std::ptrdiff_t>(b * kChecksumBlock),
                    kChecksumBlock, 0);
      }
      return end > span.first ? repack(inode, std::move(*packed)) : Status{};
    }
  }
  TP_ASSIGN_OR_RETURN(auto descriptor, open(inode, false));
  if (!descriptor) return {};
  const int fd = descriptor->fd;
  RegionLocks locked(region_locks_, inode, span);
  Status dropped = punch(fd, offset, length);
  if (dropped.ok()) {
    dropped = punch(fd, checksum_offset(span.first),
                    checksum_offset(span.first + span.count) - checksum_offset(span.first));
  }
  // Even a punch that failed half-way may have changed some of the data.
  forget_units(inode, span);
  return dropped;
}

Result<std::vector<std::uint64_t>> DataFiles::list() const {
  std::vector<std::uint64_t> inodes;
  std::error_code ec;
  for (unsigned i = 0; i < kFanout; ++i) {
    char name[8];
    std::snprintf(name, sizeof name, "/%02x", i);
    for (const auto& entry : std::filesystem::directory_iterator(root_ + name, ec)) {
      const std::string file = entry.path().filename().string();
      char* end = nullptr;
      const unsigned long long inode = std::strtoull(file.c_str(), &end, 16);
      if (file.size() == 16 && end == file.c_str() + file.size()) inodes.push_back(inode);
    }
    if (ec) return error(Errc::io_error, "cannot list " + root_ + name + ": " + ec.message());
  }
  // A file unpacked when a crash cut that short is in both.
  const std::vector<std::uint64_t> packed = pack_.inodes();
  inodes.insert(inodes.end(), packed.begin(), packed.end());
  std::sort(inodes.begin(), inodes.end());
  inodes.erase(std::unique(inodes.begin(), inodes.end()), inodes.end());
  return inodes;
}

Status DataFiles::drop_page_cache() const {
  TP_ASSIGN_OR_RETURN(std::vector<std::uint64_t> inodes, list());
  for (std::uint64_t inode : inodes) {
    const int fd = ::open(path_of(inode).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) continue;  // removed since it was listed
      return errno_status("open data file", errno);
    }
    const int advised = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
    if (advised != 0) return errno_status("drop the page cache of a data file", advised);
  }
  return pack_.drop_page_cache();
}

Result<std::vector<std::pair<std::uint64_t, std::uint64_t>>> DataFiles::extents(
    std::uint64_t inode) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> found;
  TP_ASSIGN_OR_RETURN(std::optional<PackedData> packed, pack_.load(inode));
  if (packed) {
    for (std::uint64_t b = 0; b < packed->sums.size(); ++b) {
      if (packed->sums[b] == 0) continue;
      if (!found.empty() && found.back().first + found.back().second == b * kChecksumBlock) {
        found.back().second += kChecksumBlock;
      } else {
        found.emplace_back(b * kChecksumBlock, kChecksumBlock);
      }
    }
    return found;
  }
  TP_ASSIGN_OR_RETURN(auto descriptor, open(inode, false));
  if (!descriptor) return found;
  const auto end = static_cast<off_t>(kChecksumTableOffset);
  off_t position = 0;
  while (position < end) {
    const off_t data = ::lseek(descriptor->fd, position, SEEK_DATA);
    if (data < 0 && errno == ENXIO) break;  // no data after `position`
    if (data < 0) return errno_status("find data in a data file", errno);
    if (data >= end) break;
    off_t hole = ::lseek(descriptor->fd, data, SEEK_HOLE);
    if (hole < 0) return errno_status("find a hole in a data file", errno);
    hole = std::min(hole, end);
    found.emplace_back(static_cast<std::uint64_t>(data), static_cast<std::uint64_t>(hole - data));
    position = hole;
  }
  return found;
}

void DataFiles::remove(std::uint64_t inode) {
  {
    std::lock_guard slot(pack_slots_[inode % kFileSlots]);
    if (Status s = pack_.remove(inode); !s.ok()) {
      spdlog::warn("the pack keeps the data of removed inode {}: {}", inode, s.to_string());
    }
  }
  drop_own_file(inode);
}

bool DataFiles::drop_own_file(std::uint64_t inode) {
  {
    std::lock_guard lock(mutex_);
    if (auto it = open_.find(inode); it != open_.end()) {
      recently_used_.erase(it->second);
      open_.erase(it);
    }
  }
  const bool unlinked = ::unlink(path_of(inode).c_str()) == 0;
  forget_file(inode);
  return unlinked;
}

}  // namespace tidepool::store::internal
