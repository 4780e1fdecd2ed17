#include "tiering/jobs.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>

namespace tidepool::tiering {
namespace {

using Json = nlohmann::json;

constexpr std::array<std::string_view, 4> kImpactNames = {"LOW", "MEDIUM", "HIGH", "OFF_HOURS"};
constexpr std::array<std::string_view, 6> kStateNames = {"waiting",   "running", "paused",
                                                         "succeeded", "failed",  "cancelled"};
constexpr std::int64_t kDay = 24 * 3600;
constexpr std::int64_t kEpochWeekday = 4;  // 1970-01-01 was a Thursday (Sunday = 0)

bool business_hours(std::int64_t unix_now) {
  const std::int64_t day = unix_now >= 0 ? unix_now / kDay : (unix_now - kDay + 1) / kDay;
  const std::int64_t weekday = ((day + kEpochWeekday) % 7 + 7) % 7;
  const std::int64_t hour = (unix_now - day * kDay) / 3600;
  return weekday >= 1 && weekday <= 5 && hour >= 8 && hour < 18;
}

bool path_under_ifs(std::string_view path) {
  if (path == "/ifs") return true;
  if (!path.starts_with("/ifs/") || path.size() > 4096) return false;
  // Every name after /ifs is a real one: no empty, "." or ".." component.
  std::size_t start = 5;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view name = path.substr(start, end - start);
    if (name.empty() || name == "." || name == "..") return false;
    start = end + 1;
  }
  return true;
}

Json progress_to_json(const Progress& p) {
  return {{"files_scanned", p.files_scanned},     {"directories_scanned", p.directories_scanned},
          {"files_matched", p.files_matched},     {"patterns_set", p.patterns_set},
          {"files_moved", p.files_moved},         {"bytes_moved", p.bytes_moved},
          {"files_resumed", p.files_resumed},     {"files_misplaced", p.files_misplaced},
          {"errors", p.errors}};
}

Progress progress_from_json(const Json& j) {
  Progress p;
  p.files_scanned = j.at("files_scanned").get<std::uint64_t>();
  p.directories_scanned = j.at("directories_scanned").get<std::uint64_t>();
  p.files_matched = j.at("files_matched").get<std::uint64_t>();
  p.patterns_set = j.at("patterns_set").get<std::uint64_t>();
  p.files_moved = j.value("files_moved", std::uint64_t{0});
  p.bytes_moved = j.value("bytes_moved", std::uint64_t{0});
  p.files_resumed = j.value("files_resumed", std::uint64_t{0});
  p.files_misplaced = j.at("files_misplaced").get<std::uint64_t>();
  p.errors = j.at("errors").get<std::uint64_t>();
  return p;
}

Json checkpoint_to_json(const Checkpoint& c) {
  Json frames = Json::array();
  for (const WalkFrame& f : c.frames) {
    frames.push_back({{"inode", f.inode},
                      {"path", f.path},
                      {"cookie", f.cookie},
                      {"cookie_verifier", f.cookie_verifier}});
  }
  return {{"roots_left", c.roots_left},
          {"frames", std::move(frames)},
          {"policy", c.policy},
          {"policy_name", c.policy_name},
          {"after", c.after},
          {"progress", progress_to_json(c.progress)}};
}

Checkpoint checkpoint_from_json(const Json& j) {
  Checkpoint c;
  c.roots_left = j.at("roots_left").get<std::vector<std::string>>();
  for (const Json& f : j.at("frames")) {
    c.frames.push_back({f.at("inode").get<std::uint64_t>(), f.at("path").get<std::string>(),
                        f.at("cookie").get<std::uint64_t>(),
                        f.at("cookie_verifier").get<std::uint64_t>()});
  }
  c.policy = j.value("policy", std::uint32_t{0});
  c.policy_name = j.value("policy_name", std::string());
  c.after = j.value("after", std::uint64_t{0});
  c.progress = progress_from_json(j.at("progress"));
  return c;
}

}  // namespace

std::string_view name_of(Impact impact) { return kImpactNames[static_cast<std::size_t>(impact)]; }

Result<Impact> parse_impact(std::string_view text) {
  for (std::size_t i = 0; i < kImpactNames.size(); ++i) {
    if (text == kImpactNames[i]) return static_cast<Impact>(i);
  }
  return error(Errc::invalid_argument,
               "expected an impact policy: LOW, MEDIUM, HIGH or OFF_HOURS, found '" +
                   std::string(text) + "'");
}

Budget budget_of(Impact impact, std::int64_t unix_now) {
  switch (impact) {
    case Impact::low:
      return {.run = true, .files_per_second = 200, .bytes_per_second = 50'000'000};
    case Impact::medium:
      return {.run = true, .files_per_second = 2000, .bytes_per_second = 250'000'000};
    case Impact::high:
      return {.run = true, .files_per_second = 0, .bytes_per_second = 0};
    case Impact::off_hours:
      if (business_hours(unix_now)) return {.run = false, .files_per_second = 0, .bytes_per_second = 0};
      return budget_of(Impact::low, unix_now);
  }
  return {};
}

