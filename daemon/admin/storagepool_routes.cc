// Node pools (the nodes that name a pool in their configuration) and the tiers that group them.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "daemon/admin/config_change.h"
#include "daemon/admin/handlers.h"
#include "daemon/admin/replies.h"
#include "daemon/admin/view_json.h"
#include "daemon/config_objects.h"

namespace tidepool::daemon::admin {
namespace {

using cluster::GroupView;
using nlohmann::json;

// Children of a tier as the request gives them: existing node pools, none in another tier.
Result<std::vector<std::string>> tier_children_from(const json& body, const GroupView& view,
                                                    std::string_view tier) {
  std::vector<std::string> children;
  if (!body.contains("children")) return children;
  if (!body["children"].is_array()) {
    return error(Errc::invalid_argument, "'children' must be a list of node pool names");
  }
  std::set<std::string> pools;
  for (const cluster::NodeInfo& node : view.nodes) pools.insert(node.pool);
  for (const json& child : body["children"]) {
    if (!child.is_string()) {
      return error(Errc::invalid_argument, "'children' must be a list of node pool names");
    }
    const std::string pool = child.get<std::string>();
    if (!pools.contains(pool)) {
      return error(Errc::invalid_argument, "no node pool '" + pool + "' in the cluster");
    }
    if (std::ranges::find(children, pool) != children.end()) {
      return error(Errc::invalid_argument, "node pool '" + pool + "' is named twice");
    }
    for (const cluster::ConfigObject& other : view.objects_of(kTierKind)) {
      const auto others = tier_children(other);
      if (other.name != tier && std::ranges::find(others, pool) != others.end()) {
        return error(Errc::already_exists,
                     "node pool '" + pool + "' already belongs to tier '" + other.name + "'");
      }
    }
    children.push_back(pool);
  }
  return children;
}

// POST /v1/storagepool/tiers (`existing` none) or PUT /v1/storagepool/tiers/NAME.
Plan write_tier(const GroupView& view, const std::string& request_body,
                std::optional<std::string_view> existing) {
  auto body = parse_body(request_body);
  if (!body.ok()) return refuse(body.status());
  const std::string name = existing ? std::string(*existing) : body->value("name", std::string());
  if (!is_valid_name(name)) {
    return refuse(
        error_response(400, "'" + name + "' is not a tier name (1-63 of A-Z a-z 0-9 - _)"));
  }
  const bool exists = view.object(kTierKind, name) != nullptr;
  if (existing && !exists) return refuse(error_response(404, "no tier '" + name + "'"));
  if (!existing && exists) return refuse(error_response(409, "tier '" + name + "' already exists"));
  auto children = tier_children_from(*body, view, name);
  if (!children.ok()) return refuse(children.status());
  const json tier{{"name", name}, {"children", *children}};
  const std::string stored = json{{"children", *children}}.dump();
  const std::string kind(kTierKind);
  return existing
             ? change_then(cluster::Change::update_object(kind, name, stored), reply(200, tier))
             : change_then(cluster::Change::create_object(kind, name, stored), reply(201, tier));
}

}  // namespace

Reply list_nodepools(Context& context, Request) {
  co_return reply(200, json{{"nodepools", nodepools_json(context.view())}});
}

Reply get_nodepool(Context& context, Request request) {
  const std::string& name = request.param("name");
  for (const json& pool : nodepools_json(context.view())) {
    if (pool["name"] == name) co_return reply(200, pool);
  }
  co_return error_response(404, "no node pool '" + name + "'");
}

Reply list_tiers(Context& context, Request) {
  co_return reply(200, json{{"tiers", tiers_json(context.view())}});
}

Reply create_tier(Context& context, Request request) {
  return carry_out(context.membership, write_tier(context.view(), request.body, std::nullopt));
}

Reply get_tier(Context& context, Request request) {
  const std::string& name = request.param("name");
  const cluster::ConfigObject* tier = context.view().object(kTierKind, name);
  if (tier == nullptr) co_return error_response(404, "no tier '" + name + "'");
  co_return reply(200, tier_json(*tier));
}

Reply modify_tier(Context& context, Request request) {
  return carry_out(context.membership,
                   write_tier(context.view(), request.body, request.param("name")));
}

Reply delete_tier(Context& context, Request request) {
  const std::string& name = request.param("name");
  return carry_out(context.membership,
                   delete_object(context.view(), kTierKind, name, "tier '" + name + "'"));
}

}  // namespace tidepool::daemon::admin
