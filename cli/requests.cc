#include "cli/requests.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include "cli/admin_client.h"
#include "common/config.h"

namespace tidepool::cli {
namespace {

Status invalid(std::string_view what, const std::string& expected, std::string_view got) {
  return error(Errc::invalid_argument,
               std::string(what) + ": expected " + expected + ", got '" + std::string(got) + "'");
}

// Whether `path` is /ifs or a path under it, as the API takes paths.
bool under_ifs(std::string_view path) { return path == "/ifs" || path.starts_with("/ifs/"); }

// A whole decimal number no larger than `max`.
std::optional<std::uint64_t> parse_decimal(std::string_view text, std::uint64_t max) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value > max) {
    return std::nullopt;
  }
  return value;
}

// "true" or "false", the value of `option`.
Result<bool> parse_bool(std::string_view option, std::string_view text) {
  if (text == "true") return true;
  if (text == "false") return false;
  return invalid(option, "true or false", text);
}

// A decimal number that fits 32 bits (uids, gids), the value of `option`.
Result<std::uint32_t> parse_uint32(std::string_view option, std::string_view text) {
  std::optional<std::uint64_t> value =
      parse_decimal(text, std::numeric_limits<std::uint32_t>::max());
  if (!value) return invalid(option, "a number from 0 to 4294967295", text);
  return static_cast<std::uint32_t>(*value);
}

// --map-all UID[:GID].
struct MapAll {
  std::uint32_t uid = 0;
  // None: the export's anonymous gid, as in the node configuration.
  std::optional<std::uint32_t> gid;
};

Result<MapAll> parse_map_all(std::string_view text) {
  const std::string expected = "UID or UID:GID (numbers from 0 to 4294967295)";
  auto colon = text.find(':');
  std::optional<std::uint64_t> uid =
      parse_decimal(text.substr(0, colon), std::numeric_limits<std::uint32_t>::max());
  if (!uid) return invalid("--map-all", expected, text);
  MapAll map_all{static_cast<std::uint32_t>(*uid), std::nullopt};
  if (colon != std::string_view::npos) {
    std::optional<std::uint64_t> gid =
        parse_decimal(text.substr(colon + 1), std::numeric_limits<std::uint32_t>::max());
    if (!gid) return invalid("--map-all", expected, text);
    map_all.gid = static_cast<std::uint32_t>(*gid);
  }
  return map_all;
}

// The fields of an EXPORT that the options give, in the API's order.
Result<Json> export_fields(const ExportOptions& options) {
  Json body = Json::object();
  if (options.path) {
    if (!options.path->starts_with('/')) {
      return invalid("export path", "an absolute path such as /ifs/data", *options.path);
    }
    body["path"] = *options.path;
  }
  if (!options.clients.empty()) {
    std::vector<std::string> clients = split_lists(options.clients);
    if (clients.empty()) {
      return error(Errc::invalid_argument, "--clients: expected at least one client");
    }
    body["clients"] = clients;
  }
  if (options.read_only) {
    TP_ASSIGN_OR_RETURN(body["read_only"], parse_bool("--read-only", *options.read_only));
  }
  if (options.secure) {
    TP_ASSIGN_OR_RETURN(body["secure"], parse_bool("--secure", *options.secure));
  }
  if (options.root_squash) {
    TP_ASSIGN_OR_RETURN(body["root_squash"], parse_bool("--root-squash", *options.root_squash));
  }
  if (options.map_all && options.clear_map_all) {
    return error(Errc::invalid_argument, "--map-all and --clear-map-all exclude each other");
  }
  if (options.map_all) {
    TP_ASSIGN_OR_RETURN(MapAll map_all, parse_map_all(*options.map_all));
    body["map_all_uid"] = map_all.uid;
    // Null, not absent: the server then applies the default (the anonymous gid) instead of
    // keeping an earlier gid.
    body["map_all_gid"] = map_all.gid ? Json(*map_all.gid) : Json(nullptr);
  }
  if (options.clear_map_all) {
    body["map_all_uid"] = nullptr;
    body["map_all_gid"] = nullptr;
  }
  if (options.anon_uid) {
    TP_ASSIGN_OR_RETURN(body["anon_uid"], parse_uint32("--anon-uid", *options.anon_uid));
  }
  if (options.anon_gid) {
    TP_ASSIGN_OR_RETURN(body["anon_gid"], parse_uint32("--anon-gid", *options.anon_gid));
  }
  return body;
}

// --priority of a job or job type: 1 runs first, as in OneFS.
Result<std::uint64_t> parse_job_priority(std::string_view text) {
  std::optional<std::uint64_t> value = parse_decimal(text, 10);
  if (!value || *value == 0) return invalid("--priority", "a number from 1 to 10", text);
  return *value;
}

