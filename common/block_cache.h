// A byte-bounded cache of file data blocks, the storage of both L1 (an initiator's blocks of
// other nodes' units) and L2 (an owner's blocks of its own units), after LevelDB's sharded LRU
// cache: every block the cache holds is on exactly one of two intrusive lists of its shard —
// *in use* (a Handle references it, so it is pinned and never evicted) or *LRU* (only the cache
// references it; evicted oldest first). A lookup that hits allocates nothing and takes one
// shard's lock (a spin lock: the critical sections are shorter than a futex's sleep).
//
// The budget is never exceeded: an insert that cannot make room because every block is pinned
// bypasses the cache — the caller gets a handle to a block the cache does not keep. A streaming
// reader marks the blocks it is done with `drop_behind`, so that one long scan recycles its own
// blocks instead of flushing everybody's.
//
// It lives in common/ because both cache/ (L1) and store/ (L2) keep blocks in it.
//
// Thread-safe. Handles may be used and destroyed on any thread, and may outlive neither the
// cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace tidepool {

// A block: the `block`-th block of a file's data (its size is the cache user's choice).
struct BlockKey {
  std::uint64_t inode = 0;
  std::uint64_t block = 0;
  auto operator<=>(const BlockKey&) const = default;
};

struct BlockCacheStatistics {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t inserts = 0;
  std::uint64_t bypassed = 0;       // inserts the budget had no room for, every block being pinned
  std::uint64_t evictions = 0;      // blocks evicted to make room
  std::uint64_t invalidations = 0;  // blocks dropped by erase() and erase_file()
  std::uint64_t bytes = 0;          // charged against the budget now, entries' overhead included
  std::uint64_t pinned_bytes = 0;   // of those, held by handles
  std::uint64_t blocks = 0;
};

class BlockCache {
 public:
  struct Entry;
  struct Shard;

  // A reference to a block: its bytes stay valid, and the block in memory, as long as the
  // handle lives. Move-only; an empty handle references nothing.
  class Handle {
   public:
    Handle() = default;
    Handle(Handle&& other) noexcept;
    Handle& operator=(Handle&& other) noexcept;
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle();

    explicit operator bool() const { return entry_ != nullptr; }
    BlockKey key() const;
    std::span<const std::byte> bytes() const;
    // Whether the cache keeps the block (false: the insert bypassed it, or it was erased).
    bool cached() const;
    // Once the last handle lets go, the block is the first to be evicted: a streaming reader
    // is done with it.
    void drop_behind();
    // Lets go of the block now.
    void reset();
    // Another handle on the same block (the same bytes, cached or not).
    Handle share() const;

   private:
    friend class BlockCache;
    Handle(Shard* shard, Entry* entry) : shard_(shard), entry_(entry) {}
    Shard* shard_ = nullptr;
    Entry* entry_ = nullptr;
  };

  // A block not in the cache yet, whose bytes are written in place — a read lands in them
  // directly — before insert() hands it over. Move-only; dropped unhanded, it is freed.
  class Filling {
   public:
    Filling() = default;
    Filling(Filling&& other) noexcept : entry_(std::exchange(other.entry_, nullptr)) {}
    Filling& operator=(Filling&& other) noexcept;
    Filling(const Filling&) = delete;
    Filling& operator=(const Filling&) = delete;
    ~Filling();

    std::span<std::uint8_t> bytes() const;

   private:
    friend class BlockCache;
    explicit Filling(Entry* entry) : entry_(entry) {}
    Entry* entry_ = nullptr;
  };

  // `capacity_bytes` is the budget over all shards; `shards` a power of two, or 0 for as many as
  // leave each shard kMinShardBytes at least, up to kMaxShards. A shard keeps whole blocks
  // within its share of the budget, so each may leave most of a block of it unused: a cache of
  // a few blocks in 16 shards would keep none.
  static constexpr std::size_t kMinShardBytes = 32u << 20;
  static constexpr std::size_t kMaxShards = 16;
  explicit BlockCache(std::size_t capacity_bytes, std::size_t shards = 0);
  // Every handle must be gone.
  ~BlockCache();
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  // The block, pinned, or an empty handle on a miss.
  Handle lookup(const BlockKey& key);
  // Whether the cache keeps the block now; counts neither a hit nor a miss.
  bool contains(const BlockKey& key);
  // Copies `bytes` in as the block `key` (replacing any older copy, which stays valid for its
  // handles) and returns it pinned. When the budget has no room — every block pinned, or the
  // block larger than a shard's share — the handle holds a block the cache does not keep.
  Handle insert(const BlockKey& key, std::span<const std::byte> bytes);
  // Room for `size` bytes of the block `key`, uninitialized, to fill before inserting it.
  static Filling allocate(const BlockKey& key, std::size_t size);
  // Inserts the first `size` bytes of `block` (a short read fills less than it has room for),
  // as insert() above, without copying them.
  Handle insert(Filling block, std::size_t size);
  // Inserts `bytes` where they lie, in memory `owner` keeps (a received message), as insert()
  // above: the block holds `owner` as long as it lives and charges the budget `room` bytes, or
  // bytes.size() if that is more (the caller's measure of the memory: L1 charges a block's
  // whole room, as for a block it fills).
  Handle insert(const BlockKey& key, std::shared_ptr<const void> owner,
                std::span<const std::byte> bytes, std::size_t room);
  // Drops the block, or every block of the file: the coherence protocol says the data changed.
  // Handles keep what they reference; lookups miss from now on.
  void erase(const BlockKey& key);
  void erase_file(std::uint64_t inode);
  // Drops every block nobody references (tide flush).
  void clear();

  std::size_t capacity() const { return capacity_; }
  BlockCacheStatistics statistics() const;

 private:
  Shard& shard_of(const BlockKey& key);
  Handle insert(Entry* entry);

  const std::size_t capacity_;
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace tidepool
