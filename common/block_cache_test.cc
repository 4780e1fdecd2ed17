// The block cache on its own: what it keeps, what it evicts and when, and that it never holds
// more than its budget whatever the handles pin.
#include "common/block_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

namespace tidepool {
namespace {

constexpr std::size_t kBlock = 4096;

std::vector<std::byte> block_of(std::uint64_t inode, std::uint64_t index) {
  std::vector<std::byte> bytes(kBlock);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<std::byte>((inode * 31 + index * 7 + i) & 0xff);
  }
  return bytes;
}

bool holds(const BlockCache::Handle& handle, std::uint64_t inode, std::uint64_t index) {
  const auto expected = block_of(inode, index);
  return handle && handle.bytes().size() == expected.size() &&
         std::memcmp(handle.bytes().data(), expected.data(), expected.size()) == 0;
}

// A cache with room for `blocks` blocks in one shard, so that eviction order is exact.
BlockCache one_shard_for(std::size_t blocks) {
  const std::size_t charge = kBlock + 256;  // a block and, generously, its entry
  return BlockCache(blocks * charge, 1);
}

TEST(BlockCacheTest, ABlockFilledInPlaceKeepsWhatWasFilledAndChargesItsRoom) {
  BlockCache cache = one_shard_for(4);
  BlockCache::Filling filling = BlockCache::allocate({7, 1}, kBlock);
  ASSERT_EQ(filling.bytes().size(), kBlock);
  const auto expected = block_of(7, 1);
  std::memcpy(filling.bytes().data(), expected.data(), 100);
  const BlockCache::Handle kept = cache.insert(std::move(filling), 100);
  ASSERT_TRUE(kept.cached());
  ASSERT_EQ(kept.bytes().size(), 100u);
  EXPECT_EQ(std::memcmp(kept.bytes().data(), expected.data(), 100), 0);
  // The budget pays for the room the bytes took, not for the 100 of them filled.
  EXPECT_GE(cache.statistics().bytes, kBlock);
  const BlockCache::Handle found = cache.lookup({7, 1});
  ASSERT_TRUE(found);
  EXPECT_EQ(found.bytes().size(), 100u);
  // One never handed over is freed (ASan would see it otherwise).
  BlockCache::Filling dropped = BlockCache::allocate({7, 2}, kBlock);
}

TEST(BlockCacheTest, ABlockTakenWhereItLiesKeepsItsMemoryUntilDroppedAndLetGo) {
  BlockCache cache = one_shard_for(2);
  // A received message: a header, the block's bytes, room after them.
  auto message = std::make_shared<std::vector<std::byte>>(kBlock + 100);
  const auto expected = block_of(3, 0);
  std::memcpy(message->data() + 40, expected.data(), kBlock);
  std::weak_ptr<std::vector<std::byte>> alive = message;
  const std::span<const std::byte> bytes(message->data() + 40, kBlock);
  BlockCache::Handle kept = cache.insert({3, 0}, std::move(message), bytes, kBlock + 100);
  ASSERT_TRUE(kept.cached());
  EXPECT_EQ(kept.bytes().data(), bytes.data());  // not copied
  EXPECT_TRUE(holds(cache.lookup({3, 0}), 3, 0));
  // The budget pays for the memory the message holds.
  EXPECT_GE(cache.statistics().bytes, kBlock + 100);
  // Dropped while a reader holds it: the reader keeps the message, and then it goes.
  cache.erase({3, 0});
  EXPECT_FALSE(cache.contains({3, 0}));
  EXPECT_TRUE(holds(kept, 3, 0));
  EXPECT_FALSE(alive.expired());
  kept.reset();
  EXPECT_TRUE(alive.expired());
  // Evicted, with no reader: it goes too.
  auto second = std::make_shared<std::vector<std::byte>>(block_of(3, 0));
  alive = second;
  const std::span<const std::byte> second_bytes(second->data(), kBlock);
  cache.insert({3, 0}, std::move(second), second_bytes, kBlock);
  cache.insert({3, 1}, block_of(3, 1));
  cache.insert({3, 2}, block_of(3, 2));
  EXPECT_FALSE(cache.contains({3, 0}));
  EXPECT_TRUE(alive.expired());
}

TEST(BlockCacheTest, ABlockInsertedIsFoundWithItsBytes) {
  BlockCache cache(1 << 20);
  EXPECT_FALSE(cache.lookup({7, 0}));
  EXPECT_FALSE(cache.contains({7, 0}));
  {
    auto inserted = cache.insert({7, 0}, block_of(7, 0));
    EXPECT_TRUE(inserted.cached());
  }
  EXPECT_TRUE(cache.contains({7, 0}));
  auto found = cache.lookup({7, 0});
  ASSERT_TRUE(found);
  EXPECT_TRUE(holds(found, 7, 0));
  EXPECT_EQ(found.key(), (BlockKey{7, 0}));
  const BlockCacheStatistics stats = cache.statistics();
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.blocks, 1u);
  EXPECT_GT(stats.pinned_bytes, kBlock);
}

