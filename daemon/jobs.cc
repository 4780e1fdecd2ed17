#include "daemon/jobs.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

#include "daemon/config_objects.h"
#include "policy/policies.h"

namespace tidepool::daemon {
namespace {

using nlohmann::json;
using tiering::Job;

json or_null(std::int64_t value) { return value == 0 ? json(nullptr) : json(value); }

Status unknown_fields(const json& body, std::initializer_list<std::string_view> known) {
  if (!body.is_object()) return error(Errc::invalid_argument, "the body must be a JSON object");
  for (const auto& [key, value] : body.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return error(Errc::invalid_argument, "unknown field '" + key + "'");
    }
  }
  return {};
}

Result<std::uint32_t> priority_from(const json& value) {
  if (!value.is_number_integer() || value.get<std::int64_t>() < 0) {
    return error(Errc::invalid_argument, "'priority' must be a number from 1 to 10");
  }
  const auto priority = static_cast<std::uint32_t>(std::min<std::int64_t>(value.get<std::int64_t>(), 11));
  TP_RETURN_IF_ERROR(tiering::check_priority(priority));
  return priority;
}

Result<tiering::Impact> impact_from(const json& value) {
  if (!value.is_string()) return error(Errc::invalid_argument, "'policy' must be text");
  auto impact = tiering::parse_impact(value.get<std::string>());
  if (!impact.ok()) return error(Errc::invalid_argument, "'policy': " + impact.status().message());
  return *impact;
}

}  // namespace

std::vector<StoredJob> jobs_of(const cluster::GroupView& view) {
  std::vector<StoredJob> jobs;
  for (const cluster::ConfigObject& object : view.objects_of(kJobKind)) {
    auto job = tiering::decode_job(object.body);
    if (!job.ok()) {
      spdlog::warn("job {} is left out: {}", object.name, job.status().message());
      continue;
    }
    jobs.push_back({std::move(job).value(), object.changed});
  }
  std::sort(jobs.begin(), jobs.end(),
            [](const StoredJob& a, const StoredJob& b) { return a.job.id < b.job.id; });
  return jobs;
}

std::vector<Job> plain_jobs(const std::vector<StoredJob>& jobs) {
  std::vector<Job> plain;
  plain.reserve(jobs.size());
  for (const StoredJob& stored : jobs) plain.push_back(stored.job);
  return plain;
}

std::string job_object_name(std::uint64_t id) {
  char name[24];
  std::snprintf(name, sizeof name, "%020llu", static_cast<unsigned long long>(id));
  return name;
}

std::optional<StoredJob> job_of(const cluster::GroupView& view, std::uint64_t id) {
  const cluster::ConfigObject* object = view.object(kJobKind, job_object_name(id));
  if (object == nullptr) return std::nullopt;
  auto job = tiering::decode_job(object->body);
  if (!job.ok()) return std::nullopt;
  return StoredJob{std::move(job).value(), object->changed};
}

std::uint64_t next_job_id(const std::vector<StoredJob>& jobs) {
  return jobs.empty() ? 1 : jobs.back().job.id + 1;
}

cluster::Change job_create(const Job& job) {
  return cluster::Change::create_object(std::string(kJobKind), job_object_name(job.id),
                                        tiering::encode_job(job));
}

cluster::Change job_update(const StoredJob& stored, const Job& next) {
  return cluster::Change::update_object(std::string(kJobKind), job_object_name(next.id),
                                        tiering::encode_job(next), stored.changed);
}

std::vector<std::uint64_t> jobs_past_history(const std::vector<StoredJob>& jobs) {
  std::vector<std::uint64_t> ended;
  for (const StoredJob& stored : jobs) {
    if (tiering::ended(stored.job.state)) ended.push_back(stored.job.id);
  }
  if (ended.size() <= kJobHistory) return {};
  ended.resize(ended.size() - kJobHistory);
  return ended;
}

StoredJobType job_type_of(const cluster::GroupView& view, const tiering::JobTypeSpec& spec) {
  StoredJobType type{.spec = &spec};
  const cluster::ConfigObject* object = view.object(kJobTypeKind, spec.name);
  if (object == nullptr) return type;
  auto settings = tiering::decode_job_type_settings(object->body);
  if (!settings.ok()) {
    spdlog::warn("job type {} keeps its defaults: {}", spec.name, settings.status().message());
  } else {
    type.settings = std::move(settings).value();
  }
  type.changed = object->changed;
  return type;
}

cluster::Change job_type_update(const StoredJobType& stored,
                                const tiering::JobTypeSettings& settings) {
  const std::string body = tiering::encode_job_type_settings(settings);
  if (stored.changed == 0) {
    return cluster::Change::create_object(std::string(kJobTypeKind), std::string(stored.spec->name),
                                          body);
  }
  return cluster::Change::update_object(std::string(kJobTypeKind), std::string(stored.spec->name),
                                        body, stored.changed);
}

std::optional<std::string> pool_for(const cluster::GroupView& view, const std::string& target,
                                    const std::string& pool) {
  auto has_nodes = [&view](const std::string& name) {
    return std::any_of(view.nodes.begin(), view.nodes.end(),
                       [&](const cluster::NodeInfo& node) { return node.pool == name; });
  };
  if (target == policy::kAnywhere || target == pool) return pool;
  if (has_nodes(target)) return target;
  const cluster::ConfigObject* tier = view.object(kTierKind, target);
  if (tier == nullptr) return std::nullopt;
  const std::vector<std::string> pools = tier_children(*tier);
  if (std::find(pools.begin(), pools.end(), pool) != pools.end()) return pool;
  for (const std::string& child : pools) {
    if (has_nodes(child)) return child;
  }
  return std::nullopt;
}

