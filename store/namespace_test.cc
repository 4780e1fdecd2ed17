#include "store/namespace.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <set>

#include "common/fail_points.h"
#include "store/cross_shard.h"
#include "store/internal/test_util.h"
#include "store/remote_store.h"

namespace tidepool::store {
namespace {

using internal::fresh_test_directory;
using internal::run_to_completion;

constexpr ShardId kShards = 3;

// Shard `shard` of a test's namespace, under `root`; null (and a failure) if it cannot open.
std::shared_ptr<LocalStore> open_shard(const std::filesystem::path& root, ShardId shard) {
  StoreOptions options;
  options.data_dir = (root / ("shard-" + std::to_string(shard))).string();
  options.shard = shard;
  options.threads = 1;
  auto store = Store::open(options);
  EXPECT_TRUE(store.ok()) << store.status().to_string();
  return store.ok() ? std::shared_ptr<LocalStore>(std::move(*store)) : nullptr;
}

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

  void open(ShardId shard) { shards_[shard] = open_shard(root_, shard); }
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
  // Starts the rename on `io`; its status joins `answers` once it answers.
  void start_rename(boost::asio::io_context& io, InodeId from, const std::string& from_name,
                    InodeId to, const std::string& to_name, std::vector<Status>& answers) {
    boost::asio::co_spawn(io, ns_->rename(from, from_name, to, to_name, root_caller()),
                          [&answers](std::exception_ptr, Result<RenameResult> renamed) {
                            answers.push_back(renamed.status());
                          });
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

// A directory listed whole is listed again from the shard's memory, without a query: also when
// its ".." is on another shard, an entry the shard lists without attributes either way.
TEST_F(ShardedNamespaceTest, AListingWhoseParentIsOnAnotherShardIsKeptInMemory) {
  const InodeId dir = directory_on(2, "away");
  ASSERT_NE(shard_of(kRootInode), 2u);
  create(dir, "f");
  LocalStore& shard = *shards_[2];
  auto listed = [&] {
    return run_to_completion(shard.readdir(dir, 0, 0, 100, true, root_caller()));
  };
  const Result<DirectoryPage> first = listed();
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  // From here on the shard's database answers nothing: only what it keeps in memory can.
  shard.close();
  const Result<DirectoryPage> again = listed();
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  ASSERT_EQ(again->entries.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    const DirectoryEntry& entry = again->entries[i];
    EXPECT_EQ(entry.name, first->entries[i].name);
    EXPECT_EQ(entry.inode, first->entries[i].inode);
    EXPECT_EQ(entry.attributes.has_value(), entry.name != "..") << entry.name;
  }
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
  ASSERT_TRUE(run_to_completion(ns_->commit(file, {})).ok());
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

  // A coordinator's own part of this boot is still being driven: recovery leaves it be.
  ShardStep add;
  add.kind = StepKind::add_entry;
  add.directory = b;
  add.name = "driven";
  add.inode = file;
  ASSERT_TRUE(
      run_to_completion(shards_[2]->participant().prepare(TransactionPart{60, 2, {1}, {add}}))
          .ok());
  // Another shard's part is settled whenever recovery runs, as its coordinator says: shard 2
  // never heard of 42, so it is aborted, and stays so.
  ASSERT_EQ(pending(1).size(), 1u);
  ASSERT_TRUE(run_to_completion(ns_->recover()).ok());
  EXPECT_TRUE(pending(1).empty());
  add.name = "late";
  EXPECT_EQ(run_to_completion(shards_[2]->participant().prepare(TransactionPart{42, 2, {1}, {add}}))
                .status()
                .code(),
            Errc::unavailable);
  ASSERT_TRUE(run_to_completion(ns_->remove(a, "f", root_caller())).ok());
  auto driven = run_to_completion(
      ns_->create(b, "driven", CreateMode::guarded, {}, CreateVerifier{}, root_caller()));
  EXPECT_EQ(driven.status().code(), Errc::unavailable);
  // Its coordinator's next boot gives it up.
  crash(2);
  open(2);
  ASSERT_TRUE(run_to_completion(ns_->recover()).ok());
  EXPECT_TRUE(pending(2).empty());
  EXPECT_TRUE(run_to_completion(ns_->create(b, "driven", CreateMode::guarded, {}, CreateVerifier{},
                                            root_caller()))
                  .ok());
}

TEST_F(ShardedNamespaceTest, ARenameItsCoordinatorRefusesLeavesNothingHeldOnTheOtherShards) {
  const InodeId a = directory_on(1, "a");
  const InodeId b = directory_on(2, "b");
  const InodeId file = create(a, "f", "stays");
  // Another change holds a/f on the coordinator: its part is refused after b's is prepared.
  ShardStep step;
  step.kind = StepKind::remove_entry;
  step.directory = a;
  step.name = "f";
  step.inode = file;
  ASSERT_TRUE(
      run_to_completion(shards_[1]->participant().prepare(TransactionPart{42, 2, {}, {step}}))
          .ok());
  EXPECT_EQ(rename(a, "f", b, "g").code(), Errc::unavailable);
  EXPECT_TRUE(pending(2).empty());
  EXPECT_EQ(lookup(b, "g").status().code(), Errc::not_found);
  EXPECT_TRUE(run_to_completion(
                  ns_->create(b, "g", CreateMode::guarded, {}, CreateVerifier{}, root_caller()))
                  .ok());
  ASSERT_TRUE(run_to_completion(shards_[1]->participant().abort(42)).ok());
  EXPECT_EQ(lookup(a, "f")->object.inode, file);
  EXPECT_TRUE(rename(a, "f", b, "g").ok());
  EXPECT_EQ(contents(lookup(b, "g")->object.inode), "stays");
}

TEST_F(ShardedNamespaceTest, FileRenamesBetweenTheSameDirectoriesGoTogether) {
  const InodeId a = directory_on(1, "a");
  const InodeId b = directory_on(2, "b");
  create(a, "f1", "one");
  create(a, "f2", "two");
  // Each rename waits between its phases long enough for the other to prepare its part too,
  // unless it waits for the first's locks.
  fail_points::set_pause(fail_points::kCrossShardDecide, std::chrono::milliseconds(1500));
  boost::asio::io_context io;
  std::vector<Status> answers;
  for (const std::string name : {"1", "2"}) start_rename(io, a, "f" + name, b, "g" + name, answers);
  std::size_t most_prepared_at_once = 0;
  for (int step = 0; step < 100 && most_prepared_at_once < 2; ++step) {
    io.run_for(std::chrono::milliseconds(10));
    most_prepared_at_once = std::max(most_prepared_at_once, pending(2).size());
  }
  fail_points::set_pause(fail_points::kCrossShardDecide, std::chrono::milliseconds(0));
  io.run();
  EXPECT_EQ(most_prepared_at_once, 2u);
  ASSERT_EQ(answers.size(), 2u);
  for (const Status& answer : answers) EXPECT_TRUE(answer.ok()) << answer.to_string();
  EXPECT_EQ(contents(lookup(b, "g1")->object.inode), "one");
  EXPECT_EQ(contents(lookup(b, "g2")->object.inode), "two");
  for (ShardId shard = 0; shard < kShards; ++shard) EXPECT_TRUE(pending(shard).empty());
}

TEST_F(ShardedNamespaceTest, TwoRenamesToOneNameBothSucceedTheLaterReplacingTheEarlier) {
  const InodeId a = directory_on(1, "a");
  const InodeId b = directory_on(2, "b");
  const InodeId one = create(a, "f1", "one");
  const InodeId two = create(a, "f2", "two");
  // The first to prepare holds b/g while it waits; the other meets that hold.
  fail_points::set_pause(fail_points::kCrossShardDecide, std::chrono::milliseconds(300));
  boost::asio::io_context io;
  std::vector<Status> answers;
  for (const std::string name : {"f1", "f2"}) start_rename(io, a, name, b, "g", answers);
  io.run();
  fail_points::set_pause(fail_points::kCrossShardDecide, std::chrono::milliseconds(0));
  ASSERT_EQ(answers.size(), 2u);
  for (const Status& answer : answers) EXPECT_TRUE(answer.ok()) << answer.to_string();
  EXPECT_EQ(lookup(a, "f1").status().code(), Errc::not_found);
  EXPECT_EQ(lookup(a, "f2").status().code(), Errc::not_found);
  auto last = lookup(b, "g");
  ASSERT_TRUE(last.ok()) << last.status().to_string();
  const InodeId replaced = last->object.inode == one ? two : one;
  EXPECT_TRUE(last->object.inode == one || last->object.inode == two);
  EXPECT_EQ(run_to_completion(ns_->getattr(replaced)).status().code(), Errc::stale);
  for (ShardId shard = 0; shard < kShards; ++shard) EXPECT_TRUE(pending(shard).empty());
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

// Two homes in one process, each serving the namespace of three shards: node 0 is the home of
// shards 0 and 2, node 1 of shard 1. A node reaches the other's shards as it would over the
// network: operations shipped to the other's namespace, participant calls to its shard.
class TwoHomesTest : public ::testing::Test {
 protected:
  static constexpr int kNodes = 2;
  static int home_of(ShardId shard) { return shard == 1 ? 1 : 0; }

  class StoreLoopback final : public ShardChannel {
   public:
    StoreLoopback(TwoHomesTest& test, int node) : test_(test), node_(node) {}
    awaitable<Result<xdr::Buffer>> call(StoreMethod method, xdr::Buffer request) override {
      ++test_.shipped_[node_][method];
      auto served =
          serve_store_call(*test_.namespaces_[node_], static_cast<std::uint32_t>(method), request);
      co_return co_await std::move(served);
    }

   private:
    TwoHomesTest& test_;
    const int node_;
  };

  class ParticipantLoopback final : public ParticipantChannel {
   public:
    ParticipantLoopback(TwoHomesTest& test, ShardId shard) : test_(test), shard_(shard) {}
    awaitable<Result<xdr::Buffer>> call(ParticipantMethod method, xdr::Buffer request) override {
      ++test_.participant_calls_[home_of(shard_)];
      Result<ShardAccess> local = test_.local_access(shard_);
      if (!local.ok()) co_return local.status();
      auto served =
          serve_participant_call(*local->participant, static_cast<std::uint32_t>(method), request);
      co_return co_await std::move(served);
    }

   private:
    TwoHomesTest& test_;
    const ShardId shard_;
  };

  void SetUp() override {
    root_ = fresh_test_directory("tp-two-homes");
    locks_ = make_process_locks();  // the cluster's lock service, as far as these nodes go
    for (ShardId shard = 0; shard < kShards; ++shard) open(shard);
    for (int node = 0; node < kNodes; ++node) {
      for (ShardId shard = 0; shard < kShards; ++shard) {
        remote_[node][shard] = ShardAccess{
            make_remote_store(std::make_shared<StoreLoopback>(*this, home_of(shard))),
            make_remote_participant(std::make_shared<ParticipantLoopback>(*this, shard)), false};
      }
      namespaces_[node] = std::make_unique<ShardedNamespace>(
          kShards, [this, node](ShardId shard) { return access(node, shard); }, locks_);
    }
  }
  void TearDown() override {
    for (auto& ns : namespaces_) ns.reset();
    for (auto& shard : shards_) shard.reset();
    std::filesystem::remove_all(root_);
  }

  void open(ShardId shard) { shards_[shard] = open_shard(root_, shard); }

  Result<ShardAccess> local_access(ShardId shard) {
    std::shared_ptr<LocalStore> store = shards_[shard];
    if (!store)
      return error(Errc::unavailable, "node " + std::to_string(home_of(shard)) + " is down");
    std::shared_ptr<ShardParticipant> participant(store, &store->participant());
    if (dies_on_decide_ == shard) {
      participant = std::make_shared<DyingParticipant>(participant, [this, shard] {
        dies_on_decide_.reset();
        shards_[shard]->close();
        shards_[shard].reset();
      });
    }
    return ShardAccess{store, participant};
  }
  Result<ShardAccess> access(int node, ShardId shard) {
    if (home_of(shard) != node) return remote_[node][shard];
    return local_access(shard);
  }

  ShardedNamespace& through(int node) { return *namespaces_[node]; }
  InodeId directory_on(ShardId shard, const std::string& prefix) {
    for (int i = 0; i < 100; ++i) {
      const std::string name = prefix + std::to_string(i);
      if (through(0).shard_for_directory(kRootInode, name) != shard) continue;
      auto made = run_to_completion(through(0).mkdir(kRootInode, name, {}, root_caller()));
      EXPECT_TRUE(made.ok()) << made.status().to_string();
      return made.ok() ? made->attributes.inode : 0;
    }
    ADD_FAILURE() << "no name hashes to shard " << shard;
    return 0;
  }
  Result<NewObject> create(int node, InodeId dir, const std::string& name) {
    return run_to_completion(
        through(node).create(dir, name, CreateMode::guarded, {}, CreateVerifier{}, root_caller()));
  }
  Status rename(int node, InodeId from, const std::string& from_name, InodeId to,
                const std::string& to_name) {
    return run_to_completion(through(node).rename(from, from_name, to, to_name, root_caller()))
        .status();
  }
  Result<LookupResult> lookup(int node, InodeId dir, const std::string& name) {
    return run_to_completion(through(node).lookup(dir, name, root_caller()));
  }
  std::set<std::string> names(int node, InodeId dir) {
    auto page = run_to_completion(through(node).readdir(dir, 0, 0, 100, true, root_caller()));
    EXPECT_TRUE(page.ok()) << page.status().to_string();
    std::set<std::string> listed;
    if (!page.ok()) return listed;
    for (const DirectoryEntry& entry : page->entries) {
      EXPECT_TRUE(entry.attributes) << entry.name;
      listed.insert(entry.name);
    }
    return listed;
  }
  Status recover(int node) { return run_to_completion(through(node).recover()); }

  std::filesystem::path root_;
  std::shared_ptr<NamespaceLocks> locks_;
  std::array<std::shared_ptr<LocalStore>, kShards> shards_;
  std::array<std::array<ShardAccess, kShards>, kNodes> remote_;
  std::array<std::unique_ptr<ShardedNamespace>, kNodes> namespaces_;
  std::optional<ShardId> dies_on_decide_;
  // What each node was sent.
  std::array<std::map<StoreMethod, int>, kNodes> shipped_;
  std::array<int, kNodes> participant_calls_{};
};

TEST_F(TwoHomesTest, AChangeAcrossShardsRunsAtTheHomeOfTheShardThatCoordinatesIt) {
  const InodeId on_1 = directory_on(1, "a");
  const InodeId on_2 = directory_on(2, "b");
  auto made = create(0, on_1, "f");
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  const InodeId file = made->attributes.inode;
  EXPECT_EQ(shard_of(file), 1);
  EXPECT_EQ(shipped_[1][StoreMethod::create], 1);
  EXPECT_EQ(participant_calls_[0], 0);

  // Through node 0, out of a directory of node 1's shard: node 1 runs it, and reaches
  // shard 2's part on node 0.
  ASSERT_TRUE(rename(0, on_1, "f", on_2, "g").ok());
  EXPECT_EQ(shipped_[1][StoreMethod::rename], 1);
  EXPECT_GT(participant_calls_[0], 0);
  for (int node = 0; node < kNodes; ++node) {
    EXPECT_EQ(lookup(node, on_1, "f").status().code(), Errc::not_found) << node;
    auto found = lookup(node, on_2, "g");
    ASSERT_TRUE(found.ok()) << node << ": " << found.status().to_string();
    EXPECT_EQ(found->object.inode, file);
  }

  // Back through node 1: shard 2 coordinates, on node 0, and reaches shard 1 on node 1.
  const int calls_to_1 = participant_calls_[1];
  ASSERT_TRUE(rename(1, on_2, "g", on_1, "h").ok());
  EXPECT_EQ(shipped_[0][StoreMethod::rename], 1);
  EXPECT_GT(participant_calls_[1], calls_to_1);
  EXPECT_EQ(names(0, on_1), (std::set<std::string>{".", "..", "h"}));
  EXPECT_EQ(names(1, on_1), names(0, on_1));
  EXPECT_EQ(names(1, on_2), (std::set<std::string>{".", ".."}));
}

TEST_F(TwoHomesTest, AHomeThatDiesBetweenThePhasesRollsItsChangeBackWhenItReturns) {
  const InodeId on_1 = directory_on(1, "a");
  const InodeId on_2 = directory_on(2, "b");
  auto made = create(0, on_1, "f");
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  dies_on_decide_ = 1;
  EXPECT_EQ(rename(0, on_1, "f", on_2, "g").code(), Errc::unavailable);
  ASSERT_FALSE(shards_[1]);
  // Node 0 holds the name the rename would have made, and cannot settle it alone.
  EXPECT_EQ(create(0, on_2, "g").status().code(), Errc::unavailable);
  EXPECT_EQ(recover(0).code(), Errc::unavailable);

  open(1);
  ASSERT_TRUE(recover(1).ok());
  for (int node = 0; node < kNodes; ++node) {
    auto old_name = lookup(node, on_1, "f");
    ASSERT_TRUE(old_name.ok()) << node << ": " << old_name.status().to_string();
    EXPECT_EQ(old_name->object.inode, made->attributes.inode);
    EXPECT_EQ(lookup(node, on_2, "g").status().code(), Errc::not_found) << node;
  }
  EXPECT_TRUE(create(0, on_2, "g").ok());
}

TEST_F(TwoHomesTest, APartWhoseCoordinatorNeverPreparedIsGivenUpByItsOwnHome) {
  const InodeId on_1 = directory_on(1, "a");
  const InodeId on_2 = directory_on(2, "b");
  auto made = create(0, on_1, "f");
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  // As if node 1 prepared shard 2's part of a change it coordinates, then lost track of it
  // before it prepared its own.
  ShardStep add;
  add.kind = StepKind::add_entry;
  add.directory = on_2;
  add.name = "ghost";
  add.inode = made->attributes.inode;
  ASSERT_TRUE(
      run_to_completion(shards_[2]->participant().prepare(TransactionPart{77, 1, {}, {add}})).ok());
  EXPECT_EQ(create(0, on_2, "ghost").status().code(), Errc::unavailable);

  // Node 1 leaves alone what node 0 is the home of; node 0 asks shard 1, which never heard of
  // the change, and gives its part up.
  ASSERT_TRUE(recover(1).ok());
  EXPECT_EQ(create(0, on_2, "ghost").status().code(), Errc::unavailable);
  ASSERT_TRUE(recover(0).ok());
  EXPECT_TRUE(create(1, on_2, "ghost").ok());
  // The coordinator's part, should it come late, is refused.
  ShardStep remove = add;
  remove.kind = StepKind::remove_entry;
  remove.directory = on_1;
  remove.name = "f";
  EXPECT_EQ(
      run_to_completion(shards_[1]->participant().prepare(TransactionPart{77, 1, {2}, {remove}}))
          .status()
          .code(),
      Errc::unavailable);
}

// Holders of a process's locks, each for 20 ms once granted; `order` says when each went in
// and out.
class ProcessLocksTest : public ::testing::Test {
 protected:
  void hold(std::vector<InodeId> keys, LockMode mode, std::string name) {
    boost::asio::co_spawn(io_, holder(std::move(keys), mode, std::move(name)),
                          boost::asio::detached);
  }
  std::ptrdiff_t when(const std::string& event) const {
    return std::find(order_.begin(), order_.end(), event) - order_.begin();
  }

  std::shared_ptr<NamespaceLocks> locks_ = make_process_locks();
  boost::asio::io_context io_;
  std::vector<std::string> order_;

 private:
  awaitable<void> holder(std::vector<InodeId> keys, LockMode mode, std::string name) {
    auto locking = locks_->lock(std::move(keys), mode);
    Result<std::shared_ptr<void>> held = co_await std::move(locking);
    EXPECT_TRUE(held.ok());
    order_.push_back(name + " in");
    boost::asio::steady_timer wait(io_, std::chrono::milliseconds(20));
    co_await wait.async_wait(boost::asio::use_awaitable);
    order_.push_back(name + " out");
  }
};

TEST_F(ProcessLocksTest, OverlappingKeysWaitForEachOther) {
  hold({1, 2}, LockMode::exclusive, "first");
  hold({2, 3}, LockMode::exclusive, "second");
  hold({4}, LockMode::exclusive, "third");
  io_.run();
  ASSERT_EQ(order_.size(), 6u);
  EXPECT_EQ(order_[0], "first in");
  EXPECT_EQ(order_[1], "third in");
  EXPECT_LT(when("first out"), when("second in"));
}

TEST_F(ProcessLocksTest, SharedHoldersGoTogetherAndNoneOvertakesAWaitingExclusiveOne) {
  hold({1, 2}, LockMode::shared, "a");
  hold({2, 3}, LockMode::shared, "b");
  hold({2}, LockMode::exclusive, "c");
  hold({2, 5}, LockMode::shared, "d");
  hold({3}, LockMode::shared, "f");
  io_.run();
  ASSERT_EQ(order_.size(), 10u);
  EXPECT_LT(when("a in"), when("a out"));
  EXPECT_LT(when("b in"), when("a out"));
  EXPECT_LT(when("f in"), when("a out"));
  EXPECT_GT(when("c in"), std::max(when("a out"), when("b out")));
  EXPECT_GT(when("d in"), when("c out"));
}

}  // namespace
}  // namespace tidepool::store
