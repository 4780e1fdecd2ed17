// A lock the node holds already is handed out on the caller's thread, and a blocking callback
// that weakens it waits for those holds to end.
#include "cache/file_locks.h"

#include <gtest/gtest.h>

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

  // The acquisition's answer, once the simulated cluster gave it (within 5 simulated s).
  std::optional<Result<lockmgr::CachedLock>> acquire(NodeId node, Mode mode) {
    std::optional<Result<lockmgr::CachedLock>> answer;
    locks_[node]->acquire(
        kFile, mode, lockmgr::kWholeResource,
        [&answer](Result<lockmgr::CachedLock> lock) { answer = std::move(lock); });
    for (int step = 0; step < 5000 && !answer; ++step) world_.run_until(world_.now_ms() + 1);
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
  for (int step = 0; step < 5000 && !write; ++step) world_.run_until(world_.now_ms() + 1);
  ASSERT_TRUE(write && write->ok());
  ASSERT_EQ(revoked_[1].size(), 1u);
  // Weakened to what a writer elsewhere allows (CR), which caches nothing.
  EXPECT_TRUE(lockmgr::compatible(revoked_[1][0], Mode::protected_write));
  EXPECT_FALSE(locks_[1]->try_acquire(kFile, Mode::protected_read));
  locks_[2]->release((*write)->id);
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
