// Parts of the group view as several resources show them (daemon/admin_api.md: NODEPOOL,
// TIER, JOB, SHARD): `tide status` shows them all.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "cluster/group.h"
#include "daemon/config_objects.h"
#include "daemon/jobs.h"
#include "store/namespace_record.h"
#include "store/store.h"

namespace tidepool::daemon::admin {

std::vector<nlohmann::json> nodepools_json(const cluster::GroupView& view);
nlohmann::json tier_json(const cluster::ConfigObject& tier);
std::vector<nlohmann::json> tiers_json(const cluster::GroupView& view);
// The jobs that have ended (or not), by id or newest first.
nlohmann::json jobs_json(const std::vector<StoredJob>& jobs, bool ended, bool newest_first);
// Where a shard lives: its home serves every NFS operation on its inodes, shipped from the
// others; its mirror holds a second copy, ready to take over while it is in step.
nlohmann::json shard_json(const cluster::GroupView& view,
                          const std::optional<store::NamespaceRecord>& record, store::ShardId shard);

}  // namespace tidepool::daemon::admin
