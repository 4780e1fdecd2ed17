#include "common/clock.h"

#include <cassert>
#include <thread>

namespace tidepool {

std::chrono::system_clock::time_point RealClock::now() const {
  return std::chrono::system_clock::now();
}

std::chrono::steady_clock::time_point RealClock::steady_now() const {
  return std::chrono::steady_clock::now();
}

void RealClock::sleep_until(std::chrono::steady_clock::time_point deadline) {
  std::this_thread::sleep_until(deadline);
}

FakeClock::FakeClock(std::chrono::system_clock::time_point start) : now_(start) {}

std::chrono::system_clock::time_point FakeClock::now() const {
  std::lock_guard lock(mutex_);
  return now_;
}

std::chrono::steady_clock::time_point FakeClock::steady_now() const {
  std::lock_guard lock(mutex_);
  return steady_now_;
}

void FakeClock::advance(std::chrono::nanoseconds by) {
  assert(by >= std::chrono::nanoseconds::zero());
  std::lock_guard lock(mutex_);
  now_ += std::chrono::duration_cast<std::chrono::system_clock::duration>(by);
  steady_now_ += std::chrono::duration_cast<std::chrono::steady_clock::duration>(by);
}

void FakeClock::sleep_until(std::chrono::steady_clock::time_point deadline) {
  std::lock_guard lock(mutex_);
  if (deadline <= steady_now_) return;
  now_ += std::chrono::duration_cast<std::chrono::system_clock::duration>(deadline - steady_now_);
  steady_now_ = deadline;
}

void FakeClock::set(std::chrono::system_clock::time_point to) {
  std::lock_guard lock(mutex_);
  now_ = to;
}

Clock& real_clock() {
  static RealClock clock;
  return clock;
}

}  // namespace tidepool
