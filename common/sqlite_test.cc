#include "common/sqlite.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>

namespace tidepool::sqlite {
namespace {

namespace fs = std::filesystem;
using Durability = Database::Durability;

class SyncedByCallerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/tidepool-sqlite-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    path_ = dir_ + "/test.db";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<Database> open(Durability durability = Durability::synced_by_caller) {
    auto db = Database::open(path_, durability);
    EXPECT_TRUE(db.ok()) << db.status().to_string();
    return db.ok() ? std::move(*db) : nullptr;
  }

  static std::int64_t count_rows(Database& db) {
    auto rows = db.prepare("SELECT count(*) FROM t");
    return rows.next_row() ? rows.int64(0) : -1;
  }

  // One transaction adding a row of `bytes` bytes.
  static void add_row(Database& db, std::size_t bytes) {
    ASSERT_TRUE(db.exec("BEGIN IMMEDIATE").ok());
    auto insert = db.prepare("INSERT INTO t(v) VALUES(?)");
    const std::string value(bytes, 'x');
    insert.bind(1, std::string_view(value));
    ASSERT_TRUE(insert.run().ok());
    ASSERT_TRUE(db.exec("COMMIT").ok());
  }

  std::uintmax_t wal_size() const {
    std::error_code ec;
    const auto size = fs::file_size(path_ + "-wal", ec);
    return ec ? 0 : size;
  }