// --policy: an impact policy, in any case (OneFS names them in capitals).
Result<std::string> parse_impact_policy(std::string_view text) {
  std::string policy(text);
  for (char& c : policy) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (policy != "LOW" && policy != "MEDIUM" && policy != "HIGH" && policy != "OFF_HOURS") {
    return invalid("--policy", "LOW, MEDIUM, HIGH or OFF_HOURS", text);
  }
  return policy;
}

// The fields a job and a job type share, as given.
Status add_priority_and_policy(Json& body, const std::optional<std::string>& priority,
                               const std::optional<std::string>& policy) {
  if (priority) {
    TP_ASSIGN_OR_RETURN(body["priority"], parse_job_priority(*priority));
  }
  if (policy) {
    TP_ASSIGN_OR_RETURN(body["policy"], parse_impact_policy(*policy));
  }
  return {};
}

}  // namespace

Status check_name(std::string_view what, std::string_view name) {
  if (!is_valid_name(name)) {
    return invalid(what, "1-63 characters of A-Z a-z 0-9 - _", name);
  }
  return {};
}

Result<std::uint64_t> parse_id(std::string_view what, std::string_view text) {
  std::optional<std::uint64_t> value =
      parse_decimal(text, std::numeric_limits<std::uint64_t>::max());
  if (!value || *value == 0) return invalid(what, "a number from 1 up", text);
  return *value;
}

std::vector<std::string> split_lists(const std::vector<std::string>& values) {
  std::vector<std::string> items;
  for (std::string_view value : values) {
    while (!value.empty()) {
      auto comma = value.find(',');
      if (comma != 0) items.emplace_back(value.substr(0, comma));
      value = comma == std::string_view::npos ? std::string_view() : value.substr(comma + 1);
    }
  }
  return items;
}

Result<std::chrono::milliseconds> parse_timeout(std::string_view text) {
  double seconds = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
      !(seconds >= 0.001 && seconds <= 86400)) {
    return invalid("--timeout", "seconds from 0.001 to 86400", text);
  }
  return std::chrono::milliseconds(std::llround(seconds * 1000));
}

Result<std::string> namespace_target(std::string_view path) {
  if (!under_ifs(path)) {
    return error(Errc::invalid_argument,
                 "PATH must be absolute and under /ifs: " + std::string(path));
  }
  std::string target = "/v1/namespace";
  for (std::size_t at = 1; at < path.size();) {
    std::size_t slash = std::min(path.find('/', at), path.size());
    if (slash > at) target += "/" + path_segment(path.substr(at, slash - at));
    at = slash + 1;
  }
  return target;
}

Result<Json> policy_body(const PolicyOptions& options, std::optional<std::string> name) {
  Json body = Json::object();
  if (name) body["name"] = *name;
  if (options.filter && !options.filter_flags.empty()) {
    return error(Errc::invalid_argument,
                 "give the filter as --filter or as --begin-filter ... --end-filter, not both");
  }
  if (options.filter) body["filter"] = *options.filter;
  if (!options.filter_flags.empty()) body["filter_flags"] = options.filter_flags;
  auto action = [&](const char* field, const std::optional<std::string>& value, bool clear,
                    const std::string& set_option, const std::string& clear_option) -> Status {
    if (value && clear) {
      return error(Errc::invalid_argument,
                   "give " + set_option + " or " + clear_option + ", not both");
    }
    if (value) body[field] = *value;
    if (clear) body[field] = nullptr;
    return {};
  };
  TP_RETURN_IF_ERROR(action("storage_target", options.storage_target, options.clear_storage_target,
                            "--data-storage-target", "--clear-data-storage-target"));
  TP_RETURN_IF_ERROR(action("protection", options.protection, options.clear_protection,
                            "--set-requested-protection", "--clear-requested-protection"));
  TP_RETURN_IF_ERROR(action("access_pattern", options.access_pattern, options.clear_access_pattern,
                            "--data-access-pattern", "--clear-data-access-pattern"));
  if (options.apply_order) body["apply_order"] = *options.apply_order;
  return body;
}

Status take_filter_flags(std::vector<std::string>& args, std::vector<std::string>& flags) {
  const auto begin = std::find(args.begin(), args.end(), "--begin-filter");
  if (begin == args.end()) return {};
  const auto end = std::find(begin, args.end(), "--end-filter");
  if (end == args.end()) {
    return error(Errc::invalid_argument, "--begin-filter without --end-filter");
  }
  flags.assign(begin, end + 1);
  args.erase(begin, end + 1);
  return {};
}

Result<std::string> locks_target(const std::optional<std::string>& path,
                                 const std::optional<std::string>& kind, bool waiters) {
  std::vector<std::string> query;
  if (path) {
    if (!under_ifs(*path)) {
      return error(Errc::invalid_argument, "--path must be absolute and under /ifs: " + *path);
    }
    query.push_back("path=" + path_segment(*path));
  }
  if (kind) {
    if (*kind != "data" && *kind != "attributes" && *kind != "advisory" && *kind != "share" &&
        *kind != "directory") {
      return error(Errc::invalid_argument,
                   "--kind must be data, attributes, advisory, share or directory: " + *kind);
    }
    query.push_back("kind=" + *kind);
  }
  if (waiters) query.push_back("waiters=true");
  std::string target = "/v1/locks";
  for (std::size_t i = 0; i < query.size(); ++i) target += (i == 0 ? "?" : "&") + query[i];
  return target;
}

