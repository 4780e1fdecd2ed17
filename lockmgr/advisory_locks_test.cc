// NFS clients' locks through different nodes of a simulated cluster, with POSIX semantics per
// owner.
#include "lockmgr/advisory_locks.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>

#include "cluster/sim.h"

namespace tidepool::lockmgr {
namespace {

using cluster::NodeId;

constexpr std::uint64_t kFile = 42;

AdvisoryLock lock_of(std::uint64_t process, Range range, bool exclusive) {
  AdvisoryLock lock;
  lock.file = kFile;
  lock.owner = {1, process};
  lock.client = "client-" + std::to_string(process);
  lock.holder = lock.client;
  lock.range = range;
  lock.exclusive = exclusive;
  return lock;
}

class AdvisoryLocksTest : public ::testing::Test {
 protected:
  AdvisoryLocksTest() {
    for (NodeId node : {1, 2, 3}) {
      LockManagerOptions options;
      options.self = node;
      managers_[node] =
          std::make_unique<LockManager>(world_.loop(node), world_.transport(node), options);
      locks_[node] = AdvisoryLocks::make(world_.loop(node), *managers_[node],
                                         [this, node] { losses_[node]++; });
    }
    for (NodeId node : {1, 2, 3}) managers_[node]->set_view(1, {1, 2, 3});
  }

  // The outcome of a lock through `node`; `granted_later` is set when a blocked one is granted.
  AdvisoryOutcome take(NodeId node, const AdvisoryLock& lock, bool wait = false,
                       bool* granted_later = nullptr) {
    std::optional<AdvisoryOutcome> outcome;
    locks_[node]->lock(
        lock, wait, [&outcome](AdvisoryOutcome o) { outcome = o; },
        [granted_later] {
          if (granted_later) *granted_later = true;
        });
    EXPECT_TRUE(run_until([&] { return outcome.has_value(); }));
    return outcome.value_or(AdvisoryOutcome::denied);
  }

  bool conflicts(NodeId node, const AdvisoryLock& lock) {
    std::optional<bool> answer;
    locks_[node]->test(lock, [&answer](Result<std::optional<AdvisoryConflict>> c) {
      answer = c.ok() && c->has_value();
    });
    EXPECT_TRUE(run_until([&] { return answer.has_value(); }));
    return answer.value_or(false);
  }

  void unlock(NodeId node, const AdvisoryLock& lock) {
    bool done = false;
    locks_[node]->unlock(lock, [&done] { done = true; });
    EXPECT_TRUE(run_until([&] { return done; }));
    settle();
  }

  // Until every lock manager has nothing in flight.
  void settle() {
    EXPECT_TRUE(run_until([this] {
      for (auto& [node, manager] : managers_) {
        if (!manager->settled()) return false;
      }
      return true;
    }));
  }

  // The ranges `node` holds for lock managers' users, in order.
  std::vector<Range> held_ranges(NodeId node) {
    std::vector<Range> ranges;
    for (const HeldLock& held : managers_[node]->held()) {
      if (held.record.state == LockState::granted) ranges.push_back(held.record.range);
    }
    std::sort(ranges.begin(), ranges.end());
    return ranges;
  }