  std::string dir_;
  std::string path_;
};

TEST_F(SyncedByCallerTest, AnInMemoryDatabaseIsRefused) {
  auto db = Database::open(":memory:", Durability::synced_by_caller);
  EXPECT_EQ(db.code(), Errc::invalid_argument);
}

TEST_F(SyncedByCallerTest, CommitsAreFoundAgainAfterClosing) {
  {
    auto db = open();
    ASSERT_TRUE(db->exec("CREATE TABLE t(v BLOB)").ok());
    for (int i = 0; i < 20; ++i) add_row(*db, 100);
    ASSERT_TRUE(db->sync_wal().ok());
  }
  // Closing copied the WAL into the database and deleted it.
  EXPECT_FALSE(fs::exists(path_ + "-wal"));
  auto db = open(Durability::full);
  EXPECT_EQ(count_rows(*db), 20);
}

TEST_F(SyncedByCallerTest, AProcessThatDiesWithoutClosingLeavesItsSyncedCommitsInTheWal) {
  {
    auto db = open();
    ASSERT_TRUE(db->exec("CREATE TABLE t(v BLOB)").ok());
  }
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto db = Database::open(path_, Durability::synced_by_caller);
    if (!db.ok()) ::_exit(2);
    for (int i = 0; i < 7; ++i) {
      if (!(*db)->exec("INSERT INTO t(v) VALUES('row')").ok()) ::_exit(3);
    }
    ::_exit((*db)->sync_wal().ok() ? 0 : 4);  // no destructor: nothing is checkpointed
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_GT(wal_size(), 0u);
  auto db = open();
  EXPECT_EQ(count_rows(*db), 7);
}

TEST_F(SyncedByCallerTest, SqlitesOwnCheckpointsKeepTheWalSmall) {
  auto db = open();
  ASSERT_TRUE(db->exec("CREATE TABLE t(v BLOB)").ok());
  // 1,200 transactions of 30 KB each: 36 MB through a WAL checkpointed every 16 MiB.
  for (int i = 0; i < 1200; ++i) add_row(*db, 30000);
  EXPECT_LT(wal_size(), 17u << 20);
  EXPECT_EQ(count_rows(*db), 1200);
}

TEST_F(SyncedByCallerTest, NewDatabasesHaveSmallPagesAndOldOnesKeepTheirs) {
  auto page_size = [](Database& db) {
    auto rows = db.prepare("PRAGMA page_size");
    return rows.next_row() ? rows.int64(0) : -1;
  };
  {
    auto db = open();
    ASSERT_TRUE(db->exec("CREATE TABLE t(v BLOB)").ok());
    EXPECT_EQ(page_size(*db), 1024);
  }
  const std::string old_path = dir_ + "/old.db";
  {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(old_path.c_str(), &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw,
                           "PRAGMA page_size=4096; CREATE TABLE t(v BLOB); "
                           "INSERT INTO t(v) VALUES('kept')",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(raw);
  }
  path_ = old_path;
  auto db = open();
  EXPECT_EQ(page_size(*db), 4096);
  EXPECT_EQ(count_rows(*db), 1);
  add_row(*db, 100);
  EXPECT_EQ(count_rows(*db), 2);
}

TEST_F(SyncedByCallerTest, AnotherThreadSyncsWhileTheOwnerCommits) {
  auto db = open();
  ASSERT_TRUE(db->exec("CREATE TABLE t(v BLOB)").ok());
  std::atomic<bool> done{false};
  std::atomic<int> syncs{0};
  std::atomic<int> failures{0};
  std::thread syncer([&] {
    for (int i = 0; i < 100000 && !done.load(); ++i) {
      if (!db->sync_wal().ok()) ++failures;
      ++syncs;
    }
  });
  // Through several checkpoints, each of which starts the WAL over.
  for (int i = 0; i < 300; ++i) add_row(*db, 30000);
  done = true;
  syncer.join();
  EXPECT_GT(syncs.load(), 0);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(count_rows(*db), 300);
}

// What a crash leaves: the database and its WAL as the files hold them, copied while the
// connection stays open, then opened elsewhere.
class WalGatheringTest : public SyncedByCallerTest {
 protected:
  std::unique_ptr<Database> open_copy() {
    const std::string copy = dir_ + "/copy.db";
    fs::remove(copy);
    fs::remove(copy + "-wal");
    fs::copy_file(path_, copy);
    if (fs::exists(path_ + "-wal")) fs::copy_file(path_ + "-wal", copy + "-wal");
    auto db = Database::open(copy, Durability::full);
    EXPECT_TRUE(db.ok()) << db.status().to_string();
    return db.ok() ? std::move(*db) : nullptr;
  }

  static std::string integrity(Database& db) {
    auto check = db.prepare("PRAGMA integrity_check");
    return check.next_row() ? check.blob(0) : "no answer";
  }
};

TEST_F(WalGatheringTest, EachCommitIsInTheWalFileWhenCommitReturns) {
  auto db = open();
  ASSERT_TRUE(db->exec("CREATE TABLE t(v BLOB)").ok());
  // One page, a few, and more than is gathered before a write (1 MiB).
  const std::size_t sizes[] = {100, 20000, 3u << 20, 100};
  std::int64_t rows = 0;
  for (std::size_t bytes : sizes) {
    add_row(*db, bytes);
    ++rows;
    auto copy = open_copy();
    ASSERT_NE(copy, nullptr);
    EXPECT_EQ(count_rows(*copy), rows) << "after a row of " << bytes << " bytes";
    EXPECT_EQ(integrity(*copy), "ok");
  }
}

TEST_F(WalGatheringTest, ATransactionThatSpillsAndRewritesItsPagesCommitsWhole) {
  auto db = open();
  ASSERT_TRUE(db->exec("CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB)").ok());
  // A cache of 10 pages: the transaction's pages go to the WAL before it commits, and SQLite
  // writes those it changes again over their frames, out of order, reading them back.
  ASSERT_TRUE(db->exec("PRAGMA cache_size=10").ok());
  ASSERT_TRUE(db->exec("BEGIN IMMEDIATE").ok());
  const std::string value(1000, 'v');
  for (int round = 0; round < 3; ++round) {
    for (int k = 0; k < 400; ++k) {
      auto upsert = db->prepare("INSERT OR REPLACE INTO t(k, v) VALUES(?, ?)");
      upsert.bind(1, static_cast<std::int64_t>(k)).bind(2, std::string_view(value));
      ASSERT_TRUE(upsert.run().ok());
    }
  }
  ASSERT_TRUE(db->run("COMMIT").ok());
  EXPECT_EQ(integrity(*db), "ok");
  auto copy = open_copy();
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(count_rows(*copy), 400);
  EXPECT_EQ(integrity(*copy), "ok");
}

TEST_F(WalGatheringTest, ARolledBackTransactionLeavesNothing) {
  auto db = open();
  ASSERT_TRUE(db->exec("CREATE TABLE t(v BLOB)").ok());
  add_row(*db, 100);
  ASSERT_TRUE(db->exec("PRAGMA cache_size=10").ok());
  ASSERT_TRUE(db->run("BEGIN IMMEDIATE").ok());
  const std::string value(200000, 'r');
  auto insert = db->prepare("INSERT INTO t(v) VALUES(?)");
  insert.bind(1, std::string_view(value));
  ASSERT_TRUE(insert.run().ok());
  ASSERT_TRUE(db->run("ROLLBACK").ok());
  EXPECT_EQ(count_rows(*db), 1);
  add_row(*db, 100);
  auto copy = open_copy();
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(count_rows(*copy), 2);
  EXPECT_EQ(integrity(*copy), "ok");
}

}  // namespace
}  // namespace tidepool::sqlite
