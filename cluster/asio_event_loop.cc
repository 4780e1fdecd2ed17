#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <time.h>

#include <map>
#include <memory>
#include <random>

#include "cluster/event_loop.h"

namespace tidepool::cluster {
namespace {

namespace asio = boost::asio;

class AsioEventLoop final : public EventLoop {
 public:
  explicit AsioEventLoop(asio::any_io_executor executor)
      : strand_(asio::make_strand(executor)), random_(std::random_device{}()) {}

  ~AsioEventLoop() override {
    for (auto& [id, timer] : timers_->live) timer->cancel();
    timers_->live.clear();
  }

  std::uint64_t now_ms() const override { return now_us() / 1000; }
  // CLOCK_BOOTTIME, not the steady clock (CLOCK_MONOTONIC): it goes on while the machine is
  // suspended, so a node that wakes finds its lease lapsed, as one that was paused does.
  std::uint64_t now_us() const override {
    timespec now{};
    ::clock_gettime(CLOCK_BOOTTIME, &now);
    return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000 +
           static_cast<std::uint64_t>(now.tv_nsec) / 1000;
  }

  void post(Task task) override { asio::post(strand_, std::move(task)); }

  TimerId schedule(std::chrono::milliseconds delay, Task task) override {
    TimerId id = timers_->next++;
    auto timer = std::make_shared<asio::steady_timer>(strand_, delay);
    timers_->live.emplace(id, timer);
    // A timer cancelled after it fired has its handler queued already: the handler runs the
    // task only if the timer is still live. It holds the table, not the loop, so it is safe
    // to run after the loop is gone.
    timer->async_wait([timers = timers_, id, task = std::move(task)](boost::system::error_code ec) {
      if (ec || timers->live.erase(id) == 0) return;
      task();
    });
    return id;
  }

  void cancel(TimerId timer) override {
    auto it = timers_->live.find(timer);
    if (it == timers_->live.end()) return;
    it->second->cancel();
    timers_->live.erase(it);
  }

  std::uint64_t random_between(std::uint64_t low, std::uint64_t high) override {
    return std::uniform_int_distribution<std::uint64_t>(low, high)(random_);
  }

 private:
  asio::strand<asio::any_io_executor> strand_;
  std::mt19937_64 random_;
  struct Timers {
    TimerId next = 1;
    std::map<TimerId, std::shared_ptr<asio::steady_timer>> live;
  };
  std::shared_ptr<Timers> timers_ = std::make_shared<Timers>();
};

}  // namespace

std::unique_ptr<EventLoop> make_asio_event_loop(boost::asio::any_io_executor executor) {
  return std::make_unique<AsioEventLoop>(std::move(executor));
}

}  // namespace tidepool::cluster
