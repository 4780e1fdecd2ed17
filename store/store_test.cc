#include "store/store.h"

#include <gtest/gtest.h>

#include "store/internal/test_util.h"

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <filesystem>
#include <random>

#include "common/sqlite.h"
#include "store/remote_store.h"

namespace tidepool::store {
namespace {

namespace asio = boost::asio;

const Caller kRoot{0, 0, {}};
const Caller kAlice{1000, 1000, {}};
const Caller kBob{1001, 1001, {2000}};

// Carries calls to serve_store_call on a home store in this process. Request and reply are
// copied into buffers of their own, as a network would, so neither side keeps a view into
// the other's memory.
class LoopbackChannel final : public ShardChannel {
 public:
  explicit LoopbackChannel(const std::unique_ptr<Store>& home) : home_(home) {}

  awaitable<Result<xdr::Buffer>> call(StoreMethod method, xdr::Buffer request) override {
    const xdr::Buffer arrived(request.begin(), request.end());
    auto op = serve_store_call(*home_, static_cast<std::uint32_t>(method), arrived);
    auto reply = co_await std::move(op);
    if (!reply.ok()) co_return reply.status();
    co_return xdr::Buffer(reply->begin(), reply->end());
  }

 private:
  const std::unique_ptr<Store>& home_;  // follows the fixture's reopen()
};

// Every test runs on the store itself and on a remote store shipping to it.
enum class Placement { local, shipped };

class StoreTest : public ::testing::TestWithParam<Placement> {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '-');
    dir_ = std::filesystem::temp_directory_path() /
           ("tidepool-store-test-" + std::to_string(::getpid()) + "-" + name);
    std::filesystem::remove_all(dir_);
    reopen();
  }
  void TearDown() override {
    remote_.reset();
    home_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Restarts the home store; a remote store stays, as an initiator outlives a home's restart.
  void reopen() {
    home_.reset();
    StoreOptions options;
    options.data_dir = dir_.string();
    options.threads = 2;
    options.clock = &clock_;
    options.l2 = l2_;
    auto opened = Store::open(options);
    ASSERT_TRUE(opened.ok()) << opened.status().to_string();
    home_ = std::move(opened).value();
    if (GetParam() == Placement::local) {
      store_ = home_.get();
      return;
    }
    if (!remote_) remote_ = make_remote_store(std::make_shared<LoopbackChannel>(home_));
    store_ = remote_.get();
  }

  template <typename T>
  T run(asio::awaitable<T> op) {
    return internal::run_to_completion(std::move(op));
  }

  InodeId make_file(InodeId dir, const std::string& name, const Caller& who = kAlice,
                    std::uint32_t mode = 0644) {
    AttributeChanges initial;
    initial.mode = mode;
    auto r = run(store_->create(dir, name, CreateMode::guarded, initial, {}, who));
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? r->attributes.inode : 0;
  }

  InodeId make_dir(InodeId dir, const std::string& name, const Caller& who = kAlice) {
    AttributeChanges initial;
    initial.mode = 0755;
    auto r = run(store_->mkdir(dir, name, initial, who));
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? r->attributes.inode : 0;
  }

  std::filesystem::path dir_;
  std::shared_ptr<L2> l2_ = L2::make(16u << 20);
  FakeClock clock_{std::chrono::system_clock::time_point(std::chrono::hours(24 * 365 * 50))};
  std::unique_ptr<Store> home_;    // holds the data
  std::unique_ptr<Store> remote_;  // Shipped only: ships every call to home_
  Store* store_ = nullptr;         // what the tests exercise
};

INSTANTIATE_TEST_SUITE_P(, StoreTest, ::testing::Values(Placement::local, Placement::shipped),
                         [](const ::testing::TestParamInfo<Placement>& info) {
                           return info.param == Placement::local ? "Local" : "Shipped";
                         });

TEST_P(StoreTest, CreatedFileIsFoundByLookupWithItsAttributes) {
  InodeId file = make_file(kRootInode, "a.txt");
  auto found = run(store_->lookup(kRootInode, "a.txt", kAlice));
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->object.inode, file);
  EXPECT_EQ(found->object.type, FileType::regular);
  EXPECT_EQ(found->object.uid, 1000u);
  EXPECT_EQ(found->object.mode, 0644u);
}

TEST_P(StoreTest, GuardedCreateOfAnExistingNameFails) {
  make_file(kRootInode, "a");
  auto again = run(store_->create(kRootInode, "a", CreateMode::guarded, {}, {}, kAlice));
  EXPECT_EQ(again.code(), Errc::already_exists);
}

TEST_P(StoreTest, ExclusiveCreateIsIdempotentForTheSameVerifierOnly) {
  CreateVerifier v{1, 2, 3, 4, 5, 6, 7, 8};
  auto first = run(store_->create(kRootInode, "x", CreateMode::exclusive, {}, v, kAlice));
  ASSERT_TRUE(first.ok());
  auto retry = run(store_->create(kRootInode, "x", CreateMode::exclusive, {}, v, kAlice));
  ASSERT_TRUE(retry.ok());
  EXPECT_EQ(retry->attributes.inode, first->attributes.inode);
  CreateVerifier other{9};
  EXPECT_EQ(run(store_->create(kRootInode, "x", CreateMode::exclusive, {}, other, kAlice)).code(),
            Errc::already_exists);
}

