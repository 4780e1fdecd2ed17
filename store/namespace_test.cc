#include "store/namespace.h"

#include <gtest/gtest.h>

#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <future>
#include <set>
#include <thread>

#include "common/fail_points.h"
#include "store/cross_shard.h"
#include "store/internal/test_util.h"
#include "store/local_shards.h"

namespace tidepool::store {
namespace {

using internal::fresh_test_directory;
using internal::run_to_completion;

constexpr ShardId kShards = 3;

Caller root_caller() {
  Caller c;
  c.uid = c.gid = 0;
  return c;
}

// Forwards to a shard's participant, and can make it die — its store closed, its answer lost —
// when asked to commit: a crash between the phases of a change across shards.
class DyingParticipant final : public ShardParticipant {
 public:
  DyingParticipant(std::shared_ptr<ShardParticipant> real, std::function<void()> die)
      : real_(std::move(real)), die_(std::move(die)) {}
  awaitable<Result<std::vector<InodeId>>> prepare(TransactionPart part) override {
    return real_->prepare(std::move(part));
  }
  awaitable<Status> decide(TransactionId) override { return die(); }
  awaitable<Status> commit(TransactionId) override { return die(); }
  awaitable<Status> abort(TransactionId id) override { return real_->abort(id); }
  awaitable<Status> finish(TransactionId id) override { return real_->finish(id); }
  awaitable<Result<Outcome>> outcome(TransactionId id) override { return real_->outcome(id); }
  awaitable<Result<std::vector<PendingPart>>> pending() override { return real_->pending(); }

 private:
  awaitable<Status> die() {
    die_();
    co_return error(Errc::unavailable, "the shard's home died");
  }

  std::shared_ptr<ShardParticipant> real_;
  std::function<void()> die_;
};

class ShardedNamespaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fresh_test_directory("tp-namespace");
    for (ShardId shard = 0; shard < kShards; ++shard) open(shard);
    ns_ = std::make_unique<ShardedNamespace>(
        kShards, [this](ShardId shard) { return access(shard); }, make_process_locks());
  }
  void TearDown() override {
    for (auto& shard : shards_) shard.reset();
    std::filesystem::remove_all(root_);
  }

  void open(ShardId shard) {
    StoreOptions options;
    options.data_dir = (root_ / ("shard-" + std::to_string(shard))).string();
    options.shard = shard;
    options.threads = 1;
    auto store = Store::open(options);
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    shards_[shard] = std::shared_ptr<LocalStore>(std::move(*store));
  }
  // The shard's home dies: the namespace cannot reach it until it is opened again.
  void crash(ShardId shard) {
    shards_[shard]->close();
    shards_[shard].reset();
  }

  Result<ShardAccess> access(ShardId shard) {
    std::shared_ptr<LocalStore> store = shards_[shard];
    if (!store) return error(Errc::unavailable, "shard " + std::to_string(shard) + " is down");
    std::shared_ptr<ShardParticipant> participant(store, &store->participant());
    if (dies_on_commit_ == shard) {
      participant = std::make_shared<DyingParticipant>(participant, [this, shard] {
        dies_on_commit_.reset();
        crash(shard);
      });
    }
    return ShardAccess{store, participant};
  }

