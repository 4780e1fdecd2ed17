#include "common/sqlite.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

namespace tidepool::sqlite {
namespace {

// SQLite writes each WAL frame as two writes, its 24-byte header and its page, so a commit of
// 47 pages cost the shard thread 94 pwrite calls, a quarter of its time under renames. This VFS
// layer gathers the writes to a WAL that run on from one another and hands them to the file in
// one write: when a commit's last frame is in, before anything else reaches the file (a read, a
// sync, a truncation, a file control), when a write lands elsewhere, and at 1 MiB. The file
// therefore holds each commit when COMMIT returns, as without this layer: sync_wal(), through a
// descriptor of its own, finds it there. Measured (47 frames a commit, ext4): 290 us a commit
// in separate writes, 155 us in one. Every other file goes straight to the default VFS.
constexpr char kVfsName[] = "tidepool-wal-gather";
constexpr std::size_t kMaxGathered = 1u << 20;
// The default VFS writes at most 128 KiB - 1 bytes a call (it masks the length).
constexpr std::size_t kMaxWriteBytes = 124u << 10;
constexpr int kWalHeaderBytes = 32;
constexpr int kFrameHeaderBytes = 24;

struct GatheringWal {
  sqlite3_file base;  // pMethods: kGatheringMethods
  sqlite3_file* wal;  // the default VFS's file, in the memory that follows this struct
  std::vector<std::uint8_t> gathered;
  sqlite3_int64 gathered_at = 0;
  // The last write was the header of a commit's frame: the next one, its page, ends the commit.
  bool commit_page_next = false;
};

constexpr std::size_t kWalFileOffset = (sizeof(GatheringWal) + 15) & ~std::size_t{15};

// The VFS under this layer: the default one, taken before this layer registers.
sqlite3_vfs* default_vfs() {
  static sqlite3_vfs* const underlying = sqlite3_vfs_find(nullptr);
  return underlying;
}
GatheringWal& gathering(sqlite3_file* file) { return *reinterpret_cast<GatheringWal*>(file); }
const sqlite3_io_methods& methods(const GatheringWal& g) { return *g.wal->pMethods; }

int flush(GatheringWal& g) {
  int rc = SQLITE_OK;
  for (std::size_t done = 0; done < g.gathered.size() && rc == SQLITE_OK;) {
    const std::size_t piece = std::min(g.gathered.size() - done, kMaxWriteBytes);
    rc = methods(g).xWrite(g.wal, g.gathered.data() + done, static_cast<int>(piece),
                           g.gathered_at + static_cast<sqlite3_int64>(done));
    done += piece;
  }
  // Frames that did not reach the file belong to the transaction the error now fails.
  g.gathered.clear();
  return rc;
}

bool is_commit_frame_header(const void* data, int amount, sqlite3_int64 offset) {
  if (amount != kFrameHeaderBytes || offset < kWalHeaderBytes) return false;
  // Bytes 4..7: the database's size in pages after a commit; zero in every other frame.
  std::uint32_t pages_after_commit = 0;
  std::memcpy(&pages_after_commit, static_cast<const std::uint8_t*>(data) + 4, 4);
  return pages_after_commit != 0;
}

int gathering_write(sqlite3_file* file, const void* data, int amount, sqlite3_int64 offset) {
  GatheringWal& g = gathering(file);
  const sqlite3_int64 gathered_end = g.gathered_at + static_cast<sqlite3_int64>(g.gathered.size());
  if (!g.gathered.empty() && offset != gathered_end) {
    if (const int rc = flush(g); rc != SQLITE_OK) return rc;
  }
  if (g.gathered.empty()) g.gathered_at = offset;
  const auto* bytes = static_cast<const std::uint8_t*>(data);
  try {
    g.gathered.insert(g.gathered.end(), bytes, bytes + amount);
  } catch (const std::bad_alloc&) {
    g.gathered.clear();
    return SQLITE_IOERR_NOMEM;
  }
  const bool commit_ends = g.commit_page_next;
  g.commit_page_next = is_commit_frame_header(data, amount, offset);
  if (commit_ends || g.gathered.size() >= kMaxGathered) return flush(g);
  return SQLITE_OK;
}

int gathering_close(sqlite3_file* file) {
  GatheringWal& g = gathering(file);
  const int flushed = flush(g);
  const int closed = methods(g).xClose(g.wal);
  g.~GatheringWal();
  return flushed != SQLITE_OK ? flushed : closed;
}

// Hands over what is gathered, then passes the call on: for a method that reaches the file.
template <auto kMethod, typename... Args>
int after_flush(sqlite3_file* file, Args... args) {
  GatheringWal& g = gathering(file);
  if (const int rc = flush(g); rc != SQLITE_OK) return rc;
  return (methods(g).*kMethod)(g.wal, args...);
}

// Passes the call on: for a method that leaves the file's bytes alone.
template <auto kMethod, typename... Args>
auto passed_on(sqlite3_file* file, Args... args) {
  return (methods(gathering(file)).*kMethod)(gathering(file).wal, args...);
}

int gathering_fetch(sqlite3_file* file, sqlite3_int64 offset, int amount, void** pages) {
  GatheringWal& g = gathering(file);
  *pages = nullptr;
  if (const int rc = flush(g); rc != SQLITE_OK) return rc;
  return methods(g).xFetch ? methods(g).xFetch(g.wal, offset, amount, pages) : SQLITE_OK;
}

const sqlite3_io_methods kGatheringMethods = {
    3,
    gathering_close,
    after_flush<&sqlite3_io_methods::xRead, void*, int, sqlite3_int64>,
    gathering_write,
    after_flush<&sqlite3_io_methods::xTruncate, sqlite3_int64>,
    after_flush<&sqlite3_io_methods::xSync, int>,
    after_flush<&sqlite3_io_methods::xFileSize, sqlite3_int64*>,
    passed_on<&sqlite3_io_methods::xLock, int>,
    passed_on<&sqlite3_io_methods::xUnlock, int>,
    passed_on<&sqlite3_io_methods::xCheckReservedLock, int*>,
    after_flush<&sqlite3_io_methods::xFileControl, int, void*>,
    passed_on<&sqlite3_io_methods::xSectorSize>,
    passed_on<&sqlite3_io_methods::xDeviceCharacteristics>,
    // A WAL is never mapped as shared memory; SQLite asks only the database file for that.
    [](sqlite3_file*, int, int, int, void volatile** region) {
      *region = nullptr;
      return SQLITE_IOERR_SHMMAP;
    },
    [](sqlite3_file*, int, int, int) { return SQLITE_IOERR_SHMLOCK; },
    [](sqlite3_file*) {},
    [](sqlite3_file*, int) { return SQLITE_OK; },
    gathering_fetch,
    [](sqlite3_file* f, sqlite3_int64 offset, void* pages) {
      const sqlite3_io_methods& m = methods(gathering(f));
      return m.xUnfetch ? m.xUnfetch(gathering(f).wal, offset, pages) : SQLITE_OK;
    },
};

int gathering_open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* file, int flags,
                   int* out_flags) {
  sqlite3_vfs* underlying = default_vfs();
  if ((flags & SQLITE_OPEN_WAL) == 0)
    return underlying->xOpen(underlying, name, file, flags, out_flags);
  auto* g = new (file) GatheringWal{};
  g->wal = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) + kWalFileOffset);
  const int rc = underlying->xOpen(underlying, name, g->wal, flags, out_flags);
  if (rc != SQLITE_OK || g->wal->pMethods == nullptr) {
    if (g->wal->pMethods != nullptr) g->wal->pMethods->xClose(g->wal);
    g->~GatheringWal();
    file->pMethods = nullptr;
    return rc != SQLITE_OK ? rc : SQLITE_CANTOPEN;
  }
  g->base.pMethods = &kGatheringMethods;
  return SQLITE_OK;
}