TEST_P(StoreTest, WrittenDataReadsBackAtOddOffsetsAndSparseGapsReadAsZeros) {
  InodeId file = make_file(kRootInode, "data");
  std::mt19937 rng(7);
  std::vector<std::uint8_t> expect(300000, 0);
  for (std::uint64_t offset : {1u, 70001u, 250003u}) {
    std::vector<std::uint8_t> piece(12345);
    for (auto& b : piece) b = static_cast<std::uint8_t>(rng());
    std::copy(piece.begin(), piece.end(), expect.begin() + static_cast<long>(offset));
    auto w = run(store_->write(file, offset, piece, Stability::unstable, kAlice));
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    EXPECT_EQ(w->count, piece.size());
  }
  expect.resize(250003 + 12345);
  std::vector<std::uint8_t> got(expect.size() + 100);
  auto r = run(store_->read(file, 0, got, kAlice));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->count, expect.size());
  EXPECT_TRUE(r->eof);
  got.resize(r->count);
  EXPECT_EQ(got, expect);
}

TEST_P(StoreTest, DroppedCachesAreFilledAgainWithTheSameAnswersAndCountedAsMisses) {
  const InodeId file = make_file(kRootInode, "f");
  const std::vector<std::uint8_t> data(200000, 0x5a);
  ASSERT_TRUE(run(store_->write(file, 0, data, Stability::file_sync, kAlice)).ok());
  ASSERT_TRUE(run(home_->getattr(file)).ok());
  const std::uint64_t hits = l2_->reads().metadata_hits.load();
  ASSERT_TRUE(run(home_->getattr(file)).ok());
  EXPECT_EQ(l2_->reads().metadata_hits.load(), hits + 1);

  ASSERT_TRUE(run(static_cast<LocalStore&>(*home_).drop_caches()).ok());
  const std::uint64_t looked_up = l2_->reads().metadata_reads.load();
  const Result<Attributes> again = run(home_->getattr(file));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->size, data.size());
  EXPECT_EQ(l2_->reads().metadata_reads.load(), looked_up + 1);
  EXPECT_EQ(l2_->reads().metadata_hits.load(), hits + 1);

  std::vector<std::uint8_t> got(data.size());
  const std::uint64_t read_bytes = l2_->reads().data_bytes_read.load();
  const Result<ReadResult> read = run(store_->read(file, 0, got, kAlice));
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(got, data);
  EXPECT_EQ(l2_->reads().data_bytes_read.load(), read_bytes + data.size());
  EXPECT_LE(l2_->reads().data_bytes_hit.load(), l2_->reads().data_bytes_read.load());
}

TEST_P(StoreTest, TheL2AnswersWhatWasReadUntilAChangeReachesIt) {
  const InodeId file = make_file(kRootInode, "f");
  std::vector<std::uint8_t> data(3 << 17);  // three whole units
  std::mt19937 random(3);
  for (auto& b : data) b = static_cast<std::uint8_t>(random());
  ASSERT_TRUE(run(store_->write(file, 0, data, Stability::file_sync, kAlice)).ok());
  auto read_all = [&](std::size_t expect_pieces = 0) {
    Result<ReadPieces> read = run(store_->read_pieces(file, 0, 1 << 20, kAlice));
    EXPECT_TRUE(read.ok()) << read.status().to_string();
    if (!read.ok()) return std::vector<std::uint8_t>();
    EXPECT_TRUE(read->result.eof);
    if (expect_pieces != 0) {
      EXPECT_EQ(read->pieces.size(), expect_pieces);
    }
    // Bytes the home lent from its page cache come out of their pipe.
    EXPECT_TRUE(take_out_of_pipe(*read).ok());
    std::vector<std::uint8_t> bytes;
    for (auto piece : read->pieces) bytes.insert(bytes.end(), piece.begin(), piece.end());
    EXPECT_EQ(bytes.size(), read->result.count);
    return bytes;
  };
  const std::uint64_t hits = l2_->reads().data_bytes_hit.load();
  const std::uint64_t lent = l2_->reads().data_bytes_lent.load();
  // The first read marks the file's three units, the second keeps them. On the home, the
  // second (with the attributes the first cached) is sent from the page cache.
  EXPECT_EQ(read_all(), data);
  EXPECT_EQ(read_all(), data);
  EXPECT_EQ(l2_->reads().data_bytes_hit.load(), hits);
  if (GetParam() == Placement::local) {
    EXPECT_EQ(l2_->reads().data_bytes_lent.load(), lent + data.size());
  }
  // On the home, the reply's pieces are the L2's units themselves.
  EXPECT_EQ(read_all(GetParam() == Placement::local ? 3 : 0), data);
  EXPECT_EQ(l2_->reads().data_bytes_hit.load(), hits + data.size());

  const std::vector<std::uint8_t> patch(10, 0xee);
  ASSERT_TRUE(run(store_->write(file, (128 << 10) + 5, patch, Stability::unstable, kAlice)).ok());
  std::copy(patch.begin(), patch.end(), data.begin() + (128 << 10) + 5);
  EXPECT_EQ(read_all(), data);
  AttributeChanges cut;
  cut.size = 2 << 17;
  ASSERT_TRUE(run(store_->setattr(file, cut, kAlice, std::nullopt)).ok());
  data.resize(2 << 17);
  EXPECT_EQ(read_all(), data);
  const std::uint64_t hits_after_cut = l2_->reads().data_bytes_hit.load();
  EXPECT_EQ(read_all(), data);
  EXPECT_EQ(l2_->reads().data_bytes_hit.load(), hits_after_cut + data.size());
  // tide flush --l2
  ASSERT_TRUE(run(static_cast<LocalStore&>(*home_).drop_caches()).ok());
  const std::uint64_t hits_before_read = l2_->reads().data_bytes_hit.load();
  EXPECT_EQ(read_all(), data);
  EXPECT_EQ(l2_->reads().data_bytes_hit.load(), hits_before_read);
}

