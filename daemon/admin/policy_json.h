// File pool policies as the admin API shows and takes them (daemon/admin_api.md: POLICY,
// DEFAULTPOLICY). The group view keeps them in a form of its own (daemon/filepool.h).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>

#include "cluster/group.h"
#include "common/status.h"
#include "policy/policies.h"
#include "store/store.h"

namespace tidepool::daemon::admin {

// {"name", "apply_order": 1-based, "filter": the readable expression, "storage_target",
// "protection": "2x"|"3x", "access_pattern"}; an action the policy leaves unset is null.
nlohmann::json policy_to_json(const policy::Policy& policy, std::size_t apply_order);
// {"name": "default", "storage_target", "protection", "access_pattern"}.
nlohmann::json defaults_to_json(const policy::Defaults& defaults);
// {"policies": [...], "default": {...}}.
nlohmann::json policies_to_json(const policy::PolicySet& set);

// `base` with what `body` sets: "filter" (an expression) or "filter_flags" (OneFS's flags, a
// list of strings), "storage_target" (a node pool or tier of `view`, or "anywhere"),
// "protection" ("2x" or "3x"), "access_pattern"; null unsets an action. Unknown fields and bad
// values are invalid_argument naming them.
Result<policy::Policy> policy_from_json(const nlohmann::json& body, policy::Policy base,
                                        const cluster::GroupView& view);
// The same for the default policy, whose actions cannot be unset and which has no filter.
Result<policy::Defaults> defaults_from_json(const nlohmann::json& body, policy::Defaults base,
                                            const cluster::GroupView& view);

// Which policy of `view` applies to `file`, at `path`, now, and where each action comes from.
policy::Resolution applying_policy(const cluster::GroupView& view, const store::Attributes& file,
                                   std::string path);

}  // namespace tidepool::daemon::admin
