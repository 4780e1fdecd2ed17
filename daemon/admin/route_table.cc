// Every route of the admin API (daemon/admin_api.md). A new route is one row here and its
// handler in the resource's file, declared in handlers.h.
#include "daemon/admin/handlers.h"
#include "daemon/admin/routes.h"

namespace tidepool::daemon::admin {
namespace {

constexpr Access kOpen = Access::open;
constexpr Access kSetup = Access::setup;
constexpr Access kToken = Access::token;

constexpr Route kRoutes[] = {
    {"GET", "/health", kOpen, &get_health},
    {"GET", "/metrics", kOpen, &get_metrics},
    {"GET", "/v1/node", kOpen, &get_this_node},
    {"POST", "/v1/cluster/create", kSetup, &create_cluster},
    {"POST", "/v1/cluster/join", kSetup, &join_cluster},

    {"GET", "/v1/cluster", kToken, &get_cluster_status},
    {"POST", "/v1/cluster/nodes", kToken, &add_cluster_node},
    {"DELETE", "/v1/cluster/nodes/{id}", kToken, &remove_cluster_node},
    {"POST", "/v1/cluster/nodes/{id}/smartfail", kToken, &smartfail_cluster_node},
    {"POST", "/v1/cluster/nodes/{id}/stopfail", kToken, &stopfail_cluster_node},
    {"POST", "/v1/cluster/token", kToken, &rotate_cluster_token},
    {"POST", "/v1/cluster/leader", kToken, &transfer_cluster_leadership},

    {"GET", "/v1/storagepool/nodepools", kToken, &list_nodepools},
    {"GET", "/v1/storagepool/nodepools/{name}", kToken, &get_nodepool},
    {"GET", "/v1/storagepool/tiers", kToken, &list_tiers},
    {"POST", "/v1/storagepool/tiers", kToken, &create_tier},
    {"GET", "/v1/storagepool/tiers/{name}", kToken, &get_tier},
    {"PUT", "/v1/storagepool/tiers/{name}", kToken, &modify_tier},
    {"DELETE", "/v1/storagepool/tiers/{name}", kToken, &delete_tier},

    {"GET", "/v1/sysctl", kToken, &list_sysctls},
    {"GET", "/v1/sysctl/{name}", kToken, &get_sysctl},
    {"PUT", "/v1/sysctl/{name}", kToken, &set_sysctl},

    {"GET", "/v1/nfs/exports", kToken, &list_exports},
    {"POST", "/v1/nfs/exports", kToken, &create_export},
    {"GET", "/v1/nfs/exports/{id}", kToken, &get_export},
    {"PUT", "/v1/nfs/exports/{id}", kToken, &modify_export},
    {"DELETE", "/v1/nfs/exports/{id}", kToken, &delete_export},
    {"GET", "/v1/nfs/nlm/sessions", kToken, &list_nlm_sessions},

    {"GET", "/v1/filepool/policies", kToken, &list_policies},
    {"POST", "/v1/filepool/policies", kToken, &create_policy},
    {"GET", "/v1/filepool/policies/{name}", kToken, &get_policy},
    {"PUT", "/v1/filepool/policies/{name}", kToken, &modify_policy},
    {"DELETE", "/v1/filepool/policies/{name}", kToken, &delete_policy},
    {"GET", "/v1/filepool/explain/{path...}", kToken, &explain_file},

    {"GET", "/v1/job/types", kToken, &list_job_types},
    {"GET", "/v1/job/types/{name}", kToken, &get_job_type},
    {"PUT", "/v1/job/types/{name}", kToken, &modify_job_type},
    {"GET", "/v1/job/jobs", kToken, &list_jobs},
    {"POST", "/v1/job/jobs", kToken, &start_job},
    {"GET", "/v1/job/jobs/{id}", kToken, &get_job},
    {"PUT", "/v1/job/jobs/{id}", kToken, &change_job_state},
    {"GET", "/v1/job/reports", kToken, &list_job_reports},
    {"GET", "/v1/job/reports/{id}", kToken, &get_job_report},
    {"GET", "/v1/job/status", kToken, &get_job_status},

    {"GET", "/v1/locks", kToken, &list_locks},
    {"GET", "/v1/statistics/locks", kToken, &get_lock_statistics},
    {"GET", "/v1/statistics/cache", kToken, &get_cache_statistics},
    {"GET", "/v1/statistics/system", kToken, &get_system_statistics},
    {"GET", "/v1/statistics/clients", kToken, &get_client_statistics},
    {"POST", "/v1/cache/flush", kToken, &flush_caches},

    {"GET", "/v1/namespace/{path...}", kToken, &get_file},
    {"PUT", "/v1/namespace/{path...}", kToken, &set_file},
};

}  // namespace

std::span<const Route> api_routes() { return kRoutes; }

}  // namespace tidepool::daemon::admin