  bool run_until(const std::function<bool()>& done) {
    return world_.run_until(done, world_.now_ms() + 10'000);
  }

  cluster::SimWorld world_{11};
  std::map<NodeId, std::unique_ptr<LockManager>> managers_;
  std::map<NodeId, std::shared_ptr<AdvisoryLocks>> locks_;
  std::map<NodeId, int> losses_;  // reports of lost locks, by node
};

TEST_F(AdvisoryLocksTest, ALockThroughOneNodeBlocksAConflictingOneThroughAnotherUntilUnlocked) {
  EXPECT_EQ(take(1, lock_of(1, {0, 100}, true)), AdvisoryOutcome::granted);
  EXPECT_EQ(take(3, lock_of(2, {50, 60}, true)), AdvisoryOutcome::denied);
  EXPECT_TRUE(conflicts(3, lock_of(2, {50, 60}, false)));
  EXPECT_FALSE(conflicts(3, lock_of(2, {100, 200}, true)));
  bool granted_later = false;
  EXPECT_EQ(take(3, lock_of(2, {50, 60}, true), true, &granted_later), AdvisoryOutcome::blocked);
  // The same request again (a client's retransmission) is the one already waiting.
  EXPECT_EQ(take(3, lock_of(2, {50, 60}, true), true, &granted_later), AdvisoryOutcome::blocked);
  unlock(1, lock_of(1, kWholeResource, true));
  EXPECT_TRUE(run_until([&] { return granted_later; }));
  EXPECT_EQ(held_ranges(3), (std::vector<Range>{{50, 60}}));
  EXPECT_TRUE(held_ranges(1).empty());
}

TEST_F(AdvisoryLocksTest, ATestLeavesNothingInTheWayOfTheNextLock) {
  // Asked through one node, then locked through another at once: on many files, so that the
  // probe's release and the lock would race on some of them if the test answered before it.
  for (std::uint64_t file = 1; file <= 50; ++file) {
    AdvisoryLock probe = lock_of(2, {0, 100}, false);
    probe.file = file;
    ASSERT_FALSE(conflicts(3, probe));
    AdvisoryLock exclusive = lock_of(1, {0, 100}, true);
    exclusive.file = file;
    ASSERT_EQ(take(1, exclusive), AdvisoryOutcome::granted) << "file " << file;
  }
}

TEST_F(AdvisoryLocksTest, ATestNamesTheLockInTheWay) {
  ASSERT_EQ(take(1, lock_of(1, {100, 200}, false)), AdvisoryOutcome::granted);
  std::optional<std::optional<AdvisoryConflict>> answer;
  locks_[3]->test(lock_of(2, {150, 300}, true),
                  [&answer](Result<std::optional<AdvisoryConflict>> c) { answer = c.value(); });
  ASSERT_TRUE(run_until([&] { return answer.has_value(); }));
  ASSERT_TRUE(answer->has_value());
  EXPECT_EQ((*answer)->owner, lock_of(1, {}, false).owner);
  EXPECT_EQ((*answer)->range, (Range{100, 200}));
  EXPECT_FALSE((*answer)->exclusive);
}

TEST_F(AdvisoryLocksTest, LocksOfANodeThatLeftTheViewAreNoLongerItsClients) {
  ASSERT_EQ(take(1, lock_of(1, {0, 100}, true)), AdvisoryOutcome::granted);
  ASSERT_EQ(take(1, lock_of(1, {200, 300}, false)), AdvisoryOutcome::granted);
  settle();
  // Node 1 is marked down while alive: its locks are gone, everywhere and on node 1.
  for (NodeId node : {1, 2, 3}) managers_[node]->set_view(2, {2, 3});
  EXPECT_EQ(take(3, lock_of(2, {0, 300}, true)), AdvisoryOutcome::granted);
  std::optional<std::vector<AdvisoryClient>> clients;
  locks_[1]->clients([&clients](std::vector<AdvisoryClient> c) { clients = std::move(c); });
  ASSERT_TRUE(run_until([&] { return clients.has_value(); }));
  EXPECT_TRUE(clients->empty());
  // Back in the view, its client asks like any other.
  for (NodeId node : {1, 2, 3}) managers_[node]->set_view(3, {1, 2, 3});
  EXPECT_EQ(take(1, lock_of(1, {0, 100}, false)), AdvisoryOutcome::denied);
}

TEST_F(AdvisoryLocksTest, ANodeThatLeftTheViewReportsItsLostLocksOnceForThemAll) {
  ASSERT_EQ(take(1, lock_of(1, {0, 100}, true)), AdvisoryOutcome::granted);
  ASSERT_EQ(take(1, lock_of(2, {200, 300}, false)), AdvisoryOutcome::granted);
  ASSERT_EQ(take(2, lock_of(3, {400, 500}, false)), AdvisoryOutcome::granted);
  settle();
  for (NodeId node : {1, 2, 3}) managers_[node]->set_view(2, {2, 3});
  ASSERT_TRUE(run_until([&] { return losses_[1] > 0; }));
  settle();
  EXPECT_EQ(losses_[1], 1);
  EXPECT_EQ(losses_[2], 0) << "node 2 lost nothing";
  // A view that takes nothing reports nothing.
  for (NodeId node : {1, 2, 3}) managers_[node]->set_view(3, {1, 2, 3});
  settle();
  EXPECT_EQ(losses_[1], 1);
}

TEST_F(AdvisoryLocksTest, RequestsUnderWayWhenTheNodeLeavesTheViewAreUnavailableNotDenied) {
  std::optional<AdvisoryOutcome> locked;
  std::optional<Result<std::optional<AdvisoryConflict>>> tested;
  locks_[1]->lock(
      lock_of(1, {0, 100}, true), false, [&locked](AdvisoryOutcome o) { locked = o; }, [] {});
  locks_[1]->test(lock_of(2, {0, 100}, true),
                  [&tested](Result<std::optional<AdvisoryConflict>> r) { tested = std::move(r); });
  // The requests are posted to node 1's loop; the view leaving it out comes first.
  world_.loop(1).post([this] {
    for (NodeId node : {1, 2, 3}) managers_[node]->set_view(2, {2, 3});
  });
  ASSERT_TRUE(run_until([&] { return locked.has_value() && tested.has_value(); }));
  EXPECT_EQ(*locked, AdvisoryOutcome::unavailable);
  EXPECT_EQ(tested->code(), Errc::unavailable);
}

// Node 1's loop, counting what is posted to it.
class CountingLoop final : public cluster::EventLoop {
 public:
  explicit CountingLoop(cluster::EventLoop& loop) : loop_(loop) {}
  std::uint64_t now_ms() const override { return loop_.now_ms(); }
  std::uint64_t now_us() const override { return loop_.now_us(); }
  void post(Task task) override {
    posted++;
    loop_.post(std::move(task));
  }
  TimerId schedule(std::chrono::milliseconds delay, Task task) override {
    return loop_.schedule(delay, std::move(task));
  }
  void cancel(TimerId timer) override { loop_.cancel(timer); }
  std::uint64_t random_between(std::uint64_t low, std::uint64_t high) override {
    return loop_.random_between(low, high);
  }
  int posted = 0;

