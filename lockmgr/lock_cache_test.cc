// Each node's cache of its own locks, over the lock managers of a simulated cluster: what it
// keeps, what it gives up and when, and — in a random run — that the users of different nodes
// never hold conflicting locks through it.
#include "lockmgr/lock_cache.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "cluster/sim.h"

namespace tidepool::lockmgr {
namespace {

using cluster::NodeId;

constexpr ResourceName kFile{ResourceKind::data, 42};

struct Revocation {
  ResourceName resource;
  Mode kept;
};

class LockCacheTest : public ::testing::Test {
 protected:
  void start(std::uint64_t seed, std::vector<NodeId> nodes, LockCacheOptions options = {}) {
    world_ = std::make_unique<cluster::SimWorld>(seed);
    nodes_ = nodes;
    for (NodeId node : nodes) {
      LockManagerOptions manager_options;
      manager_options.self = node;
      managers_[node] = std::make_unique<LockManager>(world_->loop(node), world_->transport(node),
                                                      manager_options);
      caches_[node] = std::make_unique<LockCache>(
          world_->loop(node), *managers_[node], options,
          [this, node](const ResourceName& resource, Range, Mode kept, std::function<void()> done) {
            revoked_[node].push_back({resource, kept});
            // The user takes a moment to drop what it cached.
            world_->loop(node).schedule(std::chrono::milliseconds(1), std::move(done));
          });
    }
    for (NodeId node : nodes) managers_[node]->set_view(1, nodes);
  }

  ~LockCacheTest() override {
    caches_.clear();
    managers_.clear();
  }

  // Acquires through `node`, waiting (bounded) for the answer.
  Result<CachedLock> acquire(NodeId node, Mode mode, Range range = {0, 4096},
                             ResourceName resource = kFile) {
    std::optional<Result<CachedLock>> answer;
    caches_.at(node)->acquire(resource, mode, range,
                              [&answer](Result<CachedLock> r) { answer = std::move(r); });
    EXPECT_TRUE(run_until([&] { return answer.has_value(); }));
    return answer.value_or(error(Errc::internal, "no answer"));
  }

  std::uint64_t requests(NodeId node) { return managers_.at(node)->statistics().requests; }

