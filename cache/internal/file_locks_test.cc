// A lock the node holds already is handed out on the caller's thread, and a blocking callback
// that weakens it waits for those holds to end.
#include "cache/internal/file_locks.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "cluster/sim.h"

namespace tidepool::cache {
namespace {

using cluster::NodeId;
using lockmgr::Mode;

const lockmgr::ResourceName kFile{lockmgr::ResourceKind::data, 42};

class FileLocksTest : public ::testing::Test {
 protected:
  FileLocksTest() : world_(3) {
    for (NodeId node : {1u, 2u}) {
      lockmgr::LockManagerOptions options;
      options.self = node;
      managers_[node] = std::make_unique<lockmgr::LockManager>(world_.loop(node),
                                                               world_.transport(node), options);
      lockmgr::LockCacheOptions cache_options;
      cache_options.min_hold = std::chrono::milliseconds(0);
      locks_[node] = FileLocks::make(world_.loop(node), *managers_[node], cache_options,
                                     [this, node](const lockmgr::ResourceName&, lockmgr::Range,
                                                  Mode kept, std::function<void()> done) {
                                       revoked_[node].push_back(kept);
                                       done();
                                     });
    }
    for (NodeId node : {1u, 2u}) managers_[node]->set_view(1, {1, 2});
  }

  ~FileLocksTest() override {
    for (auto& [node, locks] : locks_) locks->close();
    world_.run_until(world_.now_ms() + 10);
  }

  // Runs the simulated cluster until `done`, for 5 simulated s at most.
  void run_until(const std::function<bool()>& done) {
    for (int step = 0; step < 5000 && !done(); ++step) world_.run_until(world_.now_ms() + 1);
  }

  // The acquisition's answer, once the simulated cluster gave it (within 5 simulated s).
  std::optional<Result<lockmgr::CachedLock>> acquire(NodeId node, Mode mode) {
    std::optional<Result<lockmgr::CachedLock>> answer;
    locks_[node]->acquire(
        kFile, mode, lockmgr::kWholeResource,
        [&answer](Result<lockmgr::CachedLock> lock) { answer = std::move(lock); });
    run_until([&] { return answer.has_value(); });
    return answer;
  }

