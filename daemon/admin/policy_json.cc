#include "daemon/admin/policy_json.h"

#include <algorithm>

#include "daemon/admin/replies.h"
#include "daemon/config_objects.h"
#include "daemon/filepool.h"
#include "tiering/smartpools.h"

namespace tidepool::daemon::admin {
namespace {

using nlohmann::json;

Result<std::uint32_t> copies_of(const json& value) {
  if (value == "2x") return 2u;
  if (value == "3x") return 3u;
  return error(Errc::invalid_argument, "'protection' must be \"2x\" or \"3x\"");
}

std::string protection_text(std::uint32_t copies) { return std::to_string(copies) + "x"; }

Status check_target(const json& value, const cluster::GroupView& view) {
  if (!value.is_string()) {
    return error(Errc::invalid_argument,
                 "'storage_target' must be a node pool, a tier or "
                 "\"anywhere\"");
  }
  const std::string target = value.get<std::string>();
  if (target == policy::kAnywhere || view.object(kTierKind, target) != nullptr ||
      std::any_of(view.nodes.begin(), view.nodes.end(),
                  [&](const cluster::NodeInfo& node) { return node.pool == target; })) {
    return {};
  }
  return error(Errc::invalid_argument,
               "storage target '" + target + "' is neither a node pool nor a tier");
}

Status check_pattern(const json& value) {
  if (!value.is_string()) return error(Errc::invalid_argument, "'access_pattern' must be text");
  return policy::check_access_pattern(value.get<std::string>());
}

// A filter is kept as its expression: one that would not read back the same (longer than an
// expression may be, once written out) is refused when it comes in, not lost when it is read.
Status check_kept(const policy::Filter& filter) {
  auto again = policy::parse_expression(policy::to_expression(filter));
  if (again.ok() && *again == filter) return {};
  return error(Errc::invalid_argument,
               "filter: too long to keep (at most 4096 characters once written as an expression)");
}

}  // namespace

json policy_to_json(const policy::Policy& p, std::size_t apply_order) {
  const policy::Actions& a = p.actions;
  return json{{"name", p.name},
              {"apply_order", apply_order},
              {"filter", policy::to_expression(p.filter)},
              {"storage_target", a.storage_target ? json(*a.storage_target) : json(nullptr)},
              {"protection", a.protection ? json(protection_text(*a.protection)) : json(nullptr)},
              {"access_pattern", a.access_pattern ? json(*a.access_pattern) : json(nullptr)}};
}

json defaults_to_json(const policy::Defaults& d) {
  return json{{"name", policy::kDefaultPolicy},
              {"storage_target", d.storage_target},
              {"protection", protection_text(d.protection)},
              {"access_pattern", d.access_pattern}};
}

json policies_to_json(const policy::PolicySet& set) {
  json list = json::array();
  for (std::size_t i = 0; i < set.policies.size(); ++i) {
    list.push_back(policy_to_json(set.policies[i], i + 1));
  }
  return json{{"policies", std::move(list)}, {"default", defaults_to_json(set.defaults)}};
}

Result<policy::Policy> policy_from_json(const json& body, policy::Policy base,
                                        const cluster::GroupView& view) {
  if (!body.is_object()) return error(Errc::invalid_argument, "the body must be a JSON object");
  if (body.contains("filter") && body.contains("filter_flags")) {
    return error(Errc::invalid_argument, "give 'filter' or 'filter_flags', not both");
  }
  for (const auto& [key, value] : body.items()) {
    if (key == "filter") {
      if (!value.is_string()) return error(Errc::invalid_argument, "'filter' must be text");
      auto filter = policy::parse_expression(value.get<std::string>());
      if (!filter.ok())
        return error(Errc::invalid_argument, "filter: " + filter.status().message());
      base.filter = std::move(filter).value();
      TP_RETURN_IF_ERROR(check_kept(base.filter));
    } else if (key == "filter_flags") {
      if (!value.is_array() ||
          !std::all_of(value.begin(), value.end(), [](const json& v) { return v.is_string(); })) {
        return error(Errc::invalid_argument, "'filter_flags' must be a list of strings");
      }
      const std::vector<std::string> flags = value.get<std::vector<std::string>>();
      auto filter = policy::parse_flags(flags);
      if (!filter.ok())
        return error(Errc::invalid_argument, "filter: " + filter.status().message());
      base.filter = std::move(filter).value();
      TP_RETURN_IF_ERROR(check_kept(base.filter));
    } else if (key == "storage_target") {
      if (value.is_null()) {
        base.actions.storage_target.reset();
        continue;
      }
      TP_RETURN_IF_ERROR(check_target(value, view));
      base.actions.storage_target = value.get<std::string>();
    } else if (key == "protection") {
      if (value.is_null()) {
        base.actions.protection.reset();
        continue;
      }
      TP_ASSIGN_OR_RETURN(base.actions.protection, copies_of(value));
    } else if (key == "access_pattern") {
      if (value.is_null()) {
        base.actions.access_pattern.reset();
        continue;
      }
      TP_RETURN_IF_ERROR(check_pattern(value));
      base.actions.access_pattern = value.get<std::string>();
    } else if (key != "name" && key != "apply_order") {
      return error(Errc::invalid_argument, "unknown field '" + key + "'");
    }
  }
  return base;
}

Result<policy::Defaults> defaults_from_json(const json& body, policy::Defaults base,
                                            const cluster::GroupView& view) {
  if (!body.is_object()) return error(Errc::invalid_argument, "the body must be a JSON object");
  for (const auto& [key, value] : body.items()) {
    if (key == "storage_target") {
      TP_RETURN_IF_ERROR(check_target(value, view));
      base.storage_target = value.get<std::string>();
    } else if (key == "protection") {
      TP_ASSIGN_OR_RETURN(base.protection, copies_of(value));
    } else if (key == "access_pattern") {
      TP_RETURN_IF_ERROR(check_pattern(value));
      base.access_pattern = value.get<std::string>();
    } else if (key == "filter" || key == "filter_flags") {
      return error(Errc::invalid_argument, "the default policy matches every file: no filter");
    } else if (key != "name") {
      return error(Errc::invalid_argument, "unknown field '" + key + "'");
    }
  }
  return base;
}

policy::Resolution applying_policy(const cluster::GroupView& view, const store::Attributes& file,
                                   std::string path) {
  return policy::resolve(policies_of(view).set, tiering::facts_of(file, std::move(path)),
                         unix_now());
}

}  // namespace tidepool::daemon::admin
