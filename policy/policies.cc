#include "policy/policies.h"

#include <algorithm>
#include <cctype>

namespace tidepool::policy {

Resolution resolve(const PolicySet& set, const FileFacts& facts, std::int64_t now) {
  const auto matched = std::find_if(set.policies.begin(), set.policies.end(),
                                    [&](const Policy& p) { return matches(p.filter, facts, now); });
  Resolution r;
  const std::string fallback(kDefaultPolicy);
  r.policy = matched == set.policies.end() ? fallback : matched->name;
  const Actions none;
  const Actions& actions = matched == set.policies.end() ? none : matched->actions;
  r.storage_target = actions.storage_target.value_or(set.defaults.storage_target);
  r.storage_target_from = actions.storage_target ? r.policy : fallback;
  r.protection = actions.protection.value_or(set.defaults.protection);
  r.protection_from = actions.protection ? r.policy : fallback;
  r.access_pattern = actions.access_pattern.value_or(set.defaults.access_pattern);
  r.access_pattern_from = actions.access_pattern ? r.policy : fallback;
  return r;
}

Status check_policy_name(std::string_view name) {
  const bool valid =
      !name.empty() && name.size() <= 63 && std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
      });
  if (!valid) {
    return error(Errc::invalid_argument,
                 "'" + std::string(name) + "' is not a policy name (1-63 of A-Z a-z 0-9 - _)");
  }
  if (name == kDefaultPolicy) {
    return error(Errc::invalid_argument, "'default' names the default policy, which is built in");
  }
  return {};
}

Status check_protection(std::uint32_t copies) {
  if (copies == 2 || copies == 3) return {};
  return error(Errc::invalid_argument, "requested protection is 2x or 3x");
}

Status check_access_pattern(std::string_view pattern) {
  if (pattern == "random" || pattern == "concurrency" || pattern == "streaming") return {};
  return error(Errc::invalid_argument, "an access pattern is random, concurrency or streaming");
}

}  // namespace tidepool::policy
