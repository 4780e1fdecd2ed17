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
  while (entries_.size() >= capacity_ && !ages_.empty()) {
    entries_.erase(ages_.back());
    ages_.pop_back();
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
