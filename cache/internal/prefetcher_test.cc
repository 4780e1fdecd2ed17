// SmartRead's advice for the readers training jobs are: sequential streams through large
// record files, several per file, and random small reads that must not pay for prefetch.
#include "cache/internal/prefetcher.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>

namespace tidepool::cache {
namespace {

constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = 1024 * KiB;
constexpr std::uint64_t GiB = 1024 * MiB;
constexpr std::uint64_t kFile = 42;
constexpr std::uint64_t kClient = 7;

// Reads `count` sequential `size`-byte READs from `start`; returns how far ahead of the last
// read the advice has reached.
std::uint64_t read_sequentially(Prefetcher& prefetcher, AccessPattern pattern, std::uint64_t start,
                                std::uint64_t size, int count, std::uint64_t* advised = nullptr) {
  std::uint64_t fetched_to = 0;
  std::uint64_t offset = start;
  for (int i = 0; i < count; ++i, offset += size) {
    const PrefetchAdvice advice =
        prefetcher.on_read(kFile, kClient, offset, size, 1 * GiB, pattern, 0);
    if (!advice.empty()) {
      EXPECT_GE(advice.start, std::max(fetched_to, offset + size)) << "fetched twice";
      fetched_to = advice.end;
      if (advised) *advised += advice.size();
    }
  }
  return fetched_to > offset ? fetched_to - offset : 0;
}

TEST(PrefetcherTest, ASequentialReaderIsReadAheadUpToItsPatternsLimit) {
  PrefetchOptions options;
  {
    Prefetcher prefetcher(options);
    const std::uint64_t ahead =
        read_sequentially(prefetcher, AccessPattern::concurrency, 0, 128 * KiB, 100);
    EXPECT_GE(ahead, options.concurrency_limit - 128 * KiB);
    EXPECT_LE(ahead, options.concurrency_limit);
  }
  {
    Prefetcher prefetcher(options);
    const std::uint64_t ahead =
        read_sequentially(prefetcher, AccessPattern::streaming, 0, 128 * KiB, 100);
    EXPECT_GE(ahead, options.streaming_limit - 128 * KiB);
  }
  {
    Prefetcher prefetcher(options);
    EXPECT_EQ(read_sequentially(prefetcher, AccessPattern::random, 0, 128 * KiB, 100), 0u);
    EXPECT_EQ(prefetcher.statistics().advised_bytes, 0u);
  }
}

TEST(PrefetcherTest, TheWindowWidensFourfoldThenTwofold) {
  Prefetcher prefetcher;
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t offset = 0; offset < 8 * 128 * KiB; offset += 128 * KiB) {
    const PrefetchAdvice advice =
        prefetcher.on_read(kFile, kClient, offset, 128 * KiB, GiB, AccessPattern::streaming, 0);
    sizes.push_back(advice.end - offset - 128 * KiB);  // how far ahead of the read
  }
  EXPECT_EQ(sizes[0], 256 * KiB);  // a stream from the start gets the first window at once
  EXPECT_EQ(sizes[1], 1 * MiB);    // x4
  EXPECT_EQ(sizes[2], 2 * MiB);    // x2
  EXPECT_EQ(sizes[3], 4 * MiB);
}

TEST(PrefetcherTest, ReadsAlittleOutOfOrderContinueTheirStream) {
  Prefetcher prefetcher;
  // Four READs in flight arrive in the order 0, 2, 1, 3, 5, 4, ...
  const int order[] = {0, 2, 1, 3, 5, 4, 7, 6, 9, 8};
  for (int block : order) {
    prefetcher.on_read(kFile, kClient, block * 128 * KiB, 128 * KiB, GiB,
                       AccessPattern::concurrency, 0);
  }
  EXPECT_EQ(prefetcher.statistics().streams, 1u);
  EXPECT_EQ(prefetcher.statistics().sequential, 9u);
}

TEST(PrefetcherTest, InterleavedReadersOfOneFileAreTrackedApart) {
  Prefetcher prefetcher;
  std::uint64_t ahead[2] = {0, 0};
  const std::uint64_t starts[2] = {0, 512 * MiB};
  for (int i = 0; i < 40; ++i) {
    for (int reader = 0; reader < 2; ++reader) {
      const std::uint64_t offset = starts[reader] + static_cast<std::uint64_t>(i) * 128 * KiB;
      const PrefetchAdvice advice =
          prefetcher.on_read(kFile, kClient, offset, 128 * KiB, GiB, AccessPattern::concurrency, 0);
      if (!advice.empty()) ahead[reader] = advice.end - offset;
    }
  }
  EXPECT_EQ(prefetcher.statistics().streams, 2u);
  EXPECT_GE(ahead[0], 3 * MiB);
  EXPECT_GE(ahead[1], 3 * MiB);
}

TEST(PrefetcherTest, RandomSmallReadsWasteAlmostNothingOnPrefetch) {
  Prefetcher prefetcher;
  std::mt19937_64 random(1);
  std::uint64_t read = 0;
  for (int i = 0; i < 20'000; ++i) {
    const std::uint64_t offset = (random() % (GiB / (4 * KiB))) * 4 * KiB;
    prefetcher.on_read(kFile, kClient, offset, 4 * KiB, GiB, AccessPattern::concurrency, 0);
    read += 4 * KiB;
  }
  const PrefetchStatistics stats = prefetcher.statistics();
  EXPECT_LE(stats.advised_bytes, read / 20) << stats.advised_bytes << " advised for " << read;
  EXPECT_LE(stats.streams, PrefetchOptions{}.max_streams);
}

TEST(PrefetcherTest, AReaderThatTurnsRandomLosesItsWindow) {
  Prefetcher prefetcher;
  read_sequentially(prefetcher, AccessPattern::concurrency, 0, 128 * KiB, 20);
  for (std::uint64_t i = 1; i <= 6; ++i) {
    prefetcher.on_read(kFile, kClient, i * 100 * MiB, 4 * KiB, GiB, AccessPattern::concurrency, 0);
  }
  const std::uint64_t before = prefetcher.statistics().advised_bytes;
  // Back where the old stream was going: it continues, from a window of nothing.
  const PrefetchAdvice advice = prefetcher.on_read(kFile, kClient, 20 * 128 * KiB, 128 * KiB, GiB,
                                                   AccessPattern::concurrency, 0);
  EXPECT_LE(advice.size(), 256 * KiB);
  EXPECT_LE(prefetcher.statistics().advised_bytes - before, 256 * KiB);
}

TEST(PrefetcherTest, WasteHalvesTheWindowsOfTheFile) {
  Prefetcher prefetcher;
  read_sequentially(prefetcher, AccessPattern::concurrency, 0, 128 * KiB, 20);
  for (int i = 0; i < 6; ++i) prefetcher.on_waste(kFile, 1 * MiB);
  EXPECT_EQ(prefetcher.statistics().wasted_bytes, 6 * MiB);
  const PrefetchAdvice advice = prefetcher.on_read(kFile, kClient, 20 * 128 * KiB, 128 * KiB, GiB,
                                                   AccessPattern::concurrency, 0);
  EXPECT_LE(advice.size(), 256 * KiB);
}

TEST(PrefetcherTest, NothingIsAdvisedPastTheEndOfTheFile) {
  Prefetcher prefetcher;
  std::uint64_t offset = 0;
  for (; offset < MiB; offset += 128 * KiB) {
    const PrefetchAdvice advice =
        prefetcher.on_read(kFile, kClient, offset, 128 * KiB, MiB, AccessPattern::streaming, 0);
    EXPECT_LE(advice.end, MiB);
  }
  EXPECT_LE(prefetcher.statistics().advised_bytes, MiB);
}

TEST(PrefetcherTest, OffsetsNearTheLargestAreSafe) {
  PrefetchOptions options;
  options.max_streams_per_reader = 0;  // taken as one
  Prefetcher prefetcher(options);
  const std::uint64_t top = std::numeric_limits<std::uint64_t>::max();
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(
        prefetcher
            .on_read(kFile, kClient, top - 4 * KiB, 64 * KiB, top, AccessPattern::streaming, 0)
            .empty());
  }
  const PrefetchAdvice advice =
      prefetcher.on_read(kFile, kClient, 0, 128 * KiB, GiB, AccessPattern::streaming, 0);
  EXPECT_EQ(advice.start, 128 * KiB);
  EXPECT_EQ(prefetcher.statistics().streams, 1u);
}

TEST(PrefetcherTest, TheStreamTableIsBoundedAndIdleStreamsExpire) {
  PrefetchOptions options;
  options.max_streams = 8;
  options.shards = 1;
  Prefetcher prefetcher(options);
  for (std::uint64_t client = 0; client < 100; ++client) {
    prefetcher.on_read(kFile, client, 0, 4 * KiB, GiB, AccessPattern::concurrency, 0);
  }
  EXPECT_EQ(prefetcher.statistics().streams, 8u);
  EXPECT_EQ(prefetcher.statistics().streams_evicted, 92u);
  prefetcher.on_read(kFile + 1, 0, 0, 4 * KiB, GiB, AccessPattern::concurrency, 60'000);
  EXPECT_EQ(prefetcher.statistics().streams, 1u);
}

}  // namespace
}  // namespace tidepool::cache