TEST_P(StoreTest, CommittedSizeSurvivesReopenAndTheVerifierChanges) {
  InodeId file = make_file(kRootInode, "f");
  std::vector<std::uint8_t> data(5000, 0xab);
  ASSERT_TRUE(run(store_->write(file, 100, data, Stability::unstable, kAlice)).ok());
  ASSERT_TRUE(run(store_->commit(file, {})).ok());
  std::uint64_t verifier = store_->write_verifier();
  reopen();
  auto a = run(store_->getattr(file));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->size, 5100u);
  // A remote store learns the home's new verifier from the next commit or write reply.
  ASSERT_TRUE(run(store_->commit(file, {})).ok());
  EXPECT_NE(store_->write_verifier(), verifier);
}

TEST_P(StoreTest, AWriteReportsTheVerifierItWasTakenUnder) {
  InodeId file = make_file(kRootInode, "v");
  std::vector<std::uint8_t> data(10, 1);
  auto w = run(store_->write(file, 0, data, Stability::unstable, kAlice));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->verifier, store_->write_verifier());
}

TEST_P(StoreTest, RemoveOfTheLastLinkMakesTheInodeStale) {
  InodeId file = make_file(kRootInode, "gone");
  ASSERT_TRUE(run(store_->remove(kRootInode, "gone", kAlice)).ok());
  EXPECT_EQ(run(store_->getattr(file)).code(), Errc::stale);
  EXPECT_EQ(run(store_->lookup(kRootInode, "gone", kAlice)).code(), Errc::not_found);
}

TEST_P(StoreTest, HardLinkKeepsTheFileUntilTheLastNameGoes) {
  InodeId file = make_file(kRootInode, "one");
  auto linked = run(store_->link(file, kRootInode, "two", kAlice));
  ASSERT_TRUE(linked.ok());
  EXPECT_EQ(linked->file.nlink, 2u);
  ASSERT_TRUE(run(store_->remove(kRootInode, "one", kAlice)).ok());
  auto a = run(store_->getattr(file));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->nlink, 1u);
}

TEST_P(StoreTest, RmdirRefusesNonEmptyAndFiles) {
  InodeId d = make_dir(kRootInode, "d");
  make_file(d, "f");
  EXPECT_EQ(run(store_->rmdir(kRootInode, "d", kAlice)).code(), Errc::not_empty);
  EXPECT_EQ(run(store_->rmdir(d, "f", kAlice)).code(), Errc::not_a_directory);
  EXPECT_EQ(run(store_->remove(kRootInode, "d", kAlice)).code(), Errc::is_a_directory);
  ASSERT_TRUE(run(store_->remove(d, "f", kAlice)).ok());
  EXPECT_TRUE(run(store_->rmdir(kRootInode, "d", kAlice)).ok());
}

TEST_P(StoreTest, RenameReplacesAtomicallyAndRefusesADirectoryIntoItsOwnSubtree) {
  InodeId a = make_file(kRootInode, "a");
  make_file(kRootInode, "b");
  ASSERT_TRUE(run(store_->rename(kRootInode, "a", kRootInode, "b", kAlice)).ok());
  auto b = run(store_->lookup(kRootInode, "b", kAlice));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->object.inode, a);
  EXPECT_EQ(run(store_->lookup(kRootInode, "a", kAlice)).code(), Errc::not_found);

  InodeId top = make_dir(kRootInode, "top");
  InodeId sub = make_dir(top, "sub");
  EXPECT_EQ(run(store_->rename(kRootInode, "top", sub, "loop", kAlice)).code(),
            Errc::invalid_argument);
}

TEST_P(StoreTest, ReaddirCookiesStayValidWhileEntriesChange) {
  InodeId d = make_dir(kRootInode, "list");
  for (int i = 0; i < 10; ++i) make_file(d, "f" + std::to_string(i));
  auto first = run(store_->readdir(d, 0, 0, 5, false, kAlice));
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->entries.size(), 5u);  // ".", "..", f0, f1, f2
  EXPECT_FALSE(first->eof);
  std::uint64_t cookie = first->entries.back().cookie;
  ASSERT_TRUE(run(store_->remove(d, "f1", kAlice)).ok());
  ASSERT_TRUE(run(store_->remove(d, "f2", kAlice)).ok());
  make_file(d, "late");
  std::vector<std::string> rest;
  for (int pages = 0; pages < 10; ++pages) {
    auto page = run(store_->readdir(d, cookie, first->cookie_verifier, 4, false, kAlice));
    ASSERT_TRUE(page.ok()) << page.status().to_string();
    for (auto& e : page->entries) rest.push_back(e.name);
    if (page->eof) break;
    cookie = page->entries.back().cookie;
  }
  std::vector<std::string> expect{"f3", "f4", "f5", "f6", "f7", "f8", "f9", "late"};
  EXPECT_EQ(rest, expect);
  EXPECT_EQ(run(store_->readdir(d, cookie, first->cookie_verifier + 1, 4, false, kAlice)).code(),
            Errc::bad_cookie);
}

// The cookie readdir gives `name` in `dir` (0: not listed).
std::uint64_t cookie_of(Store& store, InodeId dir, const std::string& name) {
  auto page = internal::run_to_completion(store.readdir(dir, 0, 0, 100, false, kAlice));
  EXPECT_TRUE(page.ok()) << page.status().to_string();
  if (!page.ok()) return 0;
  for (const DirectoryEntry& e : page->entries) {
    if (e.name == name) return e.cookie;
  }
  return 0;
}

TEST_P(StoreTest, TheNewestInodeNumberAndCookieAreNotHandedOutAgainAfterTheyWentAndAReopen) {
  InodeId d = make_dir(kRootInode, "d");
  make_file(d, "a");
  const InodeId newest = make_file(d, "b");
  const std::uint64_t newest_cookie = cookie_of(*store_, d, "b");
  ASSERT_NE(newest_cookie, 0u);
  ASSERT_TRUE(run(store_->remove(d, "b", kAlice)).ok());
  reopen();
  const InodeId next = make_file(d, "c");
  EXPECT_GT(next, newest);
  EXPECT_GT(cookie_of(*store_, d, "c"), newest_cookie);
  // Nothing removed: numbers go on from the highest in use.
  reopen();
  EXPECT_GT(make_file(d, "e"), next);
}

