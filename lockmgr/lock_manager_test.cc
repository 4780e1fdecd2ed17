// The lock manager between nodes on the simulated network: the story of one contended lock,
// told step by step. tests/cluster/lock_sim_test.cc runs thousands of random ones.
#include "lockmgr/lock_manager.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <set>

#include "cluster/ring.h"
#include "cluster/sim.h"

namespace tidepool::lockmgr {
namespace {

using cluster::NodeId;

constexpr ResourceName kFile{ResourceKind::advisory, 42};

class LockManagerTest : public ::testing::Test {
 protected:
  LockManagerTest() {
    for (NodeId node : {1, 2, 3}) {
      LockManagerOptions options;
      options.self = node;
      options.callback_deadline = std::chrono::milliseconds(2'000);
      options.unresponsive = [this, node](NodeId silent) { unresponsive_[node].insert(silent); };
      options.may_coordinate = [this] { return leased_; };
      managers_[node] =
          std::make_unique<LockManager>(world_.loop(node), world_.transport(node), options);
    }
    view({1, 2, 3});
  }

  void view(const std::vector<NodeId>& up) {
    epoch_++;
    for (NodeId node : up) managers_.at(node)->set_view(epoch_, up);
  }

  // Asks for `mode` through `node`; the result lands in `result`.
  LockId lock(NodeId node, Mode mode, std::optional<LockResult>& result) {
    LockSpec spec{kFile, mode};
    spec.holder = "test client";
    return managers_.at(node)->lock(
        spec, [&result](const LockResult& r) { result = r; },
        [this, node](LockId holder, Mode wanted, Range) {
          blocked_[node] = {holder, wanted};
        });
  }

  bool run_until(const std::function<bool()>& done) {
    return world_.run_until(done, world_.now_ms() + 10'000);
  }

  cluster::SimWorld world_{7};
  cluster::Epoch epoch_ = 0;
  std::map<NodeId, std::unique_ptr<LockManager>> managers_;
  std::map<NodeId, std::pair<LockId, Mode>> blocked_;
  std::map<NodeId, std::set<NodeId>> unresponsive_;  // by the coordinator that reported them
  bool leased_ = true;  // whether every node holds its lease
};

TEST_F(LockManagerTest, AConflictingRequestWaitsUntilTheHolderGivesWayAfterItsCallback) {
  std::optional<LockResult> first, second;
  const LockId held = lock(1, Mode::exclusive, first);
  ASSERT_TRUE(run_until([&] { return first.has_value(); }));
  ASSERT_TRUE(first->granted());

  lock(3, Mode::protected_read, second);
  ASSERT_TRUE(run_until([&] { return blocked_.contains(1); }));
  EXPECT_EQ(blocked_[1].first, held);
  EXPECT_EQ(blocked_[1].second, Mode::protected_read);
  EXPECT_FALSE(second.has_value());
  ASSERT_EQ(managers_[3]->held().size(), 1u);
  EXPECT_EQ(managers_[3]->held()[0].record.state, LockState::waiting);
  EXPECT_EQ(managers_[3]->held()[0].holder, "test client");

  bool released = false;
  ASSERT_TRUE(managers_[1]->release(held, std::nullopt, [&released] { released = true; }).ok());
  ASSERT_TRUE(run_until([&] { return released; }));
  EXPECT_TRUE(managers_[1]->held().empty());
  ASSERT_TRUE(run_until([&] { return second.has_value(); }));
  EXPECT_TRUE(second->granted());
  EXPECT_EQ(second->lock.mode, Mode::protected_read);

  // Each node timed its calls: node 1 its lock and release, node 3 its request.
  EXPECT_EQ(managers_[1]->statistics().round_trips.count(), 2u);
  EXPECT_EQ(managers_[3]->statistics().round_trips.count(), 1u);
}

TEST_F(LockManagerTest, ACoordinatorWithoutItsLeaseGrantsNothingUntilItHoldsOneAgain) {
  leased_ = false;
  std::optional<LockResult> result;
  lock(2, Mode::exclusive, result);
  EXPECT_FALSE(run_until([&] { return result.has_value(); })) << "granted without a lease";
  std::uint64_t dropped = 0;
  for (const auto& [node, manager] : managers_) dropped += manager->statistics().unleased_dropped;
  EXPECT_GT(dropped, 1u) << "the call was not sent again";

  // Its requester sends the call again, and this time it is answered.
  leased_ = true;
  ASSERT_TRUE(run_until([&] { return result.has_value(); }));
  EXPECT_TRUE(result->granted());
}

TEST_F(LockManagerTest, ATryLockIsRefusedAtOnceAndAWaiterGivesUpAtItsDeadline) {
  std::optional<LockResult> holder, tried, timed;
  lock(1, Mode::exclusive, holder);
  ASSERT_TRUE(run_until([&] { return holder.has_value(); }));

  LockSpec spec{kFile, Mode::exclusive};
  spec.try_only = true;
  managers_[2]->lock(spec, [&](const LockResult& r) { tried = r; });
  spec.try_only = false;
  spec.timeout = std::chrono::milliseconds(300);
  managers_[3]->lock(spec, [&](const LockResult& r) { timed = r; });
  ASSERT_TRUE(run_until([&] { return tried.has_value() && timed.has_value(); }));
  EXPECT_EQ(tried->refused, Refusal::would_block);
  EXPECT_EQ(timed->refused, Refusal::timed_out);
  EXPECT_GE(world_.now_ms(), 300u);
}

TEST_F(LockManagerTest, WhenTheHolderDiesTheViewDropsItsLocksAndTheWaiterProceeds) {
  std::optional<LockResult> first, second;
  lock(1, Mode::exclusive, first);
  ASSERT_TRUE(run_until([&] { return first.has_value(); }));
  lock(3, Mode::exclusive, second);
  ASSERT_TRUE(run_until([&] { return blocked_.contains(1); }));

  // Node 1 dies holding the lock; nothing moves until the group view says so.
  world_.crash(1);
  managers_.erase(1);
  world_.run_until(world_.now_ms() + 2'000);
  EXPECT_FALSE(second.has_value());

  view({2, 3});
  ASSERT_TRUE(run_until([&] { return second.has_value(); }));
  EXPECT_TRUE(second->granted());
  ASSERT_TRUE(
      run_until([&] { return !managers_[2]->recovering() && !managers_[3]->recovering(); }));
  std::size_t coordinated = 0;
  for (auto& [node, manager] : managers_) coordinated += manager->coordinated().size();
  EXPECT_EQ(coordinated, 1u);
  EXPECT_EQ(managers_[2]->statistics().recoveries + managers_[3]->statistics().recoveries, 4u);
}

TEST_F(LockManagerTest, AHolderThatLeavesItsCallbackUnansweredIsReportedAndFencedByTheView) {
  // The holder is a node other than the resource's coordinator, the waiter the third.
  std::optional<LockResult> probe;
  const LockId probe_id = lock(1, Mode::null, probe);
  ASSERT_TRUE(run_until([&] { return probe.has_value(); }));
  NodeId coordinator = 0;
  for (auto& [node, manager] : managers_) {
    if (!manager->coordinated().empty()) coordinator = node;
  }
  ASSERT_NE(coordinator, 0u);
  ASSERT_TRUE(managers_[1]->release(probe_id).ok());
  const NodeId holder = coordinator == 1 ? 2 : 1;
  const NodeId waiter = 6 - coordinator - holder;

  std::optional<LockResult> held, wanted;
  std::optional<LockId> lost;
  LockSpec spec{kFile, Mode::exclusive};
  const LockId held_id = managers_[holder]->lock(
      spec, [&](const LockResult& r) { held = r; }, {}, [&](LockId id) { lost = id; });
  ASSERT_TRUE(run_until([&] { return held.has_value(); }));
  ASSERT_TRUE(held->granted());

  // The holder's node is cut off: it never hears the callback, and never answers it.
  world_.partition({{holder}, {coordinator, waiter}});
  lock(waiter, Mode::exclusive, wanted);
  world_.run_until(world_.now_ms() + 1'000);
  EXPECT_TRUE(unresponsive_[coordinator].empty());
  ASSERT_TRUE(run_until([&] { return unresponsive_[coordinator].contains(holder); }));
  EXPECT_FALSE(wanted.has_value());
  EXPECT_EQ(managers_[coordinator]->statistics().unresponsive_reported, 1u);

  // The group view marks it down; the holder, when it learns so, knows its lock is gone.
  epoch_++;
  for (auto& [node, manager] : managers_) manager->set_view(epoch_, {coordinator, waiter});
  ASSERT_TRUE(run_until([&] { return wanted.has_value(); }));
  EXPECT_TRUE(wanted->granted());
  EXPECT_EQ(lost, held_id);
  EXPECT_TRUE(managers_[holder]->held().empty());
  EXPECT_EQ(managers_[holder]->statistics().locks_lost, 1u);
  EXPECT_EQ(managers_[holder]->release(held_id).code(), Errc::not_found);

  // Back in the view, it asks again like any node, and waits its turn.
  world_.heal();
  std::optional<LockResult> again;
  lock(holder, Mode::protected_read, again);
  world_.run_until(world_.now_ms() + 500);
  EXPECT_FALSE(again.has_value());
  view({1, 2, 3});
  ASSERT_TRUE(run_until([&] { return blocked_.contains(waiter); }));
  EXPECT_FALSE(again.has_value());
}

TEST_F(LockManagerTest, ACallbackLostForATryLockDoesNotMakeItsHolderUnresponsive) {
  const cluster::Ring ring({1, 2, 3});
  auto coordinator_of = [&ring](std::uint64_t id) {
    return ring.owner(
        cluster::Ring::key_of(static_cast<std::uint64_t>(ResourceKind::advisory), id));
  };
  const NodeId coordinator = coordinator_of(kFile.id);
  const NodeId holder = coordinator == 1 ? 2 : 1;
  const NodeId other = 6 - coordinator - holder;
  std::uint64_t second = kFile.id + 1;
  while (coordinator_of(second) != coordinator) ++second;

  std::optional<LockResult> held, tried;
  lock(holder, Mode::exclusive, held);
  ASSERT_TRUE(run_until([&] { return held.has_value(); }));
  // The one callback a try-only request causes is lost on its way to the holder.
  world_.partition({{holder}, {coordinator, other}});
  LockSpec spec{kFile, Mode::exclusive};
  spec.try_only = true;
  managers_[other]->lock(spec, [&](const LockResult& r) { tried = r; });
  ASSERT_TRUE(run_until([&] { return tried.has_value(); }));
  EXPECT_EQ(tried->refused, Refusal::would_block);
  world_.run_until(world_.now_ms() + 100);  // the callback still on the wire is lost too
  world_.heal();
  // Later, contention elsewhere on the same coordinator keeps its reminders going well past the
  // deadline; the holder answers those, and the old silence is forgotten.
  std::optional<LockResult> first, waiting;
  LockSpec elsewhere{{ResourceKind::advisory, second}, Mode::exclusive};
  const LockId first_id =
      managers_[holder]->lock(elsewhere, [&](const LockResult& r) { first = r; });
  ASSERT_TRUE(run_until([&] { return first.has_value(); }));
  managers_[other]->lock(elsewhere, [&](const LockResult& r) { waiting = r; });
  world_.run_until(world_.now_ms() + 5'000);
  EXPECT_TRUE(unresponsive_[coordinator].empty());
  ASSERT_TRUE(managers_[holder]->release(first_id).ok());
  ASSERT_TRUE(run_until([&] { return waiting.has_value(); }));
}

TEST_F(LockManagerTest, OperationsOnLocksTheNodeDoesNotHaveAreRefused) {
  const LockId unknown{1, 999};
  EXPECT_EQ(managers_[1]->release(unknown).code(), Errc::not_found);
  EXPECT_EQ(managers_[1]->cancel(unknown).code(), Errc::not_found);
  EXPECT_EQ(managers_[1]->convert(unknown, {Mode::null}, [](const LockResult&) {}).code(),
            Errc::not_found);
  std::optional<LockResult> granted;
  const LockId id = lock(1, Mode::protected_read, granted);
  ASSERT_TRUE(run_until([&] { return granted.has_value(); }));
  EXPECT_EQ(managers_[1]->cancel(id).code(), Errc::precondition_failed);
}

}  // namespace
}  // namespace tidepool::lockmgr