  cluster::SimWorld world_;
  std::map<NodeId, std::unique_ptr<lockmgr::LockManager>> managers_;
  std::map<NodeId, std::shared_ptr<FileLocks>> locks_;
  std::map<NodeId, std::vector<Mode>> revoked_;
};

TEST_F(FileLocksTest, ALockTheNodeHoldsIsHandedOutDirectlyInItsModeOrWeaker) {
  EXPECT_FALSE(locks_[1]->try_acquire(kFile, Mode::protected_read));
  const auto first = acquire(1, Mode::protected_read);
  ASSERT_TRUE(first && first->ok());
  locks_[1]->release((*first)->id);
  world_.run_until(world_.now_ms() + 5);
  EXPECT_TRUE(locks_[1]->try_acquire(kFile, Mode::protected_read));
  EXPECT_FALSE(locks_[1]->try_acquire(kFile, Mode::protected_write));
  EXPECT_FALSE(locks_[2]->try_acquire(kFile, Mode::protected_read));
  locks_[1]->release_direct(kFile);
}

TEST_F(FileLocksTest, AnotherNodesWriteWaitsForTheDirectHoldsAndEndsThem) {
  const auto first = acquire(1, Mode::protected_read);
  ASSERT_TRUE(first && first->ok());
  locks_[1]->release((*first)->id);
  world_.run_until(world_.now_ms() + 5);
  ASSERT_TRUE(locks_[1]->try_acquire(kFile, Mode::protected_read));

  std::optional<Result<lockmgr::CachedLock>> write;
  locks_[2]->acquire(kFile, Mode::protected_write, lockmgr::kWholeResource,
                     [&write](Result<lockmgr::CachedLock> lock) { write = std::move(lock); });
  world_.run_until(world_.now_ms() + 200);
  // Node 1 still reads under its direct hold: nothing was revoked, and the write waits.
  EXPECT_TRUE(revoked_[1].empty());
  EXPECT_FALSE(write.has_value());
  // Once the revoke is due, no new direct hold starts.
  EXPECT_FALSE(locks_[1]->try_acquire(kFile, Mode::protected_read));

  locks_[1]->release_direct(kFile);
  run_until([&] { return write.has_value(); });
  ASSERT_TRUE(write && write->ok());
  ASSERT_EQ(revoked_[1].size(), 1u);
  // Weakened to what a writer elsewhere allows (CR), which caches nothing.
  EXPECT_TRUE(lockmgr::compatible(revoked_[1][0], Mode::protected_write));
  EXPECT_FALSE(locks_[1]->try_acquire(kFile, Mode::protected_read));
  locks_[2]->release((*write)->id);
}

// A lock being converted down when the node wants it again has the node ask for a second lock
// of the same file; a blocking callback for both, while a direct hold lasts, weakens both once
// the hold ends.
TEST_F(FileLocksTest, EveryLockOfTheFileWaitingForTheDirectHoldsIsWeakenedWhenTheyEnd) {
  // Node 1 coordinates the file: node 2's conversions take a round trip.
  constexpr NodeId kReader = 2;
  constexpr NodeId kWriter = 1;
  auto answer_to = [](std::optional<Result<lockmgr::CachedLock>>& answer) {
    return [&answer](Result<lockmgr::CachedLock> lock) { answer = std::move(lock); };
  };
  const auto first = acquire(kReader, Mode::protected_read);
  ASSERT_TRUE(first && first->ok());
  locks_[kReader]->release((*first)->id);
  std::optional<Result<lockmgr::CachedLock>> write;
  locks_[kWriter]->acquire(kFile, Mode::protected_write, lockmgr::kWholeResource, answer_to(write));
  run_until([&] { return !revoked_[kReader].empty(); });
  ASSERT_EQ(revoked_[kReader].size(), 1u);
  // The reader's lock is on its way down to CR: a read asks for a lock of its own, granted in
  // PR once the write is done.
  std::optional<Result<lockmgr::CachedLock>> read;
  locks_[kReader]->acquire(kFile, Mode::protected_read, lockmgr::kWholeResource, answer_to(read));
  run_until([&] { return write.has_value(); });
  ASSERT_TRUE(write && write->ok());
  locks_[kWriter]->release((*write)->id);
  run_until([&] { return read.has_value(); });
  ASSERT_TRUE(read && read->ok());
  locks_[kReader]->release((*read)->id);
  world_.run_until(world_.now_ms() + 5);
  ASSERT_EQ(managers_[kReader]->held().size(), 2u);
  ASSERT_TRUE(locks_[kReader]->try_acquire(kFile, Mode::protected_read));

  // EX is in the way of both the reader's locks: both are given up, once the direct hold ends.
  std::optional<Result<lockmgr::CachedLock>> exclusive;
  locks_[kWriter]->acquire(kFile, Mode::exclusive, lockmgr::kWholeResource, answer_to(exclusive));
  world_.run_until(world_.now_ms() + 200);
  EXPECT_EQ(revoked_[kReader].size(), 1u);
  EXPECT_FALSE(exclusive.has_value());
  locks_[kReader]->release_direct(kFile);
  run_until([&] { return exclusive.has_value(); });
  ASSERT_TRUE(exclusive && exclusive->ok());
  EXPECT_EQ(revoked_[kReader].size(), 3u);
  EXPECT_TRUE(managers_[kReader]->held().empty());
  locks_[kWriter]->release((*exclusive)->id);
}

TEST_F(FileLocksTest, NothingIsHandedOutOnceClosed) {
  const auto first = acquire(1, Mode::protected_read);
  ASSERT_TRUE(first && first->ok());
  locks_[1]->release((*first)->id);
  world_.run_until(world_.now_ms() + 5);
  locks_[1]->close();
  EXPECT_FALSE(locks_[1]->try_acquire(kFile, Mode::protected_read));
}

}  // namespace
}  // namespace tidepool::cache
