#include "common/block_cache.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <boost/intrusive/list.hpp>
#include <boost/intrusive/set.hpp>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>
#include <utility>

namespace tidepool {

namespace bi = boost::intrusive;

// A block and its bookkeeping, in one allocation: the bytes follow the entry, unless they lie
// in memory the entry keeps (`owner`: a received message the block was taken from).
struct BlockCache::Entry {
  bi::set_member_hook<> table_hook;  // in its shard's table while the cache keeps it
  bi::list_member_hook<> list_hook;  // on its shard's in-use or LRU list while the cache keeps it
  BlockKey key;
  std::size_t size = 0;
  std::size_t room = 0;  // allocated for the bytes: what the budget is charged
  std::size_t refs = 0;  // handles, and one more while the cache keeps it; guarded by the shard
  bool cached = false;   // guarded by the shard's mutex, as the flag below
  bool drop_behind = false;
  std::shared_ptr<const void> owner;
  const std::byte* owned_bytes = nullptr;  // in `owner`'s memory

  std::byte* data() { return reinterpret_cast<std::byte*>(this + 1); }
  const std::byte* bytes() const {
    return owned_bytes != nullptr ? owned_bytes : reinterpret_cast<const std::byte*>(this + 1);
  }
  std::size_t charge() const { return sizeof(Entry) + room; }

  // Room for `size` bytes, left uninitialized.
  static Entry* make(const BlockKey& key, std::size_t size) {
    void* memory = ::operator new(sizeof(Entry) + size);
    auto* entry = new (memory) Entry;
    entry->key = key;
    entry->size = size;
    entry->room = size;
    return entry;
  }
  // `bytes`, where they lie in `owner`'s memory, of which `room` bytes are charged.
  static Entry* adopt(const BlockKey& key, std::shared_ptr<const void> owner,
                      std::span<const std::byte> bytes, std::size_t room) {
    auto* entry = new (::operator new(sizeof(Entry))) Entry;
    entry->key = key;
    entry->size = bytes.size();
    entry->room = std::max(room, bytes.size());
    entry->owner = std::move(owner);
    entry->owned_bytes = bytes.data();
    return entry;
  }
  static void destroy(Entry* entry) {
    entry->~Entry();
    ::operator delete(entry);
  }
};

namespace {

// A shard's critical sections are a few list and tree steps, far shorter than the sleep and
// wake-up a contended futex costs: waiters spin (yielding after a while) instead.
class SpinLock {
 public:
  void lock() {
    for (int spins = 0; locked_.exchange(true, std::memory_order_acquire); ++spins) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins > 64) std::this_thread::yield();
      }
    }
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

struct KeyOfEntry {
  using type = BlockKey;
  const BlockKey& operator()(const BlockCache::Entry& entry) const { return entry.key; }
};

using Table = bi::set<
    BlockCache::Entry,
    bi::member_hook<BlockCache::Entry, bi::set_member_hook<>, &BlockCache::Entry::table_hook>,
    bi::key_of_value<KeyOfEntry>>;
using List = bi::list<
    BlockCache::Entry,
    bi::member_hook<BlockCache::Entry, bi::list_member_hook<>, &BlockCache::Entry::list_hook>,
    bi::constant_time_size<false>>;

}  // namespace

struct BlockCache::Shard {
  explicit Shard(std::size_t capacity) : capacity(capacity) {}

  // One more handle on `entry`: a cached block moves from the LRU list to the in-use list.
  void ref(Entry& entry) {
    // A reader takes it again: whoever marked it done with, it is not.
    entry.drop_behind = false;
    if (entry.cached && entry.refs == 1) {
      lru.erase(lru.iterator_to(entry));
      in_use.push_back(entry);
      pinned += entry.charge();
    }
    entry.refs++;
  }

  // One handle less: a cached block nobody else holds goes back on the LRU list, at the cold
  // end if its reader was done with it; a block the cache no longer keeps goes.
  void unref(Entry& entry) {
    entry.refs--;
    if (entry.cached && entry.refs == 1) {
      in_use.erase(in_use.iterator_to(entry));
      if (entry.drop_behind) {
        lru.push_front(entry);
      } else {
        lru.push_back(entry);
      }
      pinned -= entry.charge();
    } else if (entry.refs == 0) {
      Entry::destroy(&entry);
    }
  }

