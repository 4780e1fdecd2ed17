// The coherent cache with real processes (issue 6): clients on every node of a four-node cluster
// read and write the same files at once, every word a write puts down tagged with the write,
// and a checker proves that no read returned a word older than a write of it acknowledged
// before the read began. Times are this process's monotonic clock, on which every client's
// "acknowledged" and "began" are taken. Each run checks a fixed schedule and one derived from the
// commit (tests/seeds/seeds.h); a fail point that keeps what callbacks drop shows the checker
// firing.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
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
#include "tests/seeds/seeds.h"

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

// What one schedule of the clients' operations came to.
struct Outcome {
  std::vector<std::string> violations;  // the checker's findings, the first few described
  std::size_t violation_count = 0;
  std::size_t reads = 0;
  std::size_t writes = 0;
  std::string first_failure;  // the first operation that did not succeed, "" if none
};

class CoherenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (tide_path().empty()) GTEST_SKIP() << "no tide binary in this build";
    cluster_ = std::make_unique<TideCluster>("coherence", std::vector<std::string>(kNodes, "f800"),
                                             "coherence");
    ASSERT_NO_FATAL_FAILURE(cluster_->start_serving());
  }

  // The clients of every node run the operations of `seed` on files of their own, named after
  // it; the checker reads the history they wrote.
  Outcome run_schedule(std::uint64_t seed) {
    // Write 0 stands for the files' first contents, zeros, acknowledged before anything else.
    std::vector<WriteRecord> writes(1);
    writes[0].end_word = kWords;
    writes[0].acknowledged = writes[0].started = Clock::now();
    std::vector<FileHandle> files;
    Outcome outcome;
    {
      NfsClient first(cluster_->node(1).endpoint());
      for (std::size_t f = 0; f < kFiles; ++f) {
        files.push_back(first.make_file(cluster_->root_via(1),
                                        std::to_string(seed) + "-f" + std::to_string(f), 0644,
                                        std::string(kFileBytes, '\0')));
        if (files.back().empty()) {
          outcome.first_failure = "cannot make the files: " + first.error();
          return outcome;
        }
      }
    }
    std::mutex mutex;
    std::vector<ReadRecord> reads;  // guarded by mutex, as writes and outcome are
    const auto deadline = Clock::now() + kBound;
    const auto failed = [&](const std::string& what) {
      std::lock_guard guard(mutex);
      if (outcome.first_failure.empty()) outcome.first_failure = what;
    };
    std::vector<std::thread> clients;
    for (std::size_t c = 0; c < kNodes * kClientsPerNode; ++c) {
      clients.emplace_back([&, c] {
        const std::size_t node = c % kNodes + 1;
        NfsClient nfs(cluster_->node(node).endpoint());
        std::mt19937_64 random(seed ^ ((c + 1) * 0x9e3779b97f4a7c15ull));
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
              failed("write through node " + std::to_string(node) + ": status " +
                     std::to_string(written.status));
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
              failed("read through node " + std::to_string(node) + ": status " +
                     std::to_string(read.status) + ", " + std::to_string(read.data.size()) +
                     " bytes");
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
    outcome.reads = reads.size();
    outcome.writes = writes.size() - 1;
    for (const ReadRecord& read : reads) check(read, writes, outcome);
    return outcome;
  }

  // For each word read, the latest start among the writes of it acknowledged before the read
  // began: the word must come from a write acknowledged no earlier than that.
  static void check(const ReadRecord& read, const std::vector<WriteRecord>& writes,
                    Outcome& outcome) {
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
        if (outcome.violation_count++ < 5) {
          outcome.violations.push_back(
              "node " + std::to_string(read.node) + " read word " + std::to_string(at) + " of f" +
              std::to_string(read.file) + " as written by " + std::to_string(seen) +
              (known ? ", older than a write acknowledged before the read began"
                     : ", which never wrote it"));
        }
      }
    }
  }

  // Sets fail point switch `name` and waits (bounded) until every node's view has it.
  void switch_on(const std::string& name) {
    const std::string sysctl = "debug.fail_point." + name;
    ASSERT_EQ(cluster_->tide(1, {"sysctl", sysctl + "=true"}).exit_code, 0);
    for (std::size_t node = 1; node <= kNodes; ++node) {
      bool seen = false;
      for (int tries = 0; tries < 100 && !seen; ++tries) {
        seen = cluster_->tide(node, {"sysctl", sysctl}).output.find("true") != std::string::npos;
        if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      ASSERT_TRUE(seen) << "node " << node << " never showed " << sysctl;
    }
  }

  std::unique_ptr<TideCluster> cluster_;
};

std::string described(const Outcome& outcome) {
  std::string text = std::to_string(outcome.violation_count) + " violations in " +
                     std::to_string(outcome.reads) + " reads after " +
                     std::to_string(outcome.writes) + " writes";
  for (const std::string& violation : outcome.violations) text += "\n  " + violation;
  return text;
}

TEST_F(CoherenceTest, NoReadReturnsAWordOlderThanAWriteAcknowledgedBeforeItBegan) {
  for (const std::uint64_t seed : shard_seeds("coherence", 0, 1, 1)) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const Outcome outcome = run_schedule(seed);
    ASSERT_EQ(outcome.first_failure, "");
    ASSERT_GT(outcome.reads, 100u) << "every client ran its operations in time";
    EXPECT_EQ(outcome.violation_count, 0u) << described(outcome);
  }
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

// The checker is shown to fire: with every node keeping the blocks its callbacks tell it to
// drop, as a cache that forgot to would, reads return words that acknowledged writes replaced.
class CoherenceCheckerTest : public CoherenceTest {
 protected:
  void SetUp() override {
    if (sanitized_build()) {
      GTEST_SKIP() << "the release pass runs it: the checker's judgement needs no sanitizer, "
                      "and a cluster more under them costs the suite half a minute";
    }
    CoherenceTest::SetUp();
  }
};

TEST_F(CoherenceCheckerTest, ReportsTheStaleReadsOfNodesThatKeepWhatCallbacksDrop) {
  ASSERT_NO_FATAL_FAILURE(switch_on("keep_what_callbacks_drop"));
  const Outcome outcome = run_schedule(first_fixed_seed());
  ASSERT_GT(outcome.reads, 100u) << "every client ran its operations in time";
  EXPECT_GT(outcome.violation_count, 0u) << described(outcome);
  std::printf("with the fail point on, the checker found %s\n", described(outcome).c_str());
}

}  // namespace
}  // namespace tidepool::test
