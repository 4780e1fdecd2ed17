#include "nfsd/internal/duplicate_request_cache.h"

namespace tidepool::nfsd {

DuplicateRequestCache::Outcome DuplicateRequestCache::begin(const RequestKey& key,
                                                            std::vector<std::uint8_t>& results) {
  std::lock_guard lock(mutex_);
  if (auto it = entries_.find(key); it != entries_.end()) {
    if (!it->second.results) return Outcome::in_progress;
    results = *it->second.results;
    return Outcome::replay;
  }
  // Evict the oldest finished replies; a call still in progress stays, or its retransmission
  // would run it a second time. In-progress entries are bounded by the calls in flight.
  for (auto it = ages_.end(); entries_.size() >= capacity_ && it != ages_.begin();) {
    --it;
    auto entry = entries_.find(*it);
    if (!entry->second.results) continue;
    entries_.erase(entry);
    it = ages_.erase(it);
  }
  ages_.push_front(key);
  entries_.emplace(key, Entry{std::nullopt, ages_.begin()});
  return Outcome::run;
}

void DuplicateRequestCache::finish(const RequestKey& key, std::vector<std::uint8_t> results) {
  std::lock_guard lock(mutex_);
  if (auto it = entries_.find(key); it != entries_.end()) it->second.results = std::move(results);
}

void DuplicateRequestCache::abandon(const RequestKey& key) {
  std::lock_guard lock(mutex_);
  if (auto it = entries_.find(key); it != entries_.end()) {
    ages_.erase(it->second.age);
    entries_.erase(it);
  }
}

}  // namespace tidepool::nfsd
