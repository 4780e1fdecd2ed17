// Where a cluster component runs: one logical thread with a millisecond clock, timers and a
// source of randomness. The daemon runs it on an Asio strand with real time; tests run many
// nodes on one simulated loop (cluster/sim.h) whose time only moves when the scheduler says.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include <boost/asio/any_io_executor.hpp>

namespace tidepool::cluster {

class EventLoop {
 public:
  using Task = std::function<void()>;
  using TimerId = std::uint64_t;

  virtual ~EventLoop() = default;

  // Milliseconds on a monotonic clock.
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

// A loop on a strand of `executor` with the steady clock and a randomly seeded generator.
// Destroy it on its own strand: its timers then never run; tasks already posted still do.
std::unique_ptr<EventLoop> make_asio_event_loop(boost::asio::any_io_executor executor);

}  // namespace tidepool::cluster
