// Small files' data, packed. A file whose data ends below kPackedBelow is kept as one record
// appended to a segment — a large file that many such files share — rather than in a data file
// of its own: creating, syncing and removing a file of its own costs the file system an inode,
// a directory entry and a flush each, which is most of what a small file costs here (measured:
// about 330 µs of CPU for a 115 KB file with its own file and fdatasync, 60 µs appended to a
// shared one synced every 8 files). One fdatasync makes every record appended before it
// durable, so the COMMITs of many small files share one.
//
// A record holds a file's whole data, in 4 KiB blocks, with each block's CRC32C (0: a hole),
// under a sequence number. A change appends a new record; a removal appends a removal record,
// which kills the inode's records numbered below its own. The index of live records is kept in
// memory and rebuilt at the start from the records' headers. Appends are written in turn, so a
// sync that covers a record covers every record before it: after a crash the newest segment is
// cut at its first record that is not whole (never synced), and appending starts a new segment.
// A segment whose records are mostly dead is compacted by a thread of the pack's own: its live
// records are appended again under their own numbers, its removal records too while an older
// record they kill may be left elsewhere, and it goes once those copies are durable.
// Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"

namespace tidepool::store::internal {

inline constexpr std::uint64_t kPackBlock = 4096;  // a checksum block (data_files.h)
// A file is packed while its data ends below this: at most one L2 unit, never a whole one.
inline constexpr std::uint64_t kPackedBelow = 128u << 10;
inline constexpr std::uint64_t kMaxPackedBlocks = kPackedBelow / kPackBlock;
inline constexpr std::uint64_t kSegmentBytes = 64u << 20;

// A block's checksum as stored, in a data file's table and in a packed record alike: its
// CRC32C. 0 means "never written" (a hole, not checked), so a block whose CRC is 0 is stored
// as 1: it is then as well protected as by any other 32-bit value.
std::uint32_t stored_sum(std::span<const std::uint8_t> block);

// A packed file's data: whole blocks, and each block's checksum (0: a hole, reads as zeros).
struct PackedData {
  std::vector<std::uint8_t> blocks;  // sums.size() blocks
  std::vector<std::uint32_t> sums;
};

// Where a byte of data lies on disk: which file, at which position.
struct ByteOnDisk {
  std::string path;
  std::uint64_t position = 0;
};

class Pack {
 public:
  // `directory` holds the segments; `segment_bytes` is where a segment stops taking records.
  explicit Pack(std::string directory, std::uint64_t segment_bytes = kSegmentBytes);
  ~Pack();
  Pack(const Pack&) = delete;
  Pack& operator=(const Pack&) = delete;

  // Creates the directory, rebuilds the index from the segments (cutting the newest at a torn
  // record) and starts compacting.
  Status open();

  bool contains(std::uint64_t inode) const;
  std::vector<std::uint64_t> inodes() const;

  // Packs the inode's data, replacing what it had: `bytes` from offset 0 (the last block may be
  // short: it is padded with zeros), one checksum per block in `sums` (at most
  // kMaxPackedBlocks). Durable with the next sync.
  Status put(std::uint64_t inode, std::span<const std::uint8_t> bytes,
             std::span<const std::uint32_t> sums);
  // The inode's data as packed, checksums not verified; nullopt if it is not packed.
  Result<std::optional<PackedData>> load(std::uint64_t inode) const;

  enum class ReadOutcome { read, not_packed, would_block };
  // Blocks [first, first + blocks.size() / kPackBlock) of the inode's data, and their checksums
  // (not verified here); blocks past its data read as holes. With `nowait`, would_block when
  // the page cache does not hold them all.
  Result<ReadOutcome> read(std::uint64_t inode, std::uint64_t first, std::span<std::uint8_t> blocks,
                           std::span<std::uint32_t> sums, bool nowait) const;

