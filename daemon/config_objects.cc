#include "daemon/config_objects.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <limits>

#include "cluster/ring.h"
#include "daemon/stored_records.h"
#include "store/store.h"

namespace tidepool::daemon {
namespace {

using nlohmann::json;

constexpr std::string_view kAtimeEnabled = "efs.bam.atime_enabled";
constexpr std::string_view kAtimeGracePeriod = "efs.bam.atime_grace_period";
constexpr std::string_view kTransferLimit = "efs.smartpools.transfer_limit";
constexpr std::string_view kRepairDelay = "efs.flexprotect.repair_delay";
constexpr std::chrono::seconds kMinRepairDelay{1};
constexpr std::chrono::seconds kMaxRepairDelay{4 * 7 * 86400};
constexpr std::string_view kCrossShardDecidePause = "debug.fail_point.cross_shard_decide";
constexpr std::string_view kNlmGrantReplyPause = "debug.fail_point.nlm_grant_reply";
constexpr std::string_view kAddNodeAfterJoinPause = "debug.fail_point.add_node_after_join";
constexpr std::string_view kFailPointPrefix = "debug.fail_point.";
constexpr std::string_view kIgnoreLeases = "debug.fail_point.ignore_leases";
constexpr std::string_view kKeepWhatCallbacksDrop = "debug.fail_point.keep_what_callbacks_drop";
constexpr std::string_view kLeakAtExit = "debug.fail_point.leak_at_exit";

bool is_flag(const SysctlSpec& spec) { return spec.unit.empty(); }

bool is_duration(const SysctlSpec& spec) { return spec.unit == "ms" || spec.unit == "s"; }

BareNumber bare_number(const SysctlSpec& spec) {
  return spec.unit == "ms" ? BareNumber::milliseconds : BareNumber::seconds;
}

// A transfer limit as written: a whole percentage, 1 to 100, with or without '%'.
std::optional<std::uint32_t> parse_percent(std::string_view text) {
  if (!text.empty() && text.back() == '%') text.remove_suffix(1);
  std::uint32_t percent = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), percent);
  if (ec != std::errc() || end != text.data() + text.size() || percent < 1 || percent > 100) {
    return std::nullopt;
  }
  return percent;
}

std::string format_duration(std::chrono::seconds duration) {
  static constexpr std::pair<std::int64_t, std::string_view> kUnits[] = {
      {7 * 86400, "W"}, {86400, "D"}, {3600, "h"}, {60, "m"}};
  const std::int64_t seconds = duration.count();
  for (const auto& [unit, name] : kUnits) {
    if (seconds != 0 && seconds % unit == 0) {
      return std::to_string(seconds / unit).append(name);
    }
  }
  return std::to_string(seconds) + "s";
}

std::optional<std::string> cluster_value(const cluster::GroupView& view, std::string_view name) {
  const cluster::ConfigObject* object = view.object(kSysctlKind, name);
  if (object == nullptr) return std::nullopt;
  const json body = json::parse(object->body, nullptr, false);
  if (!body.is_object() || !body.contains("value") || !body["value"].is_string()) {
    return std::nullopt;
  }
  return body["value"].get<std::string>();
}

std::chrono::seconds duration_value(const cluster::GroupView& view, std::string_view name,
                                    std::chrono::seconds unset) {
  const std::optional<std::string> value = cluster_value(view, name);
  Result<std::chrono::seconds> duration = value ? parse_duration(*value) : unset;
  return duration.ok() ? *duration : unset;
}

std::set<cluster::NodeId> members_of(const cluster::GroupView& view) {
  std::set<cluster::NodeId> members;
  for (const cluster::NodeInfo& node : view.nodes) members.insert(node.id);
  return members;
}

}  // namespace

std::string encode_export(const ExportConfig& entry) {
  return json{{"version", kExportVersion},
              {"path", entry.path},
              {"clients", entry.clients},
              {"read_only", entry.read_only},
              {"secure", entry.secure},
              {"root_squash", entry.root_squash},
              {"map_all_uid", entry.map_all_uid ? json(*entry.map_all_uid) : json(nullptr)},
              {"map_all_gid", entry.map_all_gid ? json(*entry.map_all_gid) : json(nullptr)},
              {"anon_uid", entry.anon_uid},
              {"anon_gid", entry.anon_gid}}
      .dump();
}

