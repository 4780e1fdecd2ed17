// Fail points, as FreeBSD's fail(9) (on which OneFS builds its own): named places in the code
// where a fault-injection test makes a node pause, to kill it right there, or skip a check, to
// show that its tests catch what the check prevents. Every pause is 0 (none) and every switch
// off until set; the daemon sets them from the cluster's sysctls (debug.fail_point.NAME).
// Thread-safe.
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

// Switched on, every lease check (cluster/lease.h) passes, held or not: the partition tests
// show with it that their checkers see the stale answers leases prevent.
inline constexpr std::string_view kIgnoreLeases = "ignore_leases";

void set_pause(std::string_view name, std::chrono::milliseconds pause);
std::chrono::milliseconds pause_at(std::string_view name);

void set_switch(std::string_view name, bool on);
// Cheap while every switch is off: it is asked on hot paths.
bool switched_on(std::string_view name);

}  // namespace tidepool::fail_points
