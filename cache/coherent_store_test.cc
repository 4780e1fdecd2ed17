// The coherent cache of three simulated nodes in front of one real store (the home's): what L1
// keeps and prefetches, and — in a bounded random run checked word by word — that no read
// returns data older than a write acknowledged before the read began.
#include "cache/coherent_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cluster/sim.h"
#include "lockmgr/lock_manager.h"
#include "lockmgr/mode.h"

namespace tidepool::cache {
namespace {

namespace asio = boost::asio;
using cluster::NodeId;
using store::InodeId;

constexpr NodeId kHome = 1;
constexpr std::uint32_t kBlock = 128 * 1024;
const store::Caller kRoot{0, 0, {}};

class CoherentStoreTest : public ::testing::Test {
 protected:
  CoherentStoreTest() : world_(7) {
    dir_ = std::filesystem::temp_directory_path() /
           ("coherent-store-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    store::StoreOptions options;
    options.data_dir = dir_.string();
    options.l2 = l2_;
    auto opened = store::Store::open(options);
    EXPECT_TRUE(opened.ok()) << opened.status().message();
    home_ = std::move(opened).value();
    for (NodeId node : kNodes) {
      lockmgr::LockManagerOptions manager_options;
      manager_options.self = node;
      managers_[node] = std::make_unique<lockmgr::LockManager>(
          world_.loop(node), world_.transport(node), manager_options);
      CacheOptions cache_options;
      cache_options.l1_bytes = 64 << 20;
      caches_[node] = std::make_unique<CoherentStore>(
          *home_, [node](store::InodeId) { return node == kHome; }, cache_options);
      caches_[node]->attach(&world_.loop(node), managers_[node].get());
    }
    for (NodeId node : kNodes) managers_[node]->set_view(1, {kNodes.begin(), kNodes.end()});
  }

  ~CoherentStoreTest() override {
    for (NodeId node : kNodes) caches_[node]->attach(nullptr, nullptr);
    // Work the cache left behind (prefetches, lock releases) ends before the stores go.
    drive([] { return false; }, std::chrono::milliseconds(50));
    caches_.clear();
    managers_.clear();
    home_->close();
    home_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Runs the io_context (the NFS threads' part) and the simulated cluster (the lock managers'
  // part) on this thread until `done`, for `limit` at most; the home's own threads run beside.
  bool drive(const std::function<bool()>& done, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      const std::size_t ran = io_.poll();
      world_.run_until(world_.now_ms() + 1);
      if (ran == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
      io_.restart();
    }
    return true;
  }

  template <typename T>
  T run(asio::awaitable<T> operation) {
    std::optional<T> result;
    asio::co_spawn(
        io_, [&]() -> asio::awaitable<void> { result.emplace(co_await std::move(operation)); },
        asio::detached);
    EXPECT_TRUE(drive([&] { return result.has_value(); }, std::chrono::seconds(20)));
    return std::move(*result);
  }

  InodeId make_file(const std::string& name, std::uint64_t size) {
    auto made =
        run(home_->create(store::kRootInode, name, store::CreateMode::unchecked, {}, {}, kRoot));
    EXPECT_TRUE(made.ok()) << made.status().message();
    const InodeId inode = made->attributes.inode;
    std::vector<std::uint8_t> zeros(size, 0);
    EXPECT_TRUE(run(home_->write(inode, 0, zeros, store::Stability::file_sync, kRoot)).ok());
    return inode;
  }

  std::vector<std::uint8_t> read(NodeId node, InodeId inode, std::uint64_t offset,
                                 std::uint32_t length, store::Caller caller = kRoot) {
    std::vector<std::uint8_t> bytes(length);
    auto r = run(caches_[node]->read(inode, offset, bytes, caller));
    EXPECT_TRUE(r.ok()) << r.status().message();
    bytes.resize(r.ok() ? r->count : 0);
    return bytes;
  }

  // Gives `node` a new cache of `l1_bytes`, empty.
  void replace_cache(
      NodeId node, std::size_t l1_bytes,
      std::chrono::milliseconds read_report_interval = CacheOptions{}.read_report_interval,
      PrefetchOptions prefetch = {}, Clock* clock = nullptr) {
    caches_[node]->attach(nullptr, nullptr);
    CacheOptions options;
    options.l1_bytes = l1_bytes;
    options.read_report_interval = read_report_interval;
    options.prefetch = prefetch;
    options.clock = clock;
    caches_[node] = std::make_unique<CoherentStore>(
        *home_, [node](store::InodeId) { return node == kHome; }, options);
    caches_[node]->attach(&world_.loop(node), managers_[node].get());
  }

  // GETATTRs of `inode` through `node` until one is answered under a lock of the node's (the
  // first has the node take the attributes' lock, granted in the background); false if none is
  // within `limit`.
  bool getattr_until_under_lock(NodeId node, InodeId inode,
                                std::chrono::milliseconds limit = std::chrono::seconds(5)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      const std::uint64_t before = caches_[node]->statistics().l1_metadata_reads;
      if (!run(caches_[node]->getattr(inode)).ok()) return false;
      if (caches_[node]->statistics().l1_metadata_reads > before) return true;
      drive([] { return false; }, std::chrono::milliseconds(5));
    }
    return false;
  }

  void write(NodeId node, InodeId inode, std::uint64_t offset, std::vector<std::uint8_t> bytes) {
    auto w = run(caches_[node]->write(inode, offset, bytes, store::Stability::unstable, kRoot));
    EXPECT_TRUE(w.ok()) << w.status().message();
  }

  // Every node's locks as its lock manager has them, for a test that waited in vain.
  std::string lock_tables() const {
    std::ostringstream out;
    for (NodeId node : kNodes) {
      out << "node " << node << " holds:";
      for (const lockmgr::HeldLock& held : managers_.at(node)->held()) {
        const lockmgr::LockRecord& lock = held.record;
        out << " [" << lock.id.node << "." << lock.id.sequence << " of "
            << static_cast<int>(lock.resource.kind) << "/" << lock.resource.id << ": "
            << lockmgr::mode_name(lock.granted) << "->" << lockmgr::mode_name(lock.requested)
            << "]";
      }
      out << "\n";
    }
    return out.str();
  }

  static constexpr std::array<NodeId, 3> kNodes{1, 2, 3};
  asio::io_context io_;
  cluster::SimWorld world_;
  std::filesystem::path dir_;
  // The home's L2: the other nodes' L1 fetch from the home's store itself here.
  std::shared_ptr<store::L2> l2_ = store::L2::make(64u << 20);
  std::unique_ptr<store::LocalStore> home_;
  std::map<NodeId, std::unique_ptr<lockmgr::LockManager>> managers_;
  // A clock a test may give a cache (it outlives the caches): a day ahead of the home's, so that
  // every atime the home gives is past a cache's grace period.
  FakeClock cache_clock_{std::chrono::system_clock::now() + std::chrono::hours(24)};
  std::map<NodeId, std::unique_ptr<CoherentStore>> caches_;
};

TEST_F(CoherentStoreTest, L1TakesACopyOfWhatTheHomesL2SentRatherThanPinIt) {
  const InodeId file = make_file("a", 2 * kBlock);
  write(kHome, file, 0, std::vector<std::uint8_t>(2 * kBlock, 0x22));
  // Twice through the home: its L2 keeps the units on their second read.
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(read(kHome, file, 0, 2 * kBlock), std::vector<std::uint8_t>(2 * kBlock, 0x22));
  }
  ASSERT_EQ(l2_->statistics().blocks, 2u);
  EXPECT_EQ(read(2, file, 0, 2 * kBlock), std::vector<std::uint8_t>(2 * kBlock, 0x22));
  drive([] { return false; }, std::chrono::milliseconds(20));
  EXPECT_GE(caches_[2]->statistics().blocks.blocks, 2u);
  EXPECT_EQ(l2_->statistics().pinned_bytes, 0u) << "L1 holds the L2's units";
}

TEST_F(CoherentStoreTest, ASecondReadThroughAnotherNodeComesFromL1) {
  const InodeId file = make_file("a", 4 * kBlock);
  write(kHome, file, 0, std::vector<std::uint8_t>(4 * kBlock, 0x11));
  EXPECT_EQ(read(2, file, 0, 4 * kBlock), std::vector<std::uint8_t>(4 * kBlock, 0x11));
  const CacheStatistics first = caches_[2]->statistics();
  EXPECT_EQ(first.l1_bytes_hit, 0u);
  EXPECT_EQ(first.l1_bytes_fetched, 4u * kBlock);
  EXPECT_EQ(read(2, file, kBlock, kBlock), std::vector<std::uint8_t>(kBlock, 0x11));
  const CacheStatistics second = caches_[2]->statistics();
  EXPECT_EQ(second.l1_bytes_hit, kBlock);
  EXPECT_EQ(second.l1_bytes_fetched, 4u * kBlock);
  // The home reads its own copy.
  EXPECT_EQ(read(kHome, file, 0, kBlock).size(), kBlock);
  EXPECT_EQ(caches_[kHome]->statistics().l2_bytes_read, kBlock);
}

TEST_F(CoherentStoreTest, AReadFromL1LeavesItsBytesInTheBlocksPinnedUntilLetGo) {
  const InodeId file = make_file("a", 3 * kBlock);
  std::vector<std::uint8_t> bytes(3 * kBlock);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 7);
  write(kHome, file, 0, bytes);
  read(2, file, 0, 3 * kBlock);  // fetched into L1
  const std::uint64_t offset = kBlock / 2;
  const std::uint32_t length = 2 * kBlock;
  auto read = run(caches_[2]->read_pieces(file, offset, length, kRoot));
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->result.count, length);
  EXPECT_FALSE(read->result.eof);
  // Three blocks' bytes, none copied: the pieces point into the blocks, which stay pinned.
  ASSERT_EQ(read->pieces.size(), 3u);
  std::vector<std::uint8_t> joined;
  for (std::span<const std::uint8_t> piece : read->pieces) {
    joined.insert(joined.end(), piece.begin(), piece.end());
  }
  EXPECT_EQ(joined,
            std::vector<std::uint8_t>(bytes.begin() + offset, bytes.begin() + offset + length));
  EXPECT_EQ(caches_[2]->statistics().l1_bytes_hit, length);
  EXPECT_GE(caches_[2]->statistics().blocks.pinned_bytes, 3u * kBlock);
  read->keep.reset();
  EXPECT_EQ(caches_[2]->statistics().blocks.pinned_bytes, 0u);
  // Dropped from the cache by another node's write, blocks a reply holds keep what was read.
  read = run(caches_[2]->read_pieces(file, 0, length, kRoot));
  ASSERT_TRUE(read.ok()) << read.status().message();
  write(3, file, 0, std::vector<std::uint8_t>(3 * kBlock, 0xee));
  EXPECT_EQ(read->pieces[1][0], bytes[kBlock]);
}

TEST_F(CoherentStoreTest, RepliesSlowToGoPinAQuarterOfL1AtMostAndTheRestAreCopied) {
  constexpr std::size_t kL1Blocks = 64;
  constexpr std::size_t kPinnable = kL1Blocks / 4;
  replace_cache(2, kL1Blocks * kBlock);
  const InodeId file = make_file("a", kBlock);
  write(kHome, file, 0, std::vector<std::uint8_t>(kBlock, 0x5a));
  std::vector<store::ReadPieces> held;
  for (std::size_t i = 0; i < kPinnable + 2; ++i) {
    auto read = run(caches_[2]->read_pieces(file, 0, kBlock, kRoot));
    ASSERT_TRUE(read.ok()) << read.status().message();
    ASSERT_EQ(read->result.count, kBlock);
    std::vector<std::uint8_t> joined;
    for (std::span<const std::uint8_t> piece : read->pieces) {
      joined.insert(joined.end(), piece.begin(), piece.end());
    }
    EXPECT_EQ(joined, std::vector<std::uint8_t>(kBlock, 0x5a));
    held.push_back(std::move(*read));
  }
  // A quarter of L1's worth of replies is sent from the block itself; the rest hold copies.
  for (std::size_t i = 1; i < kPinnable; ++i) {
    EXPECT_EQ(held[i].pieces[0].data(), held[0].pieces[0].data()) << i;
  }
  EXPECT_NE(held[kPinnable].pieces[0].data(), held[0].pieces[0].data());
  EXPECT_NE(held[kPinnable + 1].pieces[0].data(), held[kPinnable].pieces[0].data());
  held.clear();
  EXPECT_EQ(caches_[2]->statistics().blocks.pinned_bytes, 0u);
  // Once they are gone, replies pin blocks again.
  auto again = run(caches_[2]->read_pieces(file, 0, kBlock, kRoot));
  ASSERT_TRUE(again.ok());
  EXPECT_GE(caches_[2]->statistics().blocks.pinned_bytes, kBlock);
}

TEST_F(CoherentStoreTest, ReadsFromL1MoveTheFilesAtimeAtItsHome) {
  replace_cache(2, 64 << 20, std::chrono::milliseconds(0));
  // Node 3 reports a file once an hour at most, by a clock the test moves.
  replace_cache(3, 64 << 20, std::chrono::hours(1), {}, &cache_clock_);
  // The atime is changed below behind the caches' backs (on the home's store, taking no lock):
  // with no grace period the nodes report every read they may, whatever atime they cached.
  // A cache passes the policy on to the store under it, here the home's: the home's is last.
  for (NodeId node : {NodeId{2}, NodeId{3}}) {
    caches_[node]->set_atime_policy(true, std::chrono::seconds(0));
  }
  home_->set_atime_policy(true, std::chrono::seconds(60));
  const InodeId file = make_file("t", kBlock);
  auto set_atime_days_ago = [&](int days) {
    store::AttributeChanges changes;
    changes.atime = store::SetTime::client_time;
    changes.atime_ns = (std::time(nullptr) - days * 86400) * std::int64_t{1'000'000'000};
    ASSERT_TRUE(run(home_->setattr(file, changes, kRoot, std::nullopt)).ok());
  };
  auto atime_is_recent = [&] {
    auto a = run(home_->getattr(file));
    return a.ok() && a->atime_ns > (std::time(nullptr) - 3600) * std::int64_t{1'000'000'000};
  };
  for (NodeId node : {NodeId{2}, NodeId{3}}) EXPECT_EQ(read(node, file, 0, kBlock).size(), kBlock);

  // Only L1 serves the next reads: the home sees none of them but the reports.
  set_atime_days_ago(90);
  EXPECT_EQ(read(3, file, 0, kBlock).size(), kBlock);
  EXPECT_EQ(caches_[3]->statistics().l1_bytes_hit, kBlock);
  drive([] { return false; }, std::chrono::milliseconds(100));
  EXPECT_FALSE(atime_is_recent()) << "node 3 reported the file within the hour already";
  EXPECT_EQ(read(2, file, 0, kBlock).size(), kBlock);
  EXPECT_EQ(caches_[2]->statistics().l1_bytes_hit, kBlock);
  EXPECT_TRUE(drive(atime_is_recent, std::chrono::seconds(5)))
      << "a read from node 2's L1 left the file looking 90 days cold";
  // An hour later by node 3's clock, and only then, node 3 reports the file again.
  set_atime_days_ago(90);
  EXPECT_EQ(read(3, file, 0, kBlock).size(), kBlock);
  EXPECT_EQ(caches_[3]->statistics().l1_bytes_hit, 2 * kBlock);
  drive([] { return false; }, std::chrono::milliseconds(100));
  EXPECT_FALSE(atime_is_recent()) << "node 3 reported the file within its hour";
  cache_clock_.advance(std::chrono::hours(1));
  EXPECT_EQ(read(3, file, 0, kBlock).size(), kBlock);
  EXPECT_EQ(caches_[3]->statistics().l1_bytes_hit, 3 * kBlock);
  EXPECT_TRUE(drive(atime_is_recent, std::chrono::seconds(5)))
      << "node 3 kept counting its hour on another clock";
}

TEST_F(CoherentStoreTest, AReadFromL1OfAFileReadWithinTheGracePeriodIsNotReported) {
  replace_cache(2, 64 << 20, std::chrono::milliseconds(0));
  caches_[2]->set_atime_policy(true, std::chrono::hours(1));
  // Any report would move the home's atime (the cache passed its policy on to the home's store,
  // which it wraps here: the home's is set last).
  home_->set_atime_policy(true, std::chrono::seconds(0));
  const InodeId file = make_file("g", kBlock);
  EXPECT_EQ(read(2, file, 0, kBlock).size(), kBlock);  // fetched from the home
  auto atime = [&] {
    auto a = run(home_->getattr(file));
    return a.ok() ? a->atime_ns : -1;
  };
  const std::int64_t fetched = atime();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(read(2, file, 0, kBlock).size(), kBlock);
  EXPECT_EQ(caches_[2]->statistics().l1_bytes_hit, kBlock);
  drive([] { return false; }, std::chrono::milliseconds(200));
  EXPECT_EQ(atime(), fetched) << "node 2 reported a read the home had no use for";
  // Past the grace period, the same read is reported.
  caches_[2]->set_atime_policy(true, std::chrono::seconds(0));
  EXPECT_EQ(read(2, file, 0, kBlock).size(), kBlock);
  EXPECT_TRUE(drive([&] { return atime() > fetched; }, std::chrono::seconds(5)));
}

TEST_F(CoherentStoreTest, AWriteThroughAnyNodeIsSeenByTheNextReadOfANodeThatCachedTheFile) {
  const InodeId file = make_file("b", 2 * kBlock);
  EXPECT_EQ(read(2, file, 0, kBlock), std::vector<std::uint8_t>(kBlock, 0));
  write(3, file, 100, std::vector<std::uint8_t>(8, 0x33));
  std::vector<std::uint8_t> expected(kBlock, 0);
  std::fill_n(expected.begin() + 100, 8, 0x33);
  EXPECT_EQ(read(2, file, 0, kBlock), expected);
  EXPECT_EQ(caches_[2]->statistics().coherence_invalidations, 1u);
  // The home's own clients write too.
  EXPECT_EQ(read(3, file, 0, kBlock), expected);
  write(kHome, file, 0, std::vector<std::uint8_t>(4, 0x44));
  std::fill_n(expected.begin(), 4, 0x44);
  EXPECT_EQ(read(3, file, 0, kBlock), expected);
  EXPECT_EQ(read(2, file, 0, kBlock), expected);
  // A truncation and an extension are writes of the size.
  store::AttributeChanges truncate;
  truncate.size = 50;
  EXPECT_TRUE(run(caches_[3]->setattr(file, truncate, kRoot, std::nullopt)).ok());
  EXPECT_EQ(read(2, file, 0, kBlock).size(), 50u);
}

TEST_F(CoherentStoreTest, AWriteWhoseNodeLostItsLocksWhileItWaitedIsRefusedNotMade) {
  const InodeId file = make_file("fenced", 16);
  // Node 3 keeps the attributes' lock: node 2's write holds the data lock while it waits for
  // that one, the callback to node 3 taking a few of the world's milliseconds.
  ASSERT_TRUE(getattr_until_under_lock(3, file));
  std::optional<Result<store::WriteResult>> written;
  const std::vector<std::uint8_t> word(16, 0x77);
  asio::co_spawn(
      io_,
      [&]() -> asio::awaitable<void> {
        written.emplace(co_await caches_[2]->write(file, 0, word, store::Stability::file_sync,
                                                   kRoot));
      },
      asio::detached);
  auto holds_data_lock = [&] {
    for (const lockmgr::HeldLock& held : managers_[2]->held()) {
      const lockmgr::LockRecord& lock = held.record;
      if (lock.resource.kind == lockmgr::ResourceKind::data && lock.resource.id == file &&
          lock.granted == lockmgr::Mode::protected_write) {
        return true;
      }
    }
    return false;
  };
  ASSERT_TRUE(drive(holds_data_lock, std::chrono::seconds(5))) << lock_tables();
  ASSERT_FALSE(written.has_value());
  // The group records node 2 down and up again: it lost every lock, and the data lock its
  // write held may have been another node's meanwhile.
  const std::uint64_t fences = managers_[2]->fences();
  for (NodeId node : kNodes) managers_[node]->set_view(2, {1, 3});
  for (NodeId node : kNodes) managers_[node]->set_view(3, {kNodes.begin(), kNodes.end()});
  EXPECT_EQ(managers_[2]->fences(), fences + 1);
  ASSERT_TRUE(drive([&] { return written.has_value(); }, std::chrono::seconds(20)))
      << lock_tables();
  EXPECT_EQ(written->code(), Errc::fenced) << written->status().to_string();
  std::vector<std::uint8_t> at_home(16);
  auto read_at_home = run(home_->read(file, 0, at_home, kRoot));
  ASSERT_TRUE(read_at_home.ok());
  EXPECT_EQ(at_home, std::vector<std::uint8_t>(16, 0));
  // Its client's retry, under locks taken anew, is made.
  write(2, file, 0, word);
  EXPECT_EQ(read(3, file, 0, 16), word);
}

TEST_F(CoherentStoreTest, AttributesComeFromL1UntilAnotherNodeChangesTheFileOrItsNames) {
  const InodeId file = make_file("named", 2 * kBlock);
  // The first GETATTR is the home's answer, and has node 2 take the attributes' lock; the
  // first under it keeps the home's answer; the next is L1's.
  ASSERT_TRUE(run(caches_[2]->getattr(file)).ok());
  EXPECT_EQ(caches_[2]->statistics().l1_metadata_reads, 0u);
  ASSERT_TRUE(getattr_until_under_lock(2, file));
  EXPECT_EQ(caches_[2]->statistics().l1_metadata_reads, 1u);
  EXPECT_EQ(caches_[2]->statistics().l1_metadata_hits, 0u);
  auto cached = run(caches_[2]->getattr(file));
  ASSERT_TRUE(cached.ok());
  EXPECT_EQ(cached->size, 2 * kBlock);
  EXPECT_EQ(caches_[2]->statistics().l1_metadata_hits, 1u);
  EXPECT_EQ(caches_[2]->statistics().l1_bytes_fetched, 0u) << "no data read for them";

  write(3, file, 2 * kBlock, std::vector<std::uint8_t>(10, 0x55));
  auto grown = run(caches_[2]->getattr(file));
  ASSERT_TRUE(grown.ok());
  EXPECT_EQ(grown->size, 2 * kBlock + 10);
  // Node 2 asks for the lock again only after a pause (a second by default): a client polling
  // a file that another node writes does not make each write wait for the lock.
  EXPECT_FALSE(getattr_until_under_lock(2, file, std::chrono::milliseconds(300)));
  ASSERT_TRUE(getattr_until_under_lock(2, file));
  const std::uint64_t hits = caches_[2]->statistics().l1_metadata_hits;
  ASSERT_TRUE(run(caches_[2]->getattr(file)).ok());
  ASSERT_EQ(caches_[2]->statistics().l1_metadata_hits, hits + 1) << "node 2 keeps them again";
  store::AttributeChanges shared;
  shared.mode = 0664;
  ASSERT_TRUE(run(caches_[kHome]->setattr(file, shared, kRoot, std::nullopt)).ok());
  auto changed = run(caches_[2]->getattr(file));
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(changed->mode & 0777, 0664u) << "a change at the home reaches node 2 too";

  // A second name and its removal change the link count, whichever node they run on.
  EXPECT_EQ(read(2, file, 0, kBlock).size(), kBlock);
  ASSERT_TRUE(run(caches_[3]->link(file, store::kRootInode, "other", kRoot)).ok());
  auto linked = run(caches_[2]->getattr(file));
  ASSERT_TRUE(linked.ok());
  EXPECT_EQ(linked->nlink, 2u);
  EXPECT_EQ(read(2, file, 0, kBlock).size(), kBlock);
  ASSERT_TRUE(run(caches_[3]->remove(store::kRootInode, "other", kRoot)).ok());
  auto unlinked = run(caches_[2]->getattr(file));
  ASSERT_TRUE(unlinked.ok());
  EXPECT_EQ(unlinked->nlink, 1u);
  // Removed for good: node 2 neither answers its attributes nor reads its blocks any more.
  EXPECT_EQ(read(2, file, 0, kBlock).size(), kBlock);
  ASSERT_TRUE(
      run(caches_[3]->rename(store::kRootInode, "named", store::kRootInode, "renamed", kRoot))
          .ok());
  EXPECT_EQ(read(2, file, 0, kBlock).size(), kBlock);
  ASSERT_TRUE(run(caches_[3]->remove(store::kRootInode, "renamed", kRoot)).ok());
  EXPECT_FALSE(run(caches_[2]->getattr(file)).ok());
  std::vector<std::uint8_t> bytes(kBlock);
  EXPECT_FALSE(run(caches_[2]->read(file, 0, bytes, kRoot)).ok());
}

TEST_F(CoherentStoreTest, ADirectorysAttributesComeFromItsHomeEveryTime) {
  // Entries made in a directory change its attributes under no lock: they are never kept.
  auto made = run(home_->mkdir(store::kRootInode, "dir", {}, kRoot));
  ASSERT_TRUE(made.ok()) << made.status().message();
  const InodeId dir = made->attributes.inode;
  EXPECT_FALSE(getattr_until_under_lock(2, dir, std::chrono::milliseconds(200)))
      << "no lock is taken for them";
  auto before = run(caches_[2]->getattr(dir));
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(run(caches_[3]->mkdir(dir, "sub", {}, kRoot)).ok());
  auto after = run(caches_[2]->getattr(dir));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->nlink, before->nlink + 1);
  EXPECT_EQ(caches_[2]->statistics().l1_metadata_hits, 0u);
}

TEST_F(CoherentStoreTest, ACreateThatCutsAnExistingFileReachesANodeThatCachedIt) {
  const InodeId file = make_file("cut", 2 * kBlock);
  EXPECT_EQ(read(2, file, 0, kBlock).size(), kBlock);
  ASSERT_TRUE(getattr_until_under_lock(2, file));
  store::AttributeChanges truncate;  // open(O_CREAT | O_TRUNC)
  truncate.size = 0;
  auto made = run(caches_[3]->create(store::kRootInode, "cut", store::CreateMode::unchecked,
                                     truncate, {}, kRoot));
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_EQ(made->attributes.inode, file);
  auto cut = run(caches_[2]->getattr(file));
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->size, 0u);
  EXPECT_TRUE(read(2, file, 0, kBlock).empty());
}

TEST_F(CoherentStoreTest, AccessIsWorkedOutFromL1AndFollowsAnotherNodesModeChange) {
  const InodeId file = make_file("guarded", kBlock);
  EXPECT_EQ(read(2, file, 0, kBlock).size(), kBlock);
  const store::Caller stranger{1000, 1000, {}};
  const std::uint32_t both = store::access::read | store::access::modify;
  const std::uint64_t hits = caches_[2]->statistics().l1_metadata_hits;
  auto before = run(caches_[2]->check_access(file, stranger, both));
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->granted, store::access::read);  // 0644, owned by root
  EXPECT_EQ(caches_[2]->statistics().l1_metadata_hits, hits + 1);
  store::AttributeChanges open_to_all;
  open_to_all.mode = 0666;
  ASSERT_TRUE(run(caches_[3]->setattr(file, open_to_all, kRoot, std::nullopt)).ok());
  EXPECT_EQ(read(2, file, 0, kBlock).size(), kBlock);
  auto after = run(caches_[2]->check_access(file, stranger, both));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->granted, both);
}