TEST(StoreSchemaTest, ADatabaseOfTheEarlierSchemaLosesItsIndexesAndKeepsItsCookiesGrowing) {
  const auto dir = internal::fresh_test_directory("tidepool-store-schema-test");
  std::filesystem::create_directories(dir / "shards");
  const std::string path = (dir / "shards/0000.db").string();
  {
    auto db = sqlite::Database::open(path);
    ASSERT_TRUE(db.ok());
    // As shards were made before: cookies by AUTOINCREMENT, atime and size indexes. Cookie 500
    // was the last handed out; its entry is gone.
    ASSERT_TRUE((*db)->exec(R"sql(
      CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);
      CREATE TABLE inodes(ino INTEGER PRIMARY KEY, generation INTEGER NOT NULL,
        type INTEGER NOT NULL, mode INTEGER NOT NULL, nlink INTEGER NOT NULL,
        uid INTEGER NOT NULL, gid INTEGER NOT NULL, size INTEGER NOT NULL,
        rdev_major INTEGER NOT NULL, rdev_minor INTEGER NOT NULL, atime INTEGER NOT NULL,
        mtime INTEGER NOT NULL, ctime INTEGER NOT NULL, birth INTEGER NOT NULL,
        symlink_target BLOB, create_verifier BLOB);
      CREATE INDEX inodes_by_atime ON inodes(atime);
      CREATE INDEX inodes_by_size ON inodes(size);
      CREATE TABLE dirents(cookie INTEGER PRIMARY KEY AUTOINCREMENT, dir INTEGER NOT NULL,
        name BLOB NOT NULL, ino INTEGER NOT NULL, UNIQUE(dir, name));
      INSERT INTO dirents(cookie, dir, name, ino) VALUES(500, 1, 'gone', 99);
      DELETE FROM dirents;
    )sql").ok());
  }
  {
    StoreOptions options;
    options.data_dir = dir.string();
    auto store = Store::open(options);
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    auto made = internal::run_to_completion(
        (*store)->create(kRootInode, "new", CreateMode::guarded, {}, {}, kAlice));
    ASSERT_TRUE(made.ok()) << made.status().to_string();
    EXPECT_GT(cookie_of(**store, kRootInode, "new"), 500u);
  }
  auto db = sqlite::Database::open(path);
  ASSERT_TRUE(db.ok());
  auto indexes = (*db)->prepare(
      "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name LIKE 'inodes_by_%'");
  ASSERT_TRUE(indexes.next_row());
  EXPECT_EQ(indexes.int64(0), 0);
  std::filesystem::remove_all(dir);
}

TEST_P(StoreTest, PermissionBitsApplyToOtherUsersIncludingSupplementaryGroups) {
  InodeId d = make_dir(kRootInode, "private");
  AttributeChanges mode;
  mode.mode = 0750;
  ASSERT_TRUE(run(store_->setattr(d, mode, kAlice, std::nullopt)).ok());
  EXPECT_EQ(run(store_->lookup(d, "x", kBob)).code(), Errc::access_denied);
  AttributeChanges group;
  group.gid = 2000;
  EXPECT_EQ(run(store_->setattr(d, group, kBob, std::nullopt)).code(), Errc::not_permitted);
  ASSERT_TRUE(run(store_->setattr(d, group, kRoot, std::nullopt)).ok());
  EXPECT_EQ(run(store_->lookup(d, "x", kBob)).code(), Errc::not_found);  // may search now
  EXPECT_EQ(run(store_->create(d, "y", CreateMode::guarded, {}, {}, kBob)).code(),
            Errc::access_denied);
}

TEST_P(StoreTest, SetattrGuardMismatchFails) {
  InodeId f = make_file(kRootInode, "g");
  auto a = run(store_->getattr(f));
  ASSERT_TRUE(a.ok());
  AttributeChanges c;
  c.mode = 0600;
  EXPECT_EQ(run(store_->setattr(f, c, kAlice, a->ctime_ns + 1)).code(), Errc::precondition_failed);
  EXPECT_TRUE(run(store_->setattr(f, c, kAlice, a->ctime_ns)).ok());
}

TEST_P(StoreTest, TruncateShrinksAndExtendsWithZeros) {
  InodeId f = make_file(kRootInode, "t");
  std::vector<std::uint8_t> data(1000, 0x5a);
  ASSERT_TRUE(run(store_->write(f, 0, data, Stability::file_sync, kAlice)).ok());
  AttributeChanges shrink;
  shrink.size = 10;
  ASSERT_TRUE(run(store_->setattr(f, shrink, kAlice, std::nullopt)).ok());
  AttributeChanges grow;
  grow.size = std::uint64_t{5} << 30;  // past 4 GiB
  ASSERT_TRUE(run(store_->setattr(f, grow, kAlice, std::nullopt)).ok());
  std::vector<std::uint8_t> got(20);
  auto r = run(store_->read(f, 0, got, kAlice));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(got[9], 0x5a);
  EXPECT_EQ(got[10], 0);
  EXPECT_EQ(run(store_->getattr(f))->size, std::uint64_t{5} << 30);
}

TEST_P(StoreTest, ReadMovesAtimeOnlyPastTheGracePeriod) {
  InodeId f = make_file(kRootInode, "at");
  std::int64_t created = run(store_->getattr(f))->atime_ns;
  std::vector<std::uint8_t> buf(10);
  clock_.advance(std::chrono::hours(1));
  ASSERT_TRUE(run(store_->read(f, 0, buf, kAlice)).ok());
  EXPECT_EQ(run(store_->getattr(f))->atime_ns, created);
  clock_.advance(std::chrono::hours(24));
  ASSERT_TRUE(run(store_->read(f, 0, buf, kAlice)).ok());
  EXPECT_GT(run(store_->getattr(f))->atime_ns, created);
}

}  // namespace
}  // namespace tidepool::store