Result<ExportConfig> decode_export(std::string_view body) {
  const json record = json::parse(body, nullptr, false);
  if (!record.is_object()) return error(Errc::corrupt, "not a JSON object");
  TP_ASSIGN_OR_RETURN(const std::uint32_t version, record_version(record, kExportVersion));
  // Before versions, the record was the admin API's EXPORT, with the id its name also says.
  TP_RETURN_IF_ERROR(only_known_fields(
      record, {version == 0 ? "id" : "version", "path", "clients", "read_only", "root_squash",
               "map_all_uid", "map_all_gid", "anon_uid", "anon_gid",
               version >= 2 ? "secure" : "version"}));
  const json clients = record.value("clients", json());
  if (!clients.is_array() ||
      !std::all_of(clients.begin(), clients.end(), [](const json& c) { return c.is_string(); })) {
    return error(Errc::corrupt, "'clients' is not a list of text");
  }
  ExportConfig entry;
  entry.clients = clients.get<std::vector<std::string>>();
  TP_ASSIGN_OR_RETURN(entry.path, stored_text(record, "path"));
  TP_ASSIGN_OR_RETURN(entry.read_only, stored_flag(record, "read_only"));
  // Exports made before version 2 took calls from any port: they still do.
  entry.secure = false;
  if (version >= 2) {
    TP_ASSIGN_OR_RETURN(entry.secure, stored_flag(record, "secure"));
  }
  TP_ASSIGN_OR_RETURN(entry.root_squash, stored_flag(record, "root_squash"));
  TP_ASSIGN_OR_RETURN(entry.map_all_uid, stored_optional_number(record, "map_all_uid"));
  TP_ASSIGN_OR_RETURN(entry.map_all_gid, stored_optional_number(record, "map_all_gid"));
  TP_ASSIGN_OR_RETURN(entry.anon_uid, stored_number(record, "anon_uid"));
  TP_ASSIGN_OR_RETURN(entry.anon_gid, stored_number(record, "anon_gid"));
  if (Status valid = validate_export(entry); !valid.ok()) {
    return error(Errc::corrupt, valid.message());
  }
  return entry;
}

std::map<std::uint32_t, ExportConfig> exports_of(const cluster::GroupView& view) {
  std::map<std::uint32_t, ExportConfig> exports;
  for (const cluster::ConfigObject& object : view.objects_of(kExportKind)) {
    std::uint32_t id = 0;
    const auto [end, ec] =
        std::from_chars(object.name.data(), object.name.data() + object.name.size(), id);
    Result<ExportConfig> entry = decode_export(object.body);
    if (ec != std::errc() || end != object.name.data() + object.name.size() || !entry.ok()) {
      spdlog::warn("ignoring export '{}' of the cluster configuration: {}", object.name,
                   entry.ok() ? "bad id" : entry.status().message());
      continue;
    }
    exports.emplace(id, std::move(entry).value());
  }
  return exports;
}

const std::vector<SysctlSpec>& sysctl_specs() {
  static const std::vector<SysctlSpec> specs{
      {kAtimeEnabled, "track access times (true or false)", ""},
      {kAtimeGracePeriod,
       "persist an access time only once it has moved by this much: milliseconds as in OneFS "
       "(86400000 is one day), or 90s, 5m, 12h, 1D, 2W",
       "ms"},
      {kTransferLimit,
       "a node pool this full (percent of its disks, 1-100) receives no data SmartPools moves",
       "%"},
      {kRepairDelay,
       "how long a node is down before its data is protected again on the other nodes of its "
       "pool: seconds, or 90s, 10m, 1h",
       "s"},
      {kCrossShardDecidePause,
       "fault injection: a change across shards waits this long between its two phases: "
       "seconds, or 90s (0: not at all)",
       "s"},
      {kNlmGrantReplyPause,
       "fault injection: an NLM lock granted waits this long before it is answered: seconds, "
       "or 90s (0: not at all)",
       "s"},
      {kAddNodeAfterJoinPause,
       "fault injection: an add-node waits this long once the node joined, before it goes into "
       "the view: seconds, or 90s (0: not at all)",
       "s"},
      {kIgnoreLeases,
       "fault injection, never on a cluster that serves data: every node serves as if it held "
       "its lease, cut off or not (true or false)",
       ""},
      {kKeepWhatCallbacksDrop,
       "fault injection, never on a cluster that serves data: every node keeps the cached data "
       "its locks' callbacks tell it to drop (true or false)",
       ""},
      {kLeakAtExit,
       "fault injection: every node leaks memory when it stops, for the sanitizers to find "
       "(true or false)",
       ""},
  };
  return specs;
}

