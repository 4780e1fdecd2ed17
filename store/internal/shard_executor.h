// Runs a shard's operations on the one thread that owns its database, with group commit:
// everything queued while the previous batch was committing runs in one transaction (each
// operation under its own savepoint, so a failing one rolls back alone), and no operation
// completes before that transaction is durable.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/sqlite.h"

namespace tidepool::store::internal {

using sqlite::Database;

// Work an operation wants done once its transaction is durable (e.g. deleting a data file).
using AfterCommit = std::vector<std::function<void()>>;

class ShardExecutor {
 public:
  // `periodic` runs on the shard thread about once a second, between batches;
  // `batch_done(committed)` after each batch, before its operations complete. When it fails
  // (the batch's changes did not reach the shard's mirror), so do the batch's changes.
  ShardExecutor(std::unique_ptr<Database> db, std::function<void(Database&)> periodic,
                std::function<Status(bool)> batch_done);
  ~ShardExecutor();  // stops the thread after the queued work ran

  // Until start(), the caller's thread may use the database directly.
  void start();
  // Runs what is queued; operations queued later fail as unavailable.
  void stop();

  // Runs work(db, after_commit) on the shard thread and resumes the caller on its executor with
  // the result. `mutates` opens a write transaction; read-only work skips it.
  template <typename T, typename Work>
  boost::asio::awaitable<Result<T>> run(bool mutates, Work work) {
    return boost::asio::async_initiate<const boost::asio::use_awaitable_t<>&, void(Result<T>)>(
        [this, mutates, work = std::move(work)](auto handler) mutable {
          using Handler = decltype(handler);
          enqueue(std::make_unique<Operation<T, Work, Handler>>(mutates, std::move(work),
                                                                std::move(handler)));
        },
        boost::asio::use_awaitable);
  }

 private:
  struct OperationBase {
    explicit OperationBase(bool m) : mutates(m) {}
    virtual ~OperationBase() = default;
    virtual bool execute(Database& db, AfterCommit& after) = 0;  // false: roll back
    virtual void fail(Status status) = 0;
    virtual void complete() = 0;
    const bool mutates;
  };

  template <typename T, typename Work, typename Handler>
  struct Operation final : OperationBase {
    Operation(bool m, Work w, Handler h)
        : OperationBase(m),
          work(std::move(w)),
          handler(std::move(h)),
          keep_alive(boost::asio::make_work_guard(boost::asio::get_associated_executor(handler))) {}
    bool execute(Database& db, AfterCommit& after) override {
      result.emplace(work(db, after));
      return result->ok();
    }
    void fail(Status status) override { result.emplace(std::move(status)); }
    void complete() override {
      auto executor = boost::asio::get_associated_executor(handler);
      boost::asio::post(executor, [h = std::move(handler), r = std::move(*result)]() mutable {
        std::move(h)(std::move(r));
      });
      keep_alive.reset();
    }
    Work work;
    Handler handler;
    // The caller's executor must not run out of work while the shard thread holds its handler.
    boost::asio::executor_work_guard<boost::asio::associated_executor_t<Handler>> keep_alive;
    std::optional<Result<T>> result;
  };

  void enqueue(std::unique_ptr<OperationBase> op);
  void loop();
  void run_batch(std::vector<std::unique_ptr<OperationBase>>& batch);

  std::unique_ptr<Database> db_;
  std::function<void(Database&)> periodic_;
  std::function<Status(bool)> batch_done_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::unique_ptr<OperationBase>> queue_;  // guarded by mutex_
  bool stopping_ = false;                              // guarded by mutex_
  std::thread thread_;
};

}  // namespace tidepool::store::internal