std::set<std::string> pools_past_limit(const std::map<std::string, PoolUsage>& usage,
                                       std::uint32_t limit_percent) {
  std::set<std::string> full;
  for (const auto& [pool, use] : usage) {
    if (use.size_bytes > 0 && static_cast<double>(use.used_bytes) * 100 >=
                                  limit_percent * static_cast<double>(use.size_bytes)) {
      full.insert(pool);
    }
  }
  return full;
}

json job_to_json(const Job& job) {
  json phases = json::array();
  for (const tiering::PhaseTime& p : job.phases) {
    phases.push_back({{"name", p.name}, {"seconds", p.seconds}});
  }
  const tiering::Progress& p = job.checkpoint.progress;
  return json{{"id", job.id},
              {"type", job.type},
              {"state", tiering::name_of(job.state)},
              {"priority", job.priority},
              {"policy", tiering::name_of(job.impact)},
              {"paths", job.paths},
              {"dry_run", job.dry_run},
              {"created", job.created},
              {"started", or_null(job.started)},
              {"ended", or_null(job.ended)},
              {"coordinator", or_null(job.coordinator)},
              {"runs", job.runs},
              {"phase", job.phase},
              {"phases", std::move(phases)},
              {"progress",
               {{"files_scanned", p.files_scanned},
                {"directories_scanned", p.directories_scanned},
                {"files_matched", p.files_matched},
                {"patterns_set", p.patterns_set},
                {"files_moved", p.files_moved},
                {"bytes_moved", p.bytes_moved},
                {"files_resumed", p.files_resumed},
                {"files_misplaced", p.files_misplaced},
                {"errors", p.errors}}},
              {"errors", job.errors},
              {"reason", job.reason.empty() ? json(nullptr) : json(job.reason)}};
}

json job_type_to_json(const StoredJobType& type, std::int64_t now) {
  const tiering::JobTypeView view = tiering::settle(*type.spec, type.settings);
  json next_run = nullptr;
  if (view.schedule && view.enabled) next_run = tiering::next_start(*view.schedule, now);
  return json{{"name", type.spec->name},
              {"description", type.spec->description},
              {"schedule", view.schedule ? json(tiering::to_text(*view.schedule)) : json(nullptr)},
              {"priority", view.priority},
              {"policy", tiering::name_of(view.impact)},
              {"enabled", view.enabled},
              {"next_run", next_run}};
}

Result<tiering::StartRequest> start_request_from_json(const json& body) {
  TP_RETURN_IF_ERROR(unknown_fields(body, {"type", "priority", "policy", "paths", "dry_run"}));
  tiering::StartRequest request;
  if (!body.contains("type") || !body["type"].is_string()) {
    return error(Errc::invalid_argument, "'type' must name a job type");
  }
  request.type = body["type"].get<std::string>();
  if (tiering::find_job_type(request.type) == nullptr) {
    return error(Errc::invalid_argument, "unknown job type '" + request.type +
                                             "': expected SmartPools or SmartPoolsTree");
  }
  if (body.contains("priority")) {
    TP_ASSIGN_OR_RETURN(request.priority, priority_from(body["priority"]));
  }
  if (body.contains("policy")) {
    TP_ASSIGN_OR_RETURN(request.impact, impact_from(body["policy"]));
  }
  if (body.contains("paths")) {
    const json& paths = body["paths"];
    if (!paths.is_array() || !std::all_of(paths.begin(), paths.end(),
                                          [](const json& p) { return p.is_string(); })) {
      return error(Errc::invalid_argument, "'paths' must be a list of paths");
    }
    request.paths = paths.get<std::vector<std::string>>();
  }
  if (body.contains("dry_run")) {
    if (!body["dry_run"].is_boolean()) return error(Errc::invalid_argument, "'dry_run' must be true or false");
    request.dry_run = body["dry_run"].get<bool>();
  }
  return request;
}

Result<tiering::JobTypeSettings> job_type_settings_from_json(const json& body,
                                                             tiering::JobTypeSettings base) {
  TP_RETURN_IF_ERROR(unknown_fields(body, {"schedule", "priority", "policy", "enabled"}));
  if (body.contains("schedule")) {
    if (!body["schedule"].is_string()) return error(Errc::invalid_argument, "'schedule' must be text");
    const std::string schedule = body["schedule"].get<std::string>();
    if (!schedule.empty()) {
      auto parsed = tiering::parse_schedule(schedule);
      if (!parsed.ok()) {
        return error(Errc::invalid_argument, "'schedule': " + parsed.status().message());
      }
    }
    base.schedule = schedule;
  }
  if (body.contains("priority")) {
    TP_ASSIGN_OR_RETURN(base.priority, priority_from(body["priority"]));
  }
  if (body.contains("policy")) {
    TP_ASSIGN_OR_RETURN(base.impact, impact_from(body["policy"]));
  }
  if (body.contains("enabled")) {
    if (!body["enabled"].is_boolean()) return error(Errc::invalid_argument, "'enabled' must be true or false");
    base.enabled = body["enabled"].get<bool>();
  }
  return base;
}

Result<tiering::JobState> wanted_state_from_json(const json& body) {
  TP_RETURN_IF_ERROR(unknown_fields(body, {"state"}));
  const std::optional<tiering::JobState> state =
      body.contains("state") && body["state"].is_string()
          ? tiering::parse_job_state(body["state"].get<std::string>())
          : std::nullopt;
  if (!state || (*state != tiering::JobState::paused && *state != tiering::JobState::running &&
                 *state != tiering::JobState::cancelled)) {
    return error(Errc::invalid_argument, "'state' must be \"paused\", \"running\" or \"cancelled\"");
  }
  return *state;
}

}  // namespace tidepool::daemon
