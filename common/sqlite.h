// A thin RAII layer over one SQLite connection with a cache of prepared statements.
// Not thread-safe: a Database belongs to the one thread that uses it (a store shard, the
// group view's Raft log).
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/status.h"

namespace tidepool::sqlite {

class Statement {
 public:
  explicit Statement(sqlite3_stmt* stmt) : stmt_(stmt) {}
  ~Statement() { sqlite3_reset(stmt_); sqlite3_clear_bindings(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int index, std::int64_t v) {
    sqlite3_bind_int64(stmt_, index, v);
    return *this;
  }
  Statement& bind(int index, std::uint64_t v) { return bind(index, static_cast<std::int64_t>(v)); }
  Statement& bind(int index, std::uint32_t v) { return bind(index, static_cast<std::int64_t>(v)); }
  Statement& bind(int index, unsigned long long v) {  // NOLINT(google-runtime-int): Raft's types
    return bind(index, static_cast<std::int64_t>(v));
  }
  Statement& bind(int index, std::string_view text) {
    sqlite3_bind_blob(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& bind(int index, std::span<const std::uint8_t> blob) {
    sqlite3_bind_blob(stmt_, index, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& bind_null(int index) {
    sqlite3_bind_null(stmt_, index);
    return *this;
  }

  // True while a row is available; errors end the iteration and are reported by status().
  bool next_row();
  // Runs a statement that returns no rows.
  Status run();
  Status status() const { return status_; }

  std::int64_t int64(int column) const { return sqlite3_column_int64(stmt_, column); }
  std::string blob(int column) const;
  bool is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

 private:
  sqlite3_stmt* stmt_;
  Status status_;
};

class Database {
 public:
  enum class Durability {
    // Each commit is on disk when it returns (WAL, synchronous=FULL).
    full,
    // Commits may be lost in a crash: for data rebuilt from a durable source at start.
    rebuildable,
    // A commit is written to the WAL but made durable only by a later sync_wal(), which any
    // thread may call while the owner goes on with the next transaction: the fsync leaves the
    // owner's path. WAL with synchronous=NORMAL: SQLite still syncs the WAL before a
    // checkpoint, the database after it, and the WAL's header when it starts over.
    synced_by_caller,
  };
  // Opens or creates the database file (":memory:" for one that lives in this process only).
  // The connection holds the file lock for as long as it is open.
  static Result<std::unique_ptr<Database>> open(const std::string& path,
                                                Durability durability = Durability::full);
  ~Database();

  Status exec(std::string_view sql);
  // One statement that returns no rows, prepared once and kept: for those a connection runs
  // over and over (BEGIN, SAVEPOINT, COMMIT), which exec() would parse anew every time.
  Status run(const char* sql);
  // A prepared statement from the cache; reset when the Statement goes out of scope.
  Statement prepare(const char* sql);
  std::int64_t changes() const { return sqlite3_changes64(db_); }
  std::string last_error() const { return sqlite3_errmsg(db_); }
  sqlite3* handle() { return db_; }
  // Counts the sessions (sqlite3session_create) recording this connection: each must be deleted
  // before the connection closes, as deleting one locks and writes the connection. A
  // connection closed with one left aborts the process rather than let it write freed memory.
  void count_session(int change) { sessions_ += change; }

  // synced_by_caller only. Makes every transaction committed before the call durable. Safe from
  // any thread, concurrently with the owner's transactions.
  Status sync_wal();

 private:
  Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  Result<int> wal_descriptor();

  sqlite3* db_;
  const std::string path_;
  std::unordered_map<const char*, sqlite3_stmt*> statements_;
  // synced_by_caller: this process's own descriptor of the WAL (fsync reaches a file through
  // any descriptor), opened on first use, under wal_mutex_.
  std::mutex wal_mutex_;
  int wal_fd_ = -1;
  std::atomic<int> sessions_{0};
};

}  // namespace tidepool::sqlite
