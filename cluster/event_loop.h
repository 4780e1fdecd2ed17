// Where a cluster component runs: one logical thread with a millisecond clock, timers and a
// source of randomness. The daemon runs it on an Asio strand with real time; tests run many
// nodes on one simulated loop (cluster/sim.h) whose time only moves when the scheduler says.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include <boost/asio/any_io_executor.hpp>

namespace tidepool::cluster {

class EventLoop {
 public:
  using Task = std::function<void()>;
  using TimerId = std::uint64_t;

  virtual ~EventLoop() = default;

  // Milliseconds on a clock that does not step in the daemon; a test's may (SimWorld::
  // shift_clock). What must judge a span of time right across a step reads it through
  // ForwardReadings or CountedClock (cluster/internal/counted_clock.h).
  virtual std::uint64_t now_ms() const = 0;
  // The same clock in microseconds, for measuring what takes less than a millisecond.
  virtual std::uint64_t now_us() const = 0;
  // Runs `task` on the loop soon. The only member that may be called from any thread.
  virtual void post(Task task) = 0;
  // Runs `task` on the loop after `delay`, unless cancelled first.
  virtual TimerId schedule(std::chrono::milliseconds delay, Task task) = 0;
  // Cancelling a timer that already ran or was cancelled does nothing.
  virtual void cancel(TimerId timer) = 0;
  // A uniformly drawn integer in [low, high].
  virtual std::uint64_t random_between(std::uint64_t low, std::uint64_t high) = 0;
};

// Readings of a clock made never to run back, for what would misjudge a span of time across a
// step back: a step back counts as no time, and the readings go on from where they were.
class ForwardReadings {
 public:
  std::uint64_t read(std::uint64_t clock_ms) {
    const std::uint64_t now = clock_ms + added_ms_;
    stepped_back_ = now < last_ms_;
    if (stepped_back_) {
      added_ms_ += last_ms_ - now;
      stepped_back_at_ms_ = last_ms_;
    }
    last_ms_ = std::max(last_ms_, now);
    return last_ms_;
  }
  std::uint64_t last_ms() const { return last_ms_; }
  // Whether the clock had stepped back at the latest read (and only that read).
  bool stepped_back() const { return stepped_back_; }
  // The reading at the latest step back; nothing if there was none.
  std::optional<std::uint64_t> stepped_back_at_ms() const { return stepped_back_at_ms_; }

 private:
  std::uint64_t last_ms_ = 0;
  std::uint64_t added_ms_ = 0;
  bool stepped_back_ = false;
  std::optional<std::uint64_t> stepped_back_at_ms_;
};

// A loop on a strand of `executor` with the clock that counts time suspended too
// (CLOCK_BOOTTIME) and a randomly seeded generator.
// Destroy it on its own strand: its timers then never run; tasks already posted still do.
std::unique_ptr<EventLoop> make_asio_event_loop(boost::asio::any_io_executor executor);

}  // namespace tidepool::cluster
