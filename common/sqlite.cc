#include "common/sqlite.h"

#include <cstdlib>

namespace tidepool::sqlite {

bool Statement::next_row() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc != SQLITE_DONE) {
    status_ = error(Errc::io_error, sqlite3_errmsg(sqlite3_db_handle(stmt_)));
  }
  return false;
}

Status Statement::run() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_DONE || rc == SQLITE_ROW) return {};
  if (rc == SQLITE_CONSTRAINT) {
    return error(Errc::already_exists, sqlite3_errmsg(sqlite3_db_handle(stmt_)));
  }
  if (rc == SQLITE_FULL) return error(Errc::no_space, "database disk full");
  return error(Errc::io_error, sqlite3_errmsg(sqlite3_db_handle(stmt_)));
}

std::string Statement::blob(int column) const {
  const void* data = sqlite3_column_blob(stmt_, column);
  int size = sqlite3_column_bytes(stmt_, column);
  return data ? std::string(static_cast<const char*>(data), static_cast<std::size_t>(size))
              : std::string();
}

Result<std::unique_ptr<Database>> Database::open(const std::string& path,
                                                  Durability durability) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    std::string reason = raw ? sqlite3_errmsg(raw) : "out of memory";
    sqlite3_close(raw);
    return error(Errc::io_error, "cannot open database " + path + ": " + reason);
  }
  std::unique_ptr<Database> db(new Database(raw));
  // FULL makes each commit durable on return. The file is this connection's alone, so it
  // holds the file lock for good (no fcntl lock/unlock per transaction: ten system calls per
  // created file) and WAL keeps its index in memory.
  const char* synchronous =
      durability == Durability::full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=OFF";
  for (const char* pragma : {"PRAGMA locking_mode=EXCLUSIVE", "PRAGMA journal_mode=WAL",
                             synchronous, "PRAGMA foreign_keys=OFF",
                             "PRAGMA cache_size=-16384", "PRAGMA temp_store=MEMORY"}) {
    if (Status s = db->exec(pragma); !s.ok()) {
      return error(Errc::io_error, "cannot set up database " + path + ": " + s.message());
    }
  }
  return db;
}

Database::~Database() {
  for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

Status Database::exec(std::string_view sql) {
  std::string text(sql);
  char* message = nullptr;
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return {};
  std::string reason = message ? message : sqlite3_errstr(rc);
  sqlite3_free(message);
  return error(rc == SQLITE_FULL ? Errc::no_space : Errc::io_error, reason);
}

Statement Database::prepare(const char* sql) {
  auto [it, inserted] = statements_.try_emplace(sql, nullptr);
  if (inserted) {
    if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &it->second, nullptr) !=
        SQLITE_OK) {
      // Statements are compile-time constants of this module: failing to prepare one is a bug.
      std::abort();
    }
  }
  return Statement(it->second);
}

}  // namespace tidepool::sqlite
