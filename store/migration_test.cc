// Moves of a file's data between node pools and restripes within one (store/internal/migration.h),
// through a shard store whose pools are InProcessPools.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

#include "common/sqlite.h"
#include "store/internal/test_util.h"
#include "store/pool_data.h"
#include "store/store.h"
#include "store/unit_client.h"

namespace tidepool::store {
namespace {

constexpr std::uint32_t kUnit = 128 * 1024;

class MigrateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = internal::fresh_test_directory("tidepool-migrate-test");
    nodes_ = std::make_shared<internal::InProcessPools>(dir_ / "nodes", 3);
    reopen();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void reopen() {
    store_.reset();
    StoreOptions options;
    options.data_dir = (dir_ / "shard").string();
    options.threads = 2;
    options.peers = nodes_;
    options.placement = placement_;
    options.stripe_unit_bytes = stripe_unit_;
    options.l2 = shard_l2_;
    options.integrity = integrity_;
    options.clock = clock_;
    auto opened = Store::open(options);
    ASSERT_TRUE(opened.ok()) << opened.status().to_string();
    store_ = std::move(opened).value();
  }

  InodeId file_with(const std::vector<std::uint8_t>& bytes) {
    auto made = internal::run_to_completion(
        store_->create(kRootInode, "f" + std::to_string(++files_), CreateMode::unchecked, {}, {}, kRoot));
    EXPECT_TRUE(made.ok());
    const InodeId inode = made->attributes.inode;
    EXPECT_TRUE(internal::run_to_completion(
                    store_->write(inode, 0, bytes, Stability::file_sync, kRoot))
                    .ok());
    return inode;
  }
  std::vector<std::uint8_t> contents(InodeId inode, std::size_t n) {
    std::vector<std::uint8_t> bytes(n);
    std::size_t done = 0;
    while (done < n) {
      auto read = internal::run_to_completion(
          store_->read(inode, done, std::span(bytes).subspan(done, std::min<std::size_t>(n - done, 1 << 20)), kRoot));
      EXPECT_TRUE(read.ok()) << read.status().to_string();
      if (!read.ok() || read->count == 0) break;
      done += read->count;
    }
    return bytes;
  }
  Result<Move> migrate(InodeId inode, const std::string& pool, std::uint32_t copies = 2) {
    return internal::run_to_completion(store_->migrate(inode, pool, copies, 0));
  }
  // Each node of `where`, read alone (every other copy passed over), gives `bytes` from the
  // file's start: it holds every unit whole.
  void expect_every_node_alone_reads(const Placement& where, InodeId inode,
                                     const std::vector<std::uint8_t>& bytes) {
    PoolData direct(nodes_, integrity_);
    for (cluster::NodeId node : where.nodes) {
      std::vector<std::uint8_t> got(bytes.size());
      ASSERT_TRUE(direct
                      .read(where, inode, 0, got,
                            [node](cluster::NodeId from, std::uint64_t) { return from != node; })
                      .ok());
      EXPECT_EQ(got, bytes) << "node " << node;
    }
  }
  // Where DataFiles keeps an inode's data under `root`.
  static std::filesystem::path data_file(const std::filesystem::path& root, InodeId inode) {
    char dir[8], name[24];
    std::snprintf(dir, sizeof dir, "%02x", static_cast<unsigned>(inode % 256));
    std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(inode));
    return root / dir / name;
  }
  // Waits (bounded) until the home's gauge of units left on nodes is `count`; false if it is
  // not.
  bool units_left_become(std::uint64_t count) {
    for (int i = 0; i < 1000 && integrity_->units_left.load() != count; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return integrity_->units_left.load() == count;
  }
  bool shard_holds_data_of(InodeId inode) const {
    return std::filesystem::exists(data_file(dir_ / "shard" / "data", inode));
  }

  // Places new files whose path ends in `suffix_` in pool f800 at 2x.
  struct SuffixPlacement final : NewFilePlacement {
    bool places_any() override { return true; }
    bool needs_path() override { return true; }
    std::optional<PoolChoice> place(const NewFile& file) override {
      paths.push_back(file.path);
      if (!file.path.ends_with(".hot")) return std::nullopt;
      return PoolChoice{"f800", 2};
    }
    std::vector<std::string> paths;  // asked for, in order
  };

  static inline const Caller kRoot{0, 0, {}};
  std::filesystem::path dir_;
  std::shared_ptr<SuffixPlacement> placement_ = std::make_shared<SuffixPlacement>();
  std::shared_ptr<internal::InProcessPools> nodes_;
  const std::shared_ptr<L2> shard_l2_ = L2::make(0);
  FakeClock fake_clock_{std::chrono::system_clock::time_point(std::chrono::hours(24 * 365 * 50))};
  Clock* clock_ = nullptr;  // the real one, unless a test sets &fake_clock_
  const std::shared_ptr<IntegrityCounters> integrity_ = std::make_shared<IntegrityCounters>();
  std::unique_ptr<LocalStore> store_;
  int files_ = 0;
  std::uint32_t stripe_unit_ = kUnit;  // of new files, from the next reopen()
};

TEST_F(MigrateTest, AFileMovesFromItsShardToAPoolAndBetweenPoolsKeepingEveryByte) {
  const auto bytes = internal::random_bytes(3 * kUnit + 999, 21);
  const InodeId inode = file_with(bytes);
  ASSERT_TRUE(shard_holds_data_of(inode));
  auto hot = migrate(inode, "f800");
  ASSERT_TRUE(hot.ok()) << hot.status().to_string();
  EXPECT_EQ(hot->layout.pool, "f800");
  EXPECT_EQ(hot->layout.protection, 2u);
  EXPECT_EQ(hot->resumed_at, 0u);
  EXPECT_EQ(hot->bytes_copied, bytes.size());
  EXPECT_FALSE(shard_holds_data_of(inode)) << "the shard's copy is freed";
  for (cluster::NodeId node = 1; node <= 3; ++node) {
    EXPECT_TRUE(std::filesystem::exists(data_file(nodes_->units_of(node, "f800"), inode)))
        << "4 units over 3 nodes, 2 copies each: every node holds some";
  }
  EXPECT_EQ(contents(inode, bytes.size()), bytes);
  auto cold = migrate(inode, "h500", 2);
  ASSERT_TRUE(cold.ok()) << cold.status().to_string();
  EXPECT_EQ(contents(inode, bytes.size()), bytes);
  for (cluster::NodeId node = 1; node <= 3; ++node) {
    EXPECT_FALSE(std::filesystem::exists(data_file(nodes_->units_of(node, "f800"), inode)));
  }
  // The f800 nodes no longer answer for it: h500's one node does.
  nodes_->set_down({1, 2, 3});
  EXPECT_EQ(contents(inode, bytes.size()), bytes);
  nodes_->set_down({});
  reopen();
  EXPECT_EQ(internal::run_to_completion(store_->layout(inode))->pool, "h500") << "kept across a restart";
  EXPECT_EQ(contents(inode, bytes.size()), bytes);
  EXPECT_EQ(migrate(inode, "f800")->layout.pool, "f800");
  EXPECT_EQ(contents(inode, bytes.size()), bytes);
}

TEST_F(MigrateTest, WritesMadeWhileAFileMovesAreAllThereAfterwards) {
  constexpr std::size_t kSize = 8u << 20;
  std::vector<std::uint8_t> expected = internal::random_bytes(kSize, 22);
  const InodeId inode = file_with(expected);
  boost::asio::io_context io;
  Result<Move> moved = error(Errc::internal, "not run");
  boost::asio::co_spawn(io, store_->migrate(inode, "f800", 2, 0),
                        [&](std::exception_ptr, Result<Move> r) { moved = std::move(r); });
  std::mt19937 random(23);
  int written = 0;
  // Some writes land past the size the move read when it began: appended while it copies.
  expected.resize(kSize + (2u << 20));
  auto writer = [&]() -> boost::asio::awaitable<void> {
    for (int i = 0; i < 200; ++i) {
      const std::size_t at = random() % (expected.size() - 65536);
      std::vector<std::uint8_t> piece = internal::random_bytes(65536, 100 + i);
      auto write = store_->write(inode, at, piece, Stability::unstable, kRoot);
      auto done = co_await std::move(write);
      if (!done.ok()) continue;
      std::copy(piece.begin(), piece.end(), expected.begin() + static_cast<std::ptrdiff_t>(at));
      ++written;
    }
  };
  boost::asio::co_spawn(io, writer(), boost::asio::detached);
  io.run();
  ASSERT_TRUE(moved.ok()) << moved.status().to_string();
  EXPECT_EQ(written, 200);
  ASSERT_TRUE(internal::run_to_completion(store_->commit(inode, {})).ok());
  EXPECT_EQ(contents(inode, expected.size()), expected);
}

// What an initiator synced itself (UnitClient::sync), the home's COMMIT does not sync again —
// while the file keeps the layout it was synced under; and the boot ids it was told count as
// its own, so a restart of an owner still changes the home's write verifier.
TEST_F(MigrateTest, ACommitSyncsOnlyTheOwnersItsInitiatorDidNotUnderTheFilesLayout) {
  const InodeId inode = file_with(internal::random_bytes(3 * kUnit, 24));
  ASSERT_TRUE(migrate(inode, "f800").ok());
  const auto unstable = internal::random_bytes(kUnit, 25);
  ASSERT_TRUE(
      internal::run_to_completion(store_->write(inode, kUnit, unstable, Stability::unstable, kRoot))
          .ok());
  Result<Layout> layout = internal::run_to_completion(store_->layout(inode));
  ASSERT_TRUE(layout.ok());
  UnitClient initiator(nodes_);
  const auto syncs_asked = [this] {
    std::vector<std::uint64_t> asked;
    for (cluster::NodeId node = 1; node <= 3; ++node) {
      asked.push_back(nodes_->syncs_asked[node - 1].exchange(0));
    }
    return asked;
  };
  const auto commit = [&](SyncedCopies synced) {
    syncs_asked();
    EXPECT_TRUE(internal::run_to_completion(store_->commit(inode, std::move(synced))).ok());
    return syncs_asked();
  };
  std::vector<SyncedNode> synced = internal::run_to_completion(initiator.sync(*layout, inode));
  ASSERT_EQ(synced.size(), 3u);
  EXPECT_EQ(commit({*layout, synced}), (std::vector<std::uint64_t>{0, 0, 0}))
      << "every owner synced by the initiator";
  std::erase_if(synced, [](const SyncedNode& node) { return node.node == 2; });
  EXPECT_EQ(commit({*layout, synced}), (std::vector<std::uint64_t>{0, 1, 0}))
      << "only the owner the initiator did not sync";
  EXPECT_EQ(commit({}), (std::vector<std::uint64_t>{1, 1, 1})) << "no initiator synced any";
  Layout older = *layout;
  ASSERT_TRUE(internal::run_to_completion(
                  store_->setattr(inode, AttributeChanges{.size = 2 * kUnit}, kRoot, std::nullopt))
                  .ok());
  synced = internal::run_to_completion(initiator.sync(older, inode));
  EXPECT_EQ(commit({older, synced}), (std::vector<std::uint64_t>{1, 1, 1}))
      << "synced under a layout read before a truncation";

  layout = internal::run_to_completion(store_->layout(inode));
  ASSERT_TRUE(layout.ok());
  const std::uint64_t verifier = store_->write_verifier();
  nodes_->restart(1);
  synced = internal::run_to_completion(initiator.sync(*layout, inode));
  EXPECT_EQ(commit({*layout, synced}), (std::vector<std::uint64_t>{0, 0, 0}));
  EXPECT_NE(store_->write_verifier(), verifier)
      << "node 1 restarted: what it took UNSTABLE may be gone";
}

TEST_F(MigrateTest, AMoveKeepsToItsPaceOnTheStoresClock) {
  clock_ = &fake_clock_;
  reopen();
  const FakeClock& clock = fake_clock_;
  const auto bytes = internal::random_bytes(4u << 20, 27);
  const InodeId inode = file_with(bytes);
  const auto start = clock.steady_now();
  ASSERT_TRUE(internal::run_to_completion(store_->migrate(inode, "f800", 2, 20'000'000)).ok());
  // 4 MiB at 20 MB/s is 210 ms; the last range's wait ends where the copy does.
  EXPECT_GE(clock.steady_now() - start, std::chrono::milliseconds(200));
  EXPECT_LE(clock.steady_now() - start, std::chrono::milliseconds(220));
  EXPECT_EQ(contents(inode, bytes.size()), bytes);
}

// Each 1 MiB the copy takes is 8 units of 2 copies: 16 unit writes.
constexpr std::int64_t kUnitWritesPerMiB = 16;

// Lets held writes go and joins the thread moving a file, however the test leaves.
class MoverGuard {
 public:
  MoverGuard(internal::InProcessPools& pools, std::thread& mover) : pools_(pools), mover_(mover) {}
  ~MoverGuard() {
    pools_.release_writes();
    if (mover_.joinable()) mover_.join();
  }
  MoverGuard(const MoverGuard&) = delete;
  MoverGuard& operator=(const MoverGuard&) = delete;

