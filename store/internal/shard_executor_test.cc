#include "store/internal/shard_executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <future>
#include <thread>

#include "store/internal/test_util.h"

namespace tidepool::store::internal {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;

constexpr auto kPatience = 10s;

using Work = std::function<Result<int>(Database&, AfterCommit&)>;

class ShardExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_test_directory("tidepool-shard-executor-test");
    std::filesystem::create_directories(dir_);
    auto db = Database::open((dir_ / "shard.db").string(), Database::Durability::synced_by_caller);
    ASSERT_TRUE(db.ok()) << db.status().to_string();
    ASSERT_TRUE((*db)->exec("CREATE TABLE t(v INTEGER)").ok());
    // A change that breaks the deferred key fails its batch's COMMIT.
    ASSERT_TRUE((*db)->exec("PRAGMA foreign_keys = ON").ok());
    ASSERT_TRUE((*db)->exec("CREATE TABLE parent(id INTEGER PRIMARY KEY)").ok());
    ASSERT_TRUE((*db)
                    ->exec("CREATE TABLE child(p INTEGER REFERENCES parent(id) "
                           "DEFERRABLE INITIALLY DEFERRED)")
                    .ok());
    executor_ = std::make_unique<ShardExecutor>(
        std::move(*db), [](Database&) -> Delivery { return nullptr; },
        [this](bool, bool) -> Delivery {
          std::lock_guard lock(mutex_);
          return delivery_;
        });
    executor_->start();
    io_thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    executor_.reset();
    work_.reset();
    io_thread_.join();
    std::filesystem::remove_all(dir_);
  }

  // What every batch from now on must deliver.
  void deliver(Delivery delivery) {
    std::lock_guard lock(mutex_);
    delivery_ = std::move(delivery);
  }

  std::future<Result<int>> submit(bool mutates, Work work) {
    return asio::co_spawn(io_, executor_->run<int>(mutates, std::move(work)), asio::use_future);
  }

  static Work insert(int v) {
    return [v](Database& db, AfterCommit&) -> Result<int> {
      auto stmt = db.prepare("INSERT INTO t(v) VALUES(?)");
      stmt.bind(1, static_cast<std::int64_t>(v));
      TP_RETURN_IF_ERROR(stmt.run());
      return v;
    };
  }

  // A finished operation's value, or -1 when it failed.
  static int value_of(std::future<Result<int>>& done) {
    Result<int> r = done.get();
    return r.ok() ? *r : -1;
  }

  static Result<int> count(Database& db, AfterCommit&) {
    auto rows = db.prepare("SELECT count(*) FROM t");
    if (!rows.next_row()) return rows.status();
    return static_cast<int>(rows.int64(0));
  }

  std::filesystem::path dir_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_ = asio::make_work_guard(io_);
  std::thread io_thread_;
  std::mutex mutex_;
  Delivery delivery_;
  std::unique_ptr<ShardExecutor> executor_;
};