namespace tidepool::store {
namespace {

// Bob reaches Alice's file through his supplementary group only: the file's group bits, for
// every call (a permission remembered from the last one must not stand in).
TEST_P(StoreTest, CallersWithSupplementaryGroupsReadAndWrite) {
  InodeId f = make_file(kRootInode, "groups", kAlice, 0660);
  AttributeChanges group;
  group.gid = kBob.groups.front();
  ASSERT_TRUE(run(store_->setattr(f, group, kRoot, std::nullopt)).ok());
  const Caller bob_outside_the_group{kBob.uid, kBob.gid, {}};
  std::vector<std::uint8_t> data(100, 1);
  std::vector<std::uint8_t> back(100);
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(run(store_->write(f, i, data, Stability::unstable, kBob)).ok());
    ASSERT_TRUE(run(store_->read(f, 0, back, kBob)).ok());
    ASSERT_EQ(run(store_->write(f, i, data, Stability::unstable, bob_outside_the_group)).code(),
              Errc::access_denied);
    ASSERT_EQ(run(store_->read(f, 0, back, bob_outside_the_group)).code(), Errc::access_denied);
  }
  AttributeChanges owner_only;
  owner_only.mode = 0600;
  ASSERT_TRUE(run(store_->setattr(f, owner_only, kAlice, std::nullopt)).ok());
  EXPECT_EQ(run(store_->write(f, 0, data, Stability::unstable, kBob)).code(), Errc::access_denied);
  EXPECT_EQ(run(store_->read(f, 0, back, kBob)).code(), Errc::access_denied);
}

}  // namespace
}  // namespace tidepool::store

namespace tidepool::store {
namespace {

TEST_P(StoreTest, ConcurrentWritesNeverShrinkTheSize) {
  InodeId f = make_file(kRootInode, "parallel");
  asio::io_context io;
  std::vector<std::uint8_t> piece(1000, 7);
  int done = 0;
  for (int i = 0; i < 32; ++i) {
    asio::co_spawn(io, store_->write(f, static_cast<std::uint64_t>(i) * 1000, piece,
                                     Stability::unstable, kAlice),
                   [&done](std::exception_ptr, Result<WriteResult> r) {
                     EXPECT_TRUE(r.ok());
                     ++done;
                   });
  }
  io.run();
  EXPECT_EQ(done, 32);
  EXPECT_EQ(run(store_->getattr(f))->size, 32000u);
}

TEST_P(StoreTest, ZeroByteWriteChangesNothing) {
  InodeId f = make_file(kRootInode, "zero");
  std::vector<std::uint8_t> three(3, 1);
  ASSERT_TRUE(run(store_->write(f, 0, three, Stability::file_sync, kAlice)).ok());
  ASSERT_TRUE(run(store_->write(f, 10, {}, Stability::unstable, kAlice)).ok());
  EXPECT_EQ(run(store_->getattr(f))->size, 3u);
}

}  // namespace
}  // namespace tidepool::store

namespace tidepool::store {
namespace {

TEST_P(StoreTest, CreateOfAnExistingNameNeedsSearchPermissionOnTheDirectory) {
  InodeId d = make_dir(kRootInode, "closed");
  make_file(d, "secret");
  AttributeChanges closed;
  closed.mode = 0700;
  ASSERT_TRUE(run(store_->setattr(d, closed, kAlice, std::nullopt)).ok());
  EXPECT_EQ(run(store_->create(d, "secret", CreateMode::unchecked, {}, {}, kBob)).code(),
            Errc::access_denied);
}

TEST_P(StoreTest, OnlyGroupMembersMayMakeAFileSetgidToItsGroup) {
  InodeId f = make_file(kRootInode, "sg");
  AttributeChanges group;
  group.gid = 2000;
  ASSERT_TRUE(run(store_->setattr(f, group, kRoot, std::nullopt)).ok());
  AttributeChanges setgid;
  setgid.mode = 02755;
  ASSERT_TRUE(run(store_->setattr(f, setgid, kAlice, std::nullopt)).ok());
  EXPECT_EQ(run(store_->getattr(f))->mode, 0755u);
  ASSERT_TRUE(run(store_->setattr(f, setgid, kRoot, std::nullopt)).ok());
  EXPECT_EQ(run(store_->getattr(f))->mode, 02755u);
}

TEST_P(StoreTest, AStrangerMayNotChownAFileEvenToTheOwnerAndGroupItHas) {
  InodeId f = make_file(kRootInode, "theirs");
  std::int64_t ctime = run(store_->getattr(f))->ctime_ns;
  clock_.advance(std::chrono::seconds(1));
  AttributeChanges same_owner;
  same_owner.uid = kAlice.uid;
  AttributeChanges same_group;
  same_group.gid = kAlice.gid;
  EXPECT_EQ(run(store_->setattr(f, same_owner, kBob, std::nullopt)).code(), Errc::not_permitted);
  EXPECT_EQ(run(store_->setattr(f, same_group, kBob, std::nullopt)).code(), Errc::not_permitted);
  EXPECT_EQ(run(store_->getattr(f))->ctime_ns, ctime);
  EXPECT_TRUE(run(store_->setattr(f, same_owner, kAlice, std::nullopt)).ok());
  EXPECT_TRUE(run(store_->setattr(f, same_group, kAlice, std::nullopt)).ok());
}

TEST_P(StoreTest, SetgidIsDroppedByAForeignChmodAndAChownButNotByTouchingTimes) {
  InodeId f = make_file(kRootInode, "sgid");
  AttributeChanges foreign_group;
  foreign_group.gid = 2000;  // a group Alice, the owner, is not in
  ASSERT_TRUE(run(store_->setattr(f, foreign_group, kRoot, std::nullopt)).ok());
  AttributeChanges setgid;
  setgid.mode = 02755;
  ASSERT_TRUE(run(store_->setattr(f, setgid, kRoot, std::nullopt)).ok());
  AttributeChanges touch;
  touch.mtime = SetTime::server_time;
  ASSERT_TRUE(run(store_->setattr(f, touch, kAlice, std::nullopt)).ok());
  EXPECT_EQ(run(store_->getattr(f))->mode, 02755u);
  AttributeChanges chmod;
  chmod.mode = 02750;
  ASSERT_TRUE(run(store_->setattr(f, chmod, kAlice, std::nullopt)).ok());
  EXPECT_EQ(run(store_->getattr(f))->mode, 0750u);

  AttributeChanges setuid_and_gid;
  setuid_and_gid.mode = 06755;
  ASSERT_TRUE(run(store_->setattr(f, setuid_and_gid, kRoot, std::nullopt)).ok());
  AttributeChanges same_owner;
  same_owner.uid = kAlice.uid;
  ASSERT_TRUE(run(store_->setattr(f, same_owner, kAlice, std::nullopt)).ok());
  EXPECT_EQ(run(store_->getattr(f))->mode, 0755u);
  // Without group execute, setgid marks the file for mandatory locking and survives a chown.
  AttributeChanges locking_mark;
  locking_mark.mode = 06745;
  ASSERT_TRUE(run(store_->setattr(f, locking_mark, kRoot, std::nullopt)).ok());
  ASSERT_TRUE(run(store_->setattr(f, same_owner, kRoot, std::nullopt)).ok());
  EXPECT_EQ(run(store_->getattr(f))->mode, 02745u);
}

}  // namespace
}  // namespace tidepool::store