  bool run_until(const std::function<bool()>& done) {
    return world_->run_until(done, world_->now_ms() + 10'000);
  }

  std::unique_ptr<cluster::SimWorld> world_;
  std::vector<NodeId> nodes_;
  std::map<NodeId, std::unique_ptr<LockManager>> managers_;
  std::map<NodeId, std::unique_ptr<LockCache>> caches_;
  std::map<NodeId, std::vector<Revocation>> revoked_;
};

TEST_F(LockCacheTest, RepeatedUseOnOneNodeCostsNoLockTraffic) {
  start(1, {1, 2, 3});
  Result<CachedLock> first = acquire(1, Mode::protected_read);
  ASSERT_TRUE(first.ok());
  // Uncontended, the lock covers the whole file: one lock for a whole stream.
  EXPECT_EQ(first->range, kWholeResource);
  caches_[1]->release(first->id);
  EXPECT_EQ(caches_[1]->idle(), 1u);
  const std::uint64_t asked = requests(1);
  for (std::uint64_t offset = 4096; offset < 40 * 4096; offset += 4096) {
    std::optional<Result<CachedLock>> again;
    caches_[1]->acquire(kFile, Mode::concurrent_read, {offset, offset + 4096},
                        [&again](Result<CachedLock> r) { again = std::move(r); });
    // Answered at once, from the idle lock.
    ASSERT_TRUE(again.has_value());
    ASSERT_TRUE(again->ok());
    EXPECT_EQ((*again)->id, first->id);
    caches_[1]->release((*again)->id);
  }
  EXPECT_EQ(requests(1), asked);
  EXPECT_EQ(caches_[1]->statistics().hits, 39u);
  EXPECT_EQ(caches_[1]->statistics().misses, 1u);
}

TEST_F(LockCacheTest, AnIdleWriterKeepsWhatAReaderLeavesItAndGivesUpForAWriter) {
  start(2, {1, 2, 3});
  Result<CachedLock> written = acquire(1, Mode::exclusive);
  ASSERT_TRUE(written.ok());
  caches_[1]->release(written->id);

  Result<CachedLock> read = acquire(2, Mode::protected_read);
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(revoked_[1].size(), 1u);
  EXPECT_EQ(revoked_[1][0].kept, Mode::protected_read);
  // Node 1 still reads from its own lock, without asking.
  const std::uint64_t asked = requests(1);
  Result<CachedLock> reread = acquire(1, Mode::protected_read);
  ASSERT_TRUE(reread.ok());
  EXPECT_EQ(reread->id, written->id);
  EXPECT_EQ(requests(1), asked);
  caches_[1]->release(reread->id);
  caches_[2]->release(read->id);

  Result<CachedLock> rewritten = acquire(3, Mode::exclusive);
  ASSERT_TRUE(rewritten.ok());
  ASSERT_EQ(revoked_[1].size(), 2u);
  EXPECT_EQ(revoked_[1][1].kept, Mode::null);
  ASSERT_EQ(revoked_[2].size(), 1u);
  EXPECT_EQ(revoked_[2][0].kept, Mode::null);
  EXPECT_EQ(caches_[1]->idle(), 0u);
}

TEST_F(LockCacheTest, ALockInUseIsGivenUpOnlyOnceItsUsersAreDone) {
  start(3, {1, 2});
  Result<CachedLock> one = acquire(1, Mode::protected_write);
  Result<CachedLock> two = acquire(1, Mode::protected_read);
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ(one->id, two->id);

  std::optional<Result<CachedLock>> other;
  caches_[2]->acquire(kFile, Mode::exclusive, {0, 10},
                      [&other](Result<CachedLock> r) { other = std::move(r); });
  world_->run_until(world_->now_ms() + 1000);
  EXPECT_FALSE(other.has_value());
  // While another node waits, new users on node 1 wait for its turn too.
  std::optional<Result<CachedLock>> third;
  caches_[1]->acquire(kFile, Mode::protected_read, {0, 10},
                      [&third](Result<CachedLock> r) { third = std::move(r); });
  EXPECT_FALSE(third.has_value());
  caches_[1]->release(one->id);
  world_->run_until(world_->now_ms() + 1000);
  EXPECT_FALSE(other.has_value());
  EXPECT_TRUE(revoked_[1].empty());
  caches_[1]->release(two->id);
  ASSERT_TRUE(run_until([&] { return other.has_value(); }));
  ASSERT_TRUE(other->ok());
  ASSERT_EQ(revoked_[1].size(), 1u);
  caches_[2]->release((*other)->id);
  ASSERT_TRUE(run_until([&] { return third.has_value(); }));
  EXPECT_TRUE(third->ok());
}

TEST_F(LockCacheTest, AFreshGrantIsHeldForTheMinimumTimeBeforeItGoes) {
  LockCacheOptions options;
  options.min_hold = std::chrono::milliseconds(500);
  start(4, {1, 2}, options);
  Result<CachedLock> mine = acquire(1, Mode::exclusive);
  ASSERT_TRUE(mine.ok());
  const std::uint64_t granted_at = world_->now_ms();
  caches_[1]->release(mine->id);
  Result<CachedLock> theirs = acquire(2, Mode::exclusive);
  ASSERT_TRUE(theirs.ok());
  EXPECT_GE(world_->now_ms(), granted_at + 500);
}

TEST_F(LockCacheTest, AUserThatNeedsMoreConvertsTheCachedLockUp) {
  start(5, {1, 2});
  Result<CachedLock> read = acquire(1, Mode::protected_read);
  ASSERT_TRUE(read.ok());
  // Still in use as PR; a writer on the same node converts the one lock up (PR + CW: PW).
  Result<CachedLock> write = acquire(1, Mode::concurrent_write);
  ASSERT_TRUE(write.ok());
  EXPECT_EQ(write->id, read->id);
  EXPECT_EQ(write->mode, Mode::protected_write);
  EXPECT_EQ(caches_[1]->statistics().upgrades, 1u);
  EXPECT_EQ(managers_[1]->held().size(), 1u);
}

TEST_F(LockCacheTest, IdleLocksStayWithinTheirBoundLeastRecentlyUsedFirst) {
  LockCacheOptions options;
  options.max_idle = 2;
  start(6, {1, 2}, options);
  for (std::uint64_t file = 1; file <= 3; ++file) {
    Result<CachedLock> lock = acquire(1, Mode::protected_read, {0, 1}, {ResourceKind::data, file});
    ASSERT_TRUE(lock.ok());
    caches_[1]->release(lock->id);
  }
  ASSERT_TRUE(run_until([&] { return managers_[1]->held().size() == 2; }));
  EXPECT_EQ(caches_[1]->idle(), 2u);
  EXPECT_EQ(caches_[1]->statistics().evictions, 1u);
  ASSERT_EQ(revoked_[1].size(), 1u);
  EXPECT_EQ(revoked_[1][0].resource.id, 1u);
}

TEST_F(LockCacheTest, ALockLostWithTheViewIsDroppedAndAskedForAnewOnReturn) {
  start(7, {1, 2, 3});
  Result<CachedLock> mine = acquire(1, Mode::exclusive);
  ASSERT_TRUE(mine.ok());
  caches_[1]->release(mine->id);
  // Node 1 is marked down while alive: its user drops what the idle lock protected.
  for (NodeId node : {1, 2, 3}) managers_[node]->set_view(2, {2, 3});
  ASSERT_EQ(revoked_[1].size(), 1u);
  EXPECT_EQ(revoked_[1][0].kept, Mode::null);
  EXPECT_EQ(caches_[1]->statistics().lost, 1u);
  EXPECT_EQ(caches_[1]->idle(), 0u);
  Result<CachedLock> theirs = acquire(2, Mode::exclusive);
  ASSERT_TRUE(theirs.ok());
  caches_[2]->release(theirs->id);
  // Back in the view, node 1 asks anew; node 2's idle writer keeps a reader's share.
  for (NodeId node : {1, 2, 3}) managers_[node]->set_view(3, {1, 2, 3});
  Result<CachedLock> again = acquire(1, Mode::protected_read);
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->id, mine->id);
  ASSERT_EQ(revoked_[2].size(), 1u);
  EXPECT_EQ(revoked_[2][0].kept, Mode::protected_read);
}

TEST_F(LockCacheTest, ALockLostWhileInUseIsDroppedAgainOnceUnusedAndNobodyTakesItsResourceBefore) {
  start(8, {1, 2, 3});
  Result<CachedLock> mine = acquire(1, Mode::protected_read);
  ASSERT_TRUE(mine.ok());
  // Fenced while a read is under way: what that read puts back must go too.
  for (NodeId node : {1, 2, 3}) managers_[node]->set_view(2, {2, 3});
  EXPECT_EQ(caches_[1]->statistics().lost, 1u);
  ASSERT_EQ(revoked_[1].size(), 1u) << "what the lock protected is dropped at once";
  for (NodeId node : {1, 2, 3}) managers_[node]->set_view(3, {1, 2, 3});
  // A new read waits for the drop, not only for a new lock.
  std::optional<Result<CachedLock>> again;
  caches_[1]->acquire(kFile, Mode::protected_read, {0, 4096},
                      [&again](Result<CachedLock> r) { again = std::move(r); });
  world_->run_until([] { return false; }, world_->now_ms() + 500);
  EXPECT_FALSE(again.has_value());
  caches_[1]->release(mine->id);
  ASSERT_TRUE(run_until([&] { return again.has_value(); }));
  ASSERT_EQ(revoked_[1].size(), 2u) << "and what the read put back, once it is done";
  EXPECT_EQ(revoked_[1][1].kept, Mode::null);
  ASSERT_TRUE(again->ok());
  EXPECT_NE((*again)->id, mine->id);
}

// Users on every node take and give back random modes on random ranges of two files through
// their caches, over a network that delays, reorders, loses and repeats; what users hold at any
// moment never conflicts across nodes, and every acquisition is answered.
TEST_F(LockCacheTest, UsersOfDifferentNodesNeverHoldConflictingLocks) {
  constexpr int kSeeds = 500;
  for (int seed = 1; seed <= kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    caches_.clear();
    managers_.clear();
    revoked_.clear();
    LockCacheOptions options;
    options.min_hold = std::chrono::milliseconds(5);
    options.max_idle = 3;
    start(1000 + seed, {1, 2, 3}, options);
    // Every other run loses and repeats messages too.
    if (seed % 2 == 0) world_->set_faults({1, 15, 0.02, 0.02});
    struct Use {
      NodeId node;
      ResourceName resource;
      Mode mode;
      Range range;
      LockId id;
    };
    std::vector<Use> in_use;
    int asked = 0;
    int answered = 0;
    bool conflict = false;
    std::function<void(NodeId)> act = [&](NodeId node) {
      if (asked >= 150) return;
      asked++;
      const ResourceName resource{ResourceKind::data, world_->random_between(1, 2)};
      const auto mode = static_cast<Mode>(world_->random_between(1, kModeCount - 1));
      const std::uint64_t start_at = world_->random_between(0, 3) * 100;
      const Range range{start_at, start_at + world_->random_between(1, 3) * 100};
      caches_[node]->acquire(
          resource, mode, range, [&, node, resource, mode, range](Result<CachedLock> lock) {
            answered++;
            if (!lock.ok()) return;
            for (const Use& use : in_use) {
              if (use.node != node && use.resource == resource && use.range.overlaps(range) &&
                  !compatible(use.mode, mode)) {
                conflict = true;
              }
            }
            in_use.push_back({node, resource, mode, range, lock->id});
            world_->loop(node).schedule(std::chrono::milliseconds(world_->random_between(1, 30)),
                                        [&, node, id = lock->id, resource, mode, range] {
                                          for (auto it = in_use.begin(); it != in_use.end(); ++it) {
                                            if (it->node == node && it->id == id &&
                                                it->mode == mode && it->range == range &&
                                                it->resource == resource) {
                                              in_use.erase(it);
                                              break;
                                            }
                                          }
                                          caches_[node]->release(id);
                                          act(node);
                                        });
          });
    };
    for (NodeId node : nodes_) {
      for (int user = 0; user < 3; ++user) act(node);
    }
    ASSERT_TRUE(world_->run_until([&] { return answered == asked && in_use.empty(); },
                                  world_->now_ms() + 120'000))
        << asked << " asked, " << answered << " answered, " << in_use.size() << " in use";
    EXPECT_FALSE(conflict);
  }
}

}  // namespace
}  // namespace tidepool::lockmgr