TEST_F(CoherentStoreTest, ReadersKeepTheirPermissionsOnCachedBlocks) {
  const InodeId file = make_file("private", kBlock);
  store::AttributeChanges private_mode;
  private_mode.mode = 0600;
  EXPECT_TRUE(run(caches_[2]->setattr(file, private_mode, kRoot, std::nullopt)).ok());
  EXPECT_EQ(read(2, file, 0, kBlock).size(), kBlock);
  std::vector<std::uint8_t> bytes(kBlock);
  const store::Caller stranger{1000, 1000, {}};
  auto denied = run(caches_[2]->read(file, 0, bytes, stranger));
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.code(), Errc::access_denied);
}

TEST_F(CoherentStoreTest, ASequentialReaderFindsMostOfItsBytesPrefetched) {
  constexpr std::uint64_t kSize = 32ull << 20;
  const InodeId file = make_file("stream", kSize);
  store::Caller reader = kRoot;
  reader.client = 0x0a000001;
  for (std::uint64_t offset = 0; offset < kSize; offset += kBlock) {
    ASSERT_EQ(read(2, file, offset, kBlock, reader).size(), kBlock);
    // The client thinks a little between reads, as a training job decodes its records.
    drive([] { return false; }, std::chrono::milliseconds(1));
  }
  const CacheStatistics stats = caches_[2]->statistics();
  EXPECT_EQ(stats.l1_bytes_accessed, kSize);
  // Found there or still on their way (that depends on the machine's speed): either way
  // fetched ahead of the reader, and only the first reads fetched on demand.
  EXPECT_GT(stats.l1_bytes_hit, 0u);
  EXPECT_GE(stats.l1_bytes_prefetched, kSize * 9 / 10) << stats.l1_bytes_fetched << " fetched";
  EXPECT_LE(stats.l1_bytes_fetched, 4u * kBlock);
  EXPECT_EQ(stats.l1_prefetch_wasted, 0u);
  // Every block fetched ahead was read, found there or still on its way.
  EXPECT_EQ(stats.l1_prefetch_used, stats.l1_bytes_prefetched);
}

