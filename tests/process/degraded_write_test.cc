// Issue 4's kill test for file data in a node pool: four real tided processes, all in pool f800,
// and files the default policy placed there (two copies of each unit). One node that holds
// units is killed while writers through the others keep changing the files, FILE_SYNC or
// UNSTABLE then COMMIT: the writes go on with the copies left, every acknowledged byte reads
// back through each survivor, and when the node returns the home puts back the units it missed
// — proved by reading every file with another owner down, so that the units the two shared come
// from the returned node alone.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/process/cluster.h"
#include "tests/process/nfs_client.h"
#include "tests/process/tide_cluster.h"

namespace tidepool::test {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr std::size_t kNodes = 4;
constexpr std::size_t kFiles = 12;
constexpr std::size_t kFileBytes = 4 * 128 * 1024;  // four stripe units
constexpr std::size_t kPieceBytes = 48 * 1024;      // a write: within one unit or across two

std::string random_text(std::mt19937_64& random, std::size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(random());
  return s;
}

// The files and what each holds as its writer knows it: every write is acknowledged (and
// committed, when UNSTABLE) before it counts, and a file has one writer.
struct Files {
  std::vector<FileHandle> handles;
  std::vector<std::string> contents;
};

// Writers through the nodes given, each changing its own files at random offsets until stopped
// (at most 100,000 writes each). A write that fails (while a node dies) is sent again, the same
// bytes, until it is acknowledged: what a file holds stays known. One stopped before it was is
// kept, for settle() to finish.
class Writers {
 public:
  Writers(std::vector<Endpoint> via, Files& files) : files_(files) {
    for (std::size_t w = 0; w < via.size(); ++w) {
      threads_.emplace_back([this, w, ep = via[w], writers = via.size()] {
        std::mt19937_64 random(w + 7);
        NfsClient nfs(ep);
        for (int i = 0; i < 100'000 && !stop_.load(); ++i) {
          const std::size_t file = w + writers * (random() % (kFiles / writers));
          const std::uint64_t offset = random() % (kFileBytes - kPieceBytes);
          const std::string piece = random_text(random, kPieceBytes);
          const bool stable = random() % 2 == 0;
          const bool done = write_until_acknowledged(nfs, file, offset, piece, stable, true);
          std::lock_guard lock(mutex_);
          if (!done) {
            unsettled_.push_back({file, offset, piece});
            return;
          }
          files_.contents[file].replace(offset, piece.size(), piece);
          ++acknowledged_;
        }
      });
    }
  }
  ~Writers() { stop(); }
  void stop() {
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  std::size_t acknowledged() {
    std::lock_guard lock(mutex_);
    return acknowledged_;
  }
  // After stop(): the writes stopped before they were acknowledged, each sent again through
  // `via` until it is, so that every file's contents are known again.
  void settle(const Endpoint& via) {
    NfsClient nfs(via);
    for (const Unsettled& write : unsettled_) {
      ASSERT_TRUE(
          write_until_acknowledged(nfs, write.file, write.offset, write.piece, true, false));
      files_.contents[write.file].replace(write.offset, write.piece.size(), write.piece);
    }
    unsettled_.clear();
  }

 private:
  struct Unsettled {
    std::size_t file;
    std::uint64_t offset;
    std::string piece;
  };

  // False when stopped before it was acknowledged (its bytes may be in the file or not), or
  // never acknowledged in a minute (a gtest failure).
  bool write_until_acknowledged(NfsClient& nfs, std::size_t file, std::uint64_t offset,
                                const std::string& piece, bool stable, bool stoppable) {
    for (int attempt = 0; attempt < 600; ++attempt) {
      const WriteResult written =
          nfs.write(files_.handles[file], offset, piece, stable ? FILE_SYNC : UNSTABLE);
      const bool done = written.status == NFS3_OK && written.count == piece.size() &&
                        (!stable || written.committed == FILE_SYNC) &&
                        (stable || nfs.commit(files_.handles[file]).status == NFS3_OK);
      if (done) return true;
      if (stoppable && stop_.load()) return false;
      std::this_thread::sleep_for(100ms);
    }
    ADD_FAILURE() << "a write to file " << file << " was never acknowledged";
    return false;
  }

  Files& files_;
  std::atomic<bool> stop_ = false;
  std::mutex mutex_;
  std::size_t acknowledged_ = 0;
  std::vector<Unsettled> unsettled_;  // guarded by mutex_ until stop()
  std::vector<std::thread> threads_;
};

class DegradedWriteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (tide_path().empty()) GTEST_SKIP() << "no tide binary in this build";
    cluster_ = std::make_unique<TideCluster>("degraded", std::vector<std::string>(kNodes, "f800"),
                                             "degraded-write");
    ASSERT_NO_FATAL_FAILURE(cluster_->start_serving());
    ASSERT_NO_FATAL_FAILURE(cluster_->place_new_files_in("f800"));
  }

