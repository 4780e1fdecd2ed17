#include "daemon/filepool.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "daemon/config_objects.h"
#include "daemon/jobs.h"
#include "daemon/stored_records.h"
#include "tiering/smartpools.h"

namespace tidepool::daemon {
namespace {

using nlohmann::json;

json protection_record(std::optional<std::uint32_t> copies) {
  return copies ? json(std::to_string(*copies) + "x") : json(nullptr);
}

json actions_record(const policy::Actions& a) {
  return json{{"storage_target", a.storage_target ? json(*a.storage_target) : json(nullptr)},
              {"protection", protection_record(a.protection)},
              {"access_pattern", a.access_pattern ? json(*a.access_pattern) : json(nullptr)}};
}

std::string encode_policies(const policy::PolicySet& set) {
  json list = json::array();
  for (const policy::Policy& p : set.policies) {
    json entry = actions_record(p.actions);
    entry["name"] = p.name;
    entry["filter"] = policy::to_expression(p.filter);
    list.push_back(std::move(entry));
  }
  const policy::Defaults& d = set.defaults;
  return json{{"version", kPoliciesVersion},
              {"policies", std::move(list)},
              {"default",
               {{"storage_target", d.storage_target},
                {"protection", protection_record(d.protection)},
                {"access_pattern", d.access_pattern}}}}
      .dump();
}

Result<std::optional<std::uint32_t>> stored_copies(const json& record) {
  TP_ASSIGN_OR_RETURN(const std::optional<std::string> text,
                      stored_optional_text(record, "protection"));
  if (!text) return std::optional<std::uint32_t>();
  if (*text == "2x") return std::optional<std::uint32_t>(2);
  if (*text == "3x") return std::optional<std::uint32_t>(3);
  return error(Errc::corrupt, "'protection' is neither 2x nor 3x");
}

Result<std::optional<std::string>> stored_pattern(const json& record) {
  TP_ASSIGN_OR_RETURN(std::optional<std::string> pattern,
                      stored_optional_text(record, "access_pattern"));
  if (pattern) TP_RETURN_IF_ERROR(policy::check_access_pattern(*pattern));
  return pattern;
}

// A storage target is taken as it was written: a pool or tier may have gone since, and the
// policy stays as it was.
Result<policy::Actions> decode_actions(const json& record) {
  policy::Actions actions;
  TP_ASSIGN_OR_RETURN(actions.storage_target, stored_optional_text(record, "storage_target"));
  TP_ASSIGN_OR_RETURN(actions.protection, stored_copies(record));
  TP_ASSIGN_OR_RETURN(actions.access_pattern, stored_pattern(record));
  return actions;
}

Result<policy::Policy> decode_policy(const json& record) {
  if (!record.is_object()) return error(Errc::corrupt, "a policy is not a JSON object");
  TP_RETURN_IF_ERROR(only_known_fields(
      record, {"name", "filter", "storage_target", "protection", "access_pattern"}));
  policy::Policy p;
  TP_ASSIGN_OR_RETURN(p.name, stored_text(record, "name"));
  TP_ASSIGN_OR_RETURN(const std::string expression, stored_text(record, "filter"));
  Result<policy::Filter> filter = policy::parse_expression(expression);
  if (!filter.ok()) return error(Errc::corrupt, "filter: " + filter.status().message());
  p.filter = std::move(filter).value();
  TP_ASSIGN_OR_RETURN(p.actions, decode_actions(record));
  return p;
}

// The default policy sets every action.
Result<policy::Defaults> decode_defaults(const json& record) {
  if (!record.is_object()) return error(Errc::corrupt, "the default policy is not a JSON object");
  TP_RETURN_IF_ERROR(only_known_fields(record, {"storage_target", "protection", "access_pattern"}));
  TP_ASSIGN_OR_RETURN(const policy::Actions actions, decode_actions(record));
  if (!actions.storage_target || !actions.protection || !actions.access_pattern) {
    return error(Errc::corrupt, "the default policy leaves an action unset");
  }
  return policy::Defaults{*actions.storage_target, *actions.protection, *actions.access_pattern};
}

Result<policy::PolicySet> decode_policies(std::string_view body) {
  const json record = json::parse(body, nullptr, false);
  if (!record.is_object()) return error(Errc::corrupt, "not a JSON object");
  TP_RETURN_IF_ERROR(record_version(record, kPoliciesVersion).status());
  TP_RETURN_IF_ERROR(only_known_fields(record, {"version", "policies", "default"}));
  const json list = record.value("policies", json());
  if (!list.is_array()) return error(Errc::corrupt, "'policies' is not a list");
  policy::PolicySet set;
  for (const json& entry : list) {
    TP_ASSIGN_OR_RETURN(policy::Policy p, decode_policy(entry));
    set.policies.push_back(std::move(p));
  }
  TP_ASSIGN_OR_RETURN(set.defaults, decode_defaults(record.value("default", json())));
  return set;
}

}  // namespace

StoredPolicies policies_of(const cluster::GroupView& view) {
  StoredPolicies stored;
  const cluster::ConfigObject* object = view.object(kFilepoolKind, kPoliciesName);
  if (object == nullptr) return stored;
  // Read as the default alone; the next change writes over it.
  stored.changed = object->changed;
  Result<policy::PolicySet> set = decode_policies(object->body);
  if (!set.ok()) {
    spdlog::error("the cluster's file pool policies do not read ({}): using the default alone",
                  set.status().message());
    return stored;
  }
  stored.set = std::move(set).value();
  return stored;
}

cluster::Change policies_update(const StoredPolicies& stored, const policy::PolicySet& set) {
  const std::string body = encode_policies(set);
  if (stored.changed == 0) {
    return cluster::Change::create_object(std::string(kFilepoolKind), std::string(kPoliciesName),
                                          body);
  }
  return cluster::Change::update_object(std::string(kFilepoolKind), std::string(kPoliciesName),
                                        body, stored.changed);
}

void PolicyPlacement::follow(const cluster::GroupView& view) {
  auto snapshot = std::make_shared<Snapshot>(Snapshot{policies_of(view).set, view});
  const policy::PolicySet& set = snapshot->policies;
  const bool places_any =
      set.defaults.storage_target != policy::kAnywhere ||
      std::any_of(set.policies.begin(), set.policies.end(), [](const policy::Policy& p) {
        return p.actions.storage_target && *p.actions.storage_target != policy::kAnywhere;
      });
  const bool needs_path = !set.policies.empty();
  std::lock_guard lock(mutex_);
  snapshot_ = std::move(snapshot);
  places_any_ = places_any;
  needs_path_ = needs_path;
}

bool PolicyPlacement::places_any() { return places_any_; }

bool PolicyPlacement::needs_path() { return needs_path_; }

std::optional<store::PoolChoice> PolicyPlacement::place(const store::NewFile& file) {
  std::shared_ptr<const Snapshot> snapshot;
  {
    std::lock_guard lock(mutex_);
    snapshot = snapshot_;
  }
  if (!snapshot) return std::nullopt;
  store::Attributes created;
  created.uid = file.uid;
  created.atime_ns = created.mtime_ns = created.ctime_ns = created.birth_ns = file.now_ns;
  const std::int64_t now = file.now_ns / 1'000'000'000;
  const policy::Resolution wanted =
      policy::resolve(snapshot->policies, tiering::facts_of(created, file.path), now);
  const std::optional<std::string> pool =
      pool_for(snapshot->view, wanted.storage_target, std::string(store::kWithShard));
  if (!pool || *pool == store::kWithShard) return std::nullopt;
  return store::PoolChoice{*pool, wanted.protection};
}

}  // namespace tidepool::daemon