  // Unpacks the inode (a removal record; durable with the next sync). Not packed: nothing.
  Status remove(std::uint64_t inode);
  // Before the inode gets a data file of its own: makes its removal from the pack durable, so
  // that no restart finds an older record of it, which would hide that file.
  Status settle(std::uint64_t inode);
  // Makes the inode's record durable, or, if it is not packed, everything appended so far (a
  // removal among it).
  Status sync(std::uint64_t inode);
  // Makes everything appended so far durable.
  Status sync();

  std::optional<ByteOnDisk> locate(std::uint64_t inode, std::uint64_t offset) const;
  // The same, read from the segments on disk alone (another process's pack, as a test does).
  static Result<std::optional<ByteOnDisk>> locate_on_disk(const std::string& directory,
                                                          std::uint64_t inode,
                                                          std::uint64_t offset);

  Status drop_page_cache() const;

  struct Usage {
    std::uint64_t segments = 0;
    std::uint64_t bytes = 0;       // of every segment
    std::uint64_t live_bytes = 0;  // of the records the index points at
  };
  Usage usage() const;
  // Until no segment waits for compaction (tests).
  void wait_for_compaction();

 private:
  struct Segment;
  struct Entry {
    std::shared_ptr<Segment> segment;
    std::uint64_t position = 0;
    std::uint64_t blocks = 0;
    std::uint64_t sequence = 0;
    std::uint64_t appended_mark = 0;  // appended_ once it was written: synced past it, durable
  };
  struct Scan;

  std::optional<Entry> entry_of(std::uint64_t inode) const;
  Result<ReadOutcome> read_entry(const Entry& entry, std::uint64_t inode, std::uint64_t first,
                                 std::span<std::uint8_t> blocks, std::span<std::uint32_t> sums,
                                 bool nowait) const;

  Result<std::shared_ptr<Segment>> create_segment_locked();
  Status append_removal_locked(std::uint64_t inode);
  void note_synced_locked(std::uint64_t upto);
  Status sync_segment(Segment& segment);
  Status check_not_failed() const;
  Status seal_active_locked();
  // Writes a record (its header first in `pieces`) at the end of the active segment.
  Result<std::uint64_t> append_locked(std::span<const std::span<const std::uint8_t>> pieces,
                                      std::uint64_t size);
  void index_locked(std::uint64_t inode, Entry entry);
  void forget_locked(std::uint64_t inode);
  std::shared_ptr<Segment> compaction_candidate_locked() const;
  void compact_loop();
  Status compact(const std::shared_ptr<Segment>& segment);
  Status sync_up_to(std::uint64_t mark);

  const std::string directory_;
  const std::uint64_t segment_bytes_;
  int directory_fd_ = -1;

  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, Entry> index_;
  // Per inode, its data records on disk that are not in the index (replaced or removed): a
  // removal record is kept while its inode has one.
  std::unordered_map<std::uint64_t, std::uint64_t> dead_records_;
  std::map<std::uint64_t, std::shared_ptr<Segment>> segments_;  // by number, the active last
  std::shared_ptr<Segment> active_;                             // null until the first append
  std::uint64_t next_segment_ = 0;
  std::uint64_t next_sequence_ = 1;
  std::uint64_t appended_ = 0;  // bytes appended since open()

  // Removals not known durable yet, by inode, at the appended_ mark that covers each, and in
  // the order written (so that syncs forget them cheaply).
  std::unordered_map<std::uint64_t, std::uint64_t> pending_removals_;
  std::deque<std::pair<std::uint64_t, std::uint64_t>> pending_order_;
  std::atomic<bool> failed_{false};  // a sync failed: nothing more is appended or synced

  std::mutex sync_mutex_;                 // one fdatasync at a time; the others wait and see
  std::atomic<std::uint64_t> synced_{0};  // of appended_, durable

  std::condition_variable compaction_wake_;  // under mutex_
  bool stopping_ = false;
  bool compacting_ = false;
  std::thread compactor_;
};

}  // namespace tidepool::store::internal