TEST(BlockCacheTest, TheLeastRecentlyUsedBlockGoesFirstAndTheBudgetHolds) {
  BlockCache cache = one_shard_for(3);
  for (std::uint64_t i = 0; i < 3; ++i) cache.insert({1, i}, block_of(1, i));
  // Block 0 is used again: block 1 is now the oldest.
  cache.lookup({1, 0});
  cache.insert({1, 3}, block_of(1, 3));
  EXPECT_FALSE(cache.lookup({1, 1}));
  EXPECT_TRUE(holds(cache.lookup({1, 0}), 1, 0));
  EXPECT_TRUE(holds(cache.lookup({1, 3}), 1, 3));
  EXPECT_LE(cache.statistics().bytes, cache.capacity());
  EXPECT_EQ(cache.statistics().evictions, 1u);
}

TEST(BlockCacheTest, PinnedBlocksAreNeverEvictedAndAFullyPinnedCacheIsBypassed) {
  BlockCache cache = one_shard_for(2);
  auto first = cache.insert({1, 0}, block_of(1, 0));
  auto second = cache.insert({1, 1}, block_of(1, 1));
  // No room without evicting a block a reply still uses: the third is served, not kept.
  auto third = cache.insert({1, 2}, block_of(1, 2));
  EXPECT_TRUE(holds(third, 1, 2));
  EXPECT_FALSE(third.cached());
  EXPECT_TRUE(holds(first, 1, 0));
  EXPECT_TRUE(holds(second, 1, 1));
  EXPECT_EQ(cache.statistics().bypassed, 1u);
  EXPECT_LE(cache.statistics().bytes, cache.capacity());
  // Once a reply is done with its block, it can be evicted for a new one.
  first.reset();
  auto fourth = cache.insert({1, 3}, block_of(1, 3));
  EXPECT_TRUE(fourth.cached());
  EXPECT_FALSE(cache.lookup({1, 0}));
}

TEST(BlockCacheTest, ABlockThatCannotFitIsServedButNotKeptAndEvictsNothing) {
  BlockCache cache = one_shard_for(2);
  cache.insert({1, 0}, block_of(1, 0));
  auto pinned = cache.insert({1, 1}, block_of(1, 1));
  // Larger than all the room the pinned block leaves: the other block stays.
  const std::vector<std::byte> large(2 * kBlock);
  auto handle = cache.insert({2, 0}, large);
  EXPECT_EQ(handle.bytes().size(), large.size());
  EXPECT_FALSE(handle.cached());
  EXPECT_TRUE(cache.lookup({1, 0}));
  EXPECT_EQ(cache.statistics().evictions, 0u);
}

// The smallest L1 (1 MiB) and L2 (64 MiB) a node takes, filled with stripe units: each keeps
// its budget's worth but for what its shards' rounding leaves, at most a unit a shard.
TEST(BlockCacheTest, SmallCachesOfStripeUnitsKeepTheirBudgetsWorth) {
  constexpr std::size_t kUnit = 128 * 1024;
  for (const std::size_t budget : {std::size_t{1} << 20, std::size_t{64} << 20}) {
    BlockCache cache(budget);
    for (std::uint64_t unit = 0; unit < 2 * budget / kUnit; ++unit) {
      cache.insert(BlockCache::allocate({1, unit}, kUnit), kUnit);
    }
    const std::size_t shards = std::max<std::size_t>(budget / BlockCache::kMinShardBytes, 1);
    EXPECT_LE(cache.statistics().bytes, budget);
    EXPECT_GE(cache.statistics().bytes, budget - shards * (kUnit + 256)) << budget;
  }
}

