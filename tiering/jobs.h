// The job engine's model (issue 7): job types and their settings, jobs and their states, impact
// policies as work budgets, and the decisions the engine takes on them — which jobs run now,
// which wait, what an administrator's pause, resume or cancel does. Pure: the daemon keeps
// jobs in the group view and runs them (daemon/job_engine.h); this says what is allowed.
//
// Priorities run from 1 (first) to 10, as OneFS's. The tiering jobs all restripe files, so at
// most one of them runs at a time: the one of highest priority, the oldest among equals; a job
// of higher priority that arrives makes a running one wait (it resumes from its checkpoint).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "tiering/schedule.h"

namespace tidepool::tiering {

enum class Impact : std::uint8_t { low, medium, high, off_hours };
std::string_view name_of(Impact impact);  // LOW, MEDIUM, HIGH, OFF_HOURS
// invalid_argument naming the expected values.
Result<Impact> parse_impact(std::string_view text);

// How hard a job may work at a moment.
struct Budget {
  bool run = true;                    // false: wait (OFF_HOURS in business hours)
  std::uint32_t files_per_second = 0;  // 0: no limit
  std::uint64_t bytes_per_second = 0;  // each move's copy of a file's data; 0: no limit
  bool operator==(const Budget&) const = default;
};
// OFF_HOURS waits through Monday–Friday 08:00–18:00 UTC and works as LOW otherwise.
Budget budget_of(Impact impact, std::int64_t unix_now);

struct JobTypeSpec {
  std::string_view name;
  std::string_view description;
  std::string_view default_schedule;  // empty: started by hand only
  std::uint32_t default_priority;
  Impact default_impact;
  bool needs_paths;  // works on the paths it is given rather than on all of /ifs
};
// SmartPools, SmartPoolsTree, FilePolicy and FlexProtect.
const std::vector<JobTypeSpec>& job_types();
// The type that finds its files through each shard's database rather than a walk.
inline constexpr std::string_view kFilePolicyJob = "FilePolicy";
// The type that restripes files over the nodes their pools place data on now, whatever the
// policies say: the leader starts it when nodes are lost or return (daemon/job_engine.h).
inline constexpr std::string_view kFlexProtectJob = "FlexProtect";
const JobTypeSpec* find_job_type(std::string_view name);

// What an administrator set for a type (`tide job types modify`); unset: the spec's default.
struct JobTypeSettings {
  std::optional<std::string> schedule;  // "" removes the schedule
  std::optional<std::uint32_t> priority;
  std::optional<Impact> impact;
  std::optional<bool> enabled;
  // The last scheduled start the engine made, Unix seconds: a start is made once.
  std::int64_t last_scheduled = 0;
  bool operator==(const JobTypeSettings&) const = default;
};
// A type's settings in force: `settings` over the spec's defaults.
struct JobTypeView {
  const JobTypeSpec* spec = nullptr;
  std::optional<Schedule> schedule;
  std::uint32_t priority = 0;
  Impact impact = Impact::low;
  bool enabled = true;
};
JobTypeView settle(const JobTypeSpec& spec, const JobTypeSettings& settings);
// Whether the type's schedule has a start due at `now`, counting from `since` (its last
// scheduled start, or when the engine began to count): false without a schedule or disabled.
bool schedule_due(const JobTypeView& type, std::int64_t since, std::int64_t now);
// invalid_argument unless 1 <= priority <= 10.
Status check_priority(std::uint32_t priority);

enum class JobState : std::uint8_t { waiting, running, paused, succeeded, failed, cancelled };
std::string_view name_of(JobState state);
std::optional<JobState> parse_job_state(std::string_view text);
inline bool ended(JobState state) {
  return state == JobState::succeeded || state == JobState::failed ||
         state == JobState::cancelled;
}

struct Progress {
  std::uint64_t files_scanned = 0;
  std::uint64_t directories_scanned = 0;
  std::uint64_t files_matched = 0;    // by a policy other than the default
  std::uint64_t patterns_set = 0;     // access patterns changed to the policy's
  std::uint64_t files_moved = 0;      // their data moved to the pool their policy names
  std::uint64_t bytes_moved = 0;       // copied by this job's moves
  std::uint64_t files_resumed = 0;     // moves gone on from where one cut short had copied to
  std::uint64_t files_misplaced = 0;  // their data is not where their policy wants it, and stays
  std::uint64_t errors = 0;
  bool operator==(const Progress&) const = default;
};

// Where a walk of the namespace stands: the directories open from the walk's root down to the
// one being listed, each with the cookie to list on from. Depth-first, so it is as long as the
// tree is deep, however wide the directories are.
struct WalkFrame {
  std::uint64_t inode = 0;
  std::string path;
  std::uint64_t cookie = 0;
  std::uint64_t cookie_verifier = 0;
  bool operator==(const WalkFrame&) const = default;
};
struct Checkpoint {
  std::vector<std::string> roots_left;  // paths not yet started, in order
  std::vector<WalkFrame> frames;        // the walk under way; empty between roots
  // FilePolicy, which goes through candidates instead of walking: the policy (its place in the
  // list, and its name) whose candidates are being gone through, and the last inode done.
  std::uint32_t policy = 0;
  std::string policy_name;
  std::uint64_t after = 0;
  Progress progress;                    // at this point of the walk
  bool operator==(const Checkpoint&) const = default;
};

// Time spent working in a phase, over all its runs.
struct PhaseTime {
  std::string name;
  std::int64_t seconds = 0;
  bool operator==(const PhaseTime&) const = default;
};

inline constexpr std::size_t kMaxJobErrors = 10;
inline constexpr std::size_t kMaxJobPaths = 64;

struct Job {
  std::uint64_t id = 0;
  std::string type;
  JobState state = JobState::waiting;
  std::uint32_t priority = 0;
  Impact impact = Impact::low;
  std::vector<std::string> paths;
  bool dry_run = false;
  std::int64_t created = 0;  // Unix seconds
  std::int64_t started = 0;  // 0: not yet
  std::int64_t ended = 0;    // 0: not yet
  std::uint32_t coordinator = 0;  // the node running it now; 0: none
  std::uint32_t runs = 0;         // starts and take-overs from a checkpoint
  std::string phase;              // "scan" while it walks
  std::vector<PhaseTime> phases;
  Checkpoint checkpoint;
  std::vector<std::string> errors;  // the first kMaxJobErrors
  std::string reason;               // why it failed or was cancelled
  bool operator==(const Job&) const = default;
};

// A job's body as the group view keeps it; the API shows it without the checkpoint.
std::string encode_job(const Job& job);
Result<Job> decode_job(std::string_view body);
std::string encode_job_type_settings(const JobTypeSettings& settings);
Result<JobTypeSettings> decode_job_type_settings(std::string_view body);

// What an administrator asks to start.
struct StartRequest {
  std::string type;
  std::optional<std::uint32_t> priority;
  std::optional<Impact> impact;
  std::vector<std::string> paths;
  bool dry_run = false;
};
// A new job `id` from `request` and its type's settings, or: invalid_argument for an unknown
// type, a bad priority, a path not absolute under /ifs, SmartPoolsTree without paths;
// already_exists, naming it, when a job of the type has not ended.
Result<Job> start_job(const StartRequest& request, const JobTypeView& type,
                      const std::vector<Job>& jobs, std::uint64_t id, std::int64_t now);

// An administrator's change of state: paused (from waiting or running), running (from
// paused: it waits for its turn), cancelled (from any state not ended). precondition_failed
// saying why for any other.
Result<Job> change_state(const Job& job, JobState wanted, std::int64_t now);

// The jobs that should run now among `jobs` (not ended, not paused): the first by priority,
// then by id, unless its budget says wait. Every other is to wait.
std::optional<std::uint64_t> job_to_run(const std::vector<Job>& jobs, std::int64_t now);

// Ends a job: succeeded, failed (with `reason`) or cancelled.
void end_job(Job& job, JobState how, std::string reason, std::int64_t now);
// Adds an error message, keeping the first kMaxJobErrors.
void note_error(Job& job, std::string message);

}  // namespace tidepool::tiering
