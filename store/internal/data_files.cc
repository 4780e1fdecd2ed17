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

#include "common/crc32c.h"
#include "store/store.h"

namespace tidepool::store::internal {

namespace {

Status errno_status(const char* what, int err) {
  Errc code = err == ENOSPC || err == EDQUOT ? Errc::no_space
              : err == EFBIG                 ? Errc::file_too_large
                                             : Errc::io_error;
  return error(code, std::string(what) + ": " + std::strerror(err));
}

// The checksum table starts where file data cannot reach: 4 bytes per block, little-endian.
constexpr std::uint64_t kChecksumTableOffset = kMaxFileSize;
constexpr std::uint64_t kMaxBlocks = kMaxFileSize / kChecksumBlock;
constexpr std::size_t kSumBytes = 4;
// Blocks per lock region: a stripe unit's worth, and the L2's block.
constexpr std::uint64_t kRegionBlocks = 32;
static_assert(kRegionBlocks * kChecksumBlock == kCachedUnitBytes);

std::uint64_t checksum_offset(std::uint64_t block) {
  return kChecksumTableOffset + block * kSumBytes;
}

// 0 in the table means "never written" (a hole, not checked), so a block whose CRC is 0 is
// recorded as 1: it is then as well protected as by any other 32-bit value.
std::uint32_t stored_sum(std::span<const std::uint8_t> block) {
  std::uint32_t crc = crc32c(block);
  return crc == 0 ? 1 : crc;
}

std::uint32_t get_sum(std::span<const std::uint8_t> bytes) {
  return std::uint32_t{bytes[0]} | std::uint32_t{bytes[1]} << 8 | std::uint32_t{bytes[2]} << 16 |
         std::uint32_t{bytes[3]} << 24;
}

void put_sum(std::span<std::uint8_t> bytes, std::uint32_t sum) {
  for (int i = 0; i < 4; ++i) bytes[i] = static_cast<std::uint8_t>(sum >> (8 * i));
}

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

Status punch(int fd, std::uint64_t offset, std::uint64_t length) {
  if (length == 0) return {};
  if (::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                  static_cast<off_t>(length)) != 0) {
    return errno_status("punch a hole in a data file", errno);
  }
  return {};
}

}  // namespace

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
};

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

// Which units were read whole lately: two generations of a Bloom filter (two bits per unit, 16
// bits per unit the L2 holds, so about 5 % false marks when full), in shards of their own so
// that readers of different units do not wait for each other. A generation is full after twice
// as many units as the L2 holds; the older one then goes. A false mark keeps a unit on its first
// read, which costs only the copy the doorkeeper is there to save.
class DataFiles::Doorkeeper {
 public:
  explicit Doorkeeper(std::size_t l2_units) {
    const std::size_t limit = std::max<std::size_t>(2 * l2_units / kShards, 64);
    const std::size_t bits = std::bit_ceil(std::max<std::size_t>(16 * l2_units / kShards, 1024));
    for (Shard& shard : shards_) {
      shard.limit = limit;
      shard.bits = bits;
      shard.current.assign(bits / 64, 0);
      shard.previous.assign(bits / 64, 0);
    }
  }

  // Marks the unit; whether it was marked already.
  bool seen_before(std::uint64_t inode, std::uint64_t unit) {
    const std::uint64_t hash = (inode * 0x9e3779b97f4a7c15ull) ^ (unit * 0xc2b2ae3d27d4eb4full);
    Shard& shard = shards_[(hash >> 59) % kShards];
    const std::size_t first = static_cast<std::size_t>(hash) & (shard.bits - 1);
    const std::size_t second = static_cast<std::size_t>(hash >> 32 ^ hash >> 7) & (shard.bits - 1);
    std::lock_guard lock(shard.mutex);
    if (marked(shard.current, first, second)) return true;
    const bool seen = marked(shard.previous, first, second);
    mark(shard.current, first);
    mark(shard.current, second);
    if (++shard.marks >= shard.limit) {
      shard.previous.swap(shard.current);
      std::fill(shard.current.begin(), shard.current.end(), 0);
      shard.marks = 0;
    }
    return seen;
  }

  void clear() {
    for (Shard& shard : shards_) {
      std::lock_guard lock(shard.mutex);
      std::fill(shard.current.begin(), shard.current.end(), 0);
      std::fill(shard.previous.begin(), shard.previous.end(), 0);
      shard.marks = 0;
    }
  }

 private:
  static constexpr std::size_t kShards = 16;
  struct Shard {
    std::size_t limit = 0;
    std::size_t bits = 0;
    std::mutex mutex;
    std::vector<std::uint64_t> current;   // guarded by mutex
    std::vector<std::uint64_t> previous;  // guarded by mutex
    std::size_t marks = 0;                // units marked in current; guarded by mutex
  };