TEST_F(CoherentStoreTest, AStreamingReadLargerThanL1LeavesTheRestOfL1Alone) {
  // L1's budget is kept per shard (a sixteenth of it each), and a block read ahead stays until
  // it is read. A window of half of L1 could fill one shard with the stream's blocks still to be
  // read, and the hot file's block there would go: a node's L1 is gigabytes, SmartRead's window
  // tens of megabytes.
  PrefetchOptions prefetch;
  prefetch.streaming_limit = 8 << 20;
  replace_cache(2, 64 << 20, CacheOptions{}.read_report_interval, prefetch);
  const InodeId hot = make_file("hot", 8 * kBlock);
  EXPECT_EQ(read(2, hot, 0, 8 * kBlock).size(), 8 * kBlock);
  constexpr std::uint64_t kStream = 128ull << 20;  // twice L1
  const InodeId stream = make_file("stream", kStream);
  EXPECT_TRUE(run(caches_[3]->set_access_pattern(stream, "streaming")).ok());
  store::Caller reader = kRoot;
  reader.client = 0x0a000003;
  for (std::uint64_t offset = 0; offset < kStream; offset += 8 * kBlock) {
    ASSERT_EQ(read(2, stream, offset, 8 * kBlock, reader).size(), 8 * kBlock);
  }
  const std::uint64_t hits = caches_[2]->statistics().l1_bytes_hit;
  EXPECT_EQ(read(2, hot, 0, 8 * kBlock).size(), 8 * kBlock);
  // Every block of the hot file is still there: the stream's went first.
  EXPECT_EQ(caches_[2]->statistics().l1_bytes_hit - hits, 8 * kBlock);
}

