// Attributes of recently used inodes, readable from any thread so that GETATTR, ACCESS and the
// checks before READ/WRITE need not wait for the shard thread.
//
// Only the shard thread changes it, after a batch's transaction is durable and in the order
// the batch's operations ran: entries read by read-only operations are put, inodes changed
// are dropped. So an entry never shows a change before it is durable, nor one older than the
// last durable change. Bounded; thread-safe.
#pragma once

#include <array>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "store/store.h"

namespace tidepool::store::internal {

class AttributeCache {
 public:
  explicit AttributeCache(std::size_t capacity) : per_shard_(capacity / kShards + 1) {}

  std::optional<Attributes> find(InodeId inode) const {
    const Shard& s = shard(inode);
    std::lock_guard lock(s.mutex);
    auto it = s.entries.find(inode);
    if (it == s.entries.end()) return std::nullopt;
    return it->second;
  }

  void put(const Attributes& a) {
    Shard& s = shard(a.inode);
    std::lock_guard lock(s.mutex);
    if (s.entries.size() >= per_shard_ && !s.entries.count(a.inode)) {
      s.entries.erase(s.entries.begin());  // any victim will do: a miss only costs a load
    }
    s.entries[a.inode] = a;
  }

  void drop(InodeId inode) {
    Shard& s = shard(inode);
    std::lock_guard lock(s.mutex);
    s.entries.erase(inode);
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
    std::unordered_map<InodeId, Attributes> entries;  // guarded by mutex
  };
  Shard& shard(InodeId inode) { return shards_[inode % kShards]; }
  const Shard& shard(InodeId inode) const { return shards_[inode % kShards]; }

  std::size_t per_shard_;
  std::array<Shard, kShards> shards_;
};

}  // namespace tidepool::store::internal
