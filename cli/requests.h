// Command-line values checked and turned into admin API request bodies. Nothing here talks to
// the cluster; every error is invalid_argument with a one-line message naming the option.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/json.h"
#include "common/status.h"

namespace tidepool::cli {

// Names of clusters, tiers and node pools: 1-63 characters of A-Z a-z 0-9 - _.
// `what` names the value in the message ("tier name").
Status check_name(std::string_view what, std::string_view name);

// Ids of exports and nodes: decimal, at least 1. `what` names the value ("export id").
Result<std::uint64_t> parse_id(std::string_view what, std::string_view text);

// The values of a repeatable option whose values may also be comma-separated
// ("--children a,b --children c"), in order. Empty items are skipped, so "" means an empty list.
std::vector<std::string> split_lists(const std::vector<std::string>& values);

// --timeout SECONDS: more than 0, at most a day, fractions allowed ("0.5").
Result<std::chrono::milliseconds> parse_timeout(std::string_view text);

// The admin API target for `tide get PATH`: /v1/namespace/ifs/... with each component
// percent-encoded. PATH must be absolute and under /ifs.
Result<std::string> namespace_target(std::string_view path);

// The admin API target for `tide locks list`: /v1/locks with the filters given. PATH must be
// absolute and under /ifs; KIND one of data, attributes, advisory, share.
Result<std::string> locks_target(const std::optional<std::string>& path,
                                 const std::optional<std::string>& kind, bool waiters);

// What `tide filepool policies create/modify` and `tide filepool default-policy modify` set.
struct PolicyOptions {
  std::optional<std::string> filter;      // --filter EXPR
  std::vector<std::string> filter_flags;  // --begin-filter ... --end-filter, both included
  std::optional<std::string> storage_target;
  std::optional<std::string> protection;
  std::optional<std::string> access_pattern;
  std::optional<std::uint64_t> apply_order;
  // `policies modify --clear-...`: the action comes from the default policy again.
  bool clear_storage_target = false;
  bool clear_protection = false;
  bool clear_access_pattern = false;
};
// The body of POST/PUT /v1/filepool/policies[/NAME]; `name` only on create. A filter given both
// ways is invalid_argument.
Result<Json> policy_body(const PolicyOptions& options, std::optional<std::string> name);
// Cuts `--begin-filter ... --end-filter` out of a command line (OneFS's filter flags, which are
// no options of tide's), into `flags`; invalid_argument for a begin without its end.
Status take_filter_flags(std::vector<std::string>& args, std::vector<std::string>& flags);

// `tide sysctl NAME` or `tide sysctl NAME=VALUE`.
struct SysctlArgument {
  std::string name;
  std::optional<std::string> value;  // set: write it
};
Result<SysctlArgument> parse_sysctl_argument(std::string_view text);

// The options of `nfs exports create` and `modify` as given; nullopt = not given.
struct ExportOptions {
  std::optional<std::string> path;
  std::vector<std::string> clients;  // as given: repeatable and comma-separated
  std::optional<std::string> read_only;
  std::optional<std::string> secure;
  std::optional<std::string> root_squash;
  std::optional<std::string> map_all;
  bool clear_map_all = false;
  std::optional<std::string> anon_uid;
  std::optional<std::string> anon_gid;
};

// The body of POST /v1/nfs/exports: an EXPORT without id, with the fields given. The path is
// required.
Result<Json> export_create_body(const ExportOptions& options);

// The body of PUT /v1/nfs/exports/ID: the fields to change. At least one must be given.
Result<Json> export_modify_body(const ExportOptions& options);

// The options of `tide job jobs start` as given; nullopt = not given.
struct JobStartOptions {
  std::optional<std::string> priority;  // 1 (runs first) to 10
  std::optional<std::string> policy;    // an impact policy: LOW, MEDIUM, HIGH, OFF_HOURS, any case
  std::vector<std::string> paths;       // each absolute under /ifs
  bool dry_run = false;
};

// The body of POST /v1/job/jobs: {"type"} and the options given.
Result<Json> job_start_body(std::string_view type, const JobStartOptions& options);

// The options of `tide job types modify` as given; nullopt = not given.
struct JobTypeChanges {
  std::optional<std::string> schedule;  // as SCHEDULE in the API: "every day at 22:00"
  bool clear_schedule = false;
  std::optional<std::string> priority;
  std::optional<std::string> policy;
  std::optional<std::string> enabled;  // true|false
};

// The body of PUT /v1/job/types/NAME: the changes given. At least one must be.
Result<Json> job_type_modify_body(const JobTypeChanges& changes);

// The body of POST /v1/storagepool/tiers.
Result<Json> tier_create_body(std::string_view name, const std::vector<std::string>& children);

// How `tiers modify` changes the children; the API takes the whole list, so the new list is
// computed from the current one.
enum class ChildrenChange { set, add, remove };

// Checks the pool names of a change (already split).
Status check_children(const std::vector<std::string>& children);

// The children after `change`: `set` replaces, `add` appends the pools not there yet, `remove`
// takes pools out (naming a pool that is not a child is an error: likely a typo).
Result<std::vector<std::string>> apply_children_change(const std::vector<std::string>& current,
                                                       ChildrenChange change,
                                                       const std::vector<std::string>& pools);

}  // namespace tidepool::cli
