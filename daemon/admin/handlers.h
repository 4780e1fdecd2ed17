// The handlers the route table (route_table.cc) points at, one block per resource and file.
// daemon/admin_api.md says what each route takes and answers.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "daemon/admin/routes.h"
#include "daemon/http.h"

namespace tidepool::daemon::admin {

using Reply = boost::asio::awaitable<HttpResponse>;

// cluster_routes.cc: probes, forming a cluster, its status, adding and removing nodes, its lead.
Reply get_health(Context& context, Request request);
Reply get_metrics(Context& context, Request request);
Reply get_this_node(Context& context, Request request);
Reply create_cluster(Context& context, Request request);
Reply rotate_cluster_token(Context& context, Request request);
Reply join_cluster(Context& context, Request request);
Reply get_cluster_status(Context& context, Request request);
Reply add_cluster_node(Context& context, Request request);
Reply remove_cluster_node(Context& context, Request request);
Reply smartfail_cluster_node(Context& context, Request request);
Reply stopfail_cluster_node(Context& context, Request request);
Reply transfer_cluster_leadership(Context& context, Request request);

// storagepool_routes.cc: node pools and tiers.
Reply list_nodepools(Context& context, Request request);
Reply get_nodepool(Context& context, Request request);
Reply list_tiers(Context& context, Request request);
Reply create_tier(Context& context, Request request);
Reply get_tier(Context& context, Request request);
Reply modify_tier(Context& context, Request request);
Reply delete_tier(Context& context, Request request);

// sysctl_routes.cc
Reply list_sysctls(Context& context, Request request);
Reply get_sysctl(Context& context, Request request);
Reply set_sysctl(Context& context, Request request);

// export_routes.cc: NFS exports.
Reply list_exports(Context& context, Request request);
Reply create_export(Context& context, Request request);
Reply get_export(Context& context, Request request);
Reply modify_export(Context& context, Request request);
Reply delete_export(Context& context, Request request);

// filepool_routes.cc: file pool policies, and which applies to a file.
Reply list_policies(Context& context, Request request);
Reply create_policy(Context& context, Request request);
Reply get_policy(Context& context, Request request);
Reply modify_policy(Context& context, Request request);
Reply delete_policy(Context& context, Request request);
Reply explain_file(Context& context, Request request);

// job_routes.cc: job types, jobs, their reports, and the job engine's status.
Reply list_job_types(Context& context, Request request);
Reply get_job_type(Context& context, Request request);
Reply modify_job_type(Context& context, Request request);
Reply list_jobs(Context& context, Request request);
Reply start_job(Context& context, Request request);
Reply get_job(Context& context, Request request);
Reply change_job_state(Context& context, Request request);
Reply list_job_reports(Context& context, Request request);
Reply get_job_report(Context& context, Request request);
Reply get_job_status(Context& context, Request request);

// report_routes.cc: what every node up reports, gathered — locks, NLM sessions, statistics —
// and cache flushes, carried out the same way.
Reply list_locks(Context& context, Request request);
Reply list_nlm_sessions(Context& context, Request request);
Reply get_lock_statistics(Context& context, Request request);
Reply get_cache_statistics(Context& context, Request request);
Reply get_system_statistics(Context& context, Request request);
Reply get_client_statistics(Context& context, Request request);
Reply flush_caches(Context& context, Request request);

// namespace_routes.cc: `tide get` and `tide set -a`.
Reply get_file(Context& context, Request request);
Reply set_file(Context& context, Request request);

}  // namespace tidepool::daemon::admin
