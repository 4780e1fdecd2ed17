// The bounded caches the shard thread fills and any thread reads
// (store/internal/attribute_cache.h).
#include "store/internal/attribute_cache.h"

#include <gtest/gtest.h>

namespace tidepool::store::internal {
namespace {

TEST(ShardedCacheTest, FindsWhatWasPutUntilItIsDroppedOrCleared) {
  ShardedCache<InodeId, int> cache(1000);
  for (InodeId inode = 1; inode <= 100; ++inode) cache.put(inode, static_cast<int>(inode) * 2);
  for (InodeId inode = 1; inode <= 100; ++inode) EXPECT_EQ(cache.find(inode), inode * 2);
  EXPECT_EQ(cache.find(101), std::nullopt);
  cache.put(7, 70);
  EXPECT_EQ(cache.find(7), 70);
  cache.drop(7);
  EXPECT_EQ(cache.find(7), std::nullopt);
  cache.clear();
  EXPECT_EQ(cache.find(8), std::nullopt);
}

TEST(ShardedCacheTest, HoldsNoMoreThanItsCapacityAndKeepsTheNewest) {
  constexpr std::size_t kCapacity = 160;
  ShardedCache<InodeId, InodeId> cache(kCapacity);
  constexpr InodeId kPut = 100000;
  for (InodeId inode = 1; inode <= kPut; ++inode) cache.put(inode, inode);
  std::size_t held = 0;
  for (InodeId inode = 1; inode <= kPut; ++inode) {
    if (const auto found = cache.find(inode)) {
      EXPECT_EQ(*found, inode);
      ++held;
    }
  }
  // Each of its 16 parts holds capacity / 16 + 1 at most; the last put is always held.
  EXPECT_LE(held, kCapacity + 16);
  EXPECT_GT(held, 0u);
  EXPECT_EQ(cache.find(kPut), kPut);
}

TEST(ShardedCacheTest, KeysOfManyFieldsAreFoundByTheirWholeValue) {
  NameCache names(100);
  names.put({1, "a"}, 10);
  names.put({2, "a"}, 20);
  names.put({1, "b"}, 30);
  EXPECT_EQ(names.find({1, "a"}), 10u);
  EXPECT_EQ(names.find({2, "a"}), 20u);
  EXPECT_EQ(names.find({1, "b"}), 30u);
  EXPECT_EQ(names.find({2, "b"}), std::nullopt);
}

}  // namespace
}  // namespace tidepool::store::internal