  static bool marked(const std::vector<std::uint64_t>& words, std::size_t a, std::size_t b) {
    return (words[a / 64] >> (a % 64) & 1) != 0 && (words[b / 64] >> (b % 64) & 1) != 0;
  }
  static void mark(std::vector<std::uint64_t>& words, std::size_t bit) {
    words[bit / 64] |= std::uint64_t{1} << (bit % 64);
  }

  std::array<Shard, kShards> shards_;
};

struct DataFiles::UnitsToKeep {
  std::uint64_t first = 0;  // units [first, end)
  std::uint64_t end = 0;
  std::uint64_t file_changes = 0;
  std::vector<std::uint64_t> region_changes;  // one per unit
};

DataFiles::Descriptor::~Descriptor() { ::close(fd); }

namespace {
// Each DataFiles with an L2 keys its units under a number of its own: DataFiles of a shard and
// of pools may hold the same inode's units, and a store opened again must not find the units
// its predecessor kept (a mirror's copy changed the files in between).
std::atomic<std::uint64_t> next_l2_space{1};
// Units of a file fit in 2^26 (kMaxFileSize / kCachedUnitBytes): the space goes above them.
constexpr unsigned kSpaceShift = 32;
}  // namespace

DataFiles::DataFiles(std::string root, std::shared_ptr<BlockCache> l2, std::size_t max_open)
    : root_(std::move(root)),
      max_open_(max_open),
      units_(std::move(l2)),
      space_(units_ ? next_l2_space.fetch_add(1) : 0),
      doorkeeper_(units_ ? std::make_unique<Doorkeeper>(units_->capacity() / kCachedUnitBytes)
                         : nullptr) {
  static_assert(kMaxFileSize / kCachedUnitBytes <= std::uint64_t{1} << kSpaceShift);
  directories_.fill(-1);
}

BlockKey DataFiles::key_of(std::uint64_t inode, std::uint64_t unit) const {
  return {inode, space_ << kSpaceShift | unit};
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
  return {};
}

std::string DataFiles::directory_of(std::uint64_t inode) const {
  char name[8];
  std::snprintf(name, sizeof name, "%02x", static_cast<unsigned>(inode % kFanout));
  return root_ + "/" + name;
}

std::string DataFiles::path_of(std::uint64_t inode) const {
  char name[24];
  std::snprintf(name, sizeof name, "/%016llx", static_cast<unsigned long long>(inode));
  return directory_of(inode) + name;
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
  auto descriptor = std::make_shared<Descriptor>(fd);
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
  TP_ASSIGN_OR_RETURN(auto descriptor, open(inode, false));
  if (!descriptor) {
    std::memset(into.data(), 0, into.size());
    return {};
  }
  return read_verified(*descriptor, inode, offset, into, ReadMode::blocking).status();
}

Result<bool> DataFiles::holds(std::uint64_t inode) {
  TP_ASSIGN_OR_RETURN(auto descriptor, open(inode, false));
  return descriptor != nullptr;
}