const std::vector<JobTypeSpec>& job_types() {
  static const std::vector<JobTypeSpec> types = {
      {"SmartPools", "Apply the file pool policies to every file", "every day at 22:00", 6,
       Impact::low, false},
      {"SmartPoolsTree", "Apply the file pool policies to the files under the given paths", "", 5,
       Impact::medium, true},
      {kFilePolicyJob,
       "Apply the file pool policies to the files their filters select, found through each "
       "shard's database",
       "", 6, Impact::low, false},
      {kFlexProtectJob,
       "Restore the protection of file data that had copies on nodes down past the repair "
       "delay, and spread it over nodes that return",
       "", 1, Impact::medium, false},
  };
  return types;
}

const JobTypeSpec* find_job_type(std::string_view name) {
  for (const JobTypeSpec& spec : job_types()) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

JobTypeView settle(const JobTypeSpec& spec, const JobTypeSettings& settings) {
  JobTypeView view;
  view.spec = &spec;
  const std::string schedule = settings.schedule.value_or(std::string(spec.default_schedule));
  if (!schedule.empty()) {
    if (auto parsed = parse_schedule(schedule); parsed.ok()) view.schedule = *parsed;
  }
  view.priority = settings.priority.value_or(spec.default_priority);
  view.impact = settings.impact.value_or(spec.default_impact);
  view.enabled = settings.enabled.value_or(true);
  return view;
}

bool schedule_due(const JobTypeView& type, std::int64_t since, std::int64_t now) {
  return type.schedule && type.enabled && now >= next_start(*type.schedule, since);
}

Status check_priority(std::uint32_t priority) {
  if (priority >= 1 && priority <= 10) return {};
  return error(Errc::invalid_argument,
               "expected a priority from 1 (first) to 10, found " + std::to_string(priority));
}

std::string_view name_of(JobState state) { return kStateNames[static_cast<std::size_t>(state)]; }

std::optional<JobState> parse_job_state(std::string_view text) {
  for (std::size_t i = 0; i < kStateNames.size(); ++i) {
    if (text == kStateNames[i]) return static_cast<JobState>(i);
  }
  return std::nullopt;
}

std::string encode_job(const Job& job) {
  Json phases = Json::array();
  for (const PhaseTime& p : job.phases) phases.push_back({{"name", p.name}, {"seconds", p.seconds}});
  const Json j = {{"id", job.id},
                  {"type", job.type},
                  {"state", name_of(job.state)},
                  {"priority", job.priority},
                  {"policy", name_of(job.impact)},
                  {"paths", job.paths},
                  {"dry_run", job.dry_run},
                  {"created", job.created},
                  {"started", job.started},
                  {"ended", job.ended},
                  {"coordinator", job.coordinator},
                  {"runs", job.runs},
                  {"phase", job.phase},
                  {"phases", std::move(phases)},
                  {"checkpoint", checkpoint_to_json(job.checkpoint)},
                  {"errors", job.errors},
                  {"reason", job.reason}};
  return j.dump();
}

Result<Job> decode_job(std::string_view body) {
  try {
    const Json j = Json::parse(body);
    Job job;
    job.id = j.at("id").get<std::uint64_t>();
    job.type = j.at("type").get<std::string>();
    const auto state = parse_job_state(j.at("state").get<std::string>());
    if (!state) return error(Errc::invalid_argument, "a job record with an unknown state");
    job.state = *state;
    job.priority = j.at("priority").get<std::uint32_t>();
    TP_ASSIGN_OR_RETURN(job.impact, parse_impact(j.at("policy").get<std::string>()));
    job.paths = j.at("paths").get<std::vector<std::string>>();
    job.dry_run = j.at("dry_run").get<bool>();
    job.created = j.at("created").get<std::int64_t>();
    job.started = j.at("started").get<std::int64_t>();
    job.ended = j.at("ended").get<std::int64_t>();
    job.coordinator = j.at("coordinator").get<std::uint32_t>();
    job.runs = j.at("runs").get<std::uint32_t>();
    job.phase = j.at("phase").get<std::string>();
    for (const Json& p : j.at("phases")) {
      job.phases.push_back({p.at("name").get<std::string>(), p.at("seconds").get<std::int64_t>()});
    }
    job.checkpoint = checkpoint_from_json(j.at("checkpoint"));
    job.errors = j.at("errors").get<std::vector<std::string>>();
    job.reason = j.at("reason").get<std::string>();
    return job;
  } catch (const Json::exception& e) {
    return error(Errc::invalid_argument, std::string("a job record that does not read: ") + e.what());
  }
}

std::string encode_job_type_settings(const JobTypeSettings& s) {
  Json j = Json::object();
  if (s.schedule) j["schedule"] = *s.schedule;
  if (s.priority) j["priority"] = *s.priority;
  if (s.impact) j["policy"] = name_of(*s.impact);
  if (s.enabled) j["enabled"] = *s.enabled;
  j["last_scheduled"] = s.last_scheduled;
  return j.dump();
}

Result<JobTypeSettings> decode_job_type_settings(std::string_view body) {
  try {
    const Json j = Json::parse(body);
    JobTypeSettings s;
    if (j.contains("schedule")) s.schedule = j.at("schedule").get<std::string>();
    if (j.contains("priority")) s.priority = j.at("priority").get<std::uint32_t>();
    if (j.contains("policy")) {
      TP_ASSIGN_OR_RETURN(Impact impact, parse_impact(j.at("policy").get<std::string>()));
      s.impact = impact;
    }
    if (j.contains("enabled")) s.enabled = j.at("enabled").get<bool>();
    s.last_scheduled = j.value("last_scheduled", std::int64_t{0});
    return s;
  } catch (const Json::exception& e) {
    return error(Errc::invalid_argument,
                 std::string("job type settings that do not read: ") + e.what());
  }
}

Result<Job> start_job(const StartRequest& request, const JobTypeView& type,
                      const std::vector<Job>& jobs, std::uint64_t id, std::int64_t now) {
  const JobTypeSpec& spec = *type.spec;
  for (const Job& job : jobs) {
    if (job.type == spec.name && !ended(job.state)) {
      return error(Errc::already_exists, std::string(spec.name) + " is already " +
                                             std::string(name_of(job.state)) + " as job " +
                                             std::to_string(job.id));
    }
  }
  if (request.priority) TP_RETURN_IF_ERROR(check_priority(*request.priority));
  if (request.paths.size() > kMaxJobPaths) {
    return error(Errc::invalid_argument, "at most " + std::to_string(kMaxJobPaths) + " paths");
  }
  for (const std::string& path : request.paths) {
    if (!path_under_ifs(path)) {
      return error(Errc::invalid_argument,
                   "paths: expected an absolute path under /ifs, found '" + path + "'");
    }
  }
  if (spec.name == kFilePolicyJob && !request.paths.empty()) {
    return error(Errc::invalid_argument,
                 "FilePolicy finds its files in every shard: it takes no paths");
  }
  if (spec.needs_paths && request.paths.empty()) {
    return error(Errc::invalid_argument, std::string(spec.name) + " needs the paths to work on");
  }
  Job job;
  job.id = id;
  job.type = std::string(spec.name);
  job.priority = request.priority.value_or(type.priority);
  job.impact = request.impact.value_or(type.impact);
  job.paths = request.paths;
  job.dry_run = request.dry_run;
  job.created = now;
  job.checkpoint.roots_left = job.paths.empty() ? std::vector<std::string>{"/ifs"} : job.paths;
  return job;
}

Result<Job> change_state(const Job& job, JobState wanted, std::int64_t now) {
  const std::string what = job.type + "[" + std::to_string(job.id) + "] is " +
                           std::string(name_of(job.state));
  if (ended(job.state)) return error(Errc::precondition_failed, what + ": it has ended");
  Job next = job;
  switch (wanted) {
    case JobState::paused:
      if (job.state == JobState::paused) return error(Errc::precondition_failed, what + " already");
      next.state = JobState::paused;
      return next;
    case JobState::running:
      if (job.state != JobState::paused) {
        return error(Errc::precondition_failed, what + ", not paused: nothing to resume");
      }
      next.state = JobState::waiting;
      return next;
    case JobState::cancelled:
      end_job(next, JobState::cancelled, "cancelled by an administrator", now);
      return next;
    default:
      return error(Errc::invalid_argument,
                   "expected a state to ask for: paused, running or cancelled");
  }
}

std::optional<std::uint64_t> job_to_run(const std::vector<Job>& jobs, std::int64_t now) {
  const Job* first = nullptr;
  for (const Job& job : jobs) {
    if (ended(job.state) || job.state == JobState::paused) continue;
    if (first == nullptr || job.priority < first->priority ||
        (job.priority == first->priority && job.id < first->id)) {
      first = &job;
    }
  }
  if (first == nullptr || !budget_of(first->impact, now).run) return std::nullopt;
  return first->id;
}

void end_job(Job& job, JobState how, std::string reason, std::int64_t now) {
  job.state = how;
  job.ended = now;
  job.coordinator = 0;
  job.reason = std::move(reason);
}

void note_error(Job& job, std::string message) {
  ++job.checkpoint.progress.errors;
  if (job.errors.size() < kMaxJobErrors) job.errors.push_back(std::move(message));
}

}  // namespace tidepool::tiering
