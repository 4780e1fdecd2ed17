// One fetch in flight per block: a demand read and a prefetch of the same stripe unit, or two
// readers of it, share one fetch instead of reading the unit twice. The first to ask for a block
// the cache lacks starts the fetch; the others wait for it; every one gets its own handle on the
// block the fetch brought (kept in the cache when the budget allows) or the fetch's error. A
// block the cache holds is answered at once.
//
// Thread-safe: fetches may complete on any thread, and the callbacks run there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "cache/cache_options.h"
#include "common/block_cache.h"
#include "common/status.h"

namespace tidepool::cache {

class FetchTable {
 public:
  using Done = std::function<void(Result<BlockCache::Handle>)>;
  // Reads the block from where it lives, inserts it into the cache (so the fetcher decides,
  // under its own locks, whether what it read may still be kept) and calls `fetched` once, with
  // the block's handle or an error.
  using Fetched = std::function<void(Result<BlockCache::Handle>)>;
  using Fetcher = std::function<void(Fetched fetched)>;

  explicit FetchTable(BlockCache& cache) : cache_(cache) {}
  // Every fetch must have ended.
  ~FetchTable() = default;
  FetchTable(const FetchTable&) = delete;
  FetchTable& operator=(const FetchTable&) = delete;

  // The block `key`: from the cache, from the fetch of it under way, or from `fetcher`, which
  // runs (at most once) only when neither has it. `done` may run before fetch() returns.
  void fetch(const BlockKey& key, const Fetcher& fetcher, Done done);

  FetchStatistics statistics() const;

 private:
  void finish(const BlockKey& key, Result<BlockCache::Handle> fetched);

  BlockCache& cache_;
  mutable std::mutex mutex_;
  std::map<BlockKey, std::vector<Done>> in_flight_;  // guarded by mutex_
  FetchStatistics counters_;                         // guarded by mutex_
};

}  // namespace tidepool::cache
