// The local data of each inode: one sparse file per inode holding its stripe units at their
// natural offsets, so reading a unit is one pread. Open descriptors are cached (bounded).
// Thread-safe.
//
// Every 4 KiB block carries a CRC32C, kept in the same file past the largest data offset (so
// one fdatasync makes data and checksums durable together) and verified on every read: a
// block whose checksum does not match is never returned. Checksums are per block rather than
// per 128 KiB unit so that a 4 KiB random read reads and hashes 4 KiB, not a whole unit.
//
// With the node's L2 (store/l2.h), the units read here whole are kept there on their second
// read: only a read the page cache answered, or a lend, keeps the units it covers, so that a
// read they cover is served from memory — no pread, no checksum pass, and no copy for a caller
// that sends the cached bytes on. Every change to a unit's data (write, repair, truncate,
// remove) drops it, under the lock its writers take; a read that missed keeps what it read only
// if no change reached the unit since it began. Dirty UNSTABLE data waits for COMMIT in the
// kernel's page cache, not there.
//
// Small files are packed (pack.h): data that ends below kPackedBelow, written to an inode with
// no data file, goes to the pack instead, with the same checksums; it gets a file of its own
// when a write reaches past that. Packed data never enters the L2 (it holds no whole unit).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/piped_bytes.h"
#include "common/status.h"
#include "store/internal/pack.h"
#include "store/l2.h"

namespace tidepool::store::internal {

inline constexpr std::uint64_t kChecksumBlock = 4096;
// The most one lend() puts in a pipe: what a pipe may hold unless its owner may raise the
// system's limit (/proc/sys/fs/pipe-max-size), and NFS's largest READ here.
inline constexpr std::uint64_t kMaxLentBytes = 1u << 20;

// Whether a file system of this type (statfs f_type) makes a new file's directory entry
// durable when the file is fsynced or fdatasynced.
bool file_sync_covers_new_entry(std::int64_t filesystem_type);

class DataFiles {
 public:
  // `l2`: the node's L2, null to keep no units.
  explicit DataFiles(std::string root, std::shared_ptr<L2> l2 = nullptr,
                     std::size_t max_open = 1024);
  ~DataFiles();
  DataFiles(const DataFiles&) = delete;
  DataFiles& operator=(const DataFiles&) = delete;

  Status prepare();  // creates the directory tree

