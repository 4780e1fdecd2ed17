// Time on a loop's clock, counted so that a clock that jumps cannot make it run far ahead of
// the time that really passed: what the group's leader decides by that a node has been silent
// long enough to be recorded down. A step back counts as no time, and a step forward of more
// than `max_step` between two reads counts as `max_step` — a clock that jumped, or a loop that
// did not run (paused, or starved of CPU) while its peers' messages waited to be read. So each
// jump forward adds at most `max_step` that did not pass. Read at least every `max_step`, it
// counts time in full; what it leaves out only delays a record of a node down.
//
// Not thread-safe: lives on the loop.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "cluster/event_loop.h"

namespace tidepool::cluster::internal {

class CountedClock {
 public:
  CountedClock(const EventLoop& loop, std::chrono::milliseconds max_step)
      : loop_(loop),
        max_step_ms_(static_cast<std::uint64_t>(max_step.count())),
        last_read_ms_(loop.now_ms()) {}

  std::uint64_t now_ms() {
    const std::uint64_t read = loop_.now_ms();
    if (read > last_read_ms_) counted_ms_ += std::min(read - last_read_ms_, max_step_ms_);
    last_read_ms_ = read;
    return counted_ms_;
  }

 private:
  const EventLoop& loop_;
  std::uint64_t max_step_ms_;
  std::uint64_t last_read_ms_;
  std::uint64_t counted_ms_ = 0;
};

}  // namespace tidepool::cluster::internal
