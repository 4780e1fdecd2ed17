// The namespace's directory locks exclude changes coordinated on different nodes as those of
// one node, and fall back to the process's own locks only where there is no cluster.
#include "cache/directory_locks.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "cluster/sim.h"

namespace tidepool::cache {
namespace {

using cluster::NodeId;
using store::InodeId;

// What one lock() got, once it answered; resetting it gives the keys back.
struct Holder {
  std::optional<Result<std::shared_ptr<void>>> held;
};

store::awaitable<void> take(std::shared_ptr<DirectoryLocks> locks, std::vector<InodeId> keys,
                            store::LockMode mode, std::shared_ptr<Holder> holder) {
  auto locking = locks->lock(std::move(keys), mode);
  holder->held = co_await std::move(locking);
}

class DirectoryLocksTest : public ::testing::Test {
 protected:
  DirectoryLocksTest() : world_(3) {
    for (NodeId node : {1u, 2u}) {
      lockmgr::LockManagerOptions options;
      options.self = node;
      managers_[node] = std::make_unique<lockmgr::LockManager>(world_.loop(node),
                                                               world_.transport(node), options);
      locks_[node] = std::make_shared<DirectoryLocks>();
      locks_[node]->attach(&world_.loop(node), managers_[node].get());
    }
    for (NodeId node : {1u, 2u}) managers_[node]->set_view(1, {1, 2});
  }

  ~DirectoryLocksTest() override {
    holders_.clear();
    run_for(10);
    for (auto& [node, locks] : locks_) locks->attach(nullptr, nullptr);
    world_.run_until(world_.now_ms() + 10);
  }

  std::shared_ptr<Holder> start(std::shared_ptr<DirectoryLocks> locks, std::vector<InodeId> keys,
                                store::LockMode mode = store::LockMode::exclusive) {
    auto holder = std::make_shared<Holder>();
    boost::asio::co_spawn(io_, take(std::move(locks), std::move(keys), mode, holder),
                          boost::asio::detached);
    holders_.push_back(holder);
    return holder;
  }
  std::shared_ptr<Holder> start(NodeId node, std::vector<InodeId> keys,
                                store::LockMode mode = store::LockMode::exclusive) {
    return start(locks_[node], std::move(keys), mode);
  }
  // Simulated milliseconds, with the coroutines run in between.
  void run_for(int milliseconds) {
    for (int step = 0; step < milliseconds; ++step) {
      run_coroutines();
      world_.run_until(world_.now_ms() + 1);
      run_coroutines();
    }
  }
  void run_coroutines() {
    io_.restart();  // poll() leaves the context stopped once it ran out of work
    io_.poll();
  }
  static bool granted(const Holder& holder) { return holder.held && holder.held->ok(); }

  cluster::SimWorld world_;
  boost::asio::io_context io_;
  std::map<NodeId, std::unique_ptr<lockmgr::LockManager>> managers_;
  std::map<NodeId, std::shared_ptr<DirectoryLocks>> locks_;
  std::vector<std::shared_ptr<Holder>> holders_;
};

TEST_F(DirectoryLocksTest, AKeyHeldOnOneNodeWaitsOnAnotherUntilItIsGivenBack) {
  auto first = start(1, {10, 11});
  run_for(100);
  ASSERT_TRUE(granted(*first));
  auto overlapping = start(2, {12, 11});
  auto apart = start(2, {13});
  run_for(500);
  EXPECT_FALSE(overlapping->held.has_value());
  EXPECT_TRUE(granted(*apart));

  first->held.reset();
  run_for(500);
  EXPECT_TRUE(granted(*overlapping));
  // And back: node 1 now waits for node 2.
  auto again = start(1, {11});
  run_for(300);
  EXPECT_FALSE(again->held.has_value());
  overlapping->held.reset();
  run_for(500);
  EXPECT_TRUE(granted(*again));
}

TEST_F(DirectoryLocksTest, SharedHoldersOnTwoNodesGoTogetherAndAnExclusiveOneWaitsForBoth) {
  auto one = start(1, {10, 11}, store::LockMode::shared);
  auto two = start(2, {11}, store::LockMode::shared);
  run_for(300);
  ASSERT_TRUE(granted(*one));
  ASSERT_TRUE(granted(*two));
  auto alone = start(1, {11});
  run_for(300);
  EXPECT_FALSE(alone->held.has_value());
  one->held.reset();
  run_for(300);
  EXPECT_FALSE(alone->held.has_value());  // node 2 still shares the key
  two->held.reset();
  run_for(500);
  ASSERT_TRUE(granted(*alone));
  auto again = start(2, {11}, store::LockMode::shared);
  run_for(300);
  EXPECT_FALSE(again->held.has_value());
  alone->held.reset();
  run_for(500);
  EXPECT_TRUE(granted(*again));
}

TEST_F(DirectoryLocksTest, TwoChangesOfOneNodeWaitForEachOther) {
  auto first = start(1, {10});
  run_for(100);
  ASSERT_TRUE(granted(*first));
  auto second = start(1, {10, 20});
  run_for(300);
  EXPECT_FALSE(second->held.has_value());
  first->held.reset();
  run_for(100);
  EXPECT_TRUE(granted(*second));
}

TEST_F(DirectoryLocksTest, WithoutALockManagerTheProcesssLocksServe) {
  auto alone = std::make_shared<DirectoryLocks>();
  auto first = start(alone, {10});
  run_for(1);
  ASSERT_TRUE(granted(*first));
  auto second = start(alone, {10});
  run_for(10);
  EXPECT_FALSE(second->held.has_value());
  first->held.reset();
  run_for(1);
  EXPECT_TRUE(granted(*second));
  second->held.reset();

  // So they do again on a node that left its cluster.
  locks_[1]->attach(nullptr, nullptr);
  auto after = start(1, {10});
  run_for(1);
  ASSERT_TRUE(granted(*after));
  auto waiting = start(1, {10});
  run_for(10);
  EXPECT_FALSE(waiting->held.has_value());
  after->held.reset();
  run_for(1);
  EXPECT_TRUE(granted(*waiting));
}

TEST_F(DirectoryLocksTest, ALockTheNodeKeptIsTakenAgainWithoutTheLockManager) {
  auto first = start(1, {10});
  run_for(100);
  ASSERT_TRUE(granted(*first));
  first->held.reset();
  run_for(10);
  // Granted within the same turn of the coroutines: no message went to the loop.
  auto again = start(1, {10});
  run_coroutines();
  EXPECT_TRUE(granted(*again));
  // And still given up when another node wants it.
  again->held.reset();
  auto elsewhere = start(2, {10});
  run_for(500);
  EXPECT_TRUE(granted(*elsewhere));
}

}  // namespace
}  // namespace tidepool::cache
