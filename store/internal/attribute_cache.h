// Caches of what the shard thread knows (inode attributes, directory entries), readable from
// any thread so that GETATTR, ACCESS, LOOKUP and the checks before READ/WRITE need not wait
// for the shard thread.
//
// Only the shard thread changes it, after a batch's transaction is durable and in the order
// the batch's operations ran: entries read by read-only operations are put, inodes changed
// are dropped. So an entry never shows a change before it is durable, nor one older than the
// last durable change. Bounded; thread-safe.
#pragma once

#include <array>
#include <boost/unordered/unordered_flat_map.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "store/store.h"

namespace tidepool::store::internal {

template <typename Key, typename Value, typename Hash = std::hash<Key>>
class ShardedCache {
 public:
  using key_type = Key;
  using hasher = Hash;

  explicit ShardedCache(std::size_t capacity) : per_shard_(capacity / kShards + 1) {}

  std::optional<Value> find(const Key& key) const {
    const Shard& s = shard(key);
    std::lock_guard lock(s.mutex);
    auto it = s.entries.find(key);
    if (it == s.entries.end()) return std::nullopt;
    return it->second;
  }

  void put(const Key& key, const Value& value) {
    Shard& s = shard(key);
    std::lock_guard lock(s.mutex);
    if (s.entries.size() >= per_shard_ && !s.entries.count(key)) {
      s.entries.erase(s.entries.begin());  // any victim will do: a miss only costs a load
    }
    s.entries[key] = value;
  }

  void drop(const Key& key) {
    Shard& s = shard(key);
    std::lock_guard lock(s.mutex);
    s.entries.erase(key);
  }

  void clear() {
    for (Shard& s : shards_) {
      std::lock_guard lock(s.mutex);
      s.entries.clear();
    }
  }

 private:
  static constexpr std::size_t kShards = 16;
  struct Shard {
    mutable std::mutex mutex;
    // Open addressing: READDIRPLUS from memory finds an entry's attributes per entry listed.
    boost::unordered_flat_map<Key, Value, Hash> entries;  // guarded by mutex
  };
  Shard& shard(const Key& key) { return shards_[Hash{}(key) % kShards]; }
  const Shard& shard(const Key& key) const { return shards_[Hash{}(key) % kShards]; }

  std::size_t per_shard_;
  std::array<Shard, kShards> shards_;
};

// A directory entry, as the name cache keys it.
struct EntryName {
  InodeId directory;
  std::string name;
  auto operator<=>(const EntryName&) const = default;
};
struct EntryNameHash {
  std::size_t operator()(const EntryName& e) const {
    return std::hash<std::string>{}(e.name) ^ (e.directory * 0x9e3779b97f4a7c15ull);
  }
};

// A whole (small) directory as READDIR lists it after "." and "..".
struct Listing {
  struct Entry {
    InodeId inode;
    std::string name;
    std::uint64_t cookie;
  };
  InodeId parent;
  std::vector<Entry> entries;  // in cookie order
};

using AttributeCache = ShardedCache<InodeId, Attributes>;
// directory -> its listing, for READDIR/READDIRPLUS; dropped whenever an entry of it changes.
using ListingCache = ShardedCache<InodeId, std::shared_ptr<const Listing>>;
// (directory, name) -> inode, for LOOKUP; kept like the attribute cache.
using NameCache = ShardedCache<EntryName, InodeId, EntryNameHash>;

}  // namespace tidepool::store::internal
