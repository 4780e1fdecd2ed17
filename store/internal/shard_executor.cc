#include "store/internal/shard_executor.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "common/thread_name.h"

namespace tidepool::store::internal {

namespace {
constexpr auto kPeriod = std::chrono::seconds(1);
}  // namespace

ShardExecutor::ShardExecutor(std::unique_ptr<Database> db,
                             std::function<Delivery(Database&)> periodic,
                             std::function<Delivery(bool, bool)> batch_done)
    : db_(std::move(db)), periodic_(std::move(periodic)), batch_done_(std::move(batch_done)) {}

void ShardExecutor::start() {
  sync_thread_ = std::thread([this] {
    name_this_thread("shard-sync");
    sync_loop();
  });
  thread_ = std::thread([this] {
    name_this_thread("shard");
    loop();
  });
}

ShardExecutor::~ShardExecutor() { stop(); }

void ShardExecutor::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  // The shard thread is gone: what it handed over is all there is to sync.
  {
    std::lock_guard lock(sync_mutex_);
    sync_stopping_ = true;
  }
  sync_wake_.notify_one();
  if (sync_thread_.joinable()) sync_thread_.join();
}

void ShardExecutor::enqueue(std::unique_ptr<OperationBase> op) {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      queue_.push_back(std::move(op));
      wake_.notify_one();
      return;
    }
  }
  op->fail(error(Errc::unavailable, "the store is closed"));
  op->complete();
}

void ShardExecutor::loop() {
  std::vector<std::unique_ptr<OperationBase>> batch;
  auto last_periodic = std::chrono::steady_clock::now();
  for (;;) {
    bool stopping;
    {
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, kPeriod, [this] { return stopping_ || !queue_.empty(); });
      batch.swap(queue_);
      stopping = stopping_;
    }
    if (!batch.empty()) {
      run_batch(batch);
      batch.clear();
    }
    auto now = std::chrono::steady_clock::now();
    if (stopping || now - last_periodic >= kPeriod) {
      if (periodic_) {
        if (Delivery delivery = periodic_(*db_)) complete_when_synced({{}, std::move(delivery), {}});
      }
      last_periodic = now;
    }
    if (stopping) {
      std::lock_guard lock(mutex_);
      if (queue_.empty()) return;
    }
  }
}

void ShardExecutor::run_batch(std::vector<std::unique_ptr<OperationBase>>& batch) {
  bool writes = false;
  for (auto& op : batch) writes = writes || op->mutates;

  AfterCommit after;
  bool committed = true;
  Status begun = writes ? db_->run("BEGIN IMMEDIATE") : Status{};
  if (!begun.ok()) {
    for (auto& op : batch) op->fail(begun);
    committed = false;
  } else {
    for (auto& op : batch) {
      if (!op->mutates) {
        op->execute(*db_, after);
        continue;
      }
      Status s = db_->run("SAVEPOINT op");
      const std::size_t committed_mark = after.committed.size();
      const std::size_t durable_mark = after.durable.size();
      const std::size_t rolled_back_mark = after.rolled_back.size();
      if (s.ok() && !op->execute(*db_, after)) {
        s = db_->run("ROLLBACK TO op");
        after.committed.resize(committed_mark);
        after.durable.resize(durable_mark);
        after.roll_back_to(rolled_back_mark);
      }
      if (s.ok()) s = db_->run("RELEASE op");
      if (!s.ok()) op->fail(s);
    }
    if (writes) {
      if (Status commit = db_->run("COMMIT"); !commit.ok()) {
        spdlog::error("shard commit failed: {}", commit.to_string());
        (void)db_->run("ROLLBACK");
        after.roll_back_to(0);
        after.clear();
        for (auto& op : batch) op->fail(error(Errc::io_error, "commit failed"));
        committed = false;
      }
    }
  }
  Unsynced unsynced{{}, batch_done_ ? batch_done_(committed, writes) : nullptr,
                    std::move(after.durable)};
  for (auto& work : after.committed) work();
  for (auto& op : batch) {
    if (committed && op->mutates) {
      unsynced.operations.push_back(std::move(op));
    } else {
      op->complete();
    }
  }
  if (!unsynced.operations.empty() || unsynced.delivery || !unsynced.after.empty()) {
    complete_when_synced(std::move(unsynced));
  }
}

void ShardExecutor::complete_when_synced(Unsynced unsynced) {
  {
    std::lock_guard lock(sync_mutex_);
    unsynced_.push_back(std::move(unsynced));
  }
  sync_wake_.notify_one();
}

void ShardExecutor::sync_loop() {
  std::vector<Unsynced> taken;
  for (;;) {
    {
      std::unique_lock lock(sync_mutex_);
      sync_wake_.wait(lock, [this] { return sync_stopping_ || !unsynced_.empty(); });
      if (unsynced_.empty()) return;  // stopping, and everything handed over is done
      taken.swap(unsynced_);
    }
    std::vector<Status> outcomes;
    for (Unsynced& batch : taken) {
      outcomes.push_back(batch.delivery ? batch.delivery() : Status{});
      if (!outcomes.back().ok() && batch.operations.empty()) {
        spdlog::error("shard changes not delivered: {}", outcomes.back().to_string());
      }
    }
    // One sync covers every batch committed before it, however many were handed over. A
    // failed one is final (fail-stop): it may have dropped the pages it could not write, and
    // WAL recovery stops at the first missing frame, taking every later commit with it.
    const bool waited_for = std::any_of(taken.begin(), taken.end(), [](const Unsynced& batch) {
      return !batch.operations.empty() || !batch.after.empty();
    });
    if (failed_.ok() && waited_for) {
      if (Status synced = db_->sync_wal(); !synced.ok()) {
        spdlog::error("shard WAL sync failed; the shard takes no more changes: {}",
                      synced.to_string());
        failed_ = error(Errc::io_error, "the change may not be durable: " + synced.message());
      }
    }
    if (!failed_.ok()) {
      for (Status& outcome : outcomes) outcome = failed_;
    }
    for (std::size_t i = 0; i < taken.size(); ++i) {
      // Only what is durable here and on the mirror counts as made (a removed file's data
      // stays when its removal may not be).
      if (outcomes[i].ok()) {
        for (auto& work : taken[i].after) work();
      }
      for (auto& op : taken[i].operations) {
        if (!outcomes[i].ok()) op->fail(outcomes[i]);
        op->complete();
      }
    }
    taken.clear();
  }
}

}  // namespace tidepool::store::internal
