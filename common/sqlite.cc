#include "common/sqlite.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

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
  if (durability == Durability::synced_by_caller && path == ":memory:") {
    return error(Errc::invalid_argument, "an in-memory database has no WAL");
  }
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    std::string reason = raw ? sqlite3_errmsg(raw) : "out of memory";
    sqlite3_close(raw);
    return error(Errc::io_error, "cannot open database " + path + ": " + reason);
  }
  std::unique_ptr<Database> db(new Database(raw, path));
  // FULL makes each commit durable on return. The file is this connection's alone, so it
  // holds the file lock for good (no fcntl lock/unlock per transaction: ten system calls per
  // created file) and WAL keeps its index in memory.
  const char* synchronous = durability == Durability::full             ? "PRAGMA synchronous=FULL"
                            : durability == Durability::synced_by_caller ? "PRAGMA synchronous=NORMAL"
                                                                         : "PRAGMA synchronous=OFF";
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
  if (wal_fd_ >= 0) ::close(wal_fd_);
}

namespace {
Status errno_status(const std::string& what) {
  return error(Errc::io_error, what + ": " + std::strerror(errno));
}
}  // namespace

Result<int> Database::wal_descriptor() {
  // SQLite deletes the WAL only when the connection closes; a descriptor of a WAL deleted by
  // anything else would sync nothing, so that is checked too.
  if (wal_fd_ >= 0) {
    struct stat st {};
    if (::fstat(wal_fd_, &st) != 0) return errno_status("stat " + path_ + "-wal");
    if (st.st_nlink > 0) return wal_fd_;
    ::close(wal_fd_);
    wal_fd_ = -1;
  }
  wal_fd_ = ::open((path_ + "-wal").c_str(), O_RDONLY | O_CLOEXEC);
  if (wal_fd_ < 0 && errno != ENOENT) return errno_status("open " + path_ + "-wal");
  return wal_fd_;
}

Status Database::sync_wal() {
  std::lock_guard lock(wal_mutex_);
  TP_ASSIGN_OR_RETURN(const int fd, wal_descriptor());
  // No WAL yet: nothing was committed to one.
  if (fd >= 0 && ::fdatasync(fd) != 0) return errno_status("sync " + path_ + "-wal");
  return {};
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
