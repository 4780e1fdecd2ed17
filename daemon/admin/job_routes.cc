// Job types and their settings, jobs (started, paused, resumed, cancelled), the reports of
// ended jobs, and the job engine's status, as `isi job` shows them.
#include <nlohmann/json.hpp>

#include "daemon/admin/config_change.h"
#include "daemon/admin/handlers.h"
#include "daemon/admin/replies.h"
#include "daemon/admin/view_json.h"
#include "daemon/jobs.h"

namespace tidepool::daemon::admin {
namespace {

using cluster::GroupView;
using nlohmann::json;

HttpResponse no_job_type(std::string_view name) {
  return error_response(404, "no job type '" + std::string(name) + "'");
}

// A new schedule counts from now: it does not start at once for the starts an older one would
// have made.
Plan write_job_type(const GroupView& view, const std::string& request_body, std::string_view name) {
  const tiering::JobTypeSpec* spec = tiering::find_job_type(name);
  if (spec == nullptr) return refuse(no_job_type(name));
  const Result<json> body = parse_body(request_body);
  if (!body.ok()) return refuse(body.status());
  StoredJobType stored = job_type_of(view, *spec);
  auto settings = job_type_settings_from_json(*body, stored.settings);
  if (!settings.ok()) return refuse(settings.status());
  const std::int64_t now = unix_now();
  if (settings->schedule != stored.settings.schedule) settings->last_scheduled = now;
  const cluster::Change change = job_type_update(stored, *settings);
  stored.settings = *settings;
  return change_then(change, reply(200, job_type_to_json(stored, now)));
}

// A job kept in the history, ended or not (`only_ended`: only an ended one, a report).
HttpResponse job_view(const GroupView& view, std::string_view id_text, bool only_ended) {
  const std::optional<std::uint64_t> id = parse_id<std::uint64_t>(id_text);
  const std::optional<StoredJob> stored = id ? job_of(view, *id) : std::nullopt;
  if (!stored || (only_ended && !tiering::ended(stored->job.state))) {
    return error_response(
        404, std::string(only_ended ? "no report of job " : "no job ") + std::string(id_text));
  }
  return reply(200, job_to_json(stored->job));
}

Plan plan_start(const GroupView& view, const std::string& request_body) {
  const Result<json> body = parse_body(request_body);
  if (!body.ok()) return refuse(body.status());
  const auto request = start_request_from_json(*body);
  if (!request.ok()) return refuse(request.status());
  const tiering::JobTypeSpec& spec = *tiering::find_job_type(request->type);
  const std::vector<StoredJob> jobs = jobs_of(view);
  auto job = tiering::start_job(*request, tiering::settle(spec, job_type_of(view, spec).settings),
                                plain_jobs(jobs), next_job_id(jobs), unix_now());
  if (!job.ok()) return refuse(job.status());
  return change_then(job_create(*job), reply(201, job_to_json(*job)));
}

// Pause, resume or cancel.
Plan plan_state_change(const GroupView& view, const std::string& request_body,
                       std::string_view id_text) {
  const std::optional<std::uint64_t> id = parse_id<std::uint64_t>(id_text);
  const std::optional<StoredJob> stored = id ? job_of(view, *id) : std::nullopt;
  if (!stored) return refuse(error_response(404, "no job " + std::string(id_text)));
  const Result<json> body = parse_body(request_body);
  if (!body.ok()) return refuse(body.status());
  const auto wanted = wanted_state_from_json(*body);
  if (!wanted.ok()) return refuse(wanted.status());
  auto next = tiering::change_state(stored->job, *wanted, unix_now());
  if (!next.ok()) return refuse(next.status());
  return change_then(job_update(*stored, *next), reply(200, job_to_json(*next)));
}

}  // namespace

Reply list_job_types(Context& context, Request) {
  json list = json::array();
  for (const tiering::JobTypeSpec& spec : tiering::job_types()) {
    list.push_back(job_type_to_json(job_type_of(context.view(), spec), unix_now()));
  }
  co_return reply(200, json{{"types", std::move(list)}});
}

Reply get_job_type(Context& context, Request request) {
  const std::string& name = request.param("name");
  const tiering::JobTypeSpec* spec = tiering::find_job_type(name);
  if (spec == nullptr) co_return no_job_type(name);
  co_return reply(200, job_type_to_json(job_type_of(context.view(), *spec), unix_now()));
}

Reply modify_job_type(Context& context, Request request) {
  return change_config(context.membership,
                       [body = request.body, name = request.param("name")](const GroupView& now) {
                         return write_job_type(now, body, name);
                       });
}

Reply list_jobs(Context& context, Request) {
  co_return reply(200, json{{"jobs", jobs_json(jobs_of(context.view()), false, false)}});
}

Reply start_job(Context& context, Request request) {
  return change_config(context.membership, [body = request.body](const GroupView& now) {
    return plan_start(now, body);
  });
}

Reply get_job(Context& context, Request request) {
  co_return job_view(context.view(), request.param("id"), false);
}

Reply change_job_state(Context& context, Request request) {
  return change_config(context.membership,
                       [body = request.body, id = request.param("id")](const GroupView& now) {
                         return plan_state_change(now, body, id);
                       });
}

Reply list_job_reports(Context& context, Request) {
  co_return reply(200, json{{"reports", jobs_json(jobs_of(context.view()), true, true)}});
}

Reply get_job_report(Context& context, Request request) {
  co_return job_view(context.view(), request.param("id"), true);
}

// As `isi job status`: the node running jobs (the group leader), the jobs not ended, the last
// ended.
Reply get_job_status(Context& context, Request) {
  constexpr std::size_t kRecent = 5;
  const std::vector<StoredJob> jobs = jobs_of(context.view());
  json recent = jobs_json(jobs, true, true);
  if (recent.size() > kRecent) recent.erase(recent.begin() + kRecent, recent.end());
  const cluster::NodeId leader = context.membership.group()->leader();
  co_return reply(200, json{{"coordinator", leader == 0 ? json(nullptr) : json(leader)},
                            {"active", jobs_json(jobs, false, false)},
                            {"recent", std::move(recent)}});
}

}  // namespace tidepool::daemon::admin
