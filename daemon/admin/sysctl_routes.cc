// Sysctls: cluster-wide settings whose default is each node's configuration.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "daemon/admin/config_change.h"
#include "daemon/admin/handlers.h"
#include "daemon/admin/replies.h"
#include "daemon/config_objects.h"

namespace tidepool::daemon::admin {
namespace {

using cluster::GroupView;
using nlohmann::json;

// A duration also as a bare number in its unit, as OneFS prints its keys.
json sysctl_json(const SysctlSpec& spec, const std::string& value, const NodeConfig& config) {
  json shown{{"name", spec.name},
             {"value", value},
             {"default", sysctl_default(spec, config)},
             {"description", spec.description}};
  if (!spec.unit.empty()) shown["unit"] = spec.unit;
  if (std::optional<std::string> in_unit = sysctl_in_unit(spec, value)) {
    shown["value_in_unit"] = *in_unit;
  }
  return shown;
}

json sysctl_json(const SysctlSpec& spec, const GroupView& view, const NodeConfig& config) {
  return sysctl_json(spec, sysctl_value(spec, view, config), config);
}

HttpResponse no_sysctl(const std::string& name) {
  return error_response(404, "no sysctl '" + name + "'");
}

Plan write_sysctl(const GroupView& view, const NodeConfig& config, const std::string& name,
                  const std::string& request_body) {
  const SysctlSpec* spec = find_sysctl(name);
  if (spec == nullptr) return refuse(no_sysctl(name));
  auto body = parse_body(request_body);
  if (!body.ok()) return refuse(body.status());
  const json value = body->value("value", json());
  if (!value.is_string() && !value.is_boolean() && !value.is_number()) {
    return refuse(error_response(400, "'value' must be a string"));
  }
  auto normalized =
      normalize_sysctl(*spec, value.is_string() ? value.get<std::string>() : value.dump());
  if (!normalized.ok()) return refuse(normalized.status());
  const std::string stored = json{{"value", *normalized}}.dump();
  const std::string kind(kSysctlKind);
  return change_then(view.object(kind, name) != nullptr
                         ? cluster::Change::update_object(kind, name, stored)
                         : cluster::Change::create_object(kind, name, stored),
                     reply(200, sysctl_json(*spec, *normalized, config)));
}

}  // namespace

Reply list_sysctls(Context& context, Request) {
  json list = json::array();
  for (const SysctlSpec& spec : sysctl_specs()) {
    list.push_back(sysctl_json(spec, context.view(), context.membership.config()));
  }
  co_return reply(200, json{{"sysctls", list}});
}

Reply get_sysctl(Context& context, Request request) {
  const SysctlSpec* spec = find_sysctl(request.param("name"));
  if (spec == nullptr) co_return no_sysctl(request.param("name"));
  co_return reply(200, sysctl_json(*spec, context.view(), context.membership.config()));
}

Reply set_sysctl(Context& context, Request request) {
  return carry_out(context.membership, write_sysctl(context.view(), context.membership.config(),
                                                    request.param("name"), request.body));
}

}  // namespace tidepool::daemon::admin