  // The cache lets go of `entry`; its handles, if any, keep it.
  void uncache(Entry& entry) {
    table.erase(table.iterator_to(entry));
    if (entry.refs > 1) {
      in_use.erase(in_use.iterator_to(entry));
      pinned -= entry.charge();
    } else {
      lru.erase(lru.iterator_to(entry));
    }
    usage -= entry.charge();
    entry.cached = false;
    unref(entry);
  }

  SpinLock mutex;  // guards everything below but the capacity
  const std::size_t capacity;
  std::size_t usage = 0;   // the charge of the blocks the cache keeps
  std::size_t pinned = 0;  // the part of it on the in-use list
  Table table;
  List lru;                       // oldest first
  List in_use;                    // in no order
  BlockCacheStatistics counters;  // all but the byte and block counts
};

BlockCache::Handle::Handle(Handle&& other) noexcept
    : shard_(std::exchange(other.shard_, nullptr)), entry_(std::exchange(other.entry_, nullptr)) {}

BlockCache::Handle& BlockCache::Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    reset();
    shard_ = std::exchange(other.shard_, nullptr);
    entry_ = std::exchange(other.entry_, nullptr);
  }
  return *this;
}

BlockCache::Handle::~Handle() { reset(); }

void BlockCache::Handle::reset() {
  if (entry_ == nullptr) return;
  std::lock_guard guard(shard_->mutex);
  shard_->unref(*entry_);
  entry_ = nullptr;
  shard_ = nullptr;
}

BlockKey BlockCache::Handle::key() const { return entry_->key; }

std::span<const std::byte> BlockCache::Handle::bytes() const {
  return {entry_->bytes(), entry_->size};
}

bool BlockCache::Handle::cached() const {
  std::lock_guard guard(shard_->mutex);
  return entry_->cached;
}

BlockCache::Handle BlockCache::Handle::share() const {
  if (entry_ == nullptr) return {};
  std::lock_guard guard(shard_->mutex);
  shard_->ref(*entry_);
  return Handle(shard_, entry_);
}

void BlockCache::Handle::drop_behind() {
  std::lock_guard guard(shard_->mutex);
  entry_->drop_behind = true;
}

BlockCache::BlockCache(std::size_t capacity_bytes, std::size_t shards) : capacity_(capacity_bytes) {
  const std::size_t count =
      shards > 0
          ? std::bit_ceil(shards)
          : std::clamp<std::size_t>(std::bit_floor(capacity_bytes / kMinShardBytes), 1, kMaxShards);
  for (std::size_t i = 0; i < count; ++i) {
    shards_.push_back(std::make_unique<Shard>(capacity_bytes / count));
  }
}

BlockCache::~BlockCache() {
  for (auto& shard : shards_) {
    shard->table.clear();
    shard->in_use.clear();
    shard->lru.clear_and_dispose([](Entry* entry) { Entry::destroy(entry); });
  }
}

BlockCache::Shard& BlockCache::shard_of(const BlockKey& key) {
  // The blocks of one file spread over the shards, so one hot file is not one hot mutex.
  std::uint64_t h = key.inode * 0x9E3779B97F4A7C15ULL ^ key.block;
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDULL;
  h ^= h >> 33;
  return *shards_[h & (shards_.size() - 1)];
}

BlockCache::Handle BlockCache::lookup(const BlockKey& key) {
  Shard& shard = shard_of(key);
  std::lock_guard guard(shard.mutex);
  auto found = shard.table.find(key);
  if (found == shard.table.end()) {
    shard.counters.misses++;
    return {};
  }
  shard.counters.hits++;
  shard.ref(*found);
  return Handle(&shard, &*found);
}

bool BlockCache::contains(const BlockKey& key) {
  Shard& shard = shard_of(key);
  std::lock_guard guard(shard.mutex);
  return shard.table.find(key) != shard.table.end();
}