Result<bool> DataFiles::read_cached(std::uint64_t inode, std::uint64_t offset,
                                    std::span<std::uint8_t> into) {
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

CachedUnits DataFiles::cached_units(std::uint64_t inode, std::uint64_t offset,
                                    std::uint64_t length) {
  if (!units_ || length == 0) return {};
  CachedUnits cached{units_, {}, offset / kCachedUnitBytes};
  const std::uint64_t last = (offset + length - 1) / kCachedUnitBytes;
  cached.units.reserve(last - cached.first_unit + 1);
  for (std::uint64_t u = cached.first_unit; u <= last; ++u) {
    BlockCache::Handle unit = units_->lookup(key_of(inode, u));
    if (!unit) return {};
    cached.units.push_back(std::move(unit));
  }
  return cached;
}

std::vector<std::span<const std::uint8_t>> CachedUnits::pieces(std::uint64_t offset,
                                                               std::uint64_t length) const {
  std::vector<std::span<const std::uint8_t>> found;
  found.reserve(units.size());
  std::uint64_t at = offset;
  for (std::size_t i = 0; i < units.size(); ++i) {
    const std::uint64_t start = (first_unit + i) * kCachedUnitBytes;
    const std::uint64_t until = std::min(start + kCachedUnitBytes, offset + length);
    found.emplace_back(
        reinterpret_cast<const std::uint8_t*>(units[i].bytes().data()) + (at - start), until - at);
    at = until;
  }
  return found;
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

void DataFiles::clear_l2() {
  if (!units_) return;
  units_->clear();
  doorkeeper_->clear();
}

std::optional<DataFiles::UnitsToKeep> DataFiles::units_to_keep(std::uint64_t inode,
                                                               std::uint64_t offset,
                                                               std::uint64_t length) {
  if (!units_) return std::nullopt;
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
    if (!doorkeeper_->seen_before(inode, u)) continue;
    const std::uint64_t start = u * kCachedUnitBytes;
    BlockCache::Filling unit = BlockCache::allocate(key_of(inode, u), kCachedUnitBytes);
    std::memcpy(unit.bytes().data(), read.data() + (start - offset), kCachedUnitBytes);
    // A reader on a client's thread does not wait for a writer: a busy unit is not kept.
    const std::size_t region = RegionLocks::region_index(inode, u);
    std::unique_lock region_lock(region_locks_[region], std::try_to_lock);
    if (!region_lock.owns_lock()) continue;
    std::unique_lock file_lock(file_locks_[inode % kFileSlots], std::try_to_lock);
    if (!file_lock.owns_lock()) continue;
    if (file_changes_[inode % kFileSlots].load() != plan.file_changes ||
        region_changes_[region].load() != plan.region_changes[u - plan.first]) {
      continue;
    }
    units_->insert(std::move(unit), kCachedUnitBytes);
  }
}

void DataFiles::forget_units(std::uint64_t inode, const BlockSpan& span) {
  if (!units_) return;
  for (std::uint64_t r = span.first / kRegionBlocks;
       r <= (span.first + span.count - 1) / kRegionBlocks; ++r) {
    units_->erase(key_of(inode, r));
    region_changes_[RegionLocks::region_index(inode, r)].fetch_add(1);
  }
}

void DataFiles::forget_file(std::uint64_t inode) {
  if (!units_) return;
  std::lock_guard file(file_locks_[inode % kFileSlots]);
  file_changes_[inode % kFileSlots].fetch_add(1);
  // Every DataFiles' units of the inode: more than this one's, which is only a few misses.
  units_->erase_file(inode);
}

Result<bool> DataFiles::read_verified(const Descriptor& d, std::uint64_t inode,
                                      std::uint64_t offset, std::span<std::uint8_t> into,
                                      ReadMode mode) {
  if (into.empty()) return true;
  const BlockSpan span = BlockSpan::of(offset, into.size());
  std::vector<std::uint8_t> bounce;
  std::span<std::uint8_t> blocks = into;
  if (!span.aligned(offset, into.size())) {
    bounce.resize(span.count * kChecksumBlock);
    blocks = bounce;
  }
  std::vector<std::uint8_t> sums(span.count * kSumBytes);
  const bool nowait = mode == ReadMode::cached;
  for (int attempt = mode == ReadMode::holding_locks ? 1 : 0;; ++attempt) {
    // The second look holds the regions' locks, so no writer is between data and checksum.
    std::optional<RegionLocks> locked;
    if (attempt == 1 && mode != ReadMode::holding_locks) locked.emplace(region_locks_, inode, span);
    TP_ASSIGN_OR_RETURN(bool data_read,
                        read_at(d.fd, blocks, span.first * kChecksumBlock, nowait, "read data file"));
    TP_ASSIGN_OR_RETURN(bool sums_read,
                        read_at(d.fd, sums, checksum_offset(span.first), nowait, "read checksums"));
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
  TP_ASSIGN_OR_RETURN(auto descriptor, open(inode, true));
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
  TP_ASSIGN_OR_RETURN(auto descriptor, open(inode, false));
  if (!descriptor) return 0;
  RegionLocks locked(region_locks_, inode, span);
  std::vector<std::uint8_t> blocks(good.size());
  std::vector<std::uint8_t> sums(span.count * kSumBytes);
  TP_RETURN_IF_ERROR(read_at(descriptor->fd, blocks, offset, false, "read data file").status());
  TP_RETURN_IF_ERROR(
      read_at(descriptor->fd, sums, checksum_offset(span.first), false, "read checksums").status());
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
  TP_ASSIGN_OR_RETURN(auto descriptor, open(inode, false));
  if (!descriptor) return {};
  if (::fdatasync(descriptor->fd) != 0) return errno_status("sync data file", errno);
  if (!descriptor->entry_synced && !file_sync_covers_entry_) {
    if (::fsync(directories_[inode % kFanout]) != 0) {
      return errno_status("sync data directory", errno);
    }
    descriptor->entry_synced = true;
  }
  return {};
}

Status DataFiles::sync_all() {
  if (directories_[0] < 0) return error(Errc::io_error, "the data directory is not prepared");
  if (::syncfs(directories_[0]) != 0) return errno_status("sync the data files", errno);
  return {};
}

Status DataFiles::truncate(std::uint64_t inode, std::uint64_t size) {
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
                        read_at(fd, sum, checksum_offset(last.first), false, "read checksums"));
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
  TP_ASSIGN_OR_RETURN(auto descriptor, open(inode, false));
  if (!descriptor) return {};
  const int fd = descriptor->fd;
  const BlockSpan span = BlockSpan::of(offset, length);
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
  return {};
}

Result<std::vector<std::pair<std::uint64_t, std::uint64_t>>> DataFiles::extents(
    std::uint64_t inode) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> found;
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
    std::lock_guard lock(mutex_);
    if (auto it = open_.find(inode); it != open_.end()) {
      recently_used_.erase(it->second);
      open_.erase(it);
    }
  }
  ::unlink(path_of(inode).c_str());
  forget_file(inode);
}

}  // namespace tidepool::store::internal