  // Reads into `into`; bytes never written read as zeros. A block that fails its checksum
  // fails the read with Errc::corrupt naming the inode and offset.
  Status read(std::uint64_t inode, std::uint64_t offset, std::span<std::uint8_t> into);
  // The same read served only from the page cache: false, with nothing guaranteed in `into`,
  // when it would have to wait for the disk. The L2 may keep the units it covers whole.
  Result<bool> read_cached(std::uint64_t inode, std::uint64_t offset, std::span<std::uint8_t> into);
  // Puts the whole blocks [offset, offset + length) of the inode's data file in a pipe by
  // reference to the page cache's pages, and checks each block the pipe holds against its
  // checksum, reading those very pages (through a copy of the pipe's references), before it
  // gives the pipe out; may wait for the disk. A reply then sends them without copying them.
  // Null when they cannot be lent so: the data is packed, the inode has no data file, the file
  // ends before, or a block does not match (the copying read reads it again, and repairs it).
  // The L2 may keep the units it covers whole, as read_cached()'s do. invalid_argument unless
  // both are multiples of kChecksumBlock and 0 < length <= kMaxLentBytes.
  Result<std::unique_ptr<PipedBytes>> lend(std::uint64_t inode, std::uint64_t offset,
                                           std::uint64_t length);
  // The L2's units covering [offset, offset + length), when it holds every one of them; else
  // none. Their bytes are the data file's as of the call.
  CachedUnits cached_units(std::uint64_t inode, std::uint64_t offset, std::uint64_t length);
  // Copies [offset, offset + into.size()) out of the L2 when it holds all of it.
  bool read_from_l2(std::uint64_t inode, std::uint64_t offset, std::span<std::uint8_t> into);
  Status write(std::uint64_t inode, std::uint64_t offset, std::span<const std::uint8_t> data);
  // Puts back, from `good` (whole blocks from the block-aligned `offset`, as another copy
  // holds them), the blocks of that range that fail their checksums, and makes them durable.
  // A block that matches by now (a writer got there first) is left alone. Returns how many
  // blocks were put back.
  Result<std::uint64_t> repair(std::uint64_t inode, std::uint64_t offset,
                               std::span<const std::uint8_t> good);
  // Whether the inode has a data file here (a file never written to has none).
  Result<bool> holds(std::uint64_t inode);
  // Makes the file's data durable; also its directory entry the first time (by the file's own
  // sync on a file system known to do that, else by syncing the directory).
  Status sync(std::uint64_t inode);
  // As sync(), then lets the page cache go of the file's data: for copies a job writes (a
  // move's, a restripe's), which no client asked for and which would otherwise push the
  // clients' data out of the node's memory.
  Status sync_and_release(std::uint64_t inode);
  // Makes every file's data and directory entry durable (a whole copy's: one syncfs).
  Status sync_all();
  // Cuts the data at `size` (and makes the cut durable); later reads past it give zeros.
  Status truncate(std::uint64_t inode, std::uint64_t size);
  // Makes whole checksum blocks [offset, offset + length) a hole: they read as zeros, as never
  // written; durable with the next sync(). invalid_argument unless both are multiples of
  // kChecksumBlock.
  Status drop(std::uint64_t inode, std::uint64_t offset, std::uint64_t length);
  // Removes the file; a missing file is fine.
  void remove(std::uint64_t inode);

  // Asks the kernel to drop the clean pages of every data file from the page cache; pages not
  // yet durable stay.
  Status drop_page_cache() const;

  // Where byte `offset` of an inode's data lies on the disk under `root`, read from the disk
  // alone (a test's way to damage it behind a store's back).
  static Result<ByteOnDisk> locate_on_disk(const std::string& root, std::uint64_t inode,
                                           std::uint64_t offset);

  // The inodes that have a data file.
  Result<std::vector<std::uint64_t>> list() const;
  // Where the file holds data (start, length), below the checksum table; holes are left out.
  Result<std::vector<std::pair<std::uint64_t, std::uint64_t>>> extents(std::uint64_t inode);

  // Blocks found not matching their checksums since the start.
  std::uint64_t checksum_failures() const { return checksum_failures_.load(); }

 private:
  struct Descriptor {
    Descriptor(int f, int sums) : fd(f), sums_fd(sums) {}
    ~Descriptor();
    int fd;
    // Reads of the checksum table go through a descriptor of their own: read-ahead follows
    // each open file's reads, and the table's, far from the data, would make the data's look
    // random to it.
    int sums_fd;
    bool entry_synced = false;  // its directory entry is known durable
  };
  struct BlockSpan;
  class RegionLocks;
  struct UnitsToKeep;
  // blocking: may wait for the disk; cached: only from the page cache; holding_locks: blocking,
  // by a caller that holds the regions' locks already.
  enum class ReadMode { blocking, cached, holding_locks };

