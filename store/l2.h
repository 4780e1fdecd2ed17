// The node's L2 (DESIGN.md, Read path): its own data kept in memory as it is read — whole
// 128 KiB stripe units, verified, of its shards' files and of the units it holds for node pools —
// under one budget, with one doorkeeper, one flush and one count of how it answered.
//
// Units are kept on their second read: the DataFiles that read a unit whole asks read_before(),
// and only a unit marked as read lately (a doorkeeper, as TinyLFU's: a Bloom filter of the units
// read lately) goes in. One pass over a data set — a cold scan; a copy; a file written and read
// back once — costs no copy into the L2 and pushes nothing out of it. Every DataFiles keys its
// units in a space of its own (new_space()): the files of a shard and of pools may hold the same
// inode's units, and a store opened again must not find the units its predecessor kept. What
// keeps the units right — drop on every change, keep a read's units only if no change reached
// them meanwhile — is the DataFiles', which alone knows its writers (data_files.h).
//
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/block_cache.h"

namespace tidepool::store {

// The L2's block: a stripe unit of the default size.
inline constexpr std::uint64_t kCachedUnitBytes = 128u << 10;

class L2;

// How the store's own caches — its node's L2 — answered reads, counted like IntegrityCounters:
// file data from the L2's units, counted once, by the node whose data files hold it (the
// shard's, or the units it holds for node pools), attributes from the store's attribute cache.
struct ReadCounters {
  std::atomic<std::uint64_t> data_bytes_read{0};
  std::atomic<std::uint64_t> data_bytes_hit{0};
  // Of those, bytes sent from the page cache by reference (DataFiles::lend).
  std::atomic<std::uint64_t> data_bytes_lent{0};
  std::atomic<std::uint64_t> metadata_reads{0};
  std::atomic<std::uint64_t> metadata_hits{0};
};

// What the L2 (the store's block cache of its own units) holds now, and may hold.
struct L2Usage {
  std::uint64_t cached_bytes = 0;
  std::uint64_t budget_bytes = 0;
};

// Units of a file the L2 holds, pinned: units[i] is unit first_unit + i. The L2 outlives the
// handles (declared first, destroyed last), so a reply may hold them after its store is gone.
struct CachedUnits {
  std::shared_ptr<L2> l2;
  std::vector<BlockCache::Handle> units;
  std::uint64_t first_unit = 0;

  // The bytes [offset, offset + length) where they lie in the units, in order; the units must
  // cover the range.
  std::vector<std::span<const std::uint8_t>> pieces(std::uint64_t offset,
                                                    std::uint64_t length) const;
};

class L2 : public std::enable_shared_from_this<L2> {
 public:
  // 0 bytes keeps no units; reads are counted all the same. Always shared: pinned units keep
  // their L2.
  static std::shared_ptr<L2> make(std::uint64_t budget_bytes);
  ~L2();
  L2(const L2&) = delete;
  L2& operator=(const L2&) = delete;

  bool keeps_units() const { return units_ != nullptr; }
  // A key space for one DataFiles' units.
  std::uint64_t new_space();

  // The units covering [offset, offset + length) of the inode in `space`, when the L2 holds
  // every one of them; else none.
  CachedUnits lookup(std::uint64_t space, std::uint64_t inode, std::uint64_t offset,
                     std::uint64_t length);
  // Marks the unit as read whole; whether it was marked already.
  bool read_before(std::uint64_t space, std::uint64_t inode, std::uint64_t unit);
  // Room for a unit's bytes, to fill and keep().
  static BlockCache::Filling allocate(std::uint64_t space, std::uint64_t inode,
                                      std::uint64_t unit);
  void keep(BlockCache::Filling unit);
  // The data changed: the unit goes, or every unit of the inode in every space.
  void forget(std::uint64_t space, std::uint64_t inode, std::uint64_t unit);
  void forget_file(std::uint64_t inode);

  // Whether READ replies may pin `bytes` more: they pin a quarter of the budget at most (a reply
  // slow to go would keep others' units from coming in); past that, reads copy.
  bool may_pin(std::uint64_t bytes) const;
  // Holds `units` (this L2's) for a READ reply on its way, unless may_pin() says no: then null.
  std::shared_ptr<const CachedUnits> pin_for_reply(CachedUnits units, std::uint64_t bytes);

  // Drops every unit and the doorkeeper's marks: the L2 is as cold as after a start (tide flush
  // --l2).
  void clear();

  L2Usage usage() const;
  BlockCacheStatistics statistics() const;
  ReadCounters& reads() { return reads_; }
  const ReadCounters& reads() const { return reads_; }

 private:
  class Doorkeeper;
  class ReplyPin;

  explicit L2(std::uint64_t budget_bytes);
  // What replies may pin at most, with units_: a quarter of the budget.
  std::uint64_t reply_pin_limit() const;

  const std::unique_ptr<BlockCache> units_;  // null: keeps none
  const std::unique_ptr<Doorkeeper> doorkeeper_;  // with units_
  std::atomic<std::uint64_t> next_space_{1};
  // Bytes READ replies hold (pin_for_reply).
  std::atomic<std::uint64_t> reply_pins_{0};
  ReadCounters reads_;
};

}  // namespace tidepool::store
