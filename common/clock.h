// Time as a dependency: code that reads the time takes a Clock&, so that tests drive it with a
// FakeClock instead of sleeping.
#pragma once

#include <chrono>
#include <mutex>

namespace tidepool {

// Implementations are safe to call from any thread.
class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time: timestamps that are stored or shown (atime, mtime, job reports).
  virtual std::chrono::system_clock::time_point now() const = 0;
  // Monotonic time: deadlines, timeouts and intervals.
  virtual std::chrono::steady_clock::time_point steady_now() const = 0;
  // Blocks the calling thread until the monotonic clock reaches `deadline`.
  virtual void sleep_until(std::chrono::steady_clock::time_point deadline) = 0;
  void sleep_for(std::chrono::nanoseconds pause) {
    sleep_until(steady_now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(pause));
  }
};

class RealClock final : public Clock {
 public:
  std::chrono::system_clock::time_point now() const override;
  std::chrono::steady_clock::time_point steady_now() const override;
  void sleep_until(std::chrono::steady_clock::time_point deadline) override;
};

// Time stands still until a test moves it, or a thread sleeps: a sleep moves it to the sleep's
// end for every reader of the clock. A pause that waits for another thread or node to get
// somewhere (a retry of a peer that is behind) therefore comes back at once: tests that need
// such a wait to last give the code the real clock.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(std::chrono::system_clock::time_point start);

  std::chrono::system_clock::time_point now() const override;
  std::chrono::steady_clock::time_point steady_now() const override;
  // Moves both clocks to the deadline at once, if it is ahead, and returns: a sleeper's wait
  // costs a test no time.
  void sleep_until(std::chrono::steady_clock::time_point deadline) override;

  // Moves both clocks forward; `by` must not be negative.
  void advance(std::chrono::nanoseconds by);
  // Jumps the wall clock, in either direction, like an operator resetting it; the monotonic
  // clock does not move.
  void set(std::chrono::system_clock::time_point to);

 private:
  mutable std::mutex mutex_;
  std::chrono::system_clock::time_point now_;         // guarded by mutex_
  std::chrono::steady_clock::time_point steady_now_;  // guarded by mutex_
};

// The process-wide RealClock.
Clock& real_clock();

// What options that take an optional clock mean by null: the real one.
inline Clock& clock_or_real(Clock* clock) { return clock ? *clock : real_clock(); }

}  // namespace tidepool
