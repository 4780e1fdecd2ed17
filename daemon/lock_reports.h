// What `tide locks list`, `tide statistics locks` and `tide nfs nlm sessions list` show, as
// each node reports its part in JSON: the locks it holds and wants, its lock manager's
// counters, and the NLM clients that came through it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <vector>

#include "cluster/types.h"
#include "common/status.h"
#include "lockmgr/lock.h"
#include "nfsd/server.h"

namespace tidepool::daemon {

// The reports a node gives about itself.
enum class NodeReport : std::uint32_t {
  locks = 1,
  lock_statistics = 2,
  nlm_sessions = 3,
  cache_statistics = 4,  // daemon/cache_reports.h
  // Not only a report: the node empties its caches, as {"l1": bool, "l2": bool} asks, and
  // reports {"flushed": {"node": N, "l1": bool, "l2": bool}}.
  cache_flush = 5,
  system_statistics = 6,  // daemon/activity.h
  client_statistics = 7,
};

// Which locks a locks report lists.
struct LocksFilter {
  std::optional<lockmgr::ResourceKind> kind;
  std::optional<std::uint64_t> file;  // the inode
  bool waiters_only = false;          // requests and conversions still waiting
  nlohmann::json to_json() const;
  static Result<LocksFilter> from_json(const nlohmann::json& json);
};

// At most this many locks in one node's report: the rest are counted, not listed.
inline constexpr std::size_t kMaxReportedLocks = 20'000;

// {"locks": [...], "unlisted": N}: the locks `filter` lets through, each with its age at
// `now_ms` (the node's lock clock).
nlohmann::json locks_report(cluster::NodeId self, const std::vector<lockmgr::HeldLock>& locks,
                            std::uint64_t now_ms, const LocksFilter& filter);
// {"statistics": {...}}, round trips as mean and p99 in microseconds.
nlohmann::json lock_statistics_report(cluster::NodeId self,
                                      const lockmgr::LockStatistics& statistics);
// {"sessions": [...]}
nlohmann::json nlm_sessions_report(cluster::NodeId self,
                                   const std::vector<nfsd::NlmSession>& sessions);

// The name `tide locks list --kind` takes for a kind ("data", "attributes", "advisory",
// "share"), and the kind a name stands for.
std::string_view resource_kind_name(lockmgr::ResourceKind kind);
std::optional<lockmgr::ResourceKind> parse_resource_kind(std::string_view name);

}  // namespace tidepool::daemon
