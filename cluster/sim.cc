#include "cluster/sim.h"

#include <algorithm>
#include <utility>

namespace tidepool::cluster {

class SimWorld::Loop final : public EventLoop {
 public:
  Loop(SimWorld& world, NodeId node) : world_(world), node_(node) {}

  std::uint64_t now_ms() const override {
    const std::int64_t shifted = static_cast<std::int64_t>(world_.now_ms_) + shift_ms_;
    return static_cast<std::uint64_t>(std::max<std::int64_t>(0, shifted));
  }
  std::uint64_t now_us() const override { return now_ms() * 1000; }
  void post(Task task) override { world_.add_event(node_, 0, 0, std::move(task)); }
  TimerId schedule(std::chrono::milliseconds delay, Task task) override {
    TimerId timer = world_.next_timer_++;
    world_.live_timers_.insert(timer);
    world_.add_event(node_, static_cast<std::uint64_t>(std::max<std::int64_t>(0, delay.count())),
                     timer, std::move(task));
    return timer;
  }
  void cancel(TimerId timer) override { world_.live_timers_.erase(timer); }
  std::uint64_t random_between(std::uint64_t low, std::uint64_t high) override {
    return world_.random_between(low, high);
  }
  void shift_clock(std::int64_t by_ms) { shift_ms_ += by_ms; }

 private:
  SimWorld& world_;
  NodeId node_;
  std::int64_t shift_ms_ = 0;
};

class SimWorld::Network final : public Transport {
 public:
  Network(SimWorld& world, NodeId node) : world_(world), node_(node) {}

  void set_address(NodeId, const std::string&) override {}
  void send(NodeId to, Channel channel, xdr::Buffer message) override {
    world_.messages_sent_++;
    if (!world_.is_up(node_) || world_.random_fraction() < world_.faults_.loss) return;
    if (world_.random_fraction() < world_.faults_.duplicate) {
      world_.deliver(node_, to, channel, message);
    }
    world_.deliver(node_, to, channel, std::move(message));
  }
  void set_receiver(Channel channel, Receiver receiver) override {
    receivers_[channel] = std::move(receiver);
  }

  void receive(NodeId from, Channel channel, xdr::Buffer& message) {
    auto it = receivers_.find(channel);
    if (it != receivers_.end() && it->second) it->second(from, message);
  }

 private:
  SimWorld& world_;
  NodeId node_;
  std::map<Channel, Receiver> receivers_;
};

SimWorld::SimWorld(std::uint64_t seed) : random_(seed) {}

SimWorld::~SimWorld() = default;

EventLoop& SimWorld::loop(NodeId node) {
  auto& loop = loops_[node];
  if (!loop) loop = std::make_unique<Loop>(*this, node);
  return *loop;
}

void SimWorld::shift_clock(NodeId node, std::int64_t by_ms) {
  static_cast<Loop&>(loop(node)).shift_clock(by_ms);
}

Transport& SimWorld::transport(NodeId node) {
  auto& network = networks_[node];
  if (!network) network = std::make_unique<Network>(*this, node);
  return *network;
}

void SimWorld::partition(const std::vector<std::vector<NodeId>>& sides) {
  side_.clear();
  // Every known node starts alone on a side of its own; then the listed sides are joined.
  int next_side = 0;
  for (auto& [node, loop] : loops_) side_[node] = next_side++;
  for (const auto& side : sides) {
    int id = next_side++;
    for (NodeId node : side) side_[node] = id;
  }
}

void SimWorld::heal() { side_.clear(); }

bool SimWorld::reachable(NodeId from, NodeId to) const {
  if (from == to || side_.empty()) return true;
  auto a = side_.find(from);
  auto b = side_.find(to);
  return a != side_.end() && b != side_.end() && a->second == b->second;
}

void SimWorld::crash(NodeId node) {
  down_.insert(node);
  incarnation_[node]++;
}

void SimWorld::restart(NodeId node) { down_.erase(node); }

std::uint64_t SimWorld::random_between(std::uint64_t low, std::uint64_t high) {
  if (high <= low) return low;
  return low + random_() % (high - low + 1);
}

double SimWorld::random_fraction() {
  return static_cast<double>(random_() >> 11) * 0x1.0p-53;
}

void SimWorld::add_event(NodeId node, std::uint64_t delay_ms, EventLoop::TimerId timer,
                         EventLoop::Task task) {
  if (!is_up(node)) {
    if (timer != 0) live_timers_.erase(timer);
    return;
  }
  events_.push(Event{now_ms_ + delay_ms, next_sequence_++, node, incarnation_[node], timer,
                     std::move(task)});
}

void SimWorld::deliver(NodeId from, NodeId to, Channel channel, xdr::Buffer message) {
  std::uint64_t latency = random_between(faults_.min_latency_ms, faults_.max_latency_ms);
  // Delivery is an event of the receiver; reachability is judged when the message arrives,
  // so a partition also cuts what was already on the wire.
  events_.push(Event{now_ms_ + latency, next_sequence_++, to, incarnation_[to], 0,
                     [this, from, to, channel, message = std::move(message)]() mutable {
                       if (!reachable(from, to)) return;
                       auto it = networks_.find(to);
                       if (it == networks_.end()) return;
                       messages_delivered_++;
                       it->second->receive(from, channel, message);
                     }});
}

bool SimWorld::run_one() {
  if (events_.empty()) return false;
  // The queue holds const elements; the task is moved out before the pop destroys it.
  Event event = std::move(const_cast<Event&>(events_.top()));
  events_.pop();
  now_ms_ = std::max(now_ms_, event.time);
  if (!is_up(event.node) || incarnation_[event.node] != event.incarnation) return true;
  if (event.timer != 0 && live_timers_.erase(event.timer) == 0) return true;
  event.task();
  return true;
}

void SimWorld::run_until(std::uint64_t until_ms) {
  while (!events_.empty() && events_.top().time <= until_ms) run_one();
  now_ms_ = std::max(now_ms_, until_ms);
}

bool SimWorld::run_until(const std::function<bool()>& done, std::uint64_t deadline_ms) {
  if (done()) return true;
  while (!events_.empty() && events_.top().time <= deadline_ms) {
    run_one();
    if (done()) return true;
  }
  now_ms_ = std::max(now_ms_, deadline_ms);
  return done();
}

}  // namespace tidepool::cluster
