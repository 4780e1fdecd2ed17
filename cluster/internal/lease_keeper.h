// The lease protocol beside a Raft member (cluster/lease.h says what a lease promises).
//
// Every node asks the leader for its lease every `renew`, noting when it sent each request.
// The leader gathers the requests that reached it and, in one round, asks the voters whether
// they are still in its term; once a majority (itself included) says yes, no other leader can
// have been elected before the round began, and it grants each request it gathered before
// the round, if it may. A node that gets a grant holds its lease until `lease` after it sent
// the request — by its own clock, so message delays only shorten it. The leader records a
// node down only after `down_after` without a request from it, and only a leader that led for
// `down_after` records any, both counted on a clock that a jump forward moves by a bounded
// amount only (counted_clock.h); `lease` (with the clock-rate bound) is shorter than `down_after`, so every
// lease a node held has run out before anything it held is handed on.
//
// Not thread-safe: lives on the group member's loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <vector>

#include "cluster/event_loop.h"
#include "cluster/internal/counted_clock.h"
#include "cluster/lease.h"
#include "cluster/transport.h"
#include "cluster/types.h"

namespace tidepool::cluster::internal {

// How far the clocks of two nodes may drift apart while one lease runs, relative (0.1%: a
// monotonic clock that NTP slews moves at most 0.05% off).
constexpr double kMaxClockDrift = 0.001;

struct LeaseTiming {
  std::chrono::milliseconds lease{1500};
  std::chrono::milliseconds renew{250};
};

class LeaseKeeper {
 public:
  // What the keeper needs of the Raft member beside it.
  class Group {
   public:
    virtual ~Group() = default;
    virtual bool is_leader() const = 0;
    virtual NodeId leader() const = 0;
    virtual std::uint64_t term() const = 0;
    virtual std::vector<NodeId> voters() const = 0;
    // On the leader: whether `node` may hold a lease now (up in the view, not being marked
    // down), and then the position in the log it must have applied before it relies on it
    // (the change that last recorded it up).
    virtual std::optional<std::uint64_t> grantable(NodeId node) = 0;
    // How much of the log this node has applied.
    virtual std::uint64_t applied() const = 0;
  };

  // `silence_clock` times the requests a leader hears (last_heard).
  LeaseKeeper(EventLoop& loop, Transport& transport, NodeId self, LeaseTiming timing,
              CountedClock& silence_clock, Group& group);
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  void start();
  const std::shared_ptr<Lease>& lease() const { return lease_; }
  // On the leader: when the latest request from `node` reached it, on the silence clock.
  std::optional<std::uint64_t> last_heard(NodeId node) const;
  // This node applied changes: a grant waiting for it to catch up may now count.
  void changes_applied();
  // This node applied a change that has it down: what it held may be handed on.
  void fence();

 private:
  struct Round {
    std::uint64_t id = 0;
    std::uint64_t term = 0;
    std::set<NodeId> confirmed;
    std::map<NodeId, std::uint64_t> requests;  // node -> its request's sequence number
    EventLoop::TimerId deadline = 0;
  };
  struct WaitingGrant {
    std::uint64_t asked_ms = 0;
    std::uint64_t required_applied = 0;
  };

  void schedule_request();
  void request();
  void receive(NodeId from, std::span<const std::uint8_t> bytes);
  void on_request(NodeId from, std::uint64_t sequence);
  void on_confirm(NodeId from, std::uint64_t round, std::uint64_t term);
  void on_confirmed(NodeId from, std::uint64_t round, std::uint64_t term, bool yes);
  void on_grant(std::uint64_t sequence, std::uint64_t required_applied);
  // Holds the lease a grant of the request sent at `asked_ms` gives.
  void extend_lease(std::uint64_t asked_ms);
  void begin_round();
  void end_round();
  void send(NodeId to, const std::vector<std::uint64_t>& words);

  EventLoop& loop_;
  Transport& transport_;
  NodeId self_;
  LeaseTiming timing_;
  CountedClock& silence_clock_;
  Group& group_;
  std::shared_ptr<Lease> lease_;
  std::optional<EventLoop::TimerId> request_timer_;

  // As a requester.
  std::uint64_t next_sequence_ = 1;
  std::map<std::uint64_t, std::uint64_t> sent_;  // sequence -> when it was sent, lease's clock
  std::optional<WaitingGrant> waiting_;

  // As the leader.
  std::uint64_t leading_term_ = 0;            // the term heard_ and pending_ are of
  std::map<NodeId, std::uint64_t> heard_;    // node -> when its latest request arrived
  std::map<NodeId, std::uint64_t> pending_;  // requests not yet in a round
  std::optional<Round> round_;
  std::uint64_t next_round_ = 1;
};

}  // namespace tidepool::cluster::internal