namespace tidepool::store {
namespace {

std::vector<std::string> names_of(const DirectoryPage& page) {
  std::vector<std::string> names;
  for (const auto& e : page.entries) names.push_back(e.name);
  return names;
}

TEST_P(StoreTest, ListingsSeeEveryChangeOfTheirDirectory) {
  InodeId a = make_dir(kRootInode, "a");
  InodeId b = make_dir(kRootInode, "b");
  make_file(a, "one");
  auto list = [&](InodeId d) {
    auto page = run(store_->readdir(d, 0, 0, 100, true, kAlice));
    EXPECT_TRUE(page.ok());
    return page.ok() ? names_of(*page) : std::vector<std::string>{};
  };
  using Names = std::vector<std::string>;
  EXPECT_EQ(list(a), (Names{".", "..", "one"}));
  EXPECT_EQ(list(a), (Names{".", "..", "one"}));  // now from the cached listing
  make_file(a, "two");
  EXPECT_EQ(list(a), (Names{".", "..", "one", "two"}));
  EXPECT_EQ(list(b), (Names{".", ".."}));
  ASSERT_TRUE(run(store_->rename(a, "one", b, "moved", kAlice)).ok());
  EXPECT_EQ(list(a), (Names{".", "..", "two"}));
  EXPECT_EQ(list(b), (Names{".", "..", "moved"}));
  ASSERT_TRUE(run(store_->remove(a, "two", kAlice)).ok());
  EXPECT_EQ(list(a), (Names{".", ".."}));
  AttributeChanges resize;
  resize.size = 77;
  InodeId moved = run(store_->lookup(b, "moved", kAlice))->object.inode;
  ASSERT_TRUE(run(store_->setattr(moved, resize, kAlice, std::nullopt)).ok());
  auto page = run(store_->readdir(b, 0, 0, 100, true, kAlice));
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->entries.back().attributes->size, 77u);
}

}  // namespace
}  // namespace tidepool::store

namespace tidepool::store {
namespace {

TEST_P(StoreTest, AnEmptyDirectoryEndsOnlyAfterDotDot) {
  InodeId d = make_dir(kRootInode, "empty");
  for (int pass = 0; pass < 2; ++pass) {  // the second pass reads the cached listing
    auto first = run(store_->readdir(d, 0, 0, 1, false, kAlice));
    ASSERT_TRUE(first.ok());
    ASSERT_EQ(first->entries.size(), 1u);
    EXPECT_FALSE(first->eof);
    auto second = run(store_->readdir(d, 1, first->cookie_verifier, 1, false, kAlice));
    ASSERT_TRUE(second.ok());
    ASSERT_EQ(second->entries.size(), 1u);
    EXPECT_EQ(second->entries[0].name, "..");
    EXPECT_TRUE(second->eof);
    ASSERT_TRUE(run(store_->readdir(d, 0, 0, 100, false, kAlice)).ok());
  }
}

TEST_P(StoreTest, AtimePolicyChangesWhileServing) {
  InodeId f = make_file(kRootInode, "at");
  std::int64_t created = run(store_->getattr(f))->atime_ns;
  std::vector<std::uint8_t> buf(10);
  // The policy is the home's sysctl: a remote store leaves it to the home.
  home_->set_atime_policy(false, std::chrono::seconds(0));
  clock_.advance(std::chrono::hours(48));
  ASSERT_TRUE(run(store_->read(f, 0, buf, kAlice)).ok());
  EXPECT_EQ(run(store_->getattr(f))->atime_ns, created);
  home_->set_atime_policy(true, std::chrono::hours(1));
  clock_.advance(std::chrono::hours(1));
  ASSERT_TRUE(run(store_->read(f, 0, buf, kAlice)).ok());
  EXPECT_GT(run(store_->getattr(f))->atime_ns, created);
}

// find_files() belongs to the home's LocalStore: the policy engine looks for candidates where the
// shard lives, so these tests run on the home only. The predicates are written as
// policy::to_sql() writes them for the expression beside each (store_test does not link the
// policy module; policy_test checks to_sql's text against the evaluator).
class FindFilesTest : public ::testing::Test {
 protected:
  static constexpr std::int64_t kDayNs = 24LL * 3600 * 1'000'000'000;