  static std::string path_under(const std::string& root, std::uint64_t inode);
  std::string path_of(std::uint64_t inode) const { return path_under(root_, inode); }
  // Holding the inode's pack slot: writes `data` to the pack if it goes there (null), else
  // returns the data file to write it to, made here so that no other writer packs the inode
  // meanwhile.
  Result<std::shared_ptr<Descriptor>> write_packed(std::uint64_t inode, std::uint64_t offset,
                                                   std::span<const std::uint8_t> data);
  // Holding the inode's pack slot: moves its packed data to a data file of its own, durably.
  Result<std::shared_ptr<Descriptor>> unpack(std::uint64_t inode, const PackedData& packed);
  // Reads as read_verified does, from the pack.
  Result<Pack::ReadOutcome> read_packed(std::uint64_t inode, std::uint64_t offset,
                                        std::span<std::uint8_t> into, bool nowait);
  // Holding the inode's pack slot: packs `changed` (trailing holes left out), or unpacks the
  // inode when nothing but holes is left.
  Status repack(std::uint64_t inode, PackedData changed);
  Status sync_descriptor(Descriptor& d, std::uint64_t inode);
  // Closes and removes the inode's data file, if it has one (true).
  bool drop_own_file(std::uint64_t inode);
  // create=false and no file: returns null with ok status.
  Result<std::shared_ptr<Descriptor>> open(std::uint64_t inode, bool create);
  // Reads and verifies the whole blocks covering [offset, offset + into.size()); false when
  // `cached` and the page cache does not hold them all.
  Result<bool> read_verified(const Descriptor& d, std::uint64_t inode, std::uint64_t offset,
                             std::span<std::uint8_t> into, ReadMode mode);
  Status report_mismatch(std::uint64_t inode, std::uint64_t block);
  Status write_blocks(const Descriptor& d, std::uint64_t inode, std::uint64_t offset,
                      std::span<const std::uint8_t> data, const BlockSpan& span);
  // The units a read of [offset, offset + length) is to keep, and the changes seen before it.
  std::optional<UnitsToKeep> units_to_keep(std::uint64_t inode, std::uint64_t offset,
                                           std::uint64_t length);
  // After the read into `read` at `offset`: keeps the planned units that no change reached.
  void keep_units(std::uint64_t inode, std::uint64_t offset, std::span<const std::uint8_t> read,
                  const UnitsToKeep& plan);
  // The same for one planned unit, `bytes` being the whole of it as read.
  void keep_unit(std::uint64_t inode, std::uint64_t unit, std::span<const std::uint8_t> bytes,
                 const UnitsToKeep& plan);
  // Holding the span's region locks, after its data changed: its units go.
  void forget_units(std::uint64_t inode, const BlockSpan& span);
  // After the file's data was cut or removed: all its units go.
  void forget_file(std::uint64_t inode);

  std::string root_;
  std::size_t max_open_;
  // Data files are spread over this many directories so none grows huge.
  static constexpr unsigned kFanout = 256;
  // One descriptor per fan-out directory, kept open for the fsync that makes a new file's
  // directory entry durable. Filled by prepare(); -1 until then.
  std::array<int, kFanout> directories_;
  // The file system makes a new file's directory entry durable when the file is synced: no
  // fsync of the directory is needed (set by prepare()).
  bool file_sync_covers_entry_ = false;
  // The open descriptors, most recently used first; the least recently used is closed when
  // max_open_ are open. Guarded by mutex_.
  using OpenList = std::list<std::pair<std::uint64_t, std::shared_ptr<Descriptor>>>;
  std::mutex mutex_;
  OpenList recently_used_;
  std::unordered_map<std::uint64_t, OpenList::iterator> open_;
  // A block's data and checksum are written apart, so writers of one region take turns, and a
  // reader that saw them disagree looks again under the lock before calling it corruption.
  static constexpr std::size_t kRegionLocks = 1024;
  std::array<std::mutex, kRegionLocks> region_locks_;
  // Changes made under each region lock, and to whole files (truncate, remove) under a lock of
  // the file's slot: a read that would keep units compares them before and after.
  std::array<std::atomic<std::uint64_t>, kRegionLocks> region_changes_{};
  static constexpr std::size_t kFileSlots = 64;
  std::array<std::mutex, kFileSlots> file_locks_;
  std::array<std::atomic<std::uint64_t>, kFileSlots> file_changes_{};
  // The L2, null without one; this DataFiles' units in it are in `space_`.
  const std::shared_ptr<L2> l2_;
  const std::uint64_t space_;
  Pack pack_;
  // Whether an inode is packed, or gets packed, is decided under the lock of its slot.
  std::array<std::mutex, kFileSlots> pack_slots_;
  std::atomic<std::uint64_t> checksum_failures_{0};
};

}  // namespace tidepool::store::internal
