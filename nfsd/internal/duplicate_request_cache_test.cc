#include "nfsd/internal/duplicate_request_cache.h"

#include <gtest/gtest.h>

namespace tidepool::nfsd {
namespace {

using Outcome = DuplicateRequestCache::Outcome;

TEST(DuplicateRequestCache, RetransmissionGetsTheOriginalReply) {
  DuplicateRequestCache cache(16);
  RequestKey key{0x7f000001, 800, 42, 8, 0xabcd};
  std::vector<std::uint8_t> results;
  ASSERT_EQ(cache.begin(key, results), Outcome::run);
  EXPECT_EQ(cache.begin(key, results), Outcome::in_progress);
  cache.finish(key, {1, 2, 3});
  ASSERT_EQ(cache.begin(key, results), Outcome::replay);
  EXPECT_EQ(results, (std::vector<std::uint8_t>{1, 2, 3}));
}

TEST(DuplicateRequestCache, SameXidFromAnotherConnectionOrWithOtherArgumentsRuns) {
  DuplicateRequestCache cache(16);
  std::vector<std::uint8_t> results;
  RequestKey first{0x7f000001, 800, 42, 7, 1};
  ASSERT_EQ(cache.begin(first, results), Outcome::run);
  cache.finish(first, {9});
  RequestKey other_port = first;
  other_port.port = 801;
  EXPECT_EQ(cache.begin(other_port, results), Outcome::run);
  RequestKey other_arguments = first;
  other_arguments.arguments_crc = 2;
  EXPECT_EQ(cache.begin(other_arguments, results), Outcome::run);
}

TEST(DuplicateRequestCache, OldestEntriesAreForgottenBeyondCapacity) {
  DuplicateRequestCache cache(2);
  std::vector<std::uint8_t> results;
  for (std::uint32_t xid = 1; xid <= 3; ++xid) {
    RequestKey k{1, 1, xid, 8, 0};
    ASSERT_EQ(cache.begin(k, results), Outcome::run);
    cache.finish(k, {static_cast<std::uint8_t>(xid)});
  }
  EXPECT_EQ(cache.begin({1, 1, 1, 8, 0}, results), Outcome::run);
  EXPECT_EQ(cache.begin({1, 1, 3, 8, 0}, results), Outcome::replay);
}

}  // namespace
}  // namespace tidepool::nfsd
