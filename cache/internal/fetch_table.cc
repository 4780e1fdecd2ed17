#include "cache/internal/fetch_table.h"

#include <utility>

namespace tidepool::cache {

void FetchTable::fetch(const BlockKey& key, const Fetcher& fetcher, Done done) {
  BlockCache::Handle cached;
  bool start = false;
  {
    std::lock_guard guard(mutex_);
    // Looked up under the table's mutex: a fetch that ends inserts its block before it leaves
    // the table, so a block is always either cached or in flight to a caller here.
    cached = cache_.lookup(key);
    if (cached) {
      counters_.hits++;
    } else {
      auto [waiting, first] = in_flight_.try_emplace(key);
      waiting->second.push_back(std::move(done));
      start = first;
      if (first) {
        counters_.started++;
      } else {
        counters_.merged++;
      }
    }
  }
  if (cached) return done(std::move(cached));
  if (start) {
    fetcher([this, key](Result<BlockCache::Handle> fetched) { finish(key, std::move(fetched)); });
  }
}

void FetchTable::finish(const BlockKey& key, Result<BlockCache::Handle> fetched) {
  std::vector<Done> waiting;
  {
    std::lock_guard guard(mutex_);
    if (!fetched.ok()) counters_.failed++;
    auto entry = in_flight_.find(key);
    waiting = std::move(entry->second);
    in_flight_.erase(entry);
  }
  for (Done& done : waiting) {
    if (fetched.ok()) {
      done(fetched->share());
    } else {
      done(fetched.status());
    }
  }
}

FetchStatistics FetchTable::statistics() const {
  std::lock_guard guard(mutex_);
  return counters_;
}

}  // namespace tidepool::cache
