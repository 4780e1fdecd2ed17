// The coherent cache with real processes (issue 6): clients on every node of a four-node cluster
// read and write the same files at once, every word a write puts down tagged with the write,
// and a checker proves that no read returned a word older than a write of it acknowledged
// before the read began. Times are this process's monotonic clock, on which every client's
// "acknowledged" and "began" are taken.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/process/nfs_client.h"
#include "tests/process/tide_cluster.h"

namespace tidepool::test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kNodes = 4;
constexpr std::size_t kClientsPerNode = 2;
constexpr std::size_t kFiles = 2;
constexpr std::uint64_t kFileBytes = 512 * 1024;  // four stripe units
constexpr std::uint64_t kWords = kFileBytes / 8;
constexpr int kOperationsPerClient = 60;
constexpr auto kBound = std::chrono::seconds(120);

struct WriteRecord {
  std::size_t file = 0;
  std::uint64_t first_word = 0;
  std::uint64_t end_word = 0;
  Clock::time_point started;
  std::optional<Clock::time_point> acknowledged;
};

struct ReadRecord {
  std::size_t node = 0;
  std::size_t file = 0;
  std::uint64_t first_word = 0;
  Clock::time_point began;
  std::vector<std::uint64_t> words;  // as read
};

class CoherenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (tide_path().empty()) GTEST_SKIP() << "no tide binary in this build";
    cluster_ = std::make_unique<TideCluster>("coherence", std::vector<std::string>(kNodes, "f800"),
                                             "coherence");
    ASSERT_NO_FATAL_FAILURE(cluster_->start_serving());
  }

  std::unique_ptr<TideCluster> cluster_;
};

TEST_F(CoherenceTest, NoReadReturnsAWordOlderThanAWriteAcknowledgedBeforeItBegan) {
  // Write 0 stands for the files' first contents, zeros, acknowledged before anything else.
  std::vector<WriteRecord> writes(1);
  writes[0].end_word = kWords;
  writes[0].acknowledged = writes[0].started = Clock::now();
  std::vector<FileHandle> files;
  {
    NfsClient first(cluster_->node(1).endpoint());
    for (std::size_t f = 0; f < kFiles; ++f) {
      files.push_back(first.make_file(cluster_->root_via(1), "f" + std::to_string(f), 0644,
                                      std::string(kFileBytes, '\0')));
      ASSERT_FALSE(files.back().empty());
    }
  }
  std::mutex mutex;
  std::vector<ReadRecord> reads;  // guarded by mutex, as writes is
  std::atomic<int> failures{0};
  const auto deadline = Clock::now() + kBound;
  std::vector<std::thread> clients;
  for (std::size_t c = 0; c < kNodes * kClientsPerNode; ++c) {
    clients.emplace_back([&, c] {
      const std::size_t node = c % kNodes + 1;
      NfsClient nfs(cluster_->node(node).endpoint());
      std::mt19937_64 random(31 + c);
      for (int op = 0; op < kOperationsPerClient && Clock::now() < deadline; ++op) {
        const std::size_t file = random() % kFiles;
        const std::uint64_t first_word = random() % kWords;
        if (random() % 2 == 0) {
          const std::uint64_t count =
              1 + random() % std::min<std::uint64_t>(kWords - first_word, 8192);
          std::uint64_t id = 0;
          {
            std::lock_guard guard(mutex);
            id = writes.size();
            writes.push_back({file, first_word, first_word + count, Clock::now(), std::nullopt});
          }
          std::string bytes(count * 8, '\0');
          for (std::uint64_t w = 0; w < count; ++w) std::memcpy(&bytes[w * 8], &id, 8);
          const WriteResult written = nfs.write(files[file], first_word * 8, bytes,
                                                random() % 2 == 0 ? UNSTABLE : FILE_SYNC);
          if (written.status != NFS3_OK || written.count != bytes.size()) {
            if (failures.fetch_add(1) == 0) {
              ADD_FAILURE() << "write through node " << node << ": status " << written.status;
            }
            continue;
          }
          const Clock::time_point acknowledged = Clock::now();
          std::lock_guard guard(mutex);
          writes[id].acknowledged = acknowledged;
        } else {
          const std::uint64_t count =
              1 + random() % std::min<std::uint64_t>(kWords - first_word, kWords / 2);
          const Clock::time_point began = Clock::now();
          const ReadResult read = nfs.read(files[file], first_word * 8, count * 8);
          if (read.status != NFS3_OK || read.data.size() != count * 8) {
            if (failures.fetch_add(1) == 0) {
              ADD_FAILURE() << "read through node " << node << ": status " << read.status << ", "
                            << read.data.size() << " bytes";
            }
            continue;
          }
          ReadRecord record{node, file, first_word, began, std::vector<std::uint64_t>(count)};
          std::memcpy(record.words.data(), read.data.data(), read.data.size());
          std::lock_guard guard(mutex);
          reads.push_back(std::move(record));
        }
      }
    });
  }
  for (std::thread& client : clients) client.join();
  ASSERT_EQ(failures.load(), 0);
  ASSERT_GT(reads.size(), 100u) << "every client ran its operations in time";

  std::size_t violations = 0;
  for (const ReadRecord& read : reads) {
    // For each word read, the latest start among the writes of it acknowledged before the
    // read began: the word must come from a write acknowledged no earlier than that.
    std::vector<Clock::time_point> must_follow(read.words.size(), Clock::time_point::min());
    for (std::size_t id = 1; id < writes.size(); ++id) {
      const WriteRecord& write = writes[id];
      if (write.file != read.file) continue;
      if (!write.acknowledged || *write.acknowledged >= read.began) continue;
      const std::uint64_t from = std::max(write.first_word, read.first_word);
      const std::uint64_t to = std::min(write.end_word, read.first_word + read.words.size());
      for (std::uint64_t w = from; w < to; ++w) {
        must_follow[w - read.first_word] =
            std::max(must_follow[w - read.first_word], write.started);
      }
    }
    for (std::size_t w = 0; w < read.words.size(); ++w) {
      const std::uint64_t seen = read.words[w];
      const std::uint64_t at = read.first_word + w;
      const bool known = seen < writes.size() && (seen == 0 || writes[seen].file == read.file) &&
                         writes[seen].first_word <= at && at < writes[seen].end_word;
      if (!known || (writes[seen].acknowledged && *writes[seen].acknowledged < must_follow[w])) {
        if (violations++ < 5) {
          ADD_FAILURE() << "node " << read.node << " read word " << at << " of f" << read.file
                        << " as written by " << seen
                        << (known ? ", older than a write acknowledged before the read began"
                                  : ", which never wrote it");
        }
      }
    }
  }
  EXPECT_EQ(violations, 0u) << "in " << reads.size() << " reads after " << writes.size() - 1
                            << " writes";
  // The caches were in play: nodes read from L1 and dropped it for the others' writes.
  std::int64_t hits = 0;
  std::int64_t invalidations = 0;
  for (std::size_t node = 1; node <= kNodes; ++node) {
    hits += cluster_->metric(node, "tidepool_cache_l1_hit_bytes_total");
    invalidations += cluster_->metric(node, "tidepool_cache_coherence_invalidations_total");
  }
  EXPECT_GT(hits, 0);
  EXPECT_GT(invalidations, 0);
}

}  // namespace
}  // namespace tidepool::test
