// The cluster's file pool policies (policy/policies.h) as the group view keeps them — one
// object holding the ordered list and the default policy, so that every change rewrites the
// whole list at once and a change made on an older view fails instead of undoing a newer one —
// and as the admin API shows and takes them.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cluster/group.h"
#include "common/status.h"
#include "policy/policies.h"
#include "store/store.h"

namespace tidepool::daemon {

inline constexpr std::string_view kFilepoolKind = "filepool";
inline constexpr std::string_view kPoliciesName = "policies";

struct StoredPolicies {
  policy::PolicySet set;
  // When the object was last written; 0 while there is none and the cluster has only the
  // built-in default.
  cluster::Epoch changed = 0;
};
// An object that does not parse (written by a newer release) reads as the built-in default,
// logged; a change then writes over it.
StoredPolicies policies_of(const cluster::GroupView& view);
// The change that stores `set` over `stored` as it was read.
cluster::Change policies_update(const StoredPolicies& stored, const policy::PolicySet& set);

// Placement on create: a new file's data goes to the node pool its policy's storage target names
// (as the SmartPools job would move it; daemon/jobs.h pool_for), at the policy's protection.
// Works from the last view followed; thread-safe.
class PolicyPlacement final : public store::NewFilePlacement {
 public:
  void follow(const cluster::GroupView& view);
  bool places_any() override;
  std::optional<store::PoolChoice> place(const store::NewFile& file) override;

 private:
  // What the last view says, taken whole, so creates never wait on a view being followed.
  struct Snapshot {
    policy::PolicySet policies;
    cluster::GroupView view;
  };
  std::mutex mutex_;
  std::shared_ptr<const Snapshot> snapshot_;  // guarded by mutex_; null: none followed yet
  std::atomic<bool> places_any_{false};
};

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

}  // namespace tidepool::daemon