// Readers on many streams at once: SmartRead's windows together would queue far more at the
// owners than they serve within a call's deadline. The node keeps its prefetches within its
// limit; the rest is fetched ahead later, or on demand, and every read is whole.
TEST_F(CoherentStoreTest, ANodesPrefetchesTogetherStayWithinItsLimit) {
  PrefetchOptions prefetch;
  prefetch.node_limit = 4 * kBlock;
  replace_cache(2, 64 << 20, CacheOptions{}.read_report_interval, prefetch);
  constexpr std::size_t kStreams = 6;
  constexpr std::uint64_t kSize = 4ull << 20;
  std::vector<InodeId> files;
  for (std::size_t i = 0; i < kStreams; ++i) {
    files.push_back(make_file("stream" + std::to_string(i), kSize));
    EXPECT_TRUE(run(caches_[2]->set_access_pattern(files.back(), "streaming")).ok());
  }
  std::uint64_t most_in_flight = 0;
  for (std::uint64_t offset = 0; offset < kSize; offset += kBlock) {
    for (std::size_t i = 0; i < kStreams; ++i) {
      store::Caller reader = kRoot;
      reader.client = 0x0a000010 + i;
      ASSERT_EQ(read(2, files[i], offset, kBlock, reader).size(), kBlock);
      most_in_flight =
          std::max(most_in_flight, caches_[2]->statistics().l1_prefetch_in_flight);
    }
  }
  const CacheStatistics stats = caches_[2]->statistics();
  EXPECT_LE(most_in_flight, 4 * kBlock);
  EXPECT_GT(stats.l1_prefetch_deferred, 0u) << "six streams' windows exceed four blocks";
  EXPECT_GT(stats.l1_bytes_prefetched, 0u) << "still fetched ahead";
  EXPECT_TRUE(drive([&] { return caches_[2]->statistics().l1_prefetch_in_flight == 0; },
                    std::chrono::seconds(5)))
      << "every prefetch ended and gave its room back";
}