TEST(BlockCacheTest, DropBehindBlocksAreEvictedBeforeOlderOnes) {
  BlockCache cache = one_shard_for(3);
  cache.insert({1, 0}, block_of(1, 0));
  cache.insert({2, 0}, block_of(2, 0));
  {
    // A stream read this block and will not be back.
    auto streamed = cache.insert({2, 1}, block_of(2, 1));
    streamed.drop_behind();
  }
  cache.insert({3, 0}, block_of(3, 0));
  EXPECT_FALSE(cache.lookup({2, 1}));
  EXPECT_TRUE(cache.lookup({1, 0}));
  EXPECT_TRUE(cache.lookup({2, 0}));
  // A block another reader takes again is no longer done with.
  {
    auto streamed = cache.lookup({3, 0});
    streamed.drop_behind();
  }
  cache.lookup({3, 0});
  cache.insert({4, 0}, block_of(4, 0));
  EXPECT_TRUE(cache.lookup({3, 0}));
}

TEST(BlockCacheTest, ErasingAFileDropsItsBlocksOnlyAndHandlesKeepWhatTheyHold) {
  BlockCache cache(1 << 20, 4);
  for (std::uint64_t i = 0; i < 20; ++i) {
    cache.insert({5, i}, block_of(5, i));
    cache.insert({6, i}, block_of(6, i));
  }
  auto reading = cache.lookup({5, 3});
  cache.erase_file(5);
  for (std::uint64_t i = 0; i < 20; ++i) {
    EXPECT_FALSE(cache.lookup({5, i})) << i;
    EXPECT_TRUE(holds(cache.lookup({6, i}), 6, i)) << i;
  }
  EXPECT_TRUE(holds(reading, 5, 3));
  EXPECT_FALSE(reading.cached());
  EXPECT_EQ(cache.statistics().invalidations, 20u);
  cache.erase({6, 0});
  EXPECT_FALSE(cache.lookup({6, 0}));
  reading.reset();
  EXPECT_EQ(cache.statistics().blocks, 19u);
}

TEST(BlockCacheTest, ANewerCopyReplacesTheOldOneWhichItsReaderKeeps) {
  BlockCache cache(1 << 20);
  auto old = cache.insert({1, 0}, block_of(1, 0));
  auto fresh = cache.insert({1, 0}, block_of(9, 9));
  EXPECT_TRUE(holds(old, 1, 0));
  EXPECT_FALSE(old.cached());
  EXPECT_TRUE(holds(cache.lookup({1, 0}), 9, 9));
  EXPECT_EQ(cache.statistics().blocks, 1u);
}

TEST(BlockCacheTest, ClearingDropsWhatNobodyHolds) {
  BlockCache cache(1 << 20);
  auto held = cache.insert({1, 0}, block_of(1, 0));
  cache.insert({1, 1}, block_of(1, 1));
  cache.clear();
  EXPECT_FALSE(cache.lookup({1, 1}));
  EXPECT_TRUE(cache.lookup({1, 0}));
  EXPECT_EQ(cache.statistics().blocks, 1u);
}

TEST(BlockCacheTest, ManyThreadsStayWithinTheBudgetAndReadWhatWasWritten) {
  BlockCache cache(256 * (kBlock + 256), 8);
  std::atomic<bool> wrong{false};
  std::atomic<std::uint64_t> over_budget{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 random(static_cast<std::uint64_t>(t));
      std::vector<BlockCache::Handle> pinned;
      for (int i = 0; i < 20'000; ++i) {
        const BlockKey key{random() % 8, random() % 128};
        BlockCache::Handle handle = cache.lookup(key);
        if (!handle) handle = cache.insert(key, block_of(key.inode, key.block));
        if (!holds(handle, key.inode, key.block)) wrong = true;
        if (random() % 4 == 0) handle.drop_behind();
        if (random() % 8 == 0) cache.erase_file(random() % 8);
        // Some readers hold on for a while, as replies in flight do.
        if (pinned.size() < 16) pinned.push_back(std::move(handle));
        if (random() % 16 == 0) pinned.clear();
        if (cache.statistics().bytes > cache.capacity()) over_budget++;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_FALSE(wrong);
  EXPECT_EQ(over_budget, 0u);
  EXPECT_EQ(cache.statistics().pinned_bytes, 0u);
}

}  // namespace
}  // namespace tidepool
