// Sysctls: cluster-wide settings whose default is each node's configuration.
#include <nlohmann/json.hpp>

#include "daemon/admin/config_change.h"
#include "daemon/admin/handlers.h"
#include "daemon/admin/replies.h"
#include "daemon/config_objects.h"

namespace tidepool::daemon::admin {
namespace {

using cluster::GroupView;
using nlohmann::json;

json sysctl_json(const SysctlSpec& spec, const GroupView& view, const NodeConfig& config) {
  return json{{"name", spec.name},
              {"value", sysctl_value(spec, view, config)},
              {"default", sysctl_default(spec, config)},
              {"description", spec.description}};
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
  json shown = sysctl_json(*spec, view, config);
  shown["value"] = *normalized;
  return change_then(view.object(kind, name) != nullptr
                         ? cluster::Change::update_object(kind, name, stored)
                         : cluster::Change::create_object(kind, name, stored),
                     reply(200, shown));
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