const SysctlSpec* find_sysctl(std::string_view name) {
  const auto& specs = sysctl_specs();
  const auto found = std::ranges::find(specs, name, &SysctlSpec::name);
  return found == specs.end() ? nullptr : &*found;
}

Result<std::string> normalize_sysctl(const SysctlSpec& spec, std::string_view value) {
  if (is_flag(spec)) {
    if (value == "true" || value == "1") return std::string("true");
    if (value == "false" || value == "0") return std::string("false");
    return error(Errc::invalid_argument, std::string(spec.name) + " must be true or false");
  }
  if (spec.name == kTransferLimit) {
    const std::optional<std::uint32_t> percent = parse_percent(value);
    if (!percent) {
      return error(Errc::invalid_argument,
                   std::string(spec.name) + " must be a percentage from 1 to 100");
    }
    return std::to_string(*percent);
  }
  Result<std::chrono::seconds> duration = parse_duration(value, bare_number(spec));
  if (!duration.ok()) {
    return error(Errc::invalid_argument,
                 std::string(spec.name) + ": " + duration.status().message());
  }
  if (spec.name == kRepairDelay && (*duration < kMinRepairDelay || *duration > kMaxRepairDelay)) {
    return error(Errc::invalid_argument, std::string(spec.name) + " must be from 1s to 4W");
  }
  if (spec.name == kAtimeGracePeriod && *duration > kMaxAtimeGracePeriod) {
    return error(Errc::invalid_argument, std::string(spec.name) + " must be at most 52W");
  }
  return format_duration(*duration);
}

std::optional<std::string> sysctl_in_unit(const SysctlSpec& spec, std::string_view value) {
  if (!is_duration(spec)) return std::nullopt;
  Result<std::chrono::seconds> duration = parse_duration(value, bare_number(spec));
  if (!duration.ok()) return std::nullopt;
  return std::to_string(bare_number(spec) == BareNumber::milliseconds
                            ? std::chrono::milliseconds(*duration).count()
                            : duration->count());
}

std::string sysctl_default(const SysctlSpec& spec, const NodeConfig& config) {
  if (spec.name == kAtimeEnabled) return config.atime_enabled ? "true" : "false";
  if (spec.name == kTransferLimit) return std::to_string(kDefaultTransferLimitPercent);
  if (spec.name == kCrossShardDecidePause || spec.name == kNlmGrantReplyPause) return "0s";
  if (spec.name.starts_with(kFailPointPrefix) && is_flag(spec)) return "false";
  if (spec.name == kRepairDelay) return format_duration(kDefaultRepairDelay);
  return format_duration(config.atime_grace_period);
}

std::string sysctl_value(const SysctlSpec& spec, const cluster::GroupView& view,
                         const NodeConfig& config) {
  std::optional<std::string> value = cluster_value(view, spec.name);
  if (value && normalize_sysctl(spec, *value).ok()) return *value;
  return sysctl_default(spec, config);
}

AtimePolicy atime_policy(const cluster::GroupView& view, const NodeConfig& config) {
  AtimePolicy policy;
  policy.enabled = sysctl_value(*find_sysctl(kAtimeEnabled), view, config) == "true";
  const SysctlSpec& grace_spec = *find_sysctl(kAtimeGracePeriod);
  Result<std::chrono::seconds> grace =
      parse_duration(sysctl_value(grace_spec, view, config), bare_number(grace_spec));
  policy.grace_period = grace.ok() ? *grace : config.atime_grace_period;
  return policy;
}

std::chrono::seconds cross_shard_decide_pause(const cluster::GroupView& view) {
  return duration_value(view, kCrossShardDecidePause, std::chrono::seconds(0));
}

std::chrono::seconds nlm_grant_reply_pause(const cluster::GroupView& view) {
  return duration_value(view, kNlmGrantReplyPause, std::chrono::seconds(0));
}

