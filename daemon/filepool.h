// The cluster's file pool policies (policy/policies.h) as the group view keeps them — one
// object holding the ordered list and the default policy, so that every change rewrites the
// whole list at once and a change made on an older view fails instead of undoing a newer one —
// and where new files are placed by them. The admin API shows and takes them in a form of its
// own (daemon/admin/policy_json.h).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "cluster/group.h"
#include "common/status.h"
#include "policy/policies.h"
#include "store/store.h"

namespace tidepool::daemon {

inline constexpr std::string_view kFilepoolKind = "filepool";
inline constexpr std::string_view kPoliciesName = "policies";
// The object's body (daemon/stored_records.h):
//   {"version": 1,
//    "policies": [{"name", "filter": an expression (policy/filter.h), "storage_target": NAME|null,
//                  "protection": "2x"|"3x"|null, "access_pattern": NAME|null}, ...in order],
//    "default": {"storage_target": NAME, "protection": "2x"|"3x", "access_pattern": NAME}}
// A body without "version" (0) was written before there was one, as the admin API showed the
// policies then: it has the same fields, and reads the same. Version 1 keeps those fields so that
// a node still on that release reads what this one writes.
inline constexpr std::uint32_t kPoliciesVersion = 1;

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
  // Only the policies' filters look at a path: the default policy alone places every file.
  bool needs_path() override;
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
  std::atomic<bool> needs_path_{false};
};

}  // namespace tidepool::daemon
