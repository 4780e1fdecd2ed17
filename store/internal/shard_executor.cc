#include "store/internal/shard_executor.h"

#include <spdlog/spdlog.h>

#include <chrono>

namespace tidepool::store::internal {

namespace {
constexpr auto kPeriod = std::chrono::seconds(1);
}

ShardExecutor::ShardExecutor(std::unique_ptr<Database> db,
                             std::function<void(Database&)> periodic,
                             std::function<Status(bool)> batch_done)
    : db_(std::move(db)), periodic_(std::move(periodic)), batch_done_(std::move(batch_done)) {}

void ShardExecutor::start() { thread_ = std::thread([this] { loop(); }); }

ShardExecutor::~ShardExecutor() { stop(); }

void ShardExecutor::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
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
      if (periodic_) periodic_(*db_);
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
  Status begun = writes ? db_->exec("BEGIN IMMEDIATE") : Status{};
  if (!begun.ok()) {
    for (auto& op : batch) op->fail(begun);
    committed = false;
  } else {
    for (auto& op : batch) {
      if (!op->mutates) {
        op->execute(*db_, after);
        continue;
      }
      Status s = db_->exec("SAVEPOINT op");
      std::size_t after_mark = after.size();
      if (s.ok() && !op->execute(*db_, after)) {
        s = db_->exec("ROLLBACK TO op");
        after.resize(after_mark);
      }
      if (s.ok()) s = db_->exec("RELEASE op");
      if (!s.ok()) op->fail(s);
    }
    if (writes) {
      if (Status commit = db_->exec("COMMIT"); !commit.ok()) {
        spdlog::error("shard commit failed: {}", commit.to_string());
        (void)db_->exec("ROLLBACK");
        after.clear();
        for (auto& op : batch) op->fail(error(Errc::io_error, "commit failed"));
        committed = false;
      }
    }
  }
  // Caches forget a removed inode before its data file goes, so a reader that still finds it
  // cached finds its data too (or sees the entry gone when it checks again).
  if (batch_done_) {
    if (Status done = batch_done_(committed); !done.ok()) {
      for (auto& op : batch) {
        if (op->mutates) op->fail(done);
      }
    }
  }
  for (auto& work : after) work();
  for (auto& op : batch) op->complete();
}

}  // namespace tidepool::store::internal