  void SetUp() override {
    dir_ = internal::fresh_test_directory("tidepool-find-files-test");
    StoreOptions options;
    options.data_dir = dir_.string();
    options.threads = 2;
    options.clock = &clock_;
    auto opened = Store::open(options);
    ASSERT_TRUE(opened.ok()) << opened.status().to_string();
    store_ = std::move(opened).value();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  template <typename T>
  T run(asio::awaitable<T> op) {
    return internal::run_to_completion(std::move(op));
  }

  std::int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.now().time_since_epoch())
        .count();
  }
  // The first nanosecond of the second `days` days before now: to_sql's value for an age.
  std::int64_t days_ago_ns(int days) const {
    return (now_ns() / 1'000'000'000 - days * 24LL * 3600) * 1'000'000'000;
  }

  // Sets the atime of `inode` to `days` days before now, as a client's SETATTR would.
  void last_read(InodeId inode, std::int64_t days) {
    AttributeChanges read;
    read.atime = SetTime::client_time;
    read.atime_ns = now_ns() - days * kDayNs;
    auto set = run(store_->setattr(inode, read, kAlice, std::nullopt));
    EXPECT_TRUE(set.ok()) << set.status().to_string();
  }

  // A regular file of `size` bytes last read `days` days ago.
  InodeId file(InodeId dir, const std::string& name, std::uint64_t size, std::int64_t days) {
    AttributeChanges initial;
    initial.size = size;
    auto made = run(store_->create(dir, name, CreateMode::guarded, initial, {}, kAlice));
    EXPECT_TRUE(made.ok()) << made.status().to_string();
    if (!made.ok()) return 0;
    last_read(made->attributes.inode, days);
    return made->attributes.inode;
  }

  InodeId directory(const std::string& name) {
    auto made = run(store_->mkdir(kRootInode, name, {}, kAlice));
    EXPECT_TRUE(made.ok()) << made.status().to_string();
    return made.ok() ? made->attributes.inode : 0;
  }

  // Every inode the predicate selects, asking `limit` at a time.
  std::vector<InodeId> found(const std::string& where, const std::vector<std::int64_t>& values,
                             std::uint32_t limit = 1000) {
    std::vector<InodeId> inodes;
    InodeId after = 0;
    for (int pages = 0; pages < 1000; ++pages) {
      auto page = run(store_->find_files(where, values, after, limit));
      EXPECT_TRUE(page.ok()) << page.status().to_string();
      if (!page.ok()) break;
      EXPECT_LE(page->files.size(), limit);
      for (const Candidate& c : page->files) inodes.push_back(c.attributes.inode);
      if (page->next == 0) break;
      after = page->next;
    }
    return inodes;
  }

  std::filesystem::path dir_;
  FakeClock clock_{std::chrono::system_clock::time_point(std::chrono::hours(24 * 365 * 50))};
  std::unique_ptr<LocalStore> store_;
};

TEST_F(FindFilesTest, AnAtimePredicateFindsExactlyTheRegularFilesNotReadSince) {
  const InodeId old = file(kRootInode, "old", 100, 60);
  const InodeId older = file(kRootInode, "older", 5, 400);
  file(kRootInode, "recent", 100, 10);
  file(kRootInode, "just-30-days", 100, 30);  // not more than 30 days
  const InodeId d = directory("untouched-directory");
  last_read(d, 90);
  auto link = run(store_->symlink(kRootInode, "untouched-link", "old", {}, kAlice));
  ASSERT_TRUE(link.ok());
  last_read(link->attributes.inode, 90);
  const InodeId nested = file(d, "nested", 0, 31);

  // accessed > 30d
  EXPECT_EQ(found("(atime < ?1)", {days_ago_ns(30)}), (std::vector<InodeId>{old, older, nested}));
  // The attributes are the file's own.
  auto page = run(store_->find_files("(atime < ?1)", {days_ago_ns(30)}, 0, 10));
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->files.size(), 3u);
  auto attributes = run(store_->getattr(old));
  ASSERT_TRUE(attributes.ok());
  EXPECT_EQ(page->files[0].attributes.size, 100u);
  EXPECT_EQ(page->files[0].attributes.atime_ns, attributes->atime_ns);
  EXPECT_EQ(page->files[0].attributes.generation, attributes->generation);
  EXPECT_EQ(page->files[0].attributes.uid, 1000u);
  EXPECT_EQ(page->files[0].path, "/ifs/old");
  EXPECT_EQ(page->files[2].path, "/ifs/untouched-directory/nested");
  EXPECT_EQ(page->next, 0u);
}

TEST_F(FindFilesTest, PagesFollowEachOtherThroughNextUntilItIsZero) {
  std::vector<InodeId> old;
  for (int i = 0; i < 6; ++i) {
    old.push_back(file(kRootInode, "old" + std::to_string(i), 1, 60));
    file(kRootInode, "new" + std::to_string(i), 1, 1);
  }
  const std::vector<std::int64_t> values{days_ago_ns(30)};
  EXPECT_EQ(found("(atime < ?1)", values, 3), old);
  EXPECT_EQ(found("(atime < ?1)", values, 4), old);
  EXPECT_EQ(found("(atime < ?1)", values, 1), old);

  auto first = run(store_->find_files("(atime < ?1)", values, 0, 3));
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->files.size(), 3u);
  EXPECT_EQ(first->next, old[2]);
  // A full last page says so: no empty page after it.
  auto second = run(store_->find_files("(atime < ?1)", values, first->next, 3));
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->files.size(), 3u);
  EXPECT_EQ(second->files[0].attributes.inode, old[3]);
  EXPECT_EQ(second->next, 0u);
  auto past = run(store_->find_files("(atime < ?1)", values, old.back(), 3));
  ASSERT_TRUE(past.ok());
  EXPECT_TRUE(past->files.empty());
  EXPECT_EQ(past->next, 0u);
}

