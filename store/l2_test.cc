#include "store/l2.h"

#include <gtest/gtest.h>

#include <cstring>

namespace tidepool::store {
namespace {

void keep_unit(L2& l2, std::uint64_t space, std::uint64_t inode, std::uint64_t unit,
               std::uint8_t fill) {
  BlockCache::Filling bytes = L2::allocate(space, inode, unit);
  std::memset(bytes.bytes().data(), fill, kCachedUnitBytes);
  l2.keep(std::move(bytes));
}

TEST(L2, AUnitGoesInOnlyOnItsSecondRead) {
  const auto l2 = L2::make(8u << 20);
  const std::uint64_t space = l2->new_space();
  EXPECT_FALSE(l2->read_before(space, 5, 0));
  EXPECT_TRUE(l2->read_before(space, 5, 0));
  EXPECT_FALSE(l2->read_before(l2->new_space(), 5, 0)) << "another space's unit";
}

TEST(L2, EachSpaceFindsOnlyItsOwnUnits) {
  const auto l2 = L2::make(8u << 20);
  const std::uint64_t shard = l2->new_space();
  const std::uint64_t pool = l2->new_space();
  keep_unit(*l2, shard, 7, 0, 1);
  keep_unit(*l2, shard, 7, 1, 2);
  const CachedUnits found = l2->lookup(shard, 7, 100, kCachedUnitBytes);
  ASSERT_EQ(found.units.size(), 2u);
  const auto pieces = found.pieces(100, kCachedUnitBytes);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].size(), kCachedUnitBytes - 100);
  EXPECT_EQ(pieces[0][0], 1);
  EXPECT_EQ(pieces[1].size(), 100u);
  EXPECT_EQ(pieces[1][0], 2);
  EXPECT_TRUE(l2->lookup(pool, 7, 0, 1).units.empty());
  EXPECT_TRUE(l2->lookup(shard, 7, 0, 3 * kCachedUnitBytes).units.empty()) << "unit 2 is missing";
  l2->forget(shard, 7, 1);
  EXPECT_TRUE(l2->lookup(shard, 7, kCachedUnitBytes, 1).units.empty());
  keep_unit(*l2, pool, 7, 0, 3);
  l2->forget_file(7);
  EXPECT_TRUE(l2->lookup(shard, 7, 0, 1).units.empty());
  EXPECT_TRUE(l2->lookup(pool, 7, 0, 1).units.empty());
}

TEST(L2, RepliesPinAQuarterOfTheBudgetAtMostOverAllSpaces) {
  const auto l2 = L2::make(4 * 4 * kCachedUnitBytes);  // replies may pin 4 units
  const std::uint64_t shard = l2->new_space();
  const std::uint64_t pool = l2->new_space();
  for (std::uint64_t u = 0; u < 3; ++u) {
    keep_unit(*l2, shard, 1, u, 1);
    keep_unit(*l2, pool, 1, u, 1);
  }
  auto first = l2->pin_for_reply(l2->lookup(shard, 1, 0, 3 * kCachedUnitBytes),
                                 3 * kCachedUnitBytes);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->units.size(), 3u);
  EXPECT_EQ(l2->pin_for_reply(l2->lookup(pool, 1, 0, 2 * kCachedUnitBytes), 2 * kCachedUnitBytes),
            nullptr)
      << "a second store's replies share the one budget";
  auto second = l2->pin_for_reply(l2->lookup(pool, 1, 0, kCachedUnitBytes), kCachedUnitBytes);
  ASSERT_NE(second, nullptr);
  first.reset();
  EXPECT_NE(l2->pin_for_reply(l2->lookup(pool, 1, 0, 3 * kCachedUnitBytes), 3 * kCachedUnitBytes),
            nullptr)
      << "a reply gone gives its share back";
  EXPECT_EQ(l2->statistics().blocks, 6u);
}

TEST(L2, AFlushDropsEveryUnitAndEveryMark) {
  const auto l2 = L2::make(8u << 20);
  const std::uint64_t space = l2->new_space();
  ASSERT_FALSE(l2->read_before(space, 3, 0));
  keep_unit(*l2, space, 3, 0, 9);
  ASSERT_EQ(l2->usage().cached_bytes, l2->statistics().bytes);
  ASSERT_GE(l2->usage().cached_bytes, kCachedUnitBytes);
  l2->clear();
  EXPECT_TRUE(l2->lookup(space, 3, 0, 1).units.empty());
  EXPECT_EQ(l2->usage().cached_bytes, 0u);
  EXPECT_FALSE(l2->read_before(space, 3, 0)) << "the doorkeeper forgot the read";
}

TEST(L2, WithoutABudgetItKeepsNothingAndStillCountsReads) {
  const auto l2 = L2::make(0);
  EXPECT_FALSE(l2->keeps_units());
  const std::uint64_t space = l2->new_space();
  EXPECT_FALSE(l2->read_before(space, 1, 0));
  EXPECT_FALSE(l2->read_before(space, 1, 0));
  keep_unit(*l2, space, 1, 0, 1);
  EXPECT_TRUE(l2->lookup(space, 1, 0, 1).units.empty());
  EXPECT_EQ(l2->usage().budget_bytes, 0u);
  l2->reads().data_bytes_read += 10;
  EXPECT_EQ(l2->reads().data_bytes_read.load(), 10u);
}

}  // namespace
}  // namespace tidepool::store