TEST_F(ShardExecutorTest, AChangeCompletesAfterItsDeliveryAndReadsDoNotWaitForIt) {
  // Shared with the deliveries, which the sync thread may still run after the test's body
  // (every batch has one here, and the executor stops in TearDown).
  struct HeldUp {
    std::promise<void> started;
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    std::atomic<bool> first = true;
  };
  auto held_up = std::make_shared<HeldUp>();
  std::future<void> started = held_up->started.get_future();
  deliver([held_up] {
    if (held_up->first.exchange(false)) {
      held_up->started.set_value();
      held_up->released.wait_for(kPatience);
    }
    return Status{};
  });
  auto change = submit(true, insert(7));
  ASSERT_EQ(started.wait_for(kPatience), std::future_status::ready);
  // The shard thread goes on while the delivery is held up: a read sees the commit.
  auto read = submit(false, &ShardExecutorTest::count);
  ASSERT_EQ(read.wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(value_of(read), 1);
  EXPECT_EQ(change.wait_for(100ms), std::future_status::timeout);
  held_up->release.set_value();
  ASSERT_EQ(change.wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(value_of(change), 7);
}

TEST_F(ShardExecutorTest, AFailedDeliveryFailsItsChangeWithItsReasonAndSkipsItsDurableWork) {
  deliver([] { return error(Errc::unavailable, "the mirror is unreachable"); });
  std::atomic<bool> durable_work_ran = false;
  auto change = submit(true, [&](Database& db, AfterCommit& after) -> Result<int> {
    after.durable.push_back([&] { durable_work_ran = true; });
    return insert(1)(db, after);
  });
  ASSERT_EQ(change.wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(change.get().code(), Errc::unavailable);
  EXPECT_FALSE(durable_work_ran.load());
  // Reads are not delivered: they complete.
  auto read = submit(false, &ShardExecutorTest::count);
  ASSERT_EQ(read.wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(value_of(read), 1);
}

TEST_F(ShardExecutorTest, DurableWorkRunsBeforeItsChangeCompletes) {
  std::atomic<bool> durable_work_ran = false;
  auto change = submit(true, [&](Database& db, AfterCommit& after) -> Result<int> {
    after.durable.push_back([&] { durable_work_ran = true; });
    return insert(3)(db, after);
  });
  ASSERT_EQ(change.wait_for(kPatience), std::future_status::ready);
  EXPECT_TRUE(change.get().ok());
  EXPECT_TRUE(durable_work_ran.load());
}

TEST_F(ShardExecutorTest, AFailingChangeRollsBackAloneAndDropsItsAfterWork) {
  std::atomic<int> work_ran = 0;
  auto good = submit(true, insert(1));
  auto bad = submit(true, [&](Database& db, AfterCommit& after) -> Result<int> {
    after.committed.push_back([&] { ++work_ran; });
    after.durable.push_back([&] { ++work_ran; });
    TP_RETURN_IF_ERROR(insert(2)(db, after).status());
    return error(Errc::invalid_argument, "refused after writing");
  });
  ASSERT_EQ(good.wait_for(kPatience), std::future_status::ready);
  ASSERT_EQ(bad.wait_for(kPatience), std::future_status::ready);
  EXPECT_TRUE(good.get().ok());
  EXPECT_EQ(bad.get().code(), Errc::invalid_argument);
  EXPECT_EQ(work_ran.load(), 0);
  auto read = submit(false, &ShardExecutorTest::count);
  ASSERT_EQ(read.wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(value_of(read), 1);
}

TEST_F(ShardExecutorTest, WhatAChangeSetInMemoryIsUndoneWhenItsChangesAreRolledBack) {
  std::atomic<int> undone = 0;
  auto undo = [&](AfterCommit& after) { after.rolled_back.push_back([&] { ++undone; }); };
  auto refused = submit(true, [&](Database&, AfterCommit& after) -> Result<int> {
    undo(after);
    return error(Errc::invalid_argument, "refused");
  });
  ASSERT_EQ(refused.wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(refused.get().code(), Errc::invalid_argument);
  EXPECT_EQ(undone.load(), 1);

  auto made = submit(true, [&](Database& db, AfterCommit& after) -> Result<int> {
    undo(after);
    return insert(3)(db, after);
  });
  ASSERT_EQ(made.wait_for(kPatience), std::future_status::ready);
  EXPECT_TRUE(made.get().ok());
  EXPECT_EQ(undone.load(), 1);

  auto orphan = submit(true, [&](Database& db, AfterCommit& after) -> Result<int> {
    undo(after);
    auto stmt = db.prepare("INSERT INTO child(p) VALUES(42)");
    TP_RETURN_IF_ERROR(stmt.run());
    return 0;
  });
  ASSERT_EQ(orphan.wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(orphan.get().code(), Errc::io_error);
  EXPECT_EQ(undone.load(), 2);
}

}  // namespace
}  // namespace tidepool::store::internal
