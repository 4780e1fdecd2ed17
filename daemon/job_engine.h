// The cluster's job engine (issue 7): whichever node leads the group view coordinates the jobs.
// It starts the job types whose schedule is due, decides which job runs (tiering/jobs.h), runs
// it here, and keeps its checkpoint in the job's object of the group view, so that when the
// leader dies or steps down the next one takes the job up where the checkpoint left it. An
// administrator's pause or cancel is a change of that object: the run sees it through
// view_changed and stops after the file it is working on, keeping what it did.
//
// The leader also keeps the data protected: a node down past efs.flexprotect.repair_delay (as
// this leader saw it go down) is marked lost (daemon/config_objects.h, LostNodes), and a lost
// node up again for as long (ten minutes at most) is not lost any more. After either change it
// starts FlexProtect, once the one before has ended, and notes the change protected when a run
// restriped every file it had to; a run that could not is followed by another, later each time.
// A node being SmartFailed is left out the same way while it still serves what it holds, and
// once that run protected every file and no shard lives on it, the leader removes it.
//
// Not thread-safe: a JobEngine lives on the strand of the node's Membership.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cluster/group.h"
#include "common/clock.h"
#include "common/status.h"
#include "daemon/config_objects.h"
#include "daemon/membership.h"
#include "store/store.h"
#include "tiering/jobs.h"

namespace tidepool::daemon {

struct JobEngineOptions {
  std::chrono::milliseconds tick{1000};        // how often schedules and budgets are looked at
  // How often a run keeps its checkpoint. Each save is a change of the group view, which every
  // node applies (and which fences calls stamped with the epoch before it), so not too often.
  std::chrono::milliseconds save_every{5000};
  // After a run stopped on a transient error (the namespace unreachable, no quorum), how long
  // before it is taken up again.
  std::chrono::milliseconds retry_after{3000};
  // What schedules, the repair delay and retries count on; null: the real clock. (The tick
  // itself is an Asio timer: a fake clock is moved, then the next tick looks.)
  Clock* clock = nullptr;
};

class JobEngine {
 public:
  // `store` is the namespace the jobs walk and change, as this node serves it.
  JobEngine(boost::asio::any_io_executor strand, Membership& membership, store::Store& store,
            JobEngineOptions options = {});
  ~JobEngine();
  JobEngine(const JobEngine&) = delete;
  JobEngine& operator=(const JobEngine&) = delete;

  // Starts looking at schedules every tick.
  void start();
  // After the view changed: plans again (a job started, paused, cancelled; leadership moved).
  void view_changed();
  // Stops ticking and the run under way, leaving its record as it is; call before the
  // Membership goes. Nothing is planned after.
  void stop();

 private:
  struct Run {
    std::uint64_t id = 0;
    bool stopping = false;
  };

  void tick();
  void plan_soon();
  boost::asio::awaitable<void> plan_until_settled();
  boost::asio::awaitable<void> plan();
  boost::asio::awaitable<void> start_due_schedules(std::int64_t now);
  boost::asio::awaitable<void> keep_protection(std::int64_t now);
  // Removes from the cluster a node being SmartFailed once FlexProtect protected every file
  // without it (`protected_nodes` says so) and the namespace's shards have left it.
  boost::asio::awaitable<void> remove_smartfailed(const LostNodes& protected_nodes);
  boost::asio::awaitable<void> run(std::uint64_t id, std::shared_ptr<Run> state);
  boost::asio::awaitable<Status> save(const tiering::Job& job, const Run& state);
  boost::asio::awaitable<void> keep_progress(const tiering::Job& job);
  // The pools of `view` past their transfer limit, from what their nodes report now; `known`:
  // those found past it before, so that only changes are logged.
  boost::asio::awaitable<std::set<std::string>> full_pools(const cluster::GroupView& view,
                                                           std::set<std::string> known);
  // Measures the pools again, then saves.
  boost::asio::awaitable<Status> save_measuring(const tiering::Job& job, const Run& state,
                                                std::set<std::string>& full);
  boost::asio::awaitable<Status> propose(cluster::Change change);
  bool leading() const;
  Clock& clock() const { return clock_or_real(options_.clock); }
  std::int64_t unix_now() const;

  boost::asio::any_io_executor strand_;
  Membership& membership_;
  store::Store& store_;
  const JobEngineOptions options_;
  boost::asio::steady_timer ticker_;
  std::shared_ptr<Run> running_;  // the run under way here, if any
  std::optional<std::chrono::steady_clock::time_point> retry_at_;
  // Unix seconds from which schedules never started count, since this node began to lead.
  std::optional<std::int64_t> counting_since_;
  // Whether each node is up, and since when, as seen while leading.
  struct NodeState {
    bool up = true;
    std::chrono::steady_clock::time_point since;
  };
  std::map<cluster::NodeId, NodeState> node_states_;
  // The FlexProtect run this leader started, for the lost nodes' generation it saw.
  struct Protecting {
    std::uint64_t job = 0;
    std::uint64_t generation = 0;
  };
  std::optional<Protecting> protecting_;
  // After a FlexProtect run that left files unprotected, the next starts this long after, twice
  // as long each time up to an hour — or at once when the lost nodes' generation or the nodes
  // up differ from when it ended (a node it needed is back, say).
  static constexpr std::chrono::seconds kFirstProtectRetry{30};
  std::chrono::steady_clock::time_point protect_retry_at_{};
  std::chrono::seconds protect_backoff_ = kFirstProtectRetry;
  struct ProtectionLeftUndone {
    std::uint64_t generation = 0;
    std::vector<cluster::NodeId> up;
    bool operator==(const ProtectionLeftUndone&) const = default;
  };
  std::optional<ProtectionLeftUndone> protection_left_undone_;
  bool planning_ = false;
  bool plan_again_ = false;
  bool stopped_ = false;
};

}  // namespace tidepool::daemon
