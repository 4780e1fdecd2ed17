// Readers and prefetches of one block share one fetch.
#include "cache/internal/fetch_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

namespace tidepool::cache {
namespace {

const std::vector<std::byte> kUnit(4096, std::byte{0x42});

// A fetcher the test completes by hand, counting how often it was started.
struct ManualFetcher {
  int started = 0;
  std::vector<FetchTable::Fetched> pending;
  FetchTable::Fetcher fetcher() {
    return [this](FetchTable::Fetched fetched) {
      started++;
      pending.push_back(std::move(fetched));
    };
  }
};

TEST(FetchTableTest, ReadersOfABlockUnderWayShareItsOneFetch) {
  BlockCache cache(1 << 20);
  FetchTable table(cache);
  ManualFetcher source;
  std::vector<Result<BlockCache::Handle>> answers;
  for (int reader = 0; reader < 3; ++reader) {
    table.fetch({1, 0}, source.fetcher(),
                [&answers](Result<BlockCache::Handle> h) { answers.push_back(std::move(h)); });
  }
  EXPECT_EQ(source.started, 1);
  EXPECT_TRUE(answers.empty());
  source.pending.front()(cache.insert({1, 0}, kUnit));
  ASSERT_EQ(answers.size(), 3u);
  for (auto& answer : answers) {
    ASSERT_TRUE(answer.ok());
    EXPECT_EQ(answer->bytes().size(), kUnit.size());
    EXPECT_EQ(answer->bytes()[0], std::byte{0x42});
  }
  // Now cached: answered at once, nothing fetched.
  std::optional<Result<BlockCache::Handle>> later;
  table.fetch({1, 0}, source.fetcher(),
              [&later](Result<BlockCache::Handle> h) { later = std::move(h); });
  ASSERT_TRUE(later.has_value() && later->ok());
  EXPECT_EQ(source.started, 1);
  const FetchStatistics stats = table.statistics();
  EXPECT_EQ(stats.started, 1u);
  EXPECT_EQ(stats.merged, 2u);
  EXPECT_EQ(stats.hits, 1u);
}

TEST(FetchTableTest, AFailedFetchFailsItsWaitersAndTheNextAskStartsAnew) {
  BlockCache cache(1 << 20);
  FetchTable table(cache);
  ManualFetcher source;
  std::vector<Status> errors;
  for (int reader = 0; reader < 2; ++reader) {
    table.fetch({1, 0}, source.fetcher(),
                [&errors](Result<BlockCache::Handle> h) { errors.push_back(h.status()); });
  }
  source.pending.front()(error(Errc::io_error, "checksum mismatch"));
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].code(), Errc::io_error);
  EXPECT_EQ(errors[1].message(), "checksum mismatch");
  table.fetch({1, 0}, source.fetcher(), [](Result<BlockCache::Handle>) {});
  EXPECT_EQ(source.started, 2);
  EXPECT_EQ(table.statistics().failed, 1u);
}

TEST(FetchTableTest, EveryWaiterGetsTheBlockEvenWhenTheCacheCannotKeepIt) {
  BlockCache cache(1024, 1);  // smaller than the block
  FetchTable table(cache);
  ManualFetcher source;
  std::vector<BlockCache::Handle> handles;
  for (int reader = 0; reader < 2; ++reader) {
    table.fetch({1, 0}, source.fetcher(), [&handles](Result<BlockCache::Handle> h) {
      handles.push_back(std::move(h).value());
    });
  }
  source.pending.front()(cache.insert({1, 0}, kUnit));
  ASSERT_EQ(handles.size(), 2u);
  EXPECT_FALSE(handles[0].cached());
  EXPECT_EQ(handles[1].bytes().size(), kUnit.size());
}

TEST(FetchTableTest, ConcurrentReadersFetchEachBlockOnce) {
  BlockCache cache(64 << 20);
  FetchTable table(cache);
  std::atomic<int> fetches{0};
  std::atomic<int> answered{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (std::uint64_t block = 0; block < 200; ++block) {
        table.fetch(
            {9, block},
            [&fetches, &cache, block](FetchTable::Fetched fetched) {
              fetches++;
              fetched(cache.insert({9, block}, kUnit));
            },
            [&answered](Result<BlockCache::Handle> h) {
              if (h.ok()) answered++;
            });
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(fetches, 200);
  EXPECT_EQ(answered, 800);
}

}  // namespace
}  // namespace tidepool::cache