  InodeId mkdir(InodeId parent, const std::string& name) {
    auto made = run_to_completion(ns_->mkdir(parent, name, {}, root_caller()));
    EXPECT_TRUE(made.ok()) << name << ": " << made.status().to_string();
    return made.ok() ? made->attributes.inode : 0;
  }
  // A directory in the root on the shard `shard`, or not on `not_shard`.
  InodeId directory_on(ShardId shard, const std::string& prefix) {
    for (int i = 0; i < 100; ++i) {
      const std::string name = prefix + std::to_string(i);
      if (ns_->shard_for_directory(kRootInode, name) == shard) return mkdir(kRootInode, name);
    }
    ADD_FAILURE() << "no name hashes to shard " << shard;
    return 0;
  }
  InodeId create(InodeId dir, const std::string& name, const std::string& contents = "") {
    auto made = run_to_completion(
        ns_->create(dir, name, CreateMode::guarded, {}, CreateVerifier{}, root_caller()));
    EXPECT_TRUE(made.ok()) << name << ": " << made.status().to_string();
    if (!made.ok()) return 0;
    if (!contents.empty()) {
      std::span<const std::uint8_t> bytes(reinterpret_cast<const std::uint8_t*>(contents.data()),
                                          contents.size());
      auto written = run_to_completion(
          ns_->write(made->attributes.inode, 0, bytes, Stability::file_sync, root_caller()));
      EXPECT_TRUE(written.ok()) << written.status().to_string();
    }
    return made->attributes.inode;
  }
  Result<LookupResult> lookup(InodeId dir, const std::string& name) {
    return run_to_completion(ns_->lookup(dir, name, root_caller()));
  }
  std::string contents(InodeId file) {
    std::string bytes(4096, '\0');
    auto read = run_to_completion(ns_->read(
        file, 0, {reinterpret_cast<std::uint8_t*>(bytes.data()), bytes.size()}, root_caller()));
    EXPECT_TRUE(read.ok()) << read.status().to_string();
    bytes.resize(read.ok() ? read->count : 0);
    return bytes;
  }
  Status rename(InodeId from, const std::string& from_name, InodeId to,
                const std::string& to_name) {
    return run_to_completion(ns_->rename(from, from_name, to, to_name, root_caller())).status();
  }
  std::vector<PendingPart> pending(ShardId shard) {
    auto parts = run_to_completion(shards_[shard]->participant().pending());
    EXPECT_TRUE(parts.ok()) << parts.status().to_string();
    return parts.ok() ? *parts : std::vector<PendingPart>{};
  }

  std::filesystem::path root_;
  std::array<std::shared_ptr<LocalStore>, kShards> shards_;
  std::unique_ptr<ShardedNamespace> ns_;
  std::optional<ShardId> dies_on_commit_;
};

TEST_F(ShardedNamespaceTest, NewDirectoriesSpreadOverTheShardsAndTheirFilesFollowThem) {
  std::set<ShardId> used;
  std::vector<InodeId> dirs;
  for (int i = 0; i < 24; ++i) {
    const InodeId dir = mkdir(kRootInode, "d" + std::to_string(i));
    ASSERT_NE(dir, 0u);
    EXPECT_EQ(shard_of(dir), ns_->shard_for_directory(kRootInode, "d" + std::to_string(i)));
    used.insert(shard_of(dir));
    dirs.push_back(dir);
    const InodeId file = create(dir, "f", "in d" + std::to_string(i));
    EXPECT_EQ(shard_of(file), shard_of(dir));
  }
  EXPECT_EQ(used.size(), kShards);

  auto root = run_to_completion(ns_->getattr(kRootInode));
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->nlink, 2u + dirs.size());
  auto page = run_to_completion(ns_->readdir(kRootInode, 0, 0, 100, true, root_caller()));
  ASSERT_TRUE(page.ok()) << page.status().to_string();
  ASSERT_EQ(page->entries.size(), 2 + dirs.size());
  for (const DirectoryEntry& entry : page->entries) {
    ASSERT_TRUE(entry.attributes) << entry.name;
    EXPECT_EQ(entry.attributes->inode, entry.inode);
    if (entry.name != "." && entry.name != "..") {
      EXPECT_EQ(entry.attributes->type, FileType::directory);
    }
  }
  for (std::size_t i = 0; i < dirs.size(); ++i) {
    auto found = lookup(kRootInode, "d" + std::to_string(i));
    ASSERT_TRUE(found.ok());
    EXPECT_EQ(found->object.inode, dirs[i]);
    EXPECT_EQ(found->object.nlink, 2u);
    auto up = lookup(dirs[i], "..");
    ASSERT_TRUE(up.ok()) << up.status().to_string();
    EXPECT_EQ(up->object.inode, kRootInode);
    auto file = lookup(dirs[i], "f");
    ASSERT_TRUE(file.ok());
    EXPECT_EQ(contents(file->object.inode), "in d" + std::to_string(i));
  }
  auto again = run_to_completion(ns_->mkdir(kRootInode, "d3", {}, root_caller()));
  EXPECT_EQ(again.status().code(), Errc::already_exists);
}

