#include "policy/policies.h"

#include <gtest/gtest.h>

namespace tidepool::policy {
namespace {

constexpr std::int64_t kNow = 1'750'000'000;

Policy policy(std::string name, std::string_view filter, Actions actions) {
  auto parsed = parse_expression(filter);
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  return Policy{std::move(name), parsed.ok() ? *parsed : Filter{}, std::move(actions)};
}

FileFacts file(std::string path, std::uint64_t size, std::int64_t accessed_days_ago) {
  FileFacts f;
  f.path = std::move(path);
  f.size = size;
  f.atime = kNow - accessed_days_ago * 86400;
  return f;
}

TEST(PolicySet, TheFirstMatchingPolicyWinsAndTheDefaultFillsWhatItLeavesUnset) {
  PolicySet set;
  set.policies.push_back(policy("cold", "accessed > 30d", {.storage_target = "cold-tier"}));
  set.policies.push_back(
      policy("images", "name =~ *.jpg",
             {.storage_target = "hot-tier", .protection = 3, .access_pattern = "random"}));
  set.defaults.storage_target = "hot-tier";

  const Resolution old_image = resolve(set, file("/ifs/a/cat.jpg", 1000, 90), kNow);
  EXPECT_EQ(old_image.policy, "cold") << "tried in order: cold before images";
  EXPECT_EQ(old_image.storage_target, "cold-tier");
  EXPECT_EQ(old_image.storage_target_from, "cold");
  EXPECT_EQ(old_image.protection, 2u);
  EXPECT_EQ(old_image.protection_from, "default");
  EXPECT_EQ(old_image.access_pattern, "concurrency");

  const Resolution new_image = resolve(set, file("/ifs/a/cat.jpg", 1000, 1), kNow);
  EXPECT_EQ(new_image.policy, "images");
  EXPECT_EQ(new_image.protection, 3u);
  EXPECT_EQ(new_image.protection_from, "images");
  EXPECT_EQ(new_image.access_pattern, "random");

  const Resolution other = resolve(set, file("/ifs/a/notes.txt", 10, 1), kNow);
  EXPECT_EQ(other.policy, "default");
  EXPECT_EQ(other.storage_target, "hot-tier");
  EXPECT_EQ(other.storage_target_from, "default");
}

TEST(PolicySet, NamesProtectionAndPatternsAreChecked) {
  EXPECT_TRUE(check_policy_name("cold_data-2").ok());
  EXPECT_EQ(check_policy_name("default").message(),
            "'default' names the default policy, which is built in");
  EXPECT_FALSE(check_policy_name("").ok());
  EXPECT_FALSE(check_policy_name("a b").ok());
  EXPECT_FALSE(check_policy_name(std::string(64, 'a')).ok());
  EXPECT_TRUE(check_protection(3).ok());
  EXPECT_EQ(check_protection(4).message(), "requested protection is 2x or 3x");
  EXPECT_TRUE(check_access_pattern("streaming").ok());
  EXPECT_FALSE(check_access_pattern("fast").ok());
}

}  // namespace
}  // namespace tidepool::policy
