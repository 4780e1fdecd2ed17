// The requesting side of a node's lock manager: the locks this node holds and wants, each with
// the one operation on it in flight (lock, convert, release or cancel).
//
// An operation's call is repeated every `retransmit` until the coordinator answers, then, while
// the request waits in a queue, every `poll`, so no lost message strands it. The node's record
// of its locks is the truth recovery rebuilds from: on every view change it reports them to
// their coordinators in the new view and repeats the report until acknowledged. A grant or
// queue place the node does not want (a repeated call that arrived after the lock was gone) is
// released at once.
//
// Not thread-safe: lives on its node's EventLoop.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "cluster/event_loop.h"
#include "cluster/ring.h"
#include "cluster/types.h"
#include "common/status.h"
#include "lockmgr/internal/messages.h"
#include "lockmgr/lock.h"

namespace tidepool::lockmgr::internal {

class Requester {
 public:
  using Send = std::function<void(cluster::NodeId to, const LockMessage& message)>;
  using Completion = std::function<void(const LockResult&)>;
  using BlockingHandler = std::function<void(LockId holder, Mode wanted, Range range)>;
  using LostHandler = std::function<void(LockId lost)>;

  struct Timing {
    std::chrono::milliseconds retransmit{200};
    std::chrono::milliseconds poll{1000};
  };

  // Counts into `counters`, which the node's coordinator shares.
  Requester(cluster::EventLoop& loop, Send send, cluster::NodeId self, std::uint64_t first_sequence,
            Timing timing, LockStatistics& counters);
  ~Requester();
  Requester(const Requester&) = delete;
  Requester& operator=(const Requester&) = delete;

  void set_view(cluster::Epoch epoch, const std::vector<cluster::NodeId>& up_nodes);
  void receive(cluster::NodeId from, const LockMessage& message);

  LockId lock(const LockSpec& spec, Completion done, BlockingHandler on_blocking,
              LostHandler on_lost);
  Status convert(LockId id, const ConvertSpec& spec, Completion done);
  Status release(LockId id, std::optional<LockValue> value, std::function<void()> released);
  Status cancel(LockId id);

  std::vector<HeldLock> held() const;
  // Whether every operation has its answer and every report its acknowledgement.
  bool settled() const;

 private:
  enum class Doing : std::uint8_t { nothing, locking, converting, releasing, cancelling };
  struct Entry {
    LockSpec spec;  // the request as made; spec.mode is the mode wanted next
    bool granted = false;
    Mode mode = Mode::null;  // granted mode
    Range range;             // granted range
    LockValue value{};
    Doing doing = Doing::nothing;
    Doing cancelled = Doing::nothing;  // what a cancel withdraws: locking or converting
    std::uint64_t op = 0;
    std::uint64_t position = 0;
    bool answered = false;  // the current call was answered: poll, don't retransmit
    std::uint64_t deadline_ms = 0;
    std::uint64_t next_send_ms = 0;
    std::uint64_t since_ms = 0;
    std::optional<std::uint64_t> call_started_us;  // the current call's first sending, unanswered
    ConvertSpec conversion;
    std::optional<LockValue> release_value;
    std::optional<Mode> warned;  // the mode held when the last blocking callback came
    Completion done;
    std::vector<std::function<void()>> released;  // run once the coordinator let the lock go
    BlockingHandler on_blocking;
    LostHandler on_lost;
    bool unwanted = false;            // not the user's: released as soon as the coordinator has it
    cluster::NodeId coordinator = 0;  // where an unwanted lock is released
  };

  cluster::NodeId coordinator_of(const ResourceName& resource) const;
  void begin(LockId id, Entry& entry, Doing doing);
  void send_call(LockId id, Entry& entry);
  void on_answer(LockId id, Entry& entry, const LockMessage& message);
  void release_unwanted(LockId id, cluster::NodeId coordinator, std::uint64_t op);
  // Ends the entry's lock or convert operation; forgets the entry unless it holds a lock.
  static LockResult outcome(LockId id, const Entry& entry, std::optional<Refusal> refused);
  void finish(LockId id, Entry& entry, std::optional<Refusal> refused,
              std::optional<Conflict> in_the_way = std::nullopt);
  void forget(LockId id);
  // Forgets a lock being released, and tells those waiting for the release.
  void released(LockId id);
  void report(const std::vector<cluster::NodeId>& up_nodes);
  // Left out of the view: every lock is lost and every operation ends.
  void fence();
  void pump();
  void keep_pumping();

  cluster::EventLoop& loop_;
  Send send_;
  cluster::NodeId self_;
  std::uint64_t next_sequence_;
  Timing timing_;
  cluster::Epoch epoch_ = 0;
  bool member_ = false;  // whether the last view has this node up
  cluster::Ring ring_{{}};
  std::unordered_map<LockId, Entry> entries_;
  std::set<LockId> in_flight_;  // entries with an operation in flight
  std::map<cluster::NodeId, std::vector<LockMessage>> unacked_reports_;
  cluster::EventLoop::TimerId pump_timer_ = 0;
  LockStatistics& counters_;
};

}  // namespace tidepool::lockmgr::internal