// A client compares the verifier of its WRITE with its COMMIT's: they must be one verifier.
TEST_F(ShardedNamespaceTest, WritesAnswerTheVerifierCommitsDo) {
  const InodeId dir = directory_on(2, "away");
  const InodeId file = create(dir, "f");
  const std::string bytes = "unstable";
  auto written = run_to_completion(
      ns_->write(file, 0, {reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()},
                 Stability::unstable, root_caller()));
  ASSERT_TRUE(written.ok()) << written.status().to_string();
  ASSERT_TRUE(run_to_completion(ns_->commit(file)).ok());
  EXPECT_EQ(written->verifier, ns_->write_verifier());
  crash(2);
  open(2);
  EXPECT_NE(written->verifier, ns_->write_verifier()) << "a shard restarted";
}

TEST_F(ShardedNamespaceTest, ADirectoryOnAnotherShardIsRemovedOnlyWhenEmpty) {
  const InodeId dir = directory_on(1, "away");
  ASSERT_EQ(shard_of(dir), 1);
  create(dir, "f", "x");
  auto found = run_to_completion(ns_->readdir(kRootInode, 0, 0, 10, false, root_caller()));
  ASSERT_TRUE(found.ok());
  std::string dir_name;
  for (const auto& e : found->entries) {
    if (e.inode == dir) dir_name = e.name;
  }
  ASSERT_FALSE(dir_name.empty());
  auto refused = run_to_completion(ns_->rmdir(kRootInode, dir_name, root_caller()));
  EXPECT_EQ(refused.status().code(), Errc::not_empty);
  auto as_file = run_to_completion(ns_->remove(kRootInode, dir_name, root_caller()));
  EXPECT_EQ(as_file.status().code(), Errc::is_a_directory);
  ASSERT_TRUE(run_to_completion(ns_->remove(dir, "f", root_caller())).ok());
  auto removed = run_to_completion(ns_->rmdir(kRootInode, dir_name, root_caller()));
  ASSERT_TRUE(removed.ok()) << removed.status().to_string();
  ASSERT_TRUE(removed->after);
  EXPECT_EQ(removed->after->nlink, 2u);
  EXPECT_EQ(lookup(kRootInode, dir_name).status().code(), Errc::not_found);
  EXPECT_EQ(run_to_completion(ns_->getattr(dir)).status().code(), Errc::stale);
  for (ShardId shard = 0; shard < kShards; ++shard) EXPECT_TRUE(pending(shard).empty());
}

TEST_F(ShardedNamespaceTest, ARenameAcrossShardsMovesTheEntryAndKeepsTheInode) {
  const InodeId a = directory_on(1, "a");
  const InodeId b = directory_on(2, "b");
  const InodeId file = create(a, "f", "moved bytes");
  const InodeId victim = create(b, "taken", "replaced bytes");

  ASSERT_TRUE(rename(a, "f", b, "g").ok());
  EXPECT_EQ(lookup(a, "f").status().code(), Errc::not_found);
  auto moved = lookup(b, "g");
  ASSERT_TRUE(moved.ok()) << moved.status().to_string();
  EXPECT_EQ(moved->object.inode, file);
  EXPECT_EQ(contents(file), "moved bytes");

  // Over an existing file: the file it replaces goes.
  ASSERT_TRUE(rename(b, "g", b, "taken").ok());
  auto replaced = lookup(b, "taken");
  ASSERT_TRUE(replaced.ok());
  EXPECT_EQ(replaced->object.inode, file);
  EXPECT_EQ(run_to_completion(ns_->getattr(victim)).status().code(), Errc::stale);

  // Removed and linked where its inode is not: its link count follows.
  ASSERT_TRUE(run_to_completion(ns_->link(file, a, "again", root_caller())).ok());
  EXPECT_EQ(run_to_completion(ns_->getattr(file))->nlink, 2u);
  ASSERT_TRUE(run_to_completion(ns_->remove(b, "taken", root_caller())).ok());
  EXPECT_EQ(run_to_completion(ns_->getattr(file))->nlink, 1u);
  EXPECT_EQ(contents(file), "moved bytes");
  ASSERT_TRUE(run_to_completion(ns_->remove(a, "again", root_caller())).ok());
  EXPECT_EQ(run_to_completion(ns_->getattr(file)).status().code(), Errc::stale);
  for (ShardId shard = 0; shard < kShards; ++shard) EXPECT_TRUE(pending(shard).empty());
}

