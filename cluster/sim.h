// A simulated cluster network for tests: every node's EventLoop and Transport in one process,
// driven by one seeded scheduler in virtual time. Messages can be delayed (and so reordered),
// lost and duplicated; the network can be partitioned and nodes crashed and restarted. A run is
// a pure function of its seed and the test's actions, so a failing seed replays exactly.
//
// Not thread-safe: the test and every simulated node run on the thread that calls run_*().
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <set>
#include <unordered_set>
#include <vector>

#include "cluster/event_loop.h"
#include "cluster/transport.h"
#include "cluster/types.h"

namespace tidepool::cluster {

struct SimFaults {
  std::uint32_t min_latency_ms = 1;
  std::uint32_t max_latency_ms = 15;
  double loss = 0;       // probability that a message is dropped
  double duplicate = 0;  // probability that a message is delivered twice
};

class SimWorld {
 public:
  explicit SimWorld(std::uint64_t seed);
  ~SimWorld();
  SimWorld(const SimWorld&) = delete;
  SimWorld& operator=(const SimWorld&) = delete;

  // The node's loop and transport, created on first use and valid as long as the world.
  EventLoop& loop(NodeId node);
  Transport& transport(NodeId node);

  void set_faults(const SimFaults& faults) { faults_ = faults; }
  // Nodes on different sides cannot reach each other; a node on no side reaches nobody.
  void partition(const std::vector<std::vector<NodeId>>& sides);
  void heal();
  bool reachable(NodeId from, NodeId to) const;

  // The node stops at once: its timers and tasks never run, messages to it are lost, and its
  // loop ignores new work until restart(). Its components are the test's to tear down.
  void crash(NodeId node);
  void restart(NodeId node);
  bool is_up(NodeId node) const { return !down_.contains(node); }
  // The node's clock jumps by `by_ms` (back when negative, never below 0) and runs on from
  // there; timers already set still fire after their delay, as a steady timer's would.
  void shift_clock(NodeId node, std::int64_t by_ms);

  // Runs events in time order until virtual time reaches `until_ms`.
  void run_until(std::uint64_t until_ms);
  // Runs events until `done()` holds (checked after each event) or time reaches `deadline_ms`;
  // returns whether `done()` held.
  bool run_until(const std::function<bool()>& done, std::uint64_t deadline_ms);

  std::uint64_t now_ms() const { return now_ms_; }
  std::uint64_t random_between(std::uint64_t low, std::uint64_t high);
  // A number in [0, 1).
  double random_fraction();
  std::uint64_t messages_sent() const { return messages_sent_; }
  std::uint64_t messages_delivered() const { return messages_delivered_; }

 private:
  class Loop;
  class Network;
  struct Event {
    std::uint64_t time;
    std::uint64_t sequence;  // ties broken in the order events were made
    NodeId node;
    std::uint64_t incarnation;
    EventLoop::TimerId timer;  // 0 for tasks and deliveries
    EventLoop::Task task;
    bool operator>(const Event& other) const {
      return time != other.time ? time > other.time : sequence > other.sequence;
    }
  };

  void add_event(NodeId node, std::uint64_t delay_ms, EventLoop::TimerId timer,
                 EventLoop::Task task);
  bool run_one();
  void deliver(NodeId from, NodeId to, Channel channel, xdr::Buffer message);

  std::mt19937_64 random_;
  SimFaults faults_;
  std::uint64_t now_ms_ = 0;
  std::uint64_t next_sequence_ = 0;
  EventLoop::TimerId next_timer_ = 1;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::unordered_set<EventLoop::TimerId> live_timers_;
  std::map<NodeId, std::uint64_t> incarnation_;
  std::set<NodeId> down_;
  std::map<NodeId, int> side_;  // empty: no partition
  std::map<NodeId, std::unique_ptr<Loop>> loops_;
  std::map<NodeId, std::unique_ptr<Network>> networks_;
  std::uint64_t messages_sent_ = 0;
  std::uint64_t messages_delivered_ = 0;
};

}  // namespace tidepool::cluster