// The gathering VFS, registered on first use (not as the default). It is the default VFS with
// its own xOpen, as SQLite's own shims (test_quota.c) are: every other method, and the
// pAppData they may use, are the default's.
const char* gathering_vfs() {
  static sqlite3_vfs vfs = [] {
    sqlite3_vfs v = *default_vfs();
    v.pNext = nullptr;
    v.szOsFile = static_cast<int>(kWalFileOffset) + default_vfs()->szOsFile;
    v.zName = kVfsName;
    v.xOpen = gathering_open;
    return v;
  }();
  static const int registered = sqlite3_vfs_register(&vfs, 0);
  return registered == SQLITE_OK ? kVfsName : nullptr;
}

}  // namespace

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
                           gathering_vfs());
  if (rc != SQLITE_OK) {
    std::string reason = raw ? sqlite3_errmsg(raw) : "out of memory";
    sqlite3_close(raw);
    return error(Errc::io_error, "cannot open database " + path + ": " + reason);
  }
  std::unique_ptr<Database> db(new Database(raw, path));
  // FULL makes each commit durable on return. The file is this connection's alone, so it
  // holds the file lock for good (no fcntl lock/unlock per transaction: ten system calls per
  // created file) and WAL keeps its index in memory. Pages of 1 KiB, not SQLite's 4 KiB: a
  // commit writes every page it changed whole to the WAL, and a shard's changes are rows of
  // 100 bytes or so in pages all over its tables and indexes; a RENAME changes five or six.
  // Measured (bench/run rename, /proc/PID/io): 20 KB written per RENAME with 4 KiB pages, 6 KB
  // with 1 KiB ones. It applies to databases made from now on; an existing one keeps its own.
  // SQLite checkpoints on the committing thread, with a sync of the WAL and one of the database
  // each time, once the WAL holds wal_autocheckpoint pages: 16 MiB of them, not its 1,000, or
  // the shard thread would stop for that some 40 times a second under a stream of RENAMEs
  // (bench/run rename, A/B: 6,480-7,720 ops/s with 1,000 pages, 8,700-11,110 with 16,384).
  const char* synchronous = durability == Durability::full             ? "PRAGMA synchronous=FULL"
                            : durability == Durability::synced_by_caller ? "PRAGMA synchronous=NORMAL"
                                                                         : "PRAGMA synchronous=OFF";
  for (const char* pragma :
       {"PRAGMA page_size=1024", "PRAGMA locking_mode=EXCLUSIVE", "PRAGMA journal_mode=WAL",
        synchronous, "PRAGMA foreign_keys=OFF", "PRAGMA cache_size=-16384",
        "PRAGMA temp_store=MEMORY", "PRAGMA wal_autocheckpoint=16384"}) {
    if (Status s = db->exec(pragma); !s.ok()) {
      return error(Errc::io_error, "cannot set up database " + path + ": " + s.message());
    }
  }
  return db;
}

Database::~Database() {
  if (const int left = sessions_.load(); left != 0) {
    std::fprintf(stderr, "database %s closed with %d session(s) still recording it\n",
                 path_.c_str(), left);
    std::abort();
  }
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

Status Database::run(const char* sql) { return prepare(sql).run(); }

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