TEST_F(ShardedNamespaceTest, ADirectoryMovedAcrossShardsTakesItsNewParentAndNeverItsOwnSubtree) {
  const InodeId a = directory_on(1, "a");
  const InodeId b = directory_on(2, "b");
  const InodeId sub = mkdir(a, "sub");
  create(sub, "inside", "deep");
  ASSERT_TRUE(rename(a, "sub", b, "sub2").ok());
  auto up = lookup(sub, "..");
  ASSERT_TRUE(up.ok());
  EXPECT_EQ(up->object.inode, b);
  EXPECT_EQ(run_to_completion(ns_->getattr(a))->nlink, 2u);
  EXPECT_EQ(run_to_completion(ns_->getattr(b))->nlink, 3u);
  auto inside = lookup(sub, "inside");
  ASSERT_TRUE(inside.ok());
  EXPECT_EQ(contents(inside->object.inode), "deep");

  // b into its own subdirectory: refused, and nothing moves.
  auto b_entry = run_to_completion(ns_->readdir(kRootInode, 0, 0, 10, false, root_caller()));
  ASSERT_TRUE(b_entry.ok());
  std::string b_name;
  for (const auto& e : b_entry->entries) {
    if (e.inode == b) b_name = e.name;
  }
  EXPECT_EQ(rename(kRootInode, b_name, sub, "loop").code(), Errc::invalid_argument);
  EXPECT_TRUE(lookup(kRootInode, b_name).ok());
}

TEST_F(ShardedNamespaceTest, ACrashOfTheCoordinatorBetweenThePhasesLeavesTheFileUnderItsOldName) {
  const InodeId a = directory_on(1, "a");
  const InodeId b = directory_on(2, "b");
  const InodeId file = create(a, "f", "kept");
  dies_on_commit_ = 1;  // a's shard coordinates the rename out of a
  EXPECT_EQ(rename(a, "f", b, "g").code(), Errc::unavailable);
  ASSERT_FALSE(shards_[1]);
  // Until recovery, the prepared part on b's shard holds the new name.
  auto held = run_to_completion(
      ns_->create(b, "g", CreateMode::guarded, {}, CreateVerifier{}, root_caller()));
  EXPECT_EQ(held.status().code(), Errc::unavailable);

  open(1);
  ASSERT_TRUE(run_to_completion(ns_->recover()).ok());
  auto old_name = lookup(a, "f");
  ASSERT_TRUE(old_name.ok()) << old_name.status().to_string();
  EXPECT_EQ(old_name->object.inode, file);
  EXPECT_EQ(lookup(b, "g").status().code(), Errc::not_found);
  EXPECT_EQ(contents(file), "kept");
  for (ShardId shard = 0; shard < kShards; ++shard) EXPECT_TRUE(pending(shard).empty());
  ASSERT_TRUE(rename(a, "f", b, "g").ok());
  EXPECT_EQ(lookup(b, "g")->object.inode, file);
}

TEST_F(ShardedNamespaceTest, ACrashOfTheOtherShardAfterTheDecisionLeavesTheFileUnderItsNewName) {
  const InodeId a = directory_on(1, "a");
  const InodeId b = directory_on(2, "b");
  const InodeId file = create(a, "f", "moved");
  dies_on_commit_ = 2;
  // Decided: the rename is made, though b's shard takes its part only when it is back.
  ASSERT_TRUE(rename(a, "f", b, "g").ok());
  EXPECT_EQ(lookup(a, "f").status().code(), Errc::not_found);
  // The whole home went: its next boot finds the decision to carry out.
  crash(1);
  open(1);
  open(2);
  ASSERT_EQ(pending(1).size(), 1u);
  EXPECT_TRUE(pending(1)[0].decided);

  ASSERT_TRUE(run_to_completion(ns_->recover()).ok());
  auto new_name = lookup(b, "g");
  ASSERT_TRUE(new_name.ok()) << new_name.status().to_string();
  EXPECT_EQ(new_name->object.inode, file);
  EXPECT_EQ(lookup(a, "f").status().code(), Errc::not_found);
  EXPECT_EQ(contents(file), "moved");
  for (ShardId shard = 0; shard < kShards; ++shard) EXPECT_TRUE(pending(shard).empty());
}

