// Fail points, as FreeBSD's fail(9) (on which OneFS builds its own): named places in the code
// where a fault-injection test makes a node pause, to kill it right there, or skip a check, to
// show that its tests catch what the check prevents. Every pause is 0 (none) and every switch
// off until set; the daemon sets them from the cluster's sysctls (debug.fail_point.NAME), the
// simulations (tests/cluster) theirs directly. Thread-safe.
#pragma once

#include <chrono>
#include <string_view>

namespace tidepool::fail_points {

// A change across shards (store/namespace.h) with every part prepared, before its coordinator
// decides: the point between its two phases.
inline constexpr std::string_view kCrossShardDecide = "cross_shard_decide";

// An NLM LOCK the lock manager granted, before the node answers it: where a node may be fenced
// between a grant and its reply.
inline constexpr std::string_view kNlmGrantReply = "nlm_grant_reply";

// `tide cluster add-node` on the member that adds: the node joined (it holds the certificate the
// cluster issued to it), before the node goes into the view and the group: where killing that
// member leaves a node half added.
inline constexpr std::string_view kAddNodeAfterJoin = "add_node_after_join";

// `tide cluster create` on the node: the group made and the node registered in it, before the
// cluster's records (identity, CA, namespace, policies, exports) are written: where a crash
// leaves a cluster half made, which the node's next start rolls back. Set from the node's
// configuration ([debug] cluster_create_pause), as no cluster exists yet.
inline constexpr std::string_view kClusterCreateRecords = "cluster_create_records";

// Switched on, every lease check (cluster/lease.h) passes, held or not: the partition tests
// show with it that their checkers see the stale answers leases prevent.
inline constexpr std::string_view kIgnoreLeases = "ignore_leases";

// Switched on, a node's cache keeps what a blocking callback tells it to drop (a file's L1
// blocks and attributes) and lets the lock go: the coherence test shows with it that its checker
// sees the stale reads that dropping prevents.
inline constexpr std::string_view kKeepWhatCallbacksDrop = "keep_what_callbacks_drop";

// Switched on, a lock coordinator grants a lock whatever other owners hold over its range: the
// lock simulation shows with it that its checker sees conflicting grants.
inline constexpr std::string_view kGrantOverHeldLocks = "grant_over_held_locks";

// Switched on, the group's leader records a node down after one heartbeat of silence, while the
// node's lease still runs: the group simulation shows with it that its checker sees that.
inline constexpr std::string_view kRecordDownWhileLeaseRuns = "record_down_while_lease_runs";

// Switched on, the daemon leaks a block of memory on its way out: the process tests' harness
// shows with it that it fails a test whose node the sanitizers found leaking.
inline constexpr std::string_view kLeakAtExit = "leak_at_exit";

void set_pause(std::string_view name, std::chrono::milliseconds pause);
std::chrono::milliseconds pause_at(std::string_view name);

void set_switch(std::string_view name, bool on);
// Cheap while every switch is off: it is asked on hot paths.
bool switched_on(std::string_view name);

// Switch `name` on for this object's life: a simulation's test breaks a check with it.
class SwitchedOn {
 public:
  explicit SwitchedOn(std::string_view name) : name_(name) { set_switch(name_, true); }
  ~SwitchedOn() { set_switch(name_, false); }
  SwitchedOn(const SwitchedOn&) = delete;
  SwitchedOn& operator=(const SwitchedOn&) = delete;

 private:
  std::string_view name_;
};

}  // namespace tidepool::fail_points