TEST_F(CoherentStoreTest, SmallRandomReadsOfARandomFileBypassL1) {
  const InodeId file = make_file("random", 64 * kBlock);
  EXPECT_TRUE(run(caches_[3]->set_access_pattern(file, "random")).ok());
  std::mt19937_64 random(3);
  for (int i = 0; i < 50; ++i) {
    const std::uint64_t offset = (random() % (64 * kBlock - 4096)) & ~4095ull;
    ASSERT_EQ(read(2, file, offset, 4096).size(), 4096u);
    // The first read looks the pattern up in the background.
    if (i == 0) drive([] { return false; }, std::chrono::milliseconds(20));
  }
  const CacheStatistics stats = caches_[2]->statistics();
  // The first read learns the pattern; the others read only what they ask.
  EXPECT_LE(stats.l1_bytes_fetched + stats.l1_bytes_prefetched, kBlock);
  EXPECT_GE(stats.l1_bypassed_bytes, 49u * 4096);
}

TEST_F(CoherentStoreTest, RandomSmallReadsOfADefaultFileWasteAlmostNothingOnPrefetch) {
  constexpr std::uint64_t kSize = 256ull << 20;
  const InodeId file = make_file("records", 0);
  store::AttributeChanges sparse;
  sparse.size = kSize;
  ASSERT_TRUE(run(home_->setattr(file, sparse, kRoot, std::nullopt)).ok());
  store::Caller reader = kRoot;
  reader.client = 0x0a000002;
  std::mt19937_64 random(5);
  constexpr int kReads = 2000;
  for (int i = 0; i < kReads; ++i) {
    const std::uint64_t offset = (random() % (kSize / 4096)) * 4096;
    ASSERT_EQ(read(2, file, offset, 4096, reader).size(), 4096u);
  }
  drive([] { return false; }, std::chrono::milliseconds(20));  // prefetches under way land
  const CacheStatistics stats = caches_[2]->statistics();
  // Prefetched and never read: wasted, whether evicted since or still in L1.
  const std::uint64_t unread = stats.l1_bytes_prefetched - stats.l1_prefetch_used;
  EXPECT_LE(unread, kReads * 4096u / 20) << stats.l1_bytes_prefetched << " prefetched";
}

