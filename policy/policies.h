// File pool policies (issue 7): an ordered list of filters, each with the actions it asks for
// the files it matches, and the default policy, always last, whose actions fill in what the
// matching policy leaves unset. The first policy whose filter matches a file wins.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "policy/filter.h"

namespace tidepool::policy {

inline constexpr std::string_view kDefaultPolicy = "default";
// A storage target that lets the file live in any node pool.
inline constexpr std::string_view kAnywhere = "anywhere";

// What a policy asks for; an action left unset comes from the default policy.
struct Actions {
  std::optional<std::string> storage_target;  // a node pool or tier, or kAnywhere
  std::optional<std::uint32_t> protection;    // copies of every stripe unit: 2 (2x) or 3 (3x)
  std::optional<std::string> access_pattern;  // random, concurrency or streaming
  bool operator==(const Actions&) const = default;
};

struct Policy {
  std::string name;
  Filter filter;
  Actions actions;
  bool operator==(const Policy&) const = default;
};

// The default policy's actions: every one set.
struct Defaults {
  std::string storage_target = std::string(kAnywhere);
  std::uint32_t protection = 2;
  std::string access_pattern = "concurrency";
  bool operator==(const Defaults&) const = default;
};

struct PolicySet {
  std::vector<Policy> policies;  // in the order they are tried
  Defaults defaults;
  bool operator==(const PolicySet&) const = default;
};

// What applies to one file, and which policy each action came from (`explain`).
struct Resolution {
  std::string policy;  // the first whose filter matched, or kDefaultPolicy
  std::string storage_target;
  std::string storage_target_from;
  std::uint32_t protection = 0;
  std::string protection_from;
  std::string access_pattern;
  std::string access_pattern_from;
};
Resolution resolve(const PolicySet& set, const FileFacts& facts, std::int64_t now);

// 1 to 63 of A-Z a-z 0-9 - _, and not "default"; invalid_argument saying so.
Status check_policy_name(std::string_view name);
// invalid_argument unless `copies` is 2 or 3.
Status check_protection(std::uint32_t copies);
// invalid_argument unless `pattern` is random, concurrency or streaming.
Status check_access_pattern(std::string_view pattern);

}  // namespace tidepool::policy