TEST_F(ShardedNamespaceTest, APreparedPartHoldsWhatItTouchesUntilItIsSettled) {
  const InodeId a = directory_on(1, "a");
  const InodeId b = directory_on(2, "b");
  const InodeId file = create(a, "f", "x");
  ShardParticipant& participant = shards_[1]->participant();
  ShardStep step;
  step.kind = StepKind::remove_entry;
  step.directory = a;
  step.name = "f";
  step.inode = file;
  TransactionPart part{42, 2, {}, {step}};
  ASSERT_TRUE(run_to_completion(participant.prepare(part)).ok());
  EXPECT_EQ(run_to_completion(participant.prepare(part)).status().code(),
            Errc::precondition_failed);
  EXPECT_EQ(run_to_completion(ns_->remove(a, "f", root_caller())).status().code(),
            Errc::unavailable);
  EXPECT_EQ(rename(a, "f", a, "g").code(), Errc::unavailable);
  // A step that no longer holds is refused.
  step.name = "nothing";
  EXPECT_EQ(
      run_to_completion(participant.prepare(TransactionPart{43, 2, {}, {step}})).status().code(),
      Errc::precondition_failed);

  // Parts adding to one directory go together; one removing it waits for them.
  const InodeId c = directory_on(1, "c");
  auto adding = [&](TransactionId id, const std::string& name) {
    ShardStep add;
    add.kind = StepKind::add_entry;
    add.directory = c;
    add.name = name;
    add.inode = file;
    return run_to_completion(participant.prepare(TransactionPart{id, 2, {}, {add}})).status();
  };
  ASSERT_TRUE(adding(50, "one").ok());
  ASSERT_TRUE(adding(51, "two").ok());
  EXPECT_EQ(adding(52, "two").code(), Errc::unavailable);
  ShardStep remove_c;
  remove_c.kind = StepKind::remove_directory;
  remove_c.inode = c;
  EXPECT_EQ(run_to_completion(participant.prepare(TransactionPart{53, 2, {}, {remove_c}}))
                .status()
                .code(),
            Errc::unavailable);
  ASSERT_TRUE(run_to_completion(participant.abort(50)).ok());
  ASSERT_TRUE(run_to_completion(participant.abort(51)).ok());
  ASSERT_TRUE(run_to_completion(participant.prepare(TransactionPart{53, 2, {}, {remove_c}})).ok());
  ASSERT_TRUE(run_to_completion(participant.abort(53)).ok());

  // Its coordinator (shard 2) never heard of it: it is aborted, and stays so.
  auto outcome = run_to_completion(shards_[2]->participant().outcome(42));
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(*outcome, Outcome::aborted);
  // Recovery settles what an earlier boot left: not yet.
  ASSERT_TRUE(run_to_completion(ns_->recover()).ok());
  EXPECT_EQ(run_to_completion(ns_->remove(a, "f", root_caller())).status().code(),
            Errc::unavailable);
  crash(1);
  open(1);
  ASSERT_EQ(pending(1).size(), 1u);
  ASSERT_TRUE(run_to_completion(ns_->recover()).ok());
  EXPECT_TRUE(pending(1).empty());
  ShardStep add;
  add.kind = StepKind::add_entry;
  add.directory = b;
  add.name = "late";
  add.inode = file;
  EXPECT_EQ(run_to_completion(shards_[2]->participant().prepare(TransactionPart{42, 2, {1}, {add}}))
                .status()
                .code(),
            Errc::unavailable);
  ASSERT_TRUE(run_to_completion(ns_->remove(a, "f", root_caller())).ok());
}

TEST_F(ShardedNamespaceTest, FindFilesGoesThroughEveryShardInTurn) {
  const InodeId top = create(kRootInode, "top", "x");
  std::set<ShardId> visited;
  std::vector<Candidate> found;
  InodeId after = 0;
  for (int page = 0; page < 100; ++page) {
    visited.insert(shard_of(after));
    auto candidates = run_to_completion(ns_->find_files("(size >= ?1)", {0}, after, 100));
    ASSERT_TRUE(candidates.ok()) << candidates.status().to_string();
    found.insert(found.end(), candidates->files.begin(), candidates->files.end());
    after = candidates->next;
    if (after == 0) break;
  }
  EXPECT_EQ(after, 0u);
  EXPECT_EQ(visited.size(), kShards);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].attributes.inode, top);
  EXPECT_EQ(found[0].path, "/ifs/top");
}