BlockCache::Filling& BlockCache::Filling::operator=(Filling&& other) noexcept {
  if (this != &other) {
    if (entry_ != nullptr) Entry::destroy(entry_);
    entry_ = std::exchange(other.entry_, nullptr);
  }
  return *this;
}

BlockCache::Filling::~Filling() {
  if (entry_ != nullptr) Entry::destroy(entry_);
}

std::span<std::uint8_t> BlockCache::Filling::bytes() const {
  return {reinterpret_cast<std::uint8_t*>(entry_->data()), entry_->size};
}

BlockCache::Filling BlockCache::allocate(const BlockKey& key, std::size_t size) {
  return Filling(Entry::make(key, size));
}

BlockCache::Handle BlockCache::insert(const BlockKey& key, std::span<const std::byte> bytes) {
  Filling block = allocate(key, bytes.size());
  if (!bytes.empty()) std::memcpy(block.bytes().data(), bytes.data(), bytes.size());
  return insert(std::move(block), bytes.size());
}

BlockCache::Handle BlockCache::insert(Filling block, std::size_t size) {
  Entry* entry = std::exchange(block.entry_, nullptr);
  entry->size = std::min(entry->size, size);
  return insert(entry);
}

BlockCache::Handle BlockCache::insert(const BlockKey& key, std::shared_ptr<const void> owner,
                                      std::span<const std::byte> bytes, std::size_t room) {
  return insert(Entry::adopt(key, std::move(owner), bytes, room));
}

BlockCache::Handle BlockCache::insert(Entry* entry) {
  const BlockKey key = entry->key;
  Shard& shard = shard_of(key);
  std::lock_guard guard(shard.mutex);
  shard.counters.inserts++;
  if (auto older = shard.table.find(key); older != shard.table.end()) shard.uncache(*older);
  // When even evicting everything unpinned would not make room, nothing is evicted in vain.
  const bool fits = entry->charge() <= shard.capacity - shard.pinned;
  while (fits && shard.usage + entry->charge() > shard.capacity && !shard.lru.empty()) {
    shard.counters.evictions++;
    shard.uncache(shard.lru.front());
  }
  entry->refs = 1;
  if (shard.usage + entry->charge() > shard.capacity) {
    shard.counters.bypassed++;
    return Handle(&shard, entry);
  }
  entry->cached = true;
  entry->refs = 2;
  shard.table.insert(*entry);
  shard.in_use.push_back(*entry);
  shard.usage += entry->charge();
  shard.pinned += entry->charge();
  return Handle(&shard, entry);
}

void BlockCache::erase(const BlockKey& key) {
  Shard& shard = shard_of(key);
  std::lock_guard guard(shard.mutex);
  if (auto found = shard.table.find(key); found != shard.table.end()) {
    shard.counters.invalidations++;
    shard.uncache(*found);
  }
}

void BlockCache::erase_file(std::uint64_t inode) {
  for (auto& shard : shards_) {
    std::lock_guard guard(shard->mutex);
    auto it = shard->table.lower_bound(BlockKey{inode, 0});
    while (it != shard->table.end() && it->key.inode == inode) {
      Entry& entry = *it++;
      shard->counters.invalidations++;
      shard->uncache(entry);
    }
  }
}

void BlockCache::clear() {
  for (auto& shard : shards_) {
    std::lock_guard guard(shard->mutex);
    while (!shard->lru.empty()) shard->uncache(shard->lru.front());
  }
}

BlockCacheStatistics BlockCache::statistics() const {
  BlockCacheStatistics total;
  for (const auto& shard : shards_) {
    std::lock_guard guard(shard->mutex);
    total.hits += shard->counters.hits;
    total.misses += shard->counters.misses;
    total.inserts += shard->counters.inserts;
    total.bypassed += shard->counters.bypassed;
    total.evictions += shard->counters.evictions;
    total.invalidations += shard->counters.invalidations;
    total.bytes += shard->usage;
    total.pinned_bytes += shard->pinned;
    total.blocks += shard->table.size();
  }
  return total;
}

}  // namespace tidepool