std::chrono::seconds add_node_after_join_pause(const cluster::GroupView& view) {
  return duration_value(view, kAddNodeAfterJoinPause, std::chrono::seconds(0));
}

bool fail_point_switched_on(const cluster::GroupView& view, std::string_view name) {
  return cluster_value(view, std::string(kFailPointPrefix) + std::string(name)) == "true";
}

std::chrono::seconds repair_delay(const cluster::GroupView& view) {
  const std::chrono::seconds delay = duration_value(view, kRepairDelay, kDefaultRepairDelay);
  return delay < kMinRepairDelay || delay > kMaxRepairDelay ? kDefaultRepairDelay : delay;
}

std::uint32_t transfer_limit_percent(const cluster::GroupView& view) {
  const std::optional<std::string> value = cluster_value(view, kTransferLimit);
  const std::optional<std::uint32_t> percent = value ? parse_percent(*value) : std::nullopt;
  return percent.value_or(kDefaultTransferLimitPercent);
}

LostNodes lost_nodes_of(const cluster::GroupView& view) {
  const cluster::ConfigObject* object = view.object(kClusterKind, kLostNodesName);
  if (object == nullptr) return {};
  const json body = json::parse(object->body, nullptr, false);
  LostNodes lost;
  lost.changed = object->changed;
  const json nodes = body.is_object() ? body.value("nodes", json()) : json();
  const json generation = body.is_object() ? body.value("generation", json()) : json();
  const json protected_generation = body.is_object() ? body.value("protected", json()) : json();
  const json smartfailing =
      body.is_object() ? body.value("smartfailing", json::array()) : json::array();
  const json members = body.is_object() ? body.value("members", json::array()) : json::array();
  const json leaving = body.is_object() ? body.value("leaving", json::array()) : json::array();
  const bool parses =
      nodes.is_array() && generation.is_number_unsigned() &&
      protected_generation.is_number_unsigned() &&
      std::ranges::all_of(nodes, &json::is_number_unsigned) && smartfailing.is_array() &&
      std::ranges::all_of(smartfailing, &json::is_number_unsigned) && members.is_array() &&
      std::ranges::all_of(members, &json::is_number_unsigned) && leaving.is_array() &&
      std::ranges::all_of(leaving, &json::is_number_unsigned);
  if (!parses) {
    spdlog::warn("ignoring the cluster's record of lost nodes: it does not parse");
    return lost;
  }
  for (const json& node : nodes) lost.nodes.insert(node.get<cluster::NodeId>());
  for (const json& node : smartfailing) lost.smartfailing.insert(node.get<cluster::NodeId>());
  for (const json& node : members) lost.members.insert(node.get<cluster::NodeId>());
  for (const json& node : leaving) lost.leaving.insert(node.get<cluster::NodeId>());
  lost.generation = generation.get<std::uint64_t>();
  lost.protected_generation = protected_generation.get<std::uint64_t>();
  return lost;
}

cluster::Change lost_nodes_update(const LostNodes& next) {
  const std::string body = json{
      {"nodes", next.nodes},
      {"generation", next.generation},
      {"protected", next.protected_generation},
      {"smartfailing", next.smartfailing},
      {"members", next.members},
      {"leaving",
       next.leaving}}.dump();
  if (next.changed == 0) {
    return cluster::Change::create_object(std::string(kClusterKind), std::string(kLostNodesName),
                                          body);
  }
  return cluster::Change::update_object(std::string(kClusterKind), std::string(kLostNodesName),
                                        body, next.changed);
}

std::optional<LostNodes> plan_lost_nodes(const LostNodes& lost, const cluster::GroupView& view,
                                         const std::set<cluster::NodeId>& down_past_delay,
                                         const std::set<cluster::NodeId>& up_past_delay) {
  std::set<cluster::NodeId> nodes = down_past_delay;
  for (const cluster::NodeId node : lost.nodes) {
    if (view.node(node) != nullptr && !(view.is_up(node) && up_past_delay.contains(node))) {
      nodes.insert(node);
    }
  }
  const auto gone = [&view](cluster::NodeId node) { return view.node(node) == nullptr; };
  std::set<cluster::NodeId> smartfailing = lost.smartfailing;
  std::erase_if(smartfailing, gone);
  std::set<cluster::NodeId> leaving = lost.leaving;
  std::erase_if(leaving, gone);
  std::set<cluster::NodeId> members = members_of(view);
  const bool removed_unprotected = std::ranges::any_of(lost.members, [&](cluster::NodeId node) {
    return !members.contains(node) && !lost.smartfailing.contains(node);
  });
  if (nodes == lost.nodes && smartfailing == lost.smartfailing && members == lost.members &&
      leaving == lost.leaving) {
    return std::nullopt;
  }
  LostNodes next = lost;
  if (nodes != lost.nodes || removed_unprotected) ++next.generation;
  next.nodes = std::move(nodes);
  next.smartfailing = std::move(smartfailing);
  next.members = std::move(members);
  next.leaving = std::move(leaving);
  return next;
}

