#include "daemon/lock_reports.h"

#include <array>
#include <limits>
#include <utility>

namespace tidepool::daemon {
namespace {

using lockmgr::ResourceKind;
using nlohmann::json;

constexpr std::array<std::pair<ResourceKind, std::string_view>, 5> kKindNames{{
    {ResourceKind::data, "data"},
    {ResourceKind::attributes, "attributes"},
    {ResourceKind::advisory, "advisory"},
    {ResourceKind::share, "share"},
    {ResourceKind::directory, "directory"},
}};

std::string_view state_name(lockmgr::LockState state) {
  switch (state) {
    case lockmgr::LockState::granted:
      return "granted";
    case lockmgr::LockState::converting:
      return "converting";
    case lockmgr::LockState::waiting:
      break;
  }
  return "waiting";
}

std::int64_t unix_seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

}  // namespace

std::string_view resource_kind_name(ResourceKind kind) {
  for (const auto& [k, name] : kKindNames) {
    if (k == kind) return name;
  }
  return "unknown";
}

std::optional<ResourceKind> parse_resource_kind(std::string_view name) {
  for (const auto& [kind, n] : kKindNames) {
    if (n == name) return kind;
  }
  return std::nullopt;
}

json LocksFilter::to_json() const {
  json out = json::object();
  if (kind) out["kind"] = resource_kind_name(*kind);
  if (file) out["file"] = *file;
  if (waiters_only) out["waiters"] = true;
  return out;
}

Result<LocksFilter> LocksFilter::from_json(const json& in) {
  LocksFilter filter;
  if (!in.is_object()) return error(Errc::invalid_argument, "a locks filter is an object");
  if (in.contains("kind")) {
    const json& kind = in["kind"];
    filter.kind = kind.is_string() ? parse_resource_kind(kind.get<std::string>()) : std::nullopt;
    if (!filter.kind) return error(Errc::invalid_argument, "unknown lock kind " + kind.dump());
  }
  if (in.contains("file")) {
    if (!in["file"].is_number_unsigned()) {
      return error(Errc::invalid_argument, "'file' must be an inode number");
    }
    filter.file = in["file"].get<std::uint64_t>();
  }
  filter.waiters_only = in.value("waiters", false);
  return filter;
}

json locks_report(cluster::NodeId self, const std::vector<lockmgr::HeldLock>& locks,
                  std::uint64_t now_ms, const LocksFilter& filter) {
  json list = json::array();
  std::uint64_t unlisted = 0;
  for (const lockmgr::HeldLock& lock : locks) {
    const lockmgr::LockRecord& r = lock.record;
    const bool waiting = r.state == lockmgr::LockState::waiting;
    if ((filter.kind && r.resource.kind != *filter.kind) ||
        (filter.file && r.resource.id != *filter.file) ||
        (filter.waiters_only && r.state == lockmgr::LockState::granted)) {
      continue;
    }
    if (list.size() >= kMaxReportedLocks) {
      unlisted++;
      continue;
    }
    list.push_back(json{
        {"node", self},
        {"id", std::to_string(r.id.node) + ":" + std::to_string(r.id.sequence)},
        {"kind", resource_kind_name(r.resource.kind)},
        {"file", r.resource.id},
        {"start", r.range.start},
        {"end", r.range.end == std::numeric_limits<std::uint64_t>::max() ? json(nullptr)
                                                                         : json(r.range.end)},
        {"state", state_name(r.state)},
        {"mode", waiting ? json(nullptr) : json(lockmgr::mode_name(r.granted))},
        {"requested", lockmgr::mode_name(r.requested)},
        {"holder", lock.holder},
        {"age_ms", now_ms - std::min(now_ms, lock.since_ms)},
    });
  }
  return json{{"locks", std::move(list)}, {"unlisted", unlisted}};
}

json lock_statistics_report(cluster::NodeId self, const lockmgr::LockStatistics& s) {
  return json{{"statistics",
               {{"node", self},
                {"requests", s.requests},
                {"grants", s.grants},
                {"conversions", s.conversions},
                {"refusals", s.refusals},
                {"callbacks_sent", s.callbacks_sent},
                {"callbacks_received", s.callbacks_received},
                {"retransmissions", s.retransmissions},
                {"fenced", s.fenced},
                {"locks_lost", s.locks_lost},
                {"unresponsive_reported", s.unresponsive_reported},
                {"recoveries", s.recoveries},
                {"last_recovery_ms", s.last_recovery_ms},
                {"coordinated_locks", s.coordinated_locks},
                {"round_trips", s.round_trips.count()},
                {"round_trip_mean_us", s.round_trips.mean_micros()},
                {"round_trip_p99_us", s.round_trips.quantile_micros(0.99)}}}};
}

json nlm_sessions_report(cluster::NodeId self, const std::vector<nfsd::NlmSession>& sessions) {
  json list = json::array();
  for (const nfsd::NlmSession& session : sessions) {
    const bool seen = session.last_seen.time_since_epoch().count() != 0;
    list.push_back(json{{"node", self},
                        {"client", session.client},
                        {"address", session.address},
                        {"locks", session.locks},
                        {"waiting", session.waiting},
                        {"shares", session.shares},
                        {"first_seen", seen ? json(unix_seconds(session.first_seen)) : json()},
                        {"last_seen", seen ? json(unix_seconds(session.last_seen)) : json()}});
  }
  return json{{"sessions", std::move(list)}};
}

}  // namespace tidepool::daemon