TEST_F(FindFilesTest, AnOrOfAndsFindsEveryFileOneOfItsClausesHolds) {
  constexpr std::uint64_t kMiB = 1 << 20;
  const InodeId old_big = file(kRootInode, "old-big", 2 * kMiB, 60);
  file(kRootInode, "old-small", 1024, 60);
  file(kRootInode, "new-big", 2 * kMiB, 1);
  const InodeId new_huge = file(kRootInode, "new-huge", 2048 * kMiB, 1);
  file(kRootInode, "exactly-1mib-new", kMiB, 1);
  const InodeId exactly_old = file(kRootInode, "exactly-1mib-old", kMiB, 31);

  // accessed > 30d and size >= 1MiB or size >= 1GiB
  EXPECT_EQ(found("(atime < ?1 AND size >= ?2) OR (size >= ?3)",
                  {days_ago_ns(30), static_cast<std::int64_t>(kMiB),
                   static_cast<std::int64_t>(1024 * kMiB)}),
            (std::vector<InodeId>{old_big, new_huge, exactly_old}));
}

TEST_F(FindFilesTest, AnInexactPredicateFindsASupersetOfTheMatches) {
  const InodeId old_log = file(kRootInode, "a.log", 1, 60);
  const InodeId old_text = file(kRootInode, "b.txt", 1, 60);
  const InodeId new_log = file(kRootInode, "c.log", 1, 1);

  // accessed > 30d and name =~ *.log: the name has no column, exact is false, and the
  // candidates hold the one match and a file the evaluator then turns down.
  const std::vector<InodeId> candidates = found("(atime < ?1)", {days_ago_ns(30)});
  EXPECT_EQ(candidates, (std::vector<InodeId>{old_log, old_text}));

  // name =~ *.log or size >= 1GiB: the first clause has no condition left, so every file.
  EXPECT_EQ(found("(1) OR (size >= ?1)", {std::int64_t{1} << 30}),
            (std::vector<InodeId>{old_log, old_text, new_log}));
}

// A file whose path is too long to carry is passed over, and the pages go on past it.
TEST_F(FindFilesTest, AFilePassedOverDoesNotEndThePages) {
  InodeId deep = kRootInode;
  for (int level = 0; level < 17; ++level) {  // 17 names of 250 bytes: over 4,096
    auto made = run(store_->mkdir(deep, std::string(250, static_cast<char>('a' + level)), {}, kAlice));
    ASSERT_TRUE(made.ok()) << made.status().to_string();
    deep = made->attributes.inode;
  }
  file(deep, "too-deep", 1, 60);
  const InodeId first = file(kRootInode, "first", 1, 60);
  const InodeId second = file(kRootInode, "second", 1, 60);
  EXPECT_EQ(found("(atime < ?1)", {days_ago_ns(30)}, 1), (std::vector<InodeId>{first, second}));
  auto page = run(store_->find_files("(atime < ?1)", {days_ago_ns(30)}, 0, 1));
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->files.size(), 1u);
  EXPECT_EQ(page->files[0].attributes.inode, first);
  EXPECT_NE(page->next, 0u) << "the second is still to come";
}

TEST_F(FindFilesTest, APredicateThatIsNotOneOfToSqlsIsInvalidArgument) {
  file(kRootInode, "f", 1, 60);
  const std::vector<std::int64_t> one{days_ago_ns(30)};
  EXPECT_EQ(run(store_->find_files("(atime <", one, 0, 10)).code(), Errc::invalid_argument);
  EXPECT_EQ(run(store_->find_files("(no_such_column < ?1)", one, 0, 10)).code(),
            Errc::invalid_argument);
  // Parameters that are not ?1..?N would take the place of the page's own.
  EXPECT_EQ(run(store_->find_files("(atime < ?1)", {}, 0, 10)).code(), Errc::invalid_argument);
  EXPECT_EQ(run(store_->find_files("(atime < ?2)", one, 0, 10)).code(), Errc::invalid_argument);
  EXPECT_EQ(run(store_->find_files("(1)", one, 0, 10)).code(), Errc::invalid_argument);
  EXPECT_EQ(run(store_->find_files("1); DELETE FROM inodes; SELECT (1", {}, 0, 10)).code(),
            Errc::invalid_argument);
  // Nothing but to_sql's words reaches SQLite: no functions, subqueries or other tables.
  for (const char* other :
       {"(atime < ?1) AND (SELECT count(*) FROM dirents) > 0",
        "(atime < ?1) OR randomblob(1000000000) = 1", "(atime < ?1) -- ", "(atime < ?1);",
        "(atime < ?1) AND 'x' = 'x'", "(generation < ?1)"}) {
    EXPECT_EQ(run(store_->find_files(other, one, 0, 10)).code(), Errc::invalid_argument) << other;
  }
  EXPECT_EQ(run(store_->find_files("(atime < ?1)", one, 0, 0)).code(), Errc::invalid_argument);
  EXPECT_EQ(run(store_->find_files("(atime < ?1)", one, 0, kMaxCandidatePage + 1)).code(),
            Errc::invalid_argument);
  EXPECT_EQ(found("(atime < ?1)", one).size(), 1u);
}

}  // namespace
}  // namespace tidepool::store