Result<LostNodes> plan_smartfail(const LostNodes& lost, const cluster::GroupView& view,
                                 cluster::NodeId node, std::uint32_t copies) {
  const cluster::NodeInfo* leaving = view.node(node);
  if (leaving == nullptr) {
    return error(Errc::not_found, "no node " + std::to_string(node) + " in the cluster");
  }
  if (lost.smartfailing.contains(node)) {
    return error(Errc::already_exists, "node " + std::to_string(node) + " is being SmartFailed");
  }
  LostNodes next = lost;
  next.smartfailing.insert(node);
  ++next.generation;
  next.members = members_of(view);
  std::size_t left_in_pool = 0;
  std::size_t left_in_cluster = 0;
  for (const cluster::NodeInfo& other : view.nodes) {
    if (next.nodes.contains(other.id) || next.smartfailing.contains(other.id)) continue;
    ++left_in_cluster;
    if (other.pool == leaving->pool) ++left_in_pool;
  }
  if (left_in_pool < copies) {
    return error(Errc::precondition_failed,
                 "node " + std::to_string(node) + " cannot be SmartFailed: node pool '" +
                     leaving->pool + "' would be left with " + std::to_string(left_in_pool) +
                     " node" + (left_in_pool == 1 ? "" : "s") + " to place data on, too few for " +
                     std::to_string(copies) +
                     " copies (the most the file pool policies ask for); add a node to the pool "
                     "first");
  }
  if (left_in_cluster < 2) {
    return error(Errc::precondition_failed,
                 "node " + std::to_string(node) +
                     " cannot be SmartFailed: the cluster would be left with fewer than 2 nodes "
                     "for the namespace's home and mirror");
  }
  return next;
}

Result<LostNodes> plan_stopfail(const LostNodes& lost, const cluster::GroupView& view,
                                cluster::NodeId node) {
  if (view.node(node) == nullptr) {
    return error(Errc::not_found, "no node " + std::to_string(node) + " in the cluster");
  }
  if (!lost.smartfailing.contains(node)) {
    return error(Errc::precondition_failed,
                 "node " + std::to_string(node) + " is not being SmartFailed");
  }
  if (lost.leaving.contains(node)) {
    return error(Errc::precondition_failed,
                 "node " + std::to_string(node) +
                     " is leaving the cluster already: what it held has its copies elsewhere");
  }
  LostNodes next = lost;
  next.smartfailing.erase(node);
  ++next.generation;
  next.members = members_of(view);
  return next;
}

std::map<std::string, std::vector<cluster::NodeId>> pool_nodes(const cluster::GroupView& view) {
  const LostNodes lost = lost_nodes_of(view);
  std::map<std::string, std::vector<cluster::NodeId>> pools;
  for (const cluster::NodeInfo& node : view.nodes) {
    if (!lost.nodes.contains(node.id) && !lost.smartfailing.contains(node.id)) {
      pools[node.pool].push_back(node.id);
    }
  }
  return pools;
}

std::set<cluster::NodeId> smartfailing_nodes(const cluster::GroupView& view) {
  return lost_nodes_of(view).smartfailing;
}

std::vector<std::string> tier_children(const cluster::ConfigObject& tier) {
  const json body = json::parse(tier.body, nullptr, false);
  std::vector<std::string> children;
  if (body.is_object() && body.contains("children") && body["children"].is_array()) {
    for (const json& child : body["children"]) {
      if (child.is_string()) children.push_back(child.get<std::string>());
    }
  }
  return children;
}

}  // namespace tidepool::daemon