  // Every file read whole through node `via` matches what its writer knows.
  void expect_files_read_through(std::size_t via, const Files& files) {
    NfsClient nfs(cluster_->node(via).endpoint());
    for (std::size_t f = 0; f < kFiles; ++f) {
      EXPECT_TRUE(nfs.read_all(files.handles[f]) == files.contents[f])
          << "file " << f << " read through node " << via;
    }
  }

  // Waits (bounded) until node `id`'s gauge `name` is 0; its last value.
  std::int64_t wait_for_zero(std::size_t id, const std::string& name, std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    std::int64_t value = cluster_->metric(id, name);
    while (value != 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(250ms);
      value = cluster_->metric(id, name);
    }
    return value;
  }

  std::unique_ptr<TideCluster> cluster_;
};

TEST_F(DegradedWriteTest, WritesGoOnWhileAnOwnerIsDownAndItCatchesUpWhenBack) {
  const auto [home, mirror] = cluster_->wait_for_full_protection(1, 30s);
  ASSERT_EQ(home, 1u) << "node 1 made the cluster";
  // The victim holds units but not the namespace: the test is about the data's copies.
  std::size_t victim = 2;
  while (victim == home || victim == mirror) ++victim;
  std::size_t other = 2;  // a second owner, killed once the victim caught up
  while (other == home || other == victim) ++other;

  Files files;
  {
    NfsClient nfs(cluster_->node(1).endpoint());
    const FileHandle dir = nfs.make_dir(cluster_->root_via(1), "work");
    ASSERT_FALSE(dir.empty());
    std::mt19937_64 random(1);
    for (std::size_t f = 0; f < kFiles; ++f) {
      files.contents.push_back(random_text(random, kFileBytes));
      files.handles.push_back(nfs.make_file(dir, "f" + std::to_string(f)));
      ASSERT_FALSE(files.handles.back().empty());
      ASSERT_EQ(nfs.write(files.handles.back(), 0, files.contents.back(), FILE_SYNC).status,
                NFS3_OK);
    }
  }
  const nlohmann::json placed = cluster_->tide_json(2, {"get", "-D", "/ifs/work/f0"});
  ASSERT_EQ(placed["layout"]["pool"], "f800") << placed.dump();

  std::vector<Endpoint> via;
  for (std::size_t id = 1; id <= kNodes; ++id) {
    if (id != victim) via.push_back(cluster_->node(id).endpoint());
  }
  Writers writers(via, files);
  const auto started = Clock::now();
  while (writers.acknowledged() < 30 && Clock::now() - started < 30s) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_GE(writers.acknowledged(), 30u);

  cluster_->node(victim).kill();
  const std::size_t before_kill = writers.acknowledged();
  const auto killed_at = Clock::now();
  while (writers.acknowledged() < before_kill + 60 && Clock::now() - killed_at < 40s) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_GE(writers.acknowledged(), before_kill + 60) << "writes did not go on without the victim\n"
                                                      << cluster_->node(home).log_tail();
  writers.stop();
  ASSERT_NO_FATAL_FAILURE(writers.settle(cluster_->node(home).endpoint()));
  EXPECT_GT(cluster_->metric(home, "tidepool_copies_behind"), 0)
      << "the victim missed writes to units it holds";
  for (std::size_t id = 1; id <= kNodes; ++id) {
    if (id == victim) continue;
    ASSERT_NO_FATAL_FAILURE(expect_files_read_through(id, files));
  }

  std::string error;
  ASSERT_TRUE(cluster_->node(victim).start(&error)) << error;
  EXPECT_EQ(wait_for_zero(home, "tidepool_copies_behind", 60s), 0)
      << cluster_->node(home).log_tail();
  EXPECT_GT(cluster_->metric(home, "tidepool_units_caught_up_total"), 0);

  // With the other owner down too, the units it shared with the victim come from the victim.
  cluster_->node(other).kill();
  ASSERT_NO_FATAL_FAILURE(expect_files_read_through(home, files));
}

}  // namespace
}  // namespace tidepool::test
