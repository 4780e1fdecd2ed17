// File pool policies, written whole as one list so that a change made on an older view fails
// instead of undoing a newer one, and which policy applies to a file.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "daemon/admin/config_change.h"
#include "daemon/admin/handlers.h"
#include "daemon/admin/namespace_paths.h"
#include "daemon/admin/policy_json.h"
#include "daemon/admin/replies.h"
#include "daemon/filepool.h"

namespace tidepool::daemon::admin {
namespace {

using cluster::GroupView;
using nlohmann::json;

HttpResponse no_policy(std::string_view name) {
  return error_response(404, "no file pool policy '" + std::string(name) + "'");
}

// POST /v1/filepool/policies (`existing` none) or PUT /v1/filepool/policies/NAME: the whole list
// is written again, and only if nobody changed it since it was read.
Plan write_policy(const GroupView& view, const std::string& request_body,
                  std::optional<std::string_view> existing) {
  const Result<json> body = parse_body(request_body);
  if (!body.ok()) return refuse(body.status());
  const StoredPolicies stored = policies_of(view);
  policy::PolicySet next = stored.set;
  if (existing == policy::kDefaultPolicy) {
    auto defaults = defaults_from_json(*body, next.defaults, view);
    if (!defaults.ok()) return refuse(defaults.status());
    next.defaults = std::move(defaults).value();
    return change_then(policies_update(stored, next), reply(200, defaults_to_json(next.defaults)));
  }
  const json name_field = body->value("name", json());
  if (!existing && !name_field.is_string()) {
    return refuse(error_response(400, "a policy needs a 'name'"));
  }
  const std::string name = existing ? std::string(*existing) : name_field.get<std::string>();
  if (existing && !name_field.is_null() && name_field != name) {
    return refuse(error_response(400, "a policy keeps its name: delete it and create another"));
  }
  auto& list = next.policies;
  const auto found = std::find_if(list.begin(), list.end(),
                                  [&](const policy::Policy& p) { return p.name == name; });
  if (!existing) {
    if (Status valid = policy::check_policy_name(name); !valid.ok()) return refuse(valid);
    if (found != list.end()) {
      return refuse(error_response(409, "file pool policy '" + name + "' already exists"));
    }
    if (!body->contains("filter") && !body->contains("filter_flags")) {
      return refuse(error_response(400, "a policy needs a filter: 'filter' or 'filter_flags'"));
    }
  } else if (found == list.end()) {
    return refuse(no_policy(name));
  }
  std::size_t position = found == list.end() ? list.size() : found - list.begin();
  const policy::Policy base = found == list.end() ? policy::Policy{name, {}, {}} : *found;
  auto made = policy_from_json(*body, base, view);
  if (!made.ok()) return refuse(made.status());
  if (found != list.end()) list.erase(found);
  const json order = body->value("apply_order", json());
  if (!order.is_null()) {
    if (!order.is_number_unsigned() || order.get<std::uint64_t>() < 1 ||
        order.get<std::uint64_t>() > list.size() + 1) {
      return refuse(
          error_response(400, "'apply_order' must be 1 to " + std::to_string(list.size() + 1)));
    }
    position = order.get<std::size_t>() - 1;
  }
  list.insert(list.begin() + static_cast<std::ptrdiff_t>(position), *made);
  return change_then(policies_update(stored, next),
                     reply(existing ? 200 : 201, policy_to_json(*made, position + 1)));
}

Plan remove_policy(const GroupView& view, std::string_view name) {
  if (name == policy::kDefaultPolicy) {
    return refuse(error_response(400, "the default policy cannot be deleted"));
  }
  const StoredPolicies stored = policies_of(view);
  policy::PolicySet next = stored.set;
  const auto erased =
      std::erase_if(next.policies, [&](const policy::Policy& p) { return p.name == name; });
  if (erased == 0) return refuse(no_policy(name));
  return change_then(policies_update(stored, next), no_content());
}

}  // namespace

Reply list_policies(Context& context, Request) {
  co_return reply(200, policies_to_json(policies_of(context.view()).set));
}

Reply create_policy(Context& context, Request request) {
  return change_config(context.membership, [body = request.body](const GroupView& now) {
    return write_policy(now, body, std::nullopt);
  });
}

// "default" is the default policy.
Reply get_policy(Context& context, Request request) {
  const std::string& name = request.param("name");
  const policy::PolicySet set = policies_of(context.view()).set;
  if (name == policy::kDefaultPolicy) co_return reply(200, defaults_to_json(set.defaults));
  for (std::size_t i = 0; i < set.policies.size(); ++i) {
    if (set.policies[i].name == name) co_return reply(200, policy_to_json(set.policies[i], i + 1));
  }
  co_return no_policy(name);
}

Reply modify_policy(Context& context, Request request) {
  return change_config(context.membership,
                       [body = request.body, name = request.param("name")](const GroupView& now) {
                         return write_policy(now, body, name);
                       });
}

Reply delete_policy(Context& context, Request request) {
  return change_config(context.membership, [name = request.param("name")](const GroupView& now) {
    return remove_policy(now, name);
  });
}

// Which policy applies to the file now, and where each of its actions comes from.
Reply explain_file(Context& context, Request request) {
  auto resolving = resolve_path(context.store, request.rest);
  const Result<store::Attributes> file = co_await std::move(resolving);
  if (!file.ok()) co_return failure(file.status());
  const std::string path = shown_path(request.rest);
  const policy::Resolution r = applying_policy(context.view(), *file, path);
  json filter = nullptr;
  for (const policy::Policy& p : policies_of(context.view()).set.policies) {
    if (p.name == r.policy) filter = policy::to_expression(p.filter);
  }
  co_return reply(
      200,
      json{{"path", path},
           {"policy", r.policy},
           {"filter", filter},
           {"storage_target", {{"value", r.storage_target}, {"from", r.storage_target_from}}},
           {"protection",
            {{"value", std::to_string(r.protection) + "x"}, {"from", r.protection_from}}},
           {"access_pattern", {{"value", r.access_pattern}, {"from", r.access_pattern_from}}}});
}

}  // namespace tidepool::daemon::admin