 private:
  internal::InProcessPools& pools_;
  std::thread& mover_;
};

// Cuts a move of `inode` to `pool` short as a home that dies would: `store` closes while the
// copy is held past 36 MiB, its watermark at 32 MiB. The caller opens the store again.
void cut_move_short(internal::InProcessPools& pools, LocalStore& store, InodeId inode,
                    const std::string& pool) {
  pools.hold_writes_after(36 * kUnitWritesPerMiB);
  boost::asio::io_context io;
  boost::asio::co_spawn(io, store.migrate(inode, pool, 2, 0), boost::asio::detached);
  std::thread mover([&] { io.run(); });
  const MoverGuard guard(pools, mover);
  ASSERT_TRUE(pools.wait_until_held());
  store.close();
  pools.release_writes();
  mover.join();
}

// The home dies mid-move (its store closes while the copy is held past 40 MiB, its watermark at
// 32 MiB): the next one goes on from the watermark, and writes made in between are in the new
// copy.
TEST_F(MigrateTest, AMoveCutShortGoesOnFromItsWatermark) {
  constexpr std::size_t kSize = 80u << 20;
  std::vector<std::uint8_t> expected = internal::random_bytes(kSize, 31);
  const InodeId inode = file_with(expected);
  auto write = [&](std::size_t at, std::uint8_t value) {
    std::vector<std::uint8_t> piece(70'000, value);
    ASSERT_TRUE(internal::run_to_completion(
                    store_->write(inode, at, piece, Stability::file_sync, kRoot))
                    .ok());
    std::copy(piece.begin(), piece.end(), expected.begin() + static_cast<std::ptrdiff_t>(at));
  };
  nodes_->hold_writes_after(40 * kUnitWritesPerMiB);
  boost::asio::io_context io;
  Result<Move> cut = error(Errc::internal, "not run");
  boost::asio::co_spawn(io, store_->migrate(inode, "f800", 2, 0),
                        [&](std::exception_ptr, Result<Move> r) { cut = std::move(r); });
  std::thread mover([&] { io.run(); });
  const MoverGuard guard(*nodes_, mover);
  ASSERT_TRUE(nodes_->wait_until_held());
  const Layout seen = internal::run_to_completion(store_->layout(inode)).value();
  EXPECT_EQ(seen.pool, kWithShard) << "mid-move, the data is where it was";
  EXPECT_EQ(seen.moving_to, "f800");
  EXPECT_EQ(seen.moving_nodes, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(seen.moved_bytes, 32u << 20) << "the watermark of the first range";
  store_->close();
  nodes_->release_writes();
  mover.join();
  EXPECT_EQ(cut.status().code(), Errc::unavailable);
  reopen();
  const Layout left = internal::run_to_completion(store_->layout(inode)).value();
  EXPECT_EQ(left.pool, kWithShard);
  EXPECT_EQ(left.moving_to, "f800");
  EXPECT_EQ(left.moved_bytes, 32u << 20);
  write(2u << 20, 0xb2);         // below the watermark, after the restart: both copies
  write(kSize - 100'000, 0xc3);  // past it
  auto resumed = migrate(inode, "f800");
  ASSERT_TRUE(resumed.ok()) << resumed.status().to_string();
  EXPECT_EQ(resumed->resumed_at, 32u << 20) << "went on from the watermark";
  EXPECT_EQ(resumed->bytes_copied, kSize - (32u << 20));
  EXPECT_EQ(resumed->layout.pool, "f800");
  EXPECT_TRUE(resumed->layout.moving_to.empty());
  EXPECT_FALSE(shard_holds_data_of(inode));
  EXPECT_EQ(contents(inode, kSize), expected);
  reopen();
  EXPECT_EQ(contents(inode, kSize), expected);
}

// A move cut short, then the file asked to go elsewhere, or to stay: the move is given up (its
// units freed, writes no longer sent there), and the new one starts from the start.
TEST_F(MigrateTest, AMoveCutShortIsGivenUpWhenTheFileIsToGoElsewhere) {
  constexpr std::size_t kSize = 40u << 20;
  const std::vector<std::uint8_t> bytes = internal::random_bytes(kSize, 32);
  const InodeId inode = file_with(bytes);
  const InodeId stays = file_with(bytes);
  for (const InodeId file : {inode, stays}) {
    ASSERT_NO_FATAL_FAILURE(cut_move_short(*nodes_, *store_, file, "f800"));
    reopen();
    const Layout left = internal::run_to_completion(store_->layout(file)).value();
    ASSERT_EQ(left.moving_to, "f800");
    ASSERT_EQ(left.moved_bytes, 32u << 20);
  }
  auto moved = migrate(inode, "h500");
  ASSERT_TRUE(moved.ok()) << moved.status().to_string();
  EXPECT_EQ(moved->resumed_at, 0u);
  EXPECT_EQ(moved->layout.pool, "h500");
  EXPECT_TRUE(moved->layout.moving_to.empty());
  EXPECT_EQ(contents(inode, kSize), bytes);
  auto stayed = migrate(stays, std::string(kWithShard));
  ASSERT_TRUE(stayed.ok()) << stayed.status().to_string();
  EXPECT_EQ(stayed->layout.pool, kWithShard);
  EXPECT_TRUE(stayed->layout.moving_to.empty()) << "the move is given up";
  EXPECT_EQ(contents(stays, kSize), bytes);
  for (cluster::NodeId node = 1; node <= 3; ++node) {
    for (const InodeId file : {inode, stays}) {
      EXPECT_FALSE(std::filesystem::exists(data_file(nodes_->units_of(node, "f800"), file)))
          << "the units of the moves given up are freed";
    }
  }
  nodes_->set_down({1});
  const std::vector<std::uint8_t> piece(1000, 7);
  EXPECT_TRUE(internal::run_to_completion(store_->write(stays, 0, piece, Stability::file_sync, kRoot))
                  .ok())
      << "writes no longer go to f800, whose node 1 is down";
  nodes_->set_down({});
  EXPECT_EQ(migrate(stays, "f800", 2)->layout.pool, "f800");
}

// A second call for a move under way waits for it, then finds the file in place.
TEST_F(MigrateTest, ACallForAMoveUnderWayWaitsForIt) {
  constexpr std::size_t kSize = 16u << 20;
  const std::vector<std::uint8_t> bytes = internal::random_bytes(kSize, 33);
  const InodeId inode = file_with(bytes);
  nodes_->hold_writes_after(2 * kUnitWritesPerMiB);
  boost::asio::io_context io;
  std::vector<Result<Move>> answers(2, error(Errc::internal, "not run"));
  // One thread runs both calls in the order they were made: the first reserves the move before
  // its first wait, so the second finds it reserved and waits before anything is copied.
  for (std::size_t i = 0; i < answers.size(); ++i) {
    boost::asio::co_spawn(io, store_->migrate(inode, "f800", 2, 0),
                          [&, i](std::exception_ptr, Result<Move> r) { answers[i] = std::move(r); });
  }
  std::thread mover([&] { io.run(); });
  const MoverGuard guard(*nodes_, mover);
  ASSERT_TRUE(nodes_->wait_until_held());
  nodes_->release_writes();
  mover.join();
  ASSERT_TRUE(answers[0].ok()) << answers[0].status().to_string();
  ASSERT_TRUE(answers[1].ok()) << answers[1].status().to_string();
  EXPECT_EQ(answers[0]->bytes_copied, kSize);
  EXPECT_EQ(answers[1]->layout.pool, "f800");
  EXPECT_EQ(answers[1]->bytes_copied, 0u) << "found in place";
  EXPECT_EQ(contents(inode, kSize), bytes);
}

// Placement on create: a new file's data goes where the placement says from its first write,
// unless a node of that pool is down.
TEST_F(MigrateTest, ANewFileIsPlacedWhereThePlacementSays) {
  auto made_dir =
      internal::run_to_completion(store_->mkdir(kRootInode, "data", {}, kRoot));
  ASSERT_TRUE(made_dir.ok());
  auto make = [&](const std::string& name) {
    auto made = internal::run_to_completion(store_->create(
        made_dir->attributes.inode, name, CreateMode::unchecked, {}, {}, kRoot));
    EXPECT_TRUE(made.ok()) << made.status().to_string();
    return made.ok() ? made->attributes.inode : 0;
  };
  const InodeId hot = make("a.hot");
  const InodeId cold = make("b.txt");
  EXPECT_EQ(placement_->paths, (std::vector<std::string>{"/ifs/data/a.hot", "/ifs/data/b.txt"}));
  const Layout placed = internal::run_to_completion(store_->layout(hot)).value();
  EXPECT_EQ(placed.pool, "f800");
  EXPECT_EQ(placed.protection, 2u);
  EXPECT_EQ(placed.nodes, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(internal::run_to_completion(store_->layout(cold))->pool, kWithShard);
  const auto bytes = internal::random_bytes(3 * kUnit, 34);
  ASSERT_TRUE(internal::run_to_completion(store_->write(hot, 0, bytes, Stability::file_sync, kRoot))
                  .ok());
  EXPECT_FALSE(shard_holds_data_of(hot)) << "its data went to the pool's nodes";
  EXPECT_TRUE(std::filesystem::exists(data_file(nodes_->units_of(1, "f800"), hot)) ||
              std::filesystem::exists(data_file(nodes_->units_of(2, "f800"), hot)));
  EXPECT_EQ(contents(hot, bytes.size()), bytes);
  reopen();
  EXPECT_EQ(contents(hot, bytes.size()), bytes) << "placed across a restart";

  nodes_->set_down({2});
  const InodeId while_down = make("c.hot");
  EXPECT_EQ(internal::run_to_completion(store_->layout(while_down))->pool, kWithShard)
      << "a pool with a node down is not chosen";

  // Down for long, the node is lost: the pool places over the others, while they keep as many
  // copies as the policy asks for.
  nodes_->set_lost({2});
  const Layout without_lost = internal::run_to_completion(store_->layout(make("d.hot"))).value();
  EXPECT_EQ(without_lost.pool, "f800");
  EXPECT_EQ(without_lost.nodes, (std::vector<std::uint64_t>{1, 3}));
  nodes_->set_down({2, 3});
  nodes_->set_lost({2, 3});
  EXPECT_EQ(internal::run_to_completion(store_->layout(make("e.hot")))->pool, kWithShard)
      << "one node left keeps one copy, the shard two";
}

// `tide statistics cache` sums L2 Read over the nodes: a byte read once is counted once, where
// it was read from.
TEST_F(MigrateTest, ReadsOfAPlacedFileAreCountedByTheNodesHoldingItsUnitsAlone) {
  auto made = internal::run_to_completion(
      store_->create(kRootInode, "a.hot", CreateMode::unchecked, {}, {}, kRoot));
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  const InodeId placed = made->attributes.inode;
  const auto bytes = internal::random_bytes(3 * kUnit, 35);
  ASSERT_TRUE(
      internal::run_to_completion(store_->write(placed, 0, bytes, Stability::file_sync, kRoot))
          .ok());
  const InodeId with_shard = file_with(internal::random_bytes(kUnit, 36));
  EXPECT_EQ(contents(placed, bytes.size()), bytes);
  EXPECT_EQ(nodes_->unit_l2->reads().data_bytes_read.load(), bytes.size());
  EXPECT_EQ(shard_l2_->reads().data_bytes_read.load(), 0u);
  contents(with_shard, kUnit);
  EXPECT_EQ(shard_l2_->reads().data_bytes_read.load(), kUnit);
  EXPECT_EQ(nodes_->unit_l2->reads().data_bytes_read.load(), bytes.size());
}

TEST_F(MigrateTest, APlacedFileIsTruncatedAndRemovedOnItsPoolsNodes) {
  const auto bytes = internal::random_bytes(2 * kUnit, 24);
  const InodeId inode = file_with(bytes);
  ASSERT_TRUE(migrate(inode, "f800").ok());
  AttributeChanges shorter;
  shorter.size = 100;
  ASSERT_TRUE(internal::run_to_completion(store_->setattr(inode, shorter, kRoot, std::nullopt)).ok());
  AttributeChanges longer;
  longer.size = kUnit;
  ASSERT_TRUE(internal::run_to_completion(store_->setattr(inode, longer, kRoot, std::nullopt)).ok());
  auto after = contents(inode, kUnit);
  EXPECT_TRUE(std::equal(after.begin(), after.begin() + 100, bytes.begin()));
  EXPECT_TRUE(std::all_of(after.begin() + 100, after.end(), [](std::uint8_t b) { return b == 0; }));
  ASSERT_TRUE(internal::run_to_completion(store_->remove(kRootInode, "f1", kRoot)).ok());
  // The units go after the remove's commit, on the store's threads (bounded wait).
  auto any_left = [&] {
    for (cluster::NodeId node = 1; node <= 3; ++node) {
      if (std::filesystem::exists(data_file(nodes_->units_of(node, "f800"), inode))) return true;
    }
    return false;
  };
  for (int i = 0; i < 500 && any_left(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(any_left());
}

TEST_F(MigrateTest, TheUnitsOfAFileRemovedWhileAnOwnerIsDownGoWhenItIsBack) {
  const InodeId inode = file_with(internal::random_bytes(4 * kUnit, 62));
  ASSERT_TRUE(migrate(inode, "f800").ok());
  constexpr cluster::NodeId kDown = 2;
  nodes_->set_down({kDown});
  ASSERT_TRUE(internal::run_to_completion(store_->remove(kRootInode, "f1", kRoot)).ok());
  // Noted with the removal itself: a restart right after it keeps the note.
  reopen();
  EXPECT_EQ(integrity_->units_left.load(), 1u);
  const auto units = [&](cluster::NodeId node) {
    return std::filesystem::exists(data_file(nodes_->units_of(node, "f800"), inode));
  };
  EXPECT_TRUE(units(kDown));
  nodes_->set_down({});
  EXPECT_TRUE(units_left_become(0));
  for (cluster::NodeId node = 1; node <= 3; ++node) EXPECT_FALSE(units(node)) << "node " << node;
}

// A node removed from the cluster while down never comes back to have its units removed: its
// rows go (before, they stayed, counted in tidepool_units_left, for ever).
TEST_F(MigrateTest, TheUnitsLeftOnANodeTheClusterRemovedAreForgotten) {
  const InodeId inode = file_with(internal::random_bytes(4 * kUnit, 63));
  ASSERT_TRUE(migrate(inode, "f800").ok());
  constexpr cluster::NodeId kRemoved = 2;
  nodes_->set_down({kRemoved});
  ASSERT_TRUE(internal::run_to_completion(store_->remove(kRootInode, "f1", kRoot)).ok());
  EXPECT_EQ(integrity_->units_left.load(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(integrity_->units_left.load(), 1u) << "kept while the node is only down";
  nodes_->set_removed({kRemoved});
  EXPECT_TRUE(units_left_become(0));
  reopen();
  EXPECT_EQ(integrity_->units_left.load(), 0u) << "dropped from the shard, not only the gauge";
}

TEST_F(MigrateTest, AMoveGivenUpWhileATargetNodeIsDownNotesItsUnitsWithTheGiveUp) {
  constexpr std::size_t kSize = 40u << 20;
  const InodeId inode = file_with(internal::random_bytes(kSize, 63));
  ASSERT_NO_FATAL_FAILURE(cut_move_short(*nodes_, *store_, inode, "f800"));
  reopen();
  ASSERT_EQ(internal::run_to_completion(store_->layout(inode))->moving_to, "f800");
  nodes_->set_down({1});
  ASSERT_TRUE(migrate(inode, std::string(kWithShard)).ok());
  // Noted with the give-up itself: a restart right after it keeps the note.
  reopen();
  EXPECT_EQ(integrity_->units_left.load(), 1u);
  nodes_->set_down({});
  EXPECT_TRUE(units_left_become(0));
  EXPECT_FALSE(std::filesystem::exists(data_file(nodes_->units_of(1, "f800"), inode)));
}

TEST_F(MigrateTest, AMoveThatCannotReachThePoolChangesNothing) {
  const auto bytes = internal::random_bytes(kUnit, 25);
  const InodeId inode = file_with(bytes);
  nodes_->set_down({2});
  EXPECT_EQ(migrate(inode, "f800").status().code(), Errc::unavailable);
  nodes_->set_down({});
  EXPECT_EQ(internal::run_to_completion(store_->layout(inode))->pool, kWithShard);
  EXPECT_TRUE(shard_holds_data_of(inode));
  EXPECT_EQ(contents(inode, bytes.size()), bytes);
  EXPECT_EQ(migrate(inode, "../x").status().code(), Errc::invalid_argument);
  EXPECT_EQ(migrate(inode, "f800", 4).status().code(), Errc::invalid_argument);
}

TEST_F(MigrateTest, ARestripeToMoreCopiesKeepsEveryByteAndLeavesNoUnitWhereItNoLongerBelongs) {
  // Units 0-7 written (a move's first 1 MiB chunk), 8-15 a hole (its second), 16 in part.
  constexpr std::uint64_t kHole = 10;
  auto bytes = internal::random_bytes(16 * kUnit + 1000, 40);
  std::fill(bytes.begin() + 8 * kUnit, bytes.begin() + 16 * kUnit, 0);
  const InodeId inode = file_with(bytes);
  ASSERT_TRUE(migrate(inode, "f800").ok());
  const Layout two = *internal::run_to_completion(store_->layout(inode));
  const Placement at_two{"f800", 2, kUnit, two.nodes};
  // A restripe given up earlier left a unit on a node its placement did not have.
  PoolData direct(nodes_, integrity_);
  const cluster::NodeId stranger = [&] {
    const auto owners = *direct.owners(at_two, inode, kHole);
    for (cluster::NodeId node : two.nodes) {
      if (std::find(owners.begin(), owners.end(), node) == owners.end()) return node;
    }
    return cluster::NodeId{0};
  }();
  ASSERT_NE(stranger, 0u);
  const auto leftover = internal::random_bytes(kUnit, 41);
  ASSERT_TRUE(nodes_
                  ->call(stranger, UnitMethod::write,
                         encode_unit_request({"f800", inode, kHole * kUnit, 1, leftover}))
                  .ok());

  auto restriped = migrate(inode, "f800", 3);
  ASSERT_TRUE(restriped.ok()) << restriped.status().to_string();
  EXPECT_EQ(restriped->layout.protection, 3u);
  EXPECT_EQ(contents(inode, bytes.size()), bytes);
  // With 3 copies over nodes 1-3, every node holds every unit: each alone reads them all.
  const Placement at_three{"f800", 3, kUnit, restriped->layout.nodes};
  expect_every_node_alone_reads(at_three, inode, bytes);

  // Back to 2 copies: each node keeps only the units it owns; the others are holes.
  ASSERT_TRUE(migrate(inode, "f800", 2).ok());
  EXPECT_EQ(contents(inode, bytes.size()), bytes);
  for (cluster::NodeId node : two.nodes) {
    for (std::uint64_t unit = 0; unit < 17; ++unit) {
      const auto owners = *direct.owners(at_two, inode, unit);
      if (std::find(owners.begin(), owners.end(), node) != owners.end()) continue;
      auto read = nodes_->call(node, UnitMethod::read,
                               encode_unit_request({"f800", inode, unit * kUnit, kUnit, {}}));
      ASSERT_TRUE(read.ok()) << read.status().to_string();
      EXPECT_TRUE(std::all_of(read->begin(), read->end(), [](std::uint8_t b) { return b == 0; }))
          << "unit " << unit << " stays on node " << node;
    }
  }
}

TEST_F(MigrateTest, ARestripeOfUnitsLargerThanItsChunksKeepsEveryByte) {
  stripe_unit_ = 4u << 20;
  reopen();
  const auto bytes = internal::random_bytes(100'000, 42);
  const InodeId inode = file_with(bytes);
  ASSERT_TRUE(migrate(inode, "f800").ok());
  auto restriped = migrate(inode, "f800", 3);
  ASSERT_TRUE(restriped.ok()) << restriped.status().to_string();
  const Placement at_three{"f800", 3, stripe_unit_, restriped->layout.nodes};
  expect_every_node_alone_reads(at_three, inode, bytes);
}

// Waits (bounded) until the home has no copy behind; false if it still has.
bool caught_up(const IntegrityCounters& integrity) {
  for (int i = 0; i < 1000 && integrity.copies_behind.load() != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return integrity.copies_behind.load() == 0;
}

TEST_F(MigrateTest, WhileAnOwnerIsDownWritesGoOnAndItCatchesUpWhenBack) {
  const auto bytes = internal::random_bytes(4 * kUnit, 26);
  const InodeId inode = file_with(bytes);
  ASSERT_TRUE(migrate(inode, "f800").ok());
  const Layout layout = *internal::run_to_completion(store_->layout(inode));
  const Placement placed{"f800", 2, kUnit, layout.nodes};
  constexpr cluster::NodeId kDown = 3;
  nodes_->set_down({kDown});
  EXPECT_EQ(contents(inode, bytes.size()), bytes);
  auto expected = internal::random_bytes(4 * kUnit, 27);
  auto write = internal::run_to_completion(
      store_->write(inode, 0, std::span(expected).first(2 * kUnit), Stability::file_sync, kRoot));
  ASSERT_TRUE(write.ok()) << write.status().to_string();
  write = internal::run_to_completion(store_->write(
      inode, 2 * kUnit, std::span(expected).subspan(2 * kUnit), Stability::unstable, kRoot));
  ASSERT_TRUE(write.ok()) << write.status().to_string();
  ASSERT_TRUE(internal::run_to_completion(store_->commit(inode, {})).ok());
  EXPECT_EQ(integrity_->copies_behind.load(), 1u);
  EXPECT_EQ(contents(inode, expected.size()), expected);

  // What is behind survives the home's restart, and is not read when the node is back.
  reopen();
  EXPECT_EQ(integrity_->copies_behind.load(), 1u);
  const std::uint64_t caught_up_before = integrity_->units_caught_up.load();
  nodes_->set_down({});
  EXPECT_EQ(contents(inode, expected.size()), expected);
  ASSERT_TRUE(caught_up(*integrity_));
  EXPECT_EQ(integrity_->units_caught_up.load() - caught_up_before,
            PoolData(nodes_, integrity_).units_held_by(placed, inode, kDown, 4 * kUnit).size());

  // Node 3's copies alone give the new bytes.
  PoolData direct(nodes_, integrity_);
  const CopyBehind all_but_node_3 = [](cluster::NodeId node, std::uint64_t) {
    return node != kDown;
  };
  for (std::uint64_t unit : direct.units_held_by(placed, inode, kDown, 4 * kUnit)) {
    std::vector<std::uint8_t> got(kUnit);
    ASSERT_TRUE(direct.read(placed, inode, unit * kUnit, got, all_but_node_3).ok());
    EXPECT_TRUE(std::equal(got.begin(), got.end(), expected.begin() + unit * kUnit))
        << "unit " << unit;
  }
}

TEST_F(MigrateTest, ALostNodesUnitsAreRestripedOverTheOthersAndBackWhenItReturns) {
  const auto bytes = internal::random_bytes(8 * kUnit, 60);
  const InodeId inode = file_with(bytes);
  ASSERT_TRUE(migrate(inode, "f800").ok());
  auto stayed = migrate(inode, "f800");
  ASSERT_TRUE(stayed.ok()) << stayed.status().to_string();
  EXPECT_EQ(stayed->bytes_copied, 0u) << "placed over the pool's nodes already";

  constexpr cluster::NodeId kLost = 3;
  nodes_->set_down({kLost});
  auto expected = internal::random_bytes(8 * kUnit, 61);
  auto write = internal::run_to_completion(
      store_->write(inode, 0, std::span(expected), Stability::file_sync, kRoot));
  ASSERT_TRUE(write.ok()) << write.status().to_string();
  EXPECT_EQ(integrity_->copies_behind.load(), 1u);
  nodes_->set_lost({kLost});
  // Only units a copy of which was on the lost node change owners: each gets one new copy.
  std::uint64_t new_copies = 0;
  for (std::uint64_t unit = 0; unit < 8; ++unit) {
    const auto owners =
        *PoolData(nodes_, integrity_).owners({"f800", 2, kUnit, stayed->layout.nodes}, inode, unit);
    new_copies += std::ranges::find(owners, kLost) != owners.end() ? 1 : 0;
  }
  const std::uint64_t writes_before = nodes_->unit_writes.load();
  auto restriped = migrate(inode, "f800");
  ASSERT_TRUE(restriped.ok()) << restriped.status().to_string();
  EXPECT_EQ(restriped->layout.nodes, (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(nodes_->unit_writes.load() - writes_before, new_copies);
  EXPECT_EQ(integrity_->copies_behind.load(), 0u) << "no copy of the new placement is behind";
  EXPECT_EQ(contents(inode, expected.size()), expected);
  // Two copies over the two nodes left: each alone holds every unit.
  expect_every_node_alone_reads({"f800", 2, kUnit, restriped->layout.nodes}, inode, expected);
  EXPECT_TRUE(units_left_become(1)) << "the lost node keeps units of the old placement";

  // Up again but still lost: what it kept goes.
  nodes_->set_down({});
  EXPECT_TRUE(units_left_become(0));
  EXPECT_FALSE(std::filesystem::exists(data_file(nodes_->units_of(kLost, "f800"), inode)));

  nodes_->set_lost({});
  auto back = migrate(inode, "f800");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_TRUE(same_nodes(back->layout.nodes, {1, 2, 3}));
  EXPECT_EQ(contents(inode, expected.size()), expected);
  // The returned node holds its units as written since, and none of the stale ones it kept.
  const Placement spread{"f800", 2, kUnit, back->layout.nodes};
  PoolData direct(nodes_, integrity_);
  for (std::uint64_t unit = 0; unit < 8; ++unit) {
    const auto owners = *direct.owners(spread, inode, unit);
    const bool owned = std::find(owners.begin(), owners.end(), kLost) != owners.end();
    auto read = nodes_->call(kLost, UnitMethod::read,
                             encode_unit_request({"f800", inode, unit * kUnit, kUnit, {}}));
    ASSERT_TRUE(read.ok()) << read.status().to_string();
    if (owned) {
      ASSERT_EQ(read->size(), kUnit);
      EXPECT_TRUE(std::equal(read->begin(), read->end(), expected.begin() + unit * kUnit))
          << "unit " << unit;
    } else {
      EXPECT_TRUE(std::all_of(read->begin(), read->end(), [](std::uint8_t b) { return b == 0; }))
          << "a stale unit " << unit << " stays on the returned node";
    }
  }
}

TEST_F(MigrateTest, WhileAnOwnerIsDownATruncationWaitsForIt) {
  const auto bytes = internal::random_bytes(4 * kUnit, 28);
  const InodeId inode = file_with(bytes);
  ASSERT_TRUE(migrate(inode, "f800").ok());
  nodes_->set_down({3});
  AttributeChanges cut;
  cut.size = kUnit;
  EXPECT_EQ(internal::run_to_completion(store_->setattr(inode, cut, kRoot, std::nullopt)).code(),
            Errc::unavailable);
  nodes_->set_down({});
  EXPECT_TRUE(internal::run_to_completion(store_->setattr(inode, cut, kRoot, std::nullopt)).ok());
  EXPECT_EQ(contents(inode, kUnit),
            std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + kUnit));
}

// Bytes written to a placed file's owners directly (store/unit_client.h) count once the home
// records them under the layout they went out under, and only then: a layout read before a
// truncation, or one the file does not have, has the write made again the home's way.
TEST_F(MigrateTest, AWriteAtTheOwnersIsRecordedOnlyUnderTheFilesCurrentLayout) {
  auto made = internal::run_to_completion(
      store_->create(kRootInode, "direct.hot", CreateMode::unchecked, {}, {}, kRoot));
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  const InodeId inode = made->attributes.inode;
  const Layout before = internal::run_to_completion(store_->layout(inode)).value();
  ASSERT_EQ(before.pool, "f800");
  const auto bytes = internal::random_bytes(2 * kUnit, 44);
  UnitClient units(nodes_);
  ASSERT_TRUE(internal::run_to_completion(units.write(before, inode, 0, bytes, true)).ok());
  auto recorded = internal::run_to_completion(store_->record_write(
      inode, 0, static_cast<std::uint32_t>(bytes.size()), Stability::file_sync, kRoot, before));
  ASSERT_TRUE(recorded.ok()) << recorded.status().to_string();
  EXPECT_EQ(recorded->file.after->size, bytes.size());
  EXPECT_EQ(contents(inode, bytes.size()), bytes);

  AttributeChanges cut;
  cut.size = kUnit;
  ASSERT_TRUE(internal::run_to_completion(store_->setattr(inode, cut, kRoot, std::nullopt)).ok());
  EXPECT_EQ(internal::run_to_completion(
                store_->record_write(inode, 0, 1, Stability::file_sync, kRoot, before))
                .code(),
            Errc::unavailable)
      << "read before the truncation";
  Layout elsewhere = internal::run_to_completion(store_->layout(inode)).value();
  elsewhere.nodes = {1, 2};
  EXPECT_EQ(internal::run_to_completion(
                store_->record_write(inode, 0, 1, Stability::file_sync, kRoot, elsewhere))
                .code(),
            Errc::unavailable)
      << "not the file's nodes";
  const Layout now = internal::run_to_completion(store_->layout(inode)).value();
  EXPECT_TRUE(internal::run_to_completion(
                  store_->record_write(inode, 0, 1, Stability::file_sync, kRoot, now))
                  .ok());
}

// Layouts written while data kept with its shard was marked "default" — the name a new node's
// pool has — read as kept with the shard after an upgrade, and a pool called "default" is a
// pool files can move to like any other.
TEST_F(MigrateTest, LayoutsMarkedTheOldWayAreKeptWithTheirShardAndDefaultIsAPoolName) {
  const auto bytes = internal::random_bytes(kUnit, 43);
  const InodeId inode = file_with(bytes);
  store_.reset();
  {
    auto db = sqlite::Database::open((dir_ / "shard" / "shards" / "0000.db").string());
    ASSERT_TRUE(db.ok()) << db.status().to_string();
    ASSERT_TRUE((*db)->exec("UPDATE layouts SET pool = 'default'").ok());
    ASSERT_TRUE((*db)->exec("DELETE FROM meta WHERE key = 'shard_marker_renamed'").ok());
  }
  reopen();
  EXPECT_EQ(internal::run_to_completion(store_->layout(inode))->pool, kWithShard);
  EXPECT_EQ(contents(inode, bytes.size()), bytes);
  EXPECT_EQ(migrate(inode, "default").code(), Errc::unavailable)
      << "a pool name like any other: this one has no node";
}

TEST(MigrateOutsideACluster, IsNotSupported) {
  const auto dir = internal::fresh_test_directory("tidepool-migrate-alone-test");
  StoreOptions options;
  options.data_dir = dir.string();
  auto store = Store::open(options);
  ASSERT_TRUE(store.ok());
  auto made = internal::run_to_completion(
      (*store)->create(kRootInode, "f", CreateMode::unchecked, {}, {}, Caller{0, 0, {}}));
  ASSERT_TRUE(made.ok());
  EXPECT_EQ(internal::run_to_completion((*store)->migrate(made->attributes.inode, "f800", 2, 0))
                .status()
                .code(),
            Errc::not_supported);
  store->reset();
  std::filesystem::remove_all(dir);
}
}  // namespace
}  // namespace tidepool::store
