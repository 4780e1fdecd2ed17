#include "cluster/lease.h"

#include <algorithm>

#include "common/fail_points.h"

namespace tidepool::cluster {

std::uint64_t Lease::now_ms() const {
  std::lock_guard lock(mutex_);
  return clock_ != nullptr ? now_locked() : 0;
}

std::uint64_t Lease::now_locked() const {
  const std::uint64_t now = readings_.read(clock_->now_ms());
  if (readings_.stepped_back()) lapse_locked();
  return now;
}

bool Lease::held_since(std::uint64_t start_ms) const {
  std::lock_guard lock(mutex_);
  if (clock_ == nullptr) return false;
  const std::uint64_t now = now_locked();
  if (fail_points::switched_on(fail_points::kIgnoreLeases)) return true;
  return from_ms_ <= start_ms && now < until_ms_;
}

std::uint64_t Lease::until_ms() const {
  std::lock_guard lock(mutex_);
  return until_ms_;
}

void Lease::extend(std::uint64_t asked_ms, std::uint64_t until_ms) {
  std::lock_guard lock(mutex_);
  if (clock_ == nullptr) return;
  const std::uint64_t now = now_locked();
  const auto stepped_back_at = readings_.stepped_back_at_ms();
  if (until_ms <= now || (stepped_back_at && asked_ms <= *stepped_back_at)) return;
  if (now < until_ms_) {
    until_ms_ = std::max(until_ms_, until_ms);
  } else {
    from_ms_ = now;
    until_ms_ = until_ms;
  }
}

void Lease::lapse() {
  std::lock_guard lock(mutex_);
  if (clock_ != nullptr) now_locked();
  lapse_locked();
}

void Lease::lapse_locked() const { until_ms_ = std::min(until_ms_, readings_.last_ms()); }

void Lease::fence() {
  std::lock_guard lock(mutex_);
  if (clock_ != nullptr) now_locked();
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