 private:
  cluster::EventLoop& loop_;
};

TEST_F(AdvisoryLocksTest, OnceClosedNothingReachesTheLoopAnyMore) {
  // A call still under way when the node leaves the cluster must not post to a loop that is
  // about to be destroyed.
  CountingLoop loop(world_.loop(1));
  auto locks = AdvisoryLocks::make(loop, *managers_[1]);
  locks->close();
  bool answered = false;
  locks->lock(
      lock_of(1, {0, 10}, true), false, [&answered](AdvisoryOutcome) { answered = true; }, [] {});
  locks->test(lock_of(1, {0, 10}, true), [&answered](auto) { answered = true; });
  world_.run_until(world_.now_ms() + 1'000);
  EXPECT_EQ(loop.posted, 0);
  EXPECT_FALSE(answered);
}

TEST_F(AdvisoryLocksTest, EachClientsLocksAndWaitersAreCounted) {
  AdvisoryLock shared = lock_of(1, {0, 10}, false);
  shared.client = "alpha";
  AdvisoryLock other = lock_of(2, {20, 30}, false);
  other.client = "alpha";
  AdvisoryLock blocked = lock_of(3, {0, 10}, true);
  blocked.client = "beta";
  ASSERT_EQ(take(1, shared), AdvisoryOutcome::granted);
  ASSERT_EQ(take(1, other), AdvisoryOutcome::granted);
  ASSERT_EQ(take(1, blocked, true), AdvisoryOutcome::blocked);
  std::optional<std::vector<AdvisoryClient>> clients;
  locks_[1]->clients([&clients](std::vector<AdvisoryClient> c) { clients = std::move(c); });
  ASSERT_TRUE(run_until([&] { return clients.has_value(); }));
  ASSERT_EQ(clients->size(), 2u);
  EXPECT_EQ((*clients)[0].client, "alpha");
  EXPECT_EQ((*clients)[0].locks, 2u);
  EXPECT_EQ((*clients)[0].waiting, 0u);
  EXPECT_EQ((*clients)[1].client, "beta");
  EXPECT_EQ((*clients)[1].locks, 0u);
  EXPECT_EQ((*clients)[1].waiting, 1u);
}

TEST_F(AdvisoryLocksTest, AnUnlockIsDoneOnceAConflictingLockCanBeGranted) {
  ASSERT_EQ(take(1, lock_of(1, {0, 100}, true)), AdvisoryOutcome::granted);
  ASSERT_EQ(take(1, lock_of(1, {200, 300}, true)), AdvisoryOutcome::granted);
  settle();
  bool done = false;
  // All of one lock and the middle of the other.
  locks_[1]->unlock(lock_of(1, {50, 250}, true), [&done] { done = true; });
  ASSERT_TRUE(run_until([&] { return done; }));
  EXPECT_EQ(take(2, lock_of(2, {50, 250}, true)), AdvisoryOutcome::granted);
  EXPECT_EQ(take(3, lock_of(3, {49, 50}, false)), AdvisoryOutcome::denied);
  EXPECT_EQ(take(3, lock_of(3, {250, 251}, false)), AdvisoryOutcome::denied);
}

TEST_F(AdvisoryLocksTest, UnlockingTheMiddleOfALockLeavesBothEnds) {
  ASSERT_EQ(take(1, lock_of(1, {0, 100}, true)), AdvisoryOutcome::granted);
  unlock(1, lock_of(1, {40, 60}, true));
  EXPECT_EQ(held_ranges(1), (std::vector<Range>{{0, 40}, {60, 100}}));
  EXPECT_EQ(take(2, lock_of(2, {45, 55}, true)), AdvisoryOutcome::granted);
  EXPECT_EQ(take(2, lock_of(2, {30, 45}, true)), AdvisoryOutcome::denied);
  EXPECT_EQ(take(2, lock_of(2, {55, 61}, false)), AdvisoryOutcome::denied);
}

TEST_F(AdvisoryLocksTest, AnOwnersNewLockReplacesWhatItHeldOnTheRange) {
  // Upgrading its own shared lock never waits for itself.
  ASSERT_EQ(take(1, lock_of(1, {0, 100}, false)), AdvisoryOutcome::granted);
  ASSERT_EQ(take(1, lock_of(1, {20, 30}, true)), AdvisoryOutcome::granted);
  settle();
  EXPECT_EQ(held_ranges(1), (std::vector<Range>{{0, 20}, {20, 30}, {30, 100}}));
  EXPECT_FALSE(conflicts(2, lock_of(2, {0, 20}, false)));
  EXPECT_TRUE(conflicts(2, lock_of(2, {25, 26}, false)));
  // Downgrading it lets other readers in.
  ASSERT_EQ(take(1, lock_of(1, {0, 100}, false)), AdvisoryOutcome::granted);
  settle();
  EXPECT_EQ(held_ranges(1), (std::vector<Range>{{0, 100}}));
  EXPECT_EQ(take(3, lock_of(3, {25, 26}, false)), AdvisoryOutcome::granted);
  EXPECT_EQ(take(3, lock_of(4, {25, 26}, true)), AdvisoryOutcome::denied);
}

TEST_F(AdvisoryLocksTest, FreeingAClientDropsItsLocksAndItsWaitingRequests) {
  ASSERT_EQ(take(1, lock_of(1, {0, 10}, true)), AdvisoryOutcome::granted);
  ASSERT_EQ(take(1, lock_of(1, {20, 30}, false)), AdvisoryOutcome::granted);
  bool granted_later = false;
  ASSERT_EQ(take(1, lock_of(1, {100, 110}, true), true), AdvisoryOutcome::granted);
  ASSERT_EQ(take(2, lock_of(5, {100, 110}, true), true, &granted_later), AdvisoryOutcome::blocked);
  bool freed = false;
  locks_[2]->free_client("client-5", [&freed] { freed = true; });
  ASSERT_TRUE(run_until([&] { return freed; }));
  locks_[1]->free_client("client-1", [&freed] { freed = true; });
  settle();
  EXPECT_FALSE(granted_later);
  EXPECT_TRUE(held_ranges(1).empty());
  EXPECT_TRUE(managers_[2]->held().empty());
  EXPECT_EQ(take(3, lock_of(6, kWholeResource, true)), AdvisoryOutcome::granted);
}

TEST_F(AdvisoryLocksTest, ABlockedRequestCancelledIsNeverGranted) {
  ASSERT_EQ(take(1, lock_of(1, {0, 10}, true)), AdvisoryOutcome::granted);
  bool granted_later = false;
  ASSERT_EQ(take(2, lock_of(2, {0, 10}, false), true, &granted_later), AdvisoryOutcome::blocked);
  std::optional<bool> cancelled;
  locks_[2]->cancel(lock_of(2, {0, 10}, true), [&](bool c) { cancelled = c; });
  ASSERT_TRUE(run_until([&] { return cancelled.has_value(); }));
  EXPECT_FALSE(*cancelled) << "a different mode is a different request";
  cancelled.reset();
  locks_[2]->cancel(lock_of(2, {0, 10}, false), [&](bool c) { cancelled = c; });
  ASSERT_TRUE(run_until([&] { return cancelled.has_value(); }));
  EXPECT_TRUE(*cancelled);
  unlock(1, lock_of(1, {0, 10}, true));
  EXPECT_FALSE(granted_later);
  EXPECT_TRUE(managers_[2]->held().empty());
}

ShareReservation share_of(std::uint64_t process, bool read, bool write, bool deny_read,
                          bool deny_write) {
  ShareReservation share;
  share.file = kFile;
  share.owner = {2, process};
  share.client = "client-" + std::to_string(process);
  share.holder = share.client;
  share.read = read;
  share.write = write;
  share.deny_read = deny_read;
  share.deny_write = deny_write;
  return share;
}

TEST_F(AdvisoryLocksTest, ShareReservationsConflictWhereOneDeniesWhatAnotherAccesses) {
  auto reserve = [this](NodeId node, const ShareReservation& share) {
    std::optional<bool> granted;
    locks_[node]->share(share, [&granted](bool g) { granted = g; });
    EXPECT_TRUE(run_until([&] { return granted.has_value(); }));
    return granted.value_or(false);
  };
  // A reader that denies writers, through node 1.
  ASSERT_TRUE(reserve(1, share_of(1, true, false, false, true)));
  // Other readers are welcome, through any node; writers are not.
  EXPECT_TRUE(reserve(2, share_of(2, true, false, false, false)));
  EXPECT_FALSE(reserve(3, share_of(3, true, true, false, false)));
  // Nor may anybody deny reading to those already reading.
  EXPECT_FALSE(reserve(3, share_of(3, false, false, true, false)));
  // The owner itself may change its reservation: to a writer that denies everything, once the
  // other reader has gone.
  bool gone = false;
  locks_[2]->unshare(share_of(2, true, false, false, false), [&gone] { gone = true; });
  ASSERT_TRUE(run_until([&] { return gone; }));
  settle();
  EXPECT_TRUE(reserve(1, share_of(1, true, true, true, true)));
  settle();
  EXPECT_FALSE(reserve(2, share_of(2, true, false, false, false)));
  // Freeing the client frees its reservation.
  bool freed = false;
  locks_[1]->free_client("client-1", [&freed] { freed = true; });
  ASSERT_TRUE(run_until([&] { return freed; }));
  settle();
  EXPECT_TRUE(reserve(2, share_of(2, true, true, true, true)));
}

}  // namespace
}  // namespace tidepool::lockmgr