TEST_F(CoherentStoreTest, ReadersOfADatasetFourTimesTheCacheHitAQuarterOfTheTime) {
  // The seeds' cache law: many readers, each reading whole files picked at random from a
  // dataset four times the cache, hit in proportion to cache / dataset.
  constexpr std::size_t kCache = 64u << 20;
  constexpr std::uint64_t kFileSize = 2 * kBlock;
  constexpr std::size_t kFiles = 4 * kCache / kFileSize;
  replace_cache(2, kCache);
  std::vector<InodeId> files;
  for (std::size_t i = 0; i < kFiles; ++i) {
    files.push_back(make_file("set-" + std::to_string(i), kFileSize));
  }
  std::mt19937_64 random(9);
  constexpr int kReaders = 8;
  // Each reader's files read whole, one READ each; the first share of them fills the cache.
  auto read_files = [&](int reads) {
    int finished = 0;
    for (int r = 0; r < kReaders; ++r) {
      std::vector<InodeId> picks;
      for (int i = 0; i < reads / kReaders; ++i) picks.push_back(files[random() % files.size()]);
      asio::co_spawn(
          io_,
          [this, &finished, picks = std::move(picks), r]() -> asio::awaitable<void> {
            store::Caller reader = kRoot;
            reader.client = 0x0a000100 + static_cast<std::uint64_t>(r);
            std::vector<std::uint8_t> bytes(kFileSize);
            for (InodeId file : picks) {
              auto read = co_await caches_[2]->read(file, 0, bytes, reader);
              EXPECT_TRUE(read.ok() && read->count == kFileSize) << read.status().message();
            }
            finished++;
          },
          asio::detached);
    }
    ASSERT_TRUE(drive([&] { return finished == kReaders; }, std::chrono::seconds(120)));
  };
  read_files(800);
  const CacheStatistics warm = caches_[2]->statistics();
  read_files(3200);
  const CacheStatistics after = caches_[2]->statistics();
  const double hit_ratio = static_cast<double>(after.l1_bytes_hit - warm.l1_bytes_hit) /
                           static_cast<double>(after.l1_bytes_accessed - warm.l1_bytes_accessed);
  EXPECT_NEAR(hit_ratio, 0.25, 0.02) << "hit ratio";
  EXPECT_EQ(after.l1_bytes_prefetched, 0u);  // whole-file reads leave nothing to fetch ahead
}

