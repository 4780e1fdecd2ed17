// Jobs and job type settings (tiering/jobs.h) as the group view keeps them — one object per job,
// named by its zero-padded id so that the view lists them in order, and one per job type whose
// settings an administrator changed — and as the admin API shows and takes them
// (daemon/admin_api.md: JOB, JOBTYPE).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "cluster/group.h"
#include "common/status.h"
#include "tiering/jobs.h"

namespace tidepool::daemon {

inline constexpr std::string_view kJobKind = "job";
inline constexpr std::string_view kJobTypeKind = "jobtype";
// Ended jobs kept in the history (`tide job reports list`); older ones are deleted.
inline constexpr std::size_t kJobHistory = 50;

struct StoredJob {
  tiering::Job job;
  cluster::Epoch changed = 0;  // when its object was last written
};
// Every job in the view, by id. An object that does not read (written by a newer release) is
// left out, logged.
std::vector<StoredJob> jobs_of(const cluster::GroupView& view);
std::vector<tiering::Job> plain_jobs(const std::vector<StoredJob>& jobs);
// The object name of job `id`: its zero-padded decimal id.
std::string job_object_name(std::uint64_t id);
std::optional<StoredJob> job_of(const cluster::GroupView& view, std::uint64_t id);
std::uint64_t next_job_id(const std::vector<StoredJob>& jobs);
cluster::Change job_create(const tiering::Job& job);
// Writes `next` over the job as it was read; fails if it changed since.
cluster::Change job_update(const StoredJob& stored, const tiering::Job& next);
// The ended jobs past the newest kJobHistory.
std::vector<std::uint64_t> jobs_past_history(const std::vector<StoredJob>& jobs);

struct StoredJobType {
  const tiering::JobTypeSpec* spec = nullptr;
  tiering::JobTypeSettings settings;
  cluster::Epoch changed = 0;  // 0: never set, the defaults apply
};
StoredJobType job_type_of(const cluster::GroupView& view, const tiering::JobTypeSpec& spec);
// Creates the type's object or writes over it as it was read.
cluster::Change job_type_update(const StoredJobType& stored,
                                const tiering::JobTypeSettings& settings);

// Where data in node pool `pool` goes for storage target `target` (tiering/smartpools.h,
// RunHooks::pool_for): `pool` when the target is anywhere, that pool, or a tier holding it;
// else the target when it is a node pool with nodes, or the first of the tier's pools that has
// nodes; none when there is no such pool.
std::optional<std::string> pool_for(const cluster::GroupView& view, const std::string& target,
                                    const std::string& pool);

// How full a node pool's disks are: the sums over its nodes that answered.
struct PoolUsage {
  std::uint64_t used_bytes = 0;
  std::uint64_t size_bytes = 0;
};
// The pools of `usage` at or past `limit_percent` of their size (their transfer limit); a pool
// of unknown size is not among them.
std::set<std::string> pools_past_limit(const std::map<std::string, PoolUsage>& usage,
                                       std::uint32_t limit_percent);

// The API's JOB: the job without its checkpoint; 0 times and nodes as null.
nlohmann::json job_to_json(const tiering::Job& job);
// The API's JOBTYPE, with the next scheduled start after `now`.
nlohmann::json job_type_to_json(const StoredJobType& type, std::int64_t now);
// POST /v1/job/jobs's body. Unknown fields and bad values are invalid_argument naming them.
Result<tiering::StartRequest> start_request_from_json(const nlohmann::json& body);
// PUT /v1/job/types/NAME's body over `base`.
Result<tiering::JobTypeSettings> job_type_settings_from_json(const nlohmann::json& body,
                                                             tiering::JobTypeSettings base);
// PUT /v1/job/jobs/ID's body: the state asked for.
Result<tiering::JobState> wanted_state_from_json(const nlohmann::json& body);

}  // namespace tidepool::daemon
