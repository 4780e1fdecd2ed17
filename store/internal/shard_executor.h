// Runs a shard's operations on the one thread that owns its database, with group commit:
// everything queued while the previous batch ran runs in one transaction (each operation under
// its own savepoint, so a failing one rolls back alone), and no operation that changes the
// shard completes before that transaction is durable, on this node and wherever the batch's
// delivery takes it (the shard's mirror).
//
// The shard thread does not wait for either: the database's commits are synced by the caller
// (Durability::synced_by_caller), and a second thread — the sync thread — takes every batch
// committed since it last looked, runs their deliveries in commit order, syncs the WAL once for
// all of them, and then completes their changing operations, while the shard thread runs the
// next batches. Operations that only read complete when their batch committed; they may see
// changes that are not durable yet, as a local file system shows a file before it is synced.
// A failed sync is final: every changing operation fails from then on, until the store is
// opened again.
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

// Work an operation wants done after its transaction. `committed` runs on the shard thread as
// soon as the transaction committed, before any later operation runs: in-memory state that
// must agree with the shard's (where a new file's data goes). `durable` runs on the sync thread
// once the transaction is durable and delivered: what a crash must not find done without it
// (deleting a removed file's data); not at all when the sync or the delivery failed.
// `rolled_back` runs on the shard thread when the operation's changes are rolled back (it
// failed, or its batch did not commit): it undoes what the operation set in memory at once,
// for the operations after it in the batch to see (what a prepared part holds).
struct AfterCommit {
  std::vector<std::function<void()>> committed;
  std::vector<std::function<void()>> durable;
  std::vector<std::function<void()>> rolled_back;

  void clear() {
    committed.clear();
    durable.clear();
    rolled_back.clear();
  }
  // Runs rolled_back from its end back to `mark`, and forgets those.
  void roll_back_to(std::size_t mark) {
    while (rolled_back.size() > mark) {
      rolled_back.back()();
      rolled_back.pop_back();
    }
  }
};

// What a committed batch must reach besides the local disk before its changes count as made
// (its changes sent to the shard's mirror); runs on the sync thread. Null: nothing.
using Delivery = std::function<Status()>;

class ShardExecutor {
 public:
  // `db` must be synced by its caller (Durability::synced_by_caller). `periodic` runs on the
  // shard thread about once a second, between batches; `batch_done(committed, changing)` after
  // each batch (`changing`: it ran changing operations), on the shard thread. What either
  // returns is delivered after every batch before it. When a batch's delivery fails (its
  // changes did not reach the mirror), so do its changing operations.
  ShardExecutor(std::unique_ptr<Database> db, std::function<Delivery(Database&)> periodic,
                std::function<Delivery(bool, bool)> batch_done);
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

  using Batch = std::vector<std::unique_ptr<OperationBase>>;
  // A committed batch's changing operations, waiting for its delivery and the WAL's sync.
  struct Unsynced {
    Batch operations;
    Delivery delivery;
    std::vector<std::function<void()>> after;  // durable work
  };

  void enqueue(std::unique_ptr<OperationBase> op);
  void loop();
  void run_batch(Batch& batch);
  void sync_loop();
  void complete_when_synced(Unsynced unsynced);

  std::unique_ptr<Database> db_;
  std::function<Delivery(Database&)> periodic_;
  std::function<Delivery(bool, bool)> batch_done_;
  std::mutex mutex_;
  std::condition_variable wake_;
  Batch queue_;           // guarded by mutex_
  bool stopping_ = false;  // guarded by mutex_
  std::thread thread_;

  std::mutex sync_mutex_;
  std::condition_variable sync_wake_;
  std::vector<Unsynced> unsynced_;  // guarded by sync_mutex_
  bool sync_stopping_ = false;      // guarded by sync_mutex_
  Status failed_;  // the sync thread's: why changes fail from now on, once a sync failed
  std::thread sync_thread_;
};

}  // namespace tidepool::store::internal