// Every 8-byte word a write puts down carries the write's id.
struct WriteRecord {
  std::uint64_t id = 0;
  std::uint64_t started = 0;  // on the run's sequence of events
  std::uint64_t acknowledged = 0;
  InodeId file = 0;
  std::uint64_t start = 0;  // bytes [start, end)
  std::uint64_t end = 0;
};

TEST_F(CoherentStoreTest, NoReadReturnsDataOlderThanAWriteAcknowledgedBeforeItBegan) {
  constexpr std::uint64_t kSize = 4 * kBlock;
  const std::vector<InodeId> files{make_file("x", kSize), make_file("y", kSize)};
  std::mt19937_64 random(11);
  std::uint64_t sequence = 0;
  std::map<std::uint64_t, WriteRecord> writes;  // by id
  std::uint64_t violations = 0;
  std::uint64_t reads_checked = 0;

  auto do_write = [&](NodeId node, InodeId file, std::uint64_t start,
                      std::uint64_t words) -> asio::awaitable<void> {
    WriteRecord record{writes.size() + 1, ++sequence, 0, file, start, start + words * 8};
    writes[record.id] = record;
    std::vector<std::uint8_t> bytes(words * 8);
    for (std::uint64_t w = 0; w < words; ++w) std::memcpy(&bytes[w * 8], &record.id, 8);
    const auto stability =
        random() % 2 == 0 ? store::Stability::unstable : store::Stability::file_sync;
    auto w = co_await caches_[node]->write(file, start, bytes, stability, kRoot);
    EXPECT_TRUE(w.ok()) << w.status().message();
    if (w.ok()) writes[record.id].acknowledged = ++sequence;
  };
  auto do_read = [&](NodeId node, InodeId file, std::uint64_t start,
                     std::uint64_t words) -> asio::awaitable<void> {
    const std::uint64_t began = ++sequence;
    std::vector<std::uint8_t> bytes(words * 8);
    auto r = co_await caches_[node]->read(file, start, bytes, kRoot);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (!r.ok()) co_return;
    reads_checked++;
    for (std::uint64_t w = 0; w < r->count / 8; ++w) {
      const std::uint64_t at = start + w * 8;
      std::uint64_t seen = 0;
      std::memcpy(&seen, &bytes[w * 8], 8);
      const WriteRecord* seen_write = seen == 0 ? nullptr : &writes.at(seen);
      // Stale: a write of this word acknowledged before the read began started after the
      // write whose data came back was acknowledged (or there was none).
      for (const auto& [id, other] : writes) {
        if (other.file != file || at < other.start || at >= other.end) continue;
        if (other.acknowledged == 0 || other.acknowledged > began) continue;
        if (seen_write == nullptr ||
            (seen_write->acknowledged != 0 && other.started > seen_write->acknowledged)) {
          violations++;
          ADD_FAILURE() << "node " << node << " read write " << seen << " at " << at
                        << " after write " << id << " was acknowledged";
          break;
        }
      }
    }
  };

  constexpr int kRounds = 60;
  constexpr int kConcurrent = 6;
  for (int round = 0; round < kRounds; ++round) {
    int finished = 0;
    for (int op = 0; op < kConcurrent; ++op) {
      const NodeId node = kNodes[random() % kNodes.size()];
      const InodeId file = files[random() % files.size()];
      const std::uint64_t start = (random() % (kSize / 8)) * 8;
      const std::uint64_t max_words = (kSize - start) / 8;
      const bool writing = random() % 2 == 0;
      const std::uint64_t words =
          1 + random() % std::min<std::uint64_t>(max_words, writing ? 4096 : 40000);
      auto body = writing ? do_write(node, file, start, words) : do_read(node, file, start, words);
      asio::co_spawn(
          io_,
          [&finished, body = std::move(body)]() mutable -> asio::awaitable<void> {
            co_await std::move(body);
            finished++;
          },
          asio::detached);
    }
    ASSERT_TRUE(drive([&] { return finished == kConcurrent; }, std::chrono::seconds(20)))
        << "round " << round << "\n"
        << lock_tables();
  }
  EXPECT_EQ(violations, 0u);
  EXPECT_GT(reads_checked, 100u);
  std::uint64_t invalidations = 0;
  for (NodeId node : kNodes) invalidations += caches_[node]->statistics().coherence_invalidations;
  EXPECT_GT(invalidations, 0u);
}

}  // namespace
}  // namespace tidepool::cache
