#include "cluster/lease.h"

#include <algorithm>

#include "common/fail_points.h"

namespace tidepool::cluster {

std::uint64_t Lease::now_ms() const {
  std::lock_guard lock(mutex_);
  return clock_ != nullptr ? clock_->now_ms() : 0;
}

bool Lease::held_since(std::uint64_t start_ms) const {
  std::lock_guard lock(mutex_);
  if (clock_ == nullptr) return false;
  if (fail_points::switched_on(fail_points::kIgnoreLeases)) return true;
  return from_ms_ <= start_ms && clock_->now_ms() < until_ms_;
}

std::uint64_t Lease::until_ms() const {
  std::lock_guard lock(mutex_);
  return until_ms_;
}

void Lease::extend(std::uint64_t until_ms) {
  std::lock_guard lock(mutex_);
  if (clock_ == nullptr) return;
  const std::uint64_t now = clock_->now_ms();
  if (until_ms <= now) return;
  if (now < until_ms_) {
    until_ms_ = std::max(until_ms_, until_ms);
  } else {
    from_ms_ = now;
    until_ms_ = until_ms;
  }
}

void Lease::lapse() {
  std::lock_guard lock(mutex_);
  lapse_locked();
}

void Lease::lapse_locked() {
  if (clock_ != nullptr) until_ms_ = std::min(until_ms_, clock_->now_ms());
}

void Lease::fence() {
  std::lock_guard lock(mutex_);
  lapse_locked();
  ++fences_;
}

std::uint64_t Lease::fences() const { return fences_.load(); }

void Lease::detach() {
  lapse();
  std::lock_guard lock(mutex_);
  clock_ = nullptr;
}

}  // namespace tidepool::cluster
