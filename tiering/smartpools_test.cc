#include "tiering/smartpools.h"

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <filesystem>

#include "store/forwarding_store.h"
#include "store/internal/test_util.h"

namespace tidepool::tiering {
namespace {

using store::internal::run_to_completion;

const store::Caller kRoot{0, 0, {}};
constexpr auto kStart = std::chrono::system_clock::time_point(std::chrono::seconds(1'795'694'400));

class SmartPoolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = store::internal::fresh_test_directory("tidepool-smartpools-test");
    store::StoreOptions options;
    options.data_dir = (dir_ / "shard").string();
    options.threads = 2;
    options.clock = &clock_;
    options.peers = pools_ = std::make_shared<store::internal::InProcessPools>(dir_ / "nodes", 3);
    auto opened = store::Store::open(options);
    ASSERT_TRUE(opened.ok()) << opened.status().to_string();
    store_ = std::move(opened).value();
  }
  void TearDown() override {
    store_->close();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  store::InodeId make(store::InodeId directory, const std::string& name, bool is_directory) {
    auto made = run_to_completion(
        is_directory ? store_->mkdir(directory, name, {}, kRoot)
                     : store_->create(directory, name, store::CreateMode::unchecked, {}, {}, kRoot));
    EXPECT_TRUE(made.ok()) << name << ": " << made.status().to_string();
    return made.ok() ? made->attributes.inode : 0;
  }

  store::Layout layout_of(store::InodeId inode) {
    auto layout = run_to_completion(store_->layout(inode));
    EXPECT_TRUE(layout.ok()) << layout.status().to_string();
    return layout.ok() ? *layout : store::Layout{};
  }
  std::string pattern_of(store::InodeId inode) { return layout_of(inode).access_pattern; }

  // /ifs/data/{a,b,sub/c,sub/deeper/d}, /ifs/logs/{e,f}, /ifs/top.
  void make_tree() {
    const store::InodeId data = make(store::kRootInode, "data", true);
    const store::InodeId logs = make(store::kRootInode, "logs", true);
    const store::InodeId sub = make(data, "sub", true);
    const store::InodeId deeper = make(sub, "deeper", true);
    data_files_ = {make(data, "a", false), make(data, "b", false), make(sub, "c", false),
                   make(deeper, "d", false)};
    other_files_ = {make(logs, "e", false), make(logs, "f", false),
                    make(store::kRootInode, "top", false)};
  }

  // Data under /ifs/data streams; the default targets "anywhere", so nothing is misplaced
  // unless a policy names a pool.
  static policy::PolicySet streaming_data(std::string target = "anywhere") {
    policy::PolicySet set;
    policy::Policy p;
    p.name = "datasets";
    p.filter = *policy::parse_expression("path =~ /ifs/data/**");
    p.actions.access_pattern = "streaming";
    p.actions.storage_target = std::move(target);
    set.policies.push_back(p);
    return set;
  }

  RunHooks hooks(policy::PolicySet set) {
    RunHooks h;
    h.policies = [set] { return set; };
    h.pool_for = [](const std::string& target,
                    const std::string& pool) -> std::optional<std::string> {
      if (target == policy::kAnywhere) return pool;
      return target == "nowhere" ? std::nullopt : std::optional<std::string>(target);
    };
    h.save = [this](const Job& job) -> boost::asio::awaitable<Status> {
      saved_.push_back(job);
      co_return Status{};
    };
    h.stopping = [] { return false; };
    h.placed_nodes = [this](const std::string& pool) { return pools_->nodes_of(pool); };
    return h;
  }

  Job job_for(std::vector<std::string> paths, bool dry_run = false,
              std::string_view type = "SmartPools") {
    StartRequest request{.type = std::string(type), .paths = std::move(paths), .dry_run = dry_run};
    request.impact = Impact::high;
    return *start_job(request, settle(*find_job_type(type), {}), {}, 1, 0);
  }

  RunOptions options(std::chrono::milliseconds save_every = std::chrono::milliseconds(0)) {
    RunOptions o;
    o.clock = &clock_;
    o.save_every = save_every;
    o.page_entries = 2;  // small pages: listings resume from cookies
    return o;
  }

  FakeClock clock_{kStart};
  std::filesystem::path dir_;
  std::shared_ptr<store::internal::InProcessPools> pools_;
  std::unique_ptr<store::LocalStore> store_;
  std::vector<store::InodeId> data_files_;
  std::vector<store::InodeId> other_files_;
  std::vector<Job> saved_;
};

TEST_F(SmartPoolsTest, FilesAPolicyMatchesTakeItsAccessPatternAndOthersKeepTheirs) {
  make_tree();
  Job job = job_for({});
  const Status done = run_to_completion(run_smartpools(*store_, job, hooks(streaming_data()), options()));
  ASSERT_TRUE(done.ok()) << done.to_string();
  for (store::InodeId inode : data_files_) EXPECT_EQ(pattern_of(inode), "streaming");
  for (store::InodeId inode : other_files_) EXPECT_EQ(pattern_of(inode), "concurrency");
  const Progress& p = job.checkpoint.progress;
  EXPECT_EQ(p.files_scanned, 7u);
  EXPECT_EQ(p.directories_scanned, 5u);  // /ifs, data, logs, sub, deeper
  EXPECT_EQ(p.files_matched, 4u);
  EXPECT_EQ(p.patterns_set, 4u);
  EXPECT_EQ(p.files_misplaced, 0u);
  EXPECT_EQ(p.errors, 0u);
  EXPECT_TRUE(job.checkpoint.frames.empty());
  EXPECT_TRUE(job.checkpoint.roots_left.empty());

  Job again = job_for({});
  ASSERT_TRUE(run_to_completion(run_smartpools(*store_, again, hooks(streaming_data()), options())).ok());
  EXPECT_EQ(again.checkpoint.progress.patterns_set, 0u) << "a second run finds nothing to change";
}

TEST_F(SmartPoolsTest, FilesMoveToThePoolTheirPolicyNamesWithTheirData) {
  make_tree();
  const std::vector<std::uint8_t> bytes(300'000, 0x5c);
  for (store::InodeId inode : data_files_) {
    ASSERT_TRUE(run_to_completion(store_->write(inode, 0, bytes, store::Stability::file_sync, kRoot)).ok());
  }
  Job job = job_for({});
  ASSERT_TRUE(run_to_completion(run_smartpools(*store_, job, hooks(streaming_data("h500")), options())).ok());
  EXPECT_EQ(job.checkpoint.progress.files_moved, 4u);
  EXPECT_EQ(job.checkpoint.progress.bytes_moved, 4u * bytes.size());
  EXPECT_EQ(job.checkpoint.progress.files_misplaced, 0u);
  EXPECT_EQ(job.checkpoint.progress.errors, 0u) << (job.errors.empty() ? "" : job.errors[0]);
  for (store::InodeId inode : data_files_) {
    EXPECT_EQ(layout_of(inode).pool, "h500");
    std::vector<std::uint8_t> back(bytes.size());
    auto read = run_to_completion(store_->read(inode, 0, back, kRoot));
    ASSERT_TRUE(read.ok());
    EXPECT_EQ(back, bytes);
  }
  for (store::InodeId inode : other_files_) EXPECT_EQ(layout_of(inode).pool, store::kWithShard);

  Job nowhere = job_for({"/ifs/logs"});
  ASSERT_TRUE(run_to_completion(run_smartpools(*store_, nowhere, hooks(streaming_data("nowhere")), options())).ok());
  EXPECT_EQ(nowhere.checkpoint.progress.files_misplaced, 0u) << "/ifs/logs is the default's";
  Job unplaceable = job_for({"/ifs/data/a"});
  ASSERT_TRUE(run_to_completion(run_smartpools(*store_, unplaceable, hooks(streaming_data("nowhere")), options())).ok());
  EXPECT_EQ(unplaceable.checkpoint.progress.files_misplaced, 1u) << "no pool to move it to";
  EXPECT_EQ(unplaceable.checkpoint.progress.files_moved, 0u);
}

TEST_F(SmartPoolsTest, FlexProtectRestripesFilesOverThePoolsNodesNowWhateverThePolicies) {
  make_tree();
  const std::vector<std::uint8_t> bytes(300'000, 0x3d);
  for (store::InodeId inode : data_files_) {
    ASSERT_TRUE(
        run_to_completion(store_->write(inode, 0, bytes, store::Stability::file_sync, kRoot)).ok());
    ASSERT_TRUE(run_to_completion(store_->migrate(inode, "f800", 2, 0)).ok());
  }
  const auto flexprotect = [&](bool dry_run) {
    Job job = job_for({}, dry_run, kFlexProtectJob);
    // Policies that would move every file elsewhere: FlexProtect leaves them aside.
    const Status done =
        run_to_completion(run_smartpools(*store_, job, hooks(streaming_data("h500")), options()));
    EXPECT_TRUE(done.ok()) << done.to_string();
    return job.checkpoint.progress;
  };
  const Progress placed = flexprotect(false);
  EXPECT_EQ(placed.files_scanned, 7u);
  EXPECT_EQ(placed.files_matched, 0u) << "every file is placed over the pool's nodes";

  pools_->set_lost({2});
  const Progress dry = flexprotect(true);
  EXPECT_EQ(dry.files_matched, 4u);
  EXPECT_EQ(dry.files_misplaced, 4u);
  EXPECT_EQ(layout_of(data_files_[0]).nodes, (std::vector<std::uint64_t>{1, 2, 3}));

  const Progress lost = flexprotect(false);
  EXPECT_EQ(lost.files_matched, 4u);
  EXPECT_EQ(lost.files_moved, 4u);
  EXPECT_EQ(lost.files_misplaced, 0u);
  EXPECT_EQ(lost.patterns_set, 0u);
  for (store::InodeId inode : data_files_) {
    const store::Layout layout = layout_of(inode);
    EXPECT_EQ(layout.pool, "f800");
    EXPECT_EQ(layout.nodes, (std::vector<std::uint64_t>{1, 3}));
    EXPECT_EQ(layout.access_pattern, "concurrency");
  }
  for (store::InodeId inode : other_files_) EXPECT_EQ(layout_of(inode).pool, store::kWithShard);

  // One node left: a restripe would keep one copy, fewer than the two there are.
  pools_->set_lost({2, 3});
  const Progress too_few = flexprotect(false);
  EXPECT_EQ(too_few.files_matched, 4u);
  EXPECT_EQ(too_few.files_moved, 0u);
  EXPECT_EQ(too_few.files_misplaced, 4u);
  EXPECT_EQ(layout_of(data_files_[0]).nodes, (std::vector<std::uint64_t>{1, 3}));

  pools_->set_lost({});
  const Progress back = flexprotect(false);
  EXPECT_EQ(back.files_moved, 4u);
  for (store::InodeId inode : data_files_) {
    EXPECT_EQ(layout_of(inode).nodes, (std::vector<std::uint64_t>{1, 2, 3}));
    std::vector<std::uint8_t> read(bytes.size());
    ASSERT_TRUE(run_to_completion(store_->read(inode, 0, read, kRoot)).ok());
    EXPECT_EQ(read, bytes);
  }
}

TEST_F(SmartPoolsTest, ADryRunCountsWithoutChanging) {
  make_tree();
  Job job = job_for({"/ifs/data"}, true);
  ASSERT_TRUE(run_to_completion(run_smartpools(*store_, job, hooks(streaming_data("h500")), options())).ok());
  for (store::InodeId inode : data_files_) EXPECT_EQ(pattern_of(inode), "concurrency");
  EXPECT_EQ(job.checkpoint.progress.files_scanned, 4u);
  EXPECT_EQ(job.checkpoint.progress.patterns_set, 4u);
  EXPECT_EQ(job.checkpoint.progress.files_misplaced, 4u) << "their data is not in pool h500";
  EXPECT_EQ(job.checkpoint.progress.files_moved, 0u);
  for (store::InodeId inode : data_files_) EXPECT_EQ(layout_of(inode).pool, store::kWithShard);
}

TEST_F(SmartPoolsTest, ARunTakenUpFromAnySavedCheckpointEndsAsOneStraightRunWould) {
  make_tree();
  Job straight = job_for({});
  ASSERT_TRUE(run_to_completion(run_smartpools(*store_, straight, hooks(streaming_data("h500")), options())).ok());
  const std::vector<Job> checkpoints = saved_;
  ASSERT_GE(checkpoints.size(), 10u);
  // Each resumed run starts from the store as the straight run left it (so it sets no pattern
  // again); what it scans and matches must still add up, walked on from the checkpoint.
  for (std::size_t i = 0; i < checkpoints.size(); ++i) {
    Job resumed = checkpoints[i];
    const Progress at = checkpoints[i].checkpoint.progress;
    ASSERT_TRUE(run_to_completion(run_smartpools(*store_, resumed, hooks(streaming_data("h500")), options())).ok());
    const Progress& end = resumed.checkpoint.progress;
    EXPECT_EQ(end.files_scanned, straight.checkpoint.progress.files_scanned) << "checkpoint " << i;
    EXPECT_EQ(end.directories_scanned, straight.checkpoint.progress.directories_scanned) << i;
    EXPECT_EQ(end.files_matched, straight.checkpoint.progress.files_matched) << i;
    EXPECT_EQ(end.files_misplaced, straight.checkpoint.progress.files_misplaced) << i;
    EXPECT_GE(end.files_scanned, at.files_scanned) << i;
  }
}

TEST_F(SmartPoolsTest, AFailedSaveStopsTheRunAndStoppingIsHonoured) {
  make_tree();
  Job job = job_for({});
  RunHooks h = hooks(streaming_data());
  h.save = [](const Job&) -> boost::asio::awaitable<Status> {
    co_return error(Errc::precondition_failed, "the job changed");
  };
  const Status stopped = run_to_completion(run_smartpools(*store_, job, h, options()));
  EXPECT_EQ(stopped.code(), Errc::precondition_failed);
  EXPECT_LT(job.checkpoint.progress.files_scanned, 7u);

  Job other = job_for({});
  RunHooks halt = hooks(streaming_data());
  halt.stopping = [] { return true; };
  EXPECT_EQ(run_to_completion(run_smartpools(*store_, other, halt, options())).code(),
            Errc::unavailable);
}

// Moves that fail as when the file's shard home is lost mid-move.
class MovesFailing final : public store::ForwardingStore {
 public:
  explicit MovesFailing(store::Store& store)
      : store_(std::shared_ptr<store::Store>(&store, [](store::Store*) {})) {}
  int failures = 0;

  boost::asio::awaitable<Result<store::Move>> migrate(store::InodeId inode, std::string pool,
                                                      std::uint32_t protection,
                                                      std::uint64_t bytes_per_second) override {
    if (failures > 0) {
      --failures;
      co_return error(Errc::unavailable, "no reply from node 1: the group recorded it down");
    }
    auto moving = ForwardingStore::migrate(inode, std::move(pool), protection, bytes_per_second);
    co_return co_await std::move(moving);
  }

 private:
  Result<std::shared_ptr<store::Store>> next(store::InodeId) const override { return store_; }
  std::shared_ptr<store::Store> store_;
};

TEST_F(SmartPoolsTest, ANodeLostMidMoveStopsTheFirstRunsAndIsNotedByALaterOne) {
  make_tree();
  MovesFailing failing(*store_);
  failing.failures = 1;
  Job job = job_for({});
  job.runs = 1;
  EXPECT_EQ(
      run_to_completion(run_smartpools(failing, job, hooks(streaming_data("h500")), options()))
          .code(),
      Errc::unavailable)
      << "taken up again later";
  EXPECT_EQ(job.checkpoint.progress.errors, 0u);
  job.runs = 2;
  ASSERT_TRUE(
      run_to_completion(run_smartpools(failing, job, hooks(streaming_data("h500")), options()))
          .ok());
  EXPECT_EQ(job.checkpoint.progress.files_moved, 4u);
  EXPECT_EQ(job.checkpoint.progress.errors, 0u);

  failing.failures = 1;
  Job later = job_for({});
  later.runs = 3;
  ASSERT_TRUE(
      run_to_completion(run_smartpools(failing, later, hooks(streaming_data("f800")), options()))
          .ok());
  EXPECT_EQ(later.checkpoint.progress.errors, 1u) << "a node down for good: noted";
  ASSERT_EQ(later.errors.size(), 1u);
  EXPECT_NE(later.errors[0].find("not moved"), std::string::npos) << later.errors[0];
}

TEST_F(SmartPoolsTest, AMissingRootIsAnErrorOfTheJobAndTheOtherRootsAreWalked) {
  make_tree();
  Job job = job_for({"/ifs/nowhere", "/ifs/logs", "/ifs/top"});
  ASSERT_TRUE(run_to_completion(run_smartpools(*store_, job, hooks(streaming_data()), options())).ok());
  EXPECT_EQ(job.checkpoint.progress.errors, 1u);
  ASSERT_EQ(job.errors.size(), 1u);
  EXPECT_EQ(job.errors[0].rfind("/ifs/nowhere: ", 0), 0u) << job.errors[0];
  EXPECT_EQ(job.checkpoint.progress.files_scanned, 3u);
}

TEST_F(SmartPoolsTest, TheImpactPolicyKeepsTheRate) {
  make_tree();
  Job job = job_for({});
  job.impact = Impact::low;  // 200 files a second: 12 entries take about 60 ms of real time
  const auto start = std::chrono::steady_clock::now();
  RunOptions o = options();
  o.clock = nullptr;
  ASSERT_TRUE(run_to_completion(run_smartpools(*store_, job, hooks(streaming_data()), o)).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(40));
}

// FilePolicy finds its files through the shard's database instead of walking: a policy on atime
// finds the files not read for 30 days, an earlier policy that matches one of them keeps it, and
// a run taken up from any saved checkpoint ends as one straight run would.
TEST_F(SmartPoolsTest, FilePolicyFindsTheFilesOfEachPolicyThroughTheShardsDatabase) {
  make_tree();
  const store::InodeId data_a = data_files_[0];
  const store::InodeId logs_e = other_files_[0];
  for (store::InodeId inode : {data_a, logs_e}) {
    store::AttributeChanges read_long_ago;
    read_long_ago.atime = store::SetTime::client_time;
    read_long_ago.atime_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(
            (kStart - std::chrono::hours(24 * 60)).time_since_epoch())
            .count();
    ASSERT_TRUE(run_to_completion(store_->setattr(inode, read_long_ago, kRoot, std::nullopt)).ok());
  }
  const std::vector<std::uint8_t> bytes(200'000, 0x3e);
  ASSERT_TRUE(run_to_completion(store_->write(logs_e, 0, bytes, store::Stability::file_sync, kRoot)).ok());
  policy::PolicySet set = streaming_data();  // datasets: path =~ /ifs/data/**, first
  policy::Policy cold;
  cold.name = "cold";
  cold.filter = *policy::parse_expression("accessed > 30d");
  cold.actions.storage_target = "h500";
  set.policies.push_back(cold);

  auto file_policy_job = [] {
    StartRequest request{.type = std::string(kFilePolicyJob)};
    request.impact = Impact::high;
    return *start_job(request, settle(*find_job_type(kFilePolicyJob), {}), {}, 2, 0);
  };
  Job job = file_policy_job();
  ASSERT_TRUE(run_to_completion(run_smartpools(*store_, job, hooks(set), options())).ok());
  const Progress& p = job.checkpoint.progress;
  // datasets has no SQL for its path: every file is its candidate; cold's are a and e.
  EXPECT_EQ(p.files_scanned, 7u + 2u);
  EXPECT_EQ(p.files_matched, 4u + 1u) << "a is datasets' file, not cold's";
  EXPECT_EQ(p.patterns_set, 4u);
  EXPECT_EQ(p.files_moved, 1u);
  EXPECT_EQ(p.bytes_moved, bytes.size());
  EXPECT_EQ(p.errors, 0u) << (job.errors.empty() ? "" : job.errors[0]);
  EXPECT_EQ(p.directories_scanned, 0u) << "no walk";
  EXPECT_EQ(layout_of(logs_e).pool, "h500");
  EXPECT_EQ(layout_of(data_a).pool, store::kWithShard);
  EXPECT_EQ(pattern_of(data_a), "streaming");
  EXPECT_EQ(layout_of(other_files_[1]).pool, store::kWithShard);

  const std::vector<Job> checkpoints = saved_;
  ASSERT_GE(checkpoints.size(), 5u);
  for (std::size_t i = 0; i < checkpoints.size(); ++i) {
    Job resumed = checkpoints[i];
    ASSERT_TRUE(run_to_completion(run_smartpools(*store_, resumed, hooks(set), options())).ok());
    EXPECT_EQ(resumed.checkpoint.progress.files_scanned, p.files_scanned) << "checkpoint " << i;
    EXPECT_EQ(resumed.checkpoint.progress.files_matched, p.files_matched) << "checkpoint " << i;
  }
  // Read last: a read makes the file recent, and no longer cold's.
  std::vector<std::uint8_t> back(bytes.size());
  ASSERT_TRUE(run_to_completion(store_->read(logs_e, 0, back, kRoot)).ok());
  EXPECT_EQ(back, bytes);
}

}  // namespace
}  // namespace tidepool::tiering