Result<SysctlArgument> parse_sysctl_argument(std::string_view text) {
  auto equals = text.find('=');
  SysctlArgument argument{std::string(text.substr(0, equals)), std::nullopt};
  // Dotted names: each component is a name ("efs", "bam", "atime_enabled").
  bool valid_name = true;
  for (std::string_view rest = argument.name; valid_name;) {
    const std::size_t dot = rest.find('.');
    valid_name = is_valid_name(rest.substr(0, dot));
    if (dot == std::string_view::npos) break;
    rest.remove_prefix(dot + 1);
  }
  if (!valid_name)
    return invalid("sysctl", "NAME or NAME=VALUE, NAME such as efs.bam.atime_enabled", text);
  if (equals != std::string_view::npos) argument.value = std::string(text.substr(equals + 1));
  return argument;
}

Result<Json> export_create_body(const ExportOptions& options) {
  if (!options.path) return error(Errc::invalid_argument, "an export needs a path");
  return export_fields(options);
}

Result<Json> export_modify_body(const ExportOptions& options) {
  TP_ASSIGN_OR_RETURN(Json body, export_fields(options));
  if (body.empty()) {
    return error(Errc::invalid_argument, "nothing to modify: give at least one option");
  }
  return body;
}

Result<Json> job_start_body(std::string_view type, const JobStartOptions& options) {
  TP_RETURN_IF_ERROR(check_name("job type", type));
  Json body{{"type", type}};
  TP_RETURN_IF_ERROR(add_priority_and_policy(body, options.priority, options.policy));
  for (const std::string& path : options.paths) {
    if (!under_ifs(path)) {
      return invalid("--paths", "an absolute path under /ifs", path);
    }
  }
  if (!options.paths.empty()) body["paths"] = options.paths;
  if (options.dry_run) body["dry_run"] = true;
  return body;
}

Result<Json> job_type_modify_body(const JobTypeChanges& changes) {
  if (changes.schedule && changes.clear_schedule) {
    return error(Errc::invalid_argument, "give --schedule or --clear-schedule, not both");
  }
  Json body = Json::object();
  if (changes.schedule) {
    // The API reads "" as "no schedule": that is said with --clear-schedule, never by accident.
    if (changes.schedule->empty()) {
      return invalid("--schedule", "a schedule such as 'every day at 22:00'", "");
    }
    body["schedule"] = *changes.schedule;
  }
  if (changes.clear_schedule) body["schedule"] = "";
  TP_RETURN_IF_ERROR(add_priority_and_policy(body, changes.priority, changes.policy));
  if (changes.enabled) {
    TP_ASSIGN_OR_RETURN(body["enabled"], parse_bool("--enabled", *changes.enabled));
  }
  if (body.empty()) {
    return error(Errc::invalid_argument,
                 "nothing to modify: give --schedule, --clear-schedule, --priority, --policy or "
                 "--enabled");
  }
  return body;
}

Result<Json> tier_create_body(std::string_view name, const std::vector<std::string>& children) {
  TP_RETURN_IF_ERROR(check_name("tier name", name));
  TP_RETURN_IF_ERROR(check_children(children));
  return Json{{"name", name}, {"children", children}};
}

Status check_children(const std::vector<std::string>& children) {
  for (auto child = children.begin(); child != children.end(); ++child) {
    TP_RETURN_IF_ERROR(check_name("node pool name", *child));
    if (std::find(children.begin(), child, *child) != child) {
      return error(Errc::invalid_argument, "node pool '" + *child + "' is named twice");
    }
  }
  return {};
}

Result<std::vector<std::string>> apply_children_change(const std::vector<std::string>& current,
                                                       ChildrenChange change,
                                                       const std::vector<std::string>& pools) {
  switch (change) {
    case ChildrenChange::set:
      return pools;
    case ChildrenChange::add: {
      std::vector<std::string> children = current;
      for (const std::string& pool : pools) {
        if (std::find(children.begin(), children.end(), pool) == children.end()) {
          children.push_back(pool);
        }
      }
      return children;
    }
    case ChildrenChange::remove: {
      std::vector<std::string> children = current;
      for (const std::string& pool : pools) {
        auto found = std::find(children.begin(), children.end(), pool);
        if (found == children.end()) {
          return error(Errc::invalid_argument, "node pool '" + pool + "' is not a child");
        }
        children.erase(found);
      }
      return children;
    }
  }
  return error(Errc::internal, "unknown change of children");
}

}  // namespace tidepool::cli