// A node's shards as its daemon opens them: a home that dies with a rename between its phases
// (held there by the fail point) settles it when it opens them again.
TEST(LocalShardsTest, AHomeThatRestartsSettlesTheRenameItLeftBetweenThePhases) {
  const auto root = fresh_test_directory("tp-local-shards");
  StoreOptions options;
  options.data_dir = root.string();
  options.threads = 1;
  InodeId a = 0;
  InodeId b = 0;
  InodeId file = 0;
  {
    auto shards = LocalShards::open(options, kShards);
    ASSERT_TRUE(shards.ok()) << shards.status().to_string();
    auto* ns = dynamic_cast<ShardedNamespace*>((*shards)->served().get());
    ASSERT_NE(ns, nullptr);
    Store& store = *(*shards)->served();
    for (int i = 0; i < 100 && (a == 0 || b == 0); ++i) {
      const std::string name = "d" + std::to_string(i);
      const ShardId shard = ns->shard_for_directory(kRootInode, name);
      InodeId& slot = shard == 1 ? a : b;
      if (shard == 0 || slot != 0) continue;
      auto made = run_to_completion(store.mkdir(kRootInode, name, {}, root_caller()));
      ASSERT_TRUE(made.ok()) << made.status().to_string();
      slot = made->attributes.inode;
    }
    ASSERT_TRUE(a != 0 && b != 0);
    auto made = run_to_completion(
        store.create(a, "f", CreateMode::guarded, {}, CreateVerifier{}, root_caller()));
    ASSERT_TRUE(made.ok());
    file = made->attributes.inode;

    fail_points::set_pause(fail_points::kCrossShardDecide, std::chrono::seconds(30));
    boost::asio::io_context io;
    auto renamed = boost::asio::co_spawn(io, store.rename(a, "f", b, "g", root_caller()),
                                         boost::asio::use_future);
    std::thread running([&io] { io.run(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // prepared, and pausing
    (*shards)->close();                                           // the node dies
    fail_points::set_pause(fail_points::kCrossShardDecide, std::chrono::milliseconds(0));
    io.stop();
    running.join();
    EXPECT_NE(renamed.wait_for(std::chrono::seconds(0)), std::future_status::ready)
        << "the rename did not wait between its phases";
  }
  auto shards = LocalShards::open(options, kShards);
  ASSERT_TRUE(shards.ok()) << shards.status().to_string();
  ASSERT_TRUE(run_to_completion((*shards)->recover()).ok());
  Store& store = *(*shards)->served();
  auto old_name = run_to_completion(store.lookup(a, "f", root_caller()));
  ASSERT_TRUE(old_name.ok()) << old_name.status().to_string();
  EXPECT_EQ(old_name->object.inode, file);
  EXPECT_EQ(run_to_completion(store.lookup(b, "g", root_caller())).status().code(),
            Errc::not_found);
  EXPECT_TRUE(run_to_completion(store.rename(a, "f", b, "g", root_caller())).ok());
  shards->reset();
  std::filesystem::remove_all(root);
}

TEST(ProcessLocksTest, OverlappingKeysWaitForEachOther) {
  auto locks = make_process_locks();
  boost::asio::io_context io;
  std::vector<std::string> order;
  auto holder = [&](std::vector<InodeId> keys, std::string name) -> awaitable<void> {
    auto locking = locks->lock(std::move(keys));
    Result<std::shared_ptr<void>> held = co_await std::move(locking);
    EXPECT_TRUE(held.ok());
    order.push_back(name + " in");
    boost::asio::steady_timer wait(io, std::chrono::milliseconds(20));
    co_await wait.async_wait(boost::asio::use_awaitable);
    order.push_back(name + " out");
  };
  boost::asio::co_spawn(io, holder({1, 2}, "first"), boost::asio::detached);
  boost::asio::co_spawn(io, holder({2, 3}, "second"), boost::asio::detached);
  boost::asio::co_spawn(io, holder({4}, "third"), boost::asio::detached);
  io.run();
  ASSERT_EQ(order.size(), 6u);
  EXPECT_EQ(order[0], "first in");
  EXPECT_EQ(order[1], "third in");
  const auto first_out = std::find(order.begin(), order.end(), "first out");
  const auto second_in = std::find(order.begin(), order.end(), "second in");
  EXPECT_LT(first_out, second_in);
}

}  // namespace
}  // namespace tidepool::store
