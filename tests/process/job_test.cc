// The job engine end to end (issue 7): four real tided processes (two f800 nodes, two h500),
// files made over NFS, file pool policies and jobs driven with the real `tide` CLI. A SmartPools
// job applies the policies' access patterns; it can be paused, resumed and cancelled; a second
// start of a running type is refused; when the node coordinating it is killed, another takes it
// up from its checkpoint; and it moves files between the hot and the cold tier as the seeds'
// walk-through does, their data intact. Moves of big files: migration_test.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/process/job_fixture.h"
#include "tests/process/nfs_client.h"

namespace tidepool::test {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Files under /ifs/data (a policy makes them stream) and /ifs/logs (left to the default): at
// LOW impact (200 files a second) a walk of them takes three seconds, long enough to be paused
// or to lose its coordinator on the way.
constexpr int kDataFiles = 450;
constexpr int kLogFiles = 150;

class JobTest : public JobFixture {
 protected:
  // make(nfs, i) for every i in [from, to), by four clients of node 2 at once, each taking the
  // next i in turn: one client waits out every CREATE's round trip and every FILE_SYNC write's
  // sync, four keep the node busy. False once one make() has.
  bool make_through_node_2(int from, int to, const std::function<bool(NfsClient&, int)>& make) {
    std::atomic<int> next = from;
    std::atomic<bool> made = true;
    std::vector<std::thread> clients;
    for (int c = 0; c < 4; ++c) {
      clients.emplace_back([&] {
        NfsClient nfs(cluster_->node(2).endpoint());
        for (int i = next++; i < to && made; i = next++) {
          if (!make(nfs, i)) made = false;
        }
      });
    }
    for (std::thread& client : clients) client.join();
    return made;
  }

  // The data set, made through node 2, and the policy that makes /ifs/data stream.
  void make_data_set() {
    const FileHandle root = root_via(2);
    ASSERT_FALSE(root.empty());
    NfsClient nfs(cluster_->node(2).endpoint());
    const FileHandle data = nfs.make_dir(root, "data");
    const FileHandle shards = nfs.make_dir(data, "shards");
    const FileHandle logs = nfs.make_dir(root, "logs");
    ASSERT_FALSE(data.empty() || shards.empty() || logs.empty());
    ASSERT_TRUE(make_through_node_2(0, kDataFiles + kLogFiles, [&](NfsClient& client, int i) {
      if (i < kDataFiles) {
        return !client.make_file(i % 2 ? data : shards, "r" + std::to_string(i) + ".rec").empty();
      }
      return !client.make_file(logs, "l" + std::to_string(i - kDataFiles) + ".log").empty();
    }));
    const Ran made = tide(1, {"filepool", "policies", "create", "datasets", "--filter",
                              "path =~ /ifs/data/**", "--data-access-pattern", "streaming"});
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }

};


TEST_F(JobTest, SmartPoolsAppliesThePoliciesAndCanBePausedResumedAndCancelled) {
  ASSERT_NO_FATAL_FAILURE(make_data_set());
  const json types = tide_json(3, {"job", "types", "list"});
  ASSERT_EQ(types["types"].size(), 4u) << types.dump();
  EXPECT_EQ(types["types"][2]["name"], "FilePolicy");
  EXPECT_EQ(types["types"][3]["name"], "FlexProtect");
  EXPECT_EQ(types["types"][3]["priority"], 1);
  EXPECT_EQ(types["types"][0]["name"], "SmartPools");
  EXPECT_TRUE(types["types"][0]["schedule"].is_null()) << "the cluster's form() cleared it";
  EXPECT_EQ(types["types"][0]["priority"], 6);

  // At LOW impact the walk takes seconds: a second start is refused, and the job paused, on
  // its way.
  const std::uint64_t id = start(2, {"SmartPools"});
  ASSERT_NE(id, 0u);
  const Ran again = tide(3, {"job", "jobs", "start", "SmartPools"});
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_NE(again.output.find("SmartPools is already"), std::string::npos) << again.output;

  ASSERT_EQ(tide(3, {"job", "jobs", "pause", std::to_string(id)}).exit_code, 0);
  const json paused = job(1, id);
  EXPECT_EQ(paused["state"], "paused") << paused.dump();
  const Ran twice = tide(1, {"job", "jobs", "pause", std::to_string(id)});
  EXPECT_EQ(twice.exit_code, 1);
  EXPECT_NE(twice.output.find("is paused already"), std::string::npos) << twice.output;
  // A paused job makes no progress: what it counted stays as it was (after the batch under way
  // when the pause came, whose progress may still be saved).
  std::this_thread::sleep_for(500ms);
  const std::uint64_t scanned_at_pause = job(1, id)["progress"]["files_scanned"];
  std::this_thread::sleep_for(1s);
  const std::uint64_t scanned_while_paused = job(2, id)["progress"]["files_scanned"];
  EXPECT_EQ(scanned_while_paused, scanned_at_pause);
  EXPECT_LT(scanned_while_paused, static_cast<std::uint64_t>(kDataFiles + kLogFiles));

  ASSERT_EQ(tide(2, {"job", "jobs", "resume", std::to_string(id)}).exit_code, 0);
  const json done = wait_for(3, id, has_ended);
  EXPECT_EQ(done["state"], "succeeded") << done.dump();
  EXPECT_EQ(done["progress"]["files_scanned"], kDataFiles + kLogFiles);
  EXPECT_EQ(done["progress"]["files_matched"], kDataFiles);
  EXPECT_EQ(done["progress"]["patterns_set"], kDataFiles);
  EXPECT_EQ(done["progress"]["errors"], 0);
  EXPECT_GE(done["runs"], 2) << "paused and taken up again from its checkpoint";
  EXPECT_EQ(pattern_of(1, "/ifs/data/r1.rec"), "streaming");
  EXPECT_EQ(pattern_of(3, "/ifs/data/shards/r0.rec"), "streaming");
  EXPECT_EQ(pattern_of(2, "/ifs/logs/l0.log"), "concurrency");

  const json reports = tide_json(1, {"job", "reports", "list"});
  ASSERT_EQ(reports["reports"].size(), 1u) << reports.dump();
  EXPECT_EQ(reports["reports"][0]["id"], id);
  const json status = tide_json(2, {"job", "status"});
  EXPECT_TRUE(status["active"].empty()) << status.dump();
  EXPECT_EQ(status["recent"][0]["state"], "succeeded");

  // A dry run at once counts nothing left to set; a cancelled job ends as cancelled.
  const std::uint64_t tree = start(1, {"SmartPoolsTree", "--paths", "/ifs/data", "--dry-run"});
  const json dry = wait_for(1, tree, has_ended);
  EXPECT_EQ(dry["state"], "succeeded") << dry.dump();
  EXPECT_EQ(dry["progress"]["files_scanned"], kDataFiles);
  EXPECT_EQ(dry["progress"]["patterns_set"], 0);
  const std::uint64_t cancelled = start(3, {"SmartPools"});
  ASSERT_EQ(tide(3, {"job", "jobs", "cancel", std::to_string(cancelled)}).exit_code, 0);
  const json gone = job(2, cancelled);
  EXPECT_EQ(gone["state"], "cancelled") << gone.dump();
  EXPECT_EQ(gone["reason"], "cancelled by an administrator");
  const Ran late = tide(2, {"job", "jobs", "resume", std::to_string(cancelled)});
  EXPECT_EQ(late.exit_code, 1);
  EXPECT_NE(late.output.find("it has ended"), std::string::npos) << late.output;
}

TEST_F(JobTest, AJobWhoseCoordinatorIsKilledGoesOnElsewhereFromItsCheckpoint) {
  ASSERT_NO_FATAL_FAILURE(make_data_set());
  const std::uint64_t id = start(3, {"SmartPools"});
  ASSERT_NE(id, 0u);
  const json working = wait_for(3, id, [](const json& j) {
    return j["state"] == "running" && j["progress"]["files_scanned"] > 50;
  });
  ASSERT_EQ(working["state"], "running");
  const std::uint64_t coordinator = working["coordinator"];
  ASSERT_GE(coordinator, 1u);
  ASSERT_LE(coordinator, 3u);
  cluster_->node(coordinator).kill();
  const std::size_t survivor = coordinator == 3 ? 1 : 3;

  const json done = wait_for(survivor, id, has_ended, 90s);
  EXPECT_EQ(done["state"], "succeeded") << done.dump();
  EXPECT_GE(done["runs"], 2) << "taken up again by another node";
  EXPECT_EQ(done["progress"]["files_scanned"], kDataFiles + kLogFiles)
      << "it went on from its checkpoint: no file counted twice, none left out";
  EXPECT_EQ(done["progress"]["files_matched"], kDataFiles);
  EXPECT_EQ(pattern_of(survivor, "/ifs/data/r" + std::to_string(kDataFiles - 1) + ".rec"),
            "streaming");
}

}  // namespace
}  // namespace tidepool::test

namespace tidepool::test {
namespace {

// The seeds' walk-through (DSS 8440 paper, Appendix A): files land on the hot tier, go cold
// once not accessed for 30 days, and come back when read again, their path and data unchanged.
TEST_F(JobTest, FilesMoveToTheColdTierWhenNotAccessedAndBackWhenReadAgain) {
  ASSERT_EQ(tide(1, {"storagepool", "tiers", "create", "hot-tier", "--children", "f800"}).exit_code, 0);
  ASSERT_EQ(tide(1, {"storagepool", "tiers", "create", "cold-tier", "--children", "h500"}).exit_code, 0);
  ASSERT_EQ(tide(2, {"filepool", "default-policy", "modify", "--data-storage-target", "hot-tier"})
                .exit_code,
            0);
  const Ran made = tide(3, {"filepool", "policies", "create", "cold", "--begin-filter",
                            "--accessed-time=30D", "--operator=gt", "--end-filter",
                            "--data-storage-target", "cold-tier"});
  ASSERT_EQ(made.exit_code, 0) << made.output;

  const FileHandle root = root_via(2);
  ASSERT_FALSE(root.empty());
  NfsClient nfs(cluster_->node(2).endpoint());
  const FileHandle dir = nfs.make_dir(root, "walkthrough");
  std::vector<FileHandle> files;
  std::vector<std::string> contents;
  for (int i = 0; i < 3; ++i) {
    std::string data(700'000 + i * 1000, '\0');
    for (std::size_t b = 0; b < data.size(); ++b) data[b] = static_cast<char>((b * 31 + i) % 251);
    files.push_back(nfs.make_file(dir, "f" + std::to_string(i), 0644, data));
    contents.push_back(std::move(data));
  }
  auto data_intact = [&](std::size_t via) {
    NfsClient reader(cluster_->node(via).endpoint());
    for (std::size_t i = 0; i < files.size(); ++i) {
      EXPECT_EQ(reader.read_all(files[i]), contents[i]) << "f" << i << " through node " << via;
    }
  };

  // Placement on create: the default policy put them on the hot tier already.
  for (int i = 0; i < 3; ++i) {
    const auto [pool, nodes] = placement_of(4, "/ifs/walkthrough/f" + std::to_string(i));
    EXPECT_EQ(pool, "f800");
    EXPECT_EQ(nodes, (std::set<std::uint64_t>{1, 2})) << "on the f800 nodes";
  }
  json job = run_smartpools(1);
  ASSERT_EQ(job["state"], "succeeded") << job.dump();
  EXPECT_EQ(job["progress"]["files_moved"], 0) << "where their policy wants them: " << job.dump();
  EXPECT_EQ(job["progress"]["files_misplaced"], 0) << job.dump();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(placement_of(4, "/ifs/walkthrough/f" + std::to_string(i)).first, "f800");
  }
  data_intact(3);

  // touch -a -d 2018-01-01: not accessed for years.
  Sattr long_ago;
  long_ago.atime_how = SET_TO_CLIENT_TIME;
  long_ago.atime.seconds = 1'514'764'800;
  for (const FileHandle& file : files) ASSERT_EQ(nfs.setattr(file, long_ago).status, NFS3_OK);
  job = run_smartpools(2);
  ASSERT_EQ(job["state"], "succeeded") << job.dump();
  EXPECT_EQ(job["progress"]["files_moved"], 3) << job.dump();
  for (int i = 0; i < 3; ++i) {
    const auto [pool, nodes] = placement_of(1, "/ifs/walkthrough/f" + std::to_string(i));
    EXPECT_EQ(pool, "h500");
    EXPECT_EQ(nodes, (std::set<std::uint64_t>{3, 4})) << "on the h500 nodes";
  }
  data_intact(1);  // reading them makes them recent again

  job = run_smartpools(3);
  ASSERT_EQ(job["state"], "succeeded") << job.dump();
  EXPECT_EQ(job["progress"]["files_moved"], 3) << job.dump();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(placement_of(2, "/ifs/walkthrough/f" + std::to_string(i)).first, "f800");
  }
  data_intact(4);
}

// A pool that fills during a job (here: its transfer limit lowered below what its disks hold)
// receives nothing more: the job goes on, counts the files it could not move as misplaced, and
// the files it moved before stay moved.
TEST_F(JobTest, APoolPastItsTransferLimitDuringAJobReceivesNoMore) {
  constexpr int kFiles = 2000;
  const FileHandle root = root_via(2);
  ASSERT_FALSE(root.empty());
  NfsClient nfs(cluster_->node(2).endpoint());
  const FileHandle dir = nfs.make_dir(root, "cold");
  const auto make = [&](NfsClient& client, int i) {
    return !client.make_file(dir, "c" + std::to_string(i), 0644, "data of c" + std::to_string(i))
                .empty();
  };
  // The first and the last made alone, so that they are walked first and last (below).
  ASSERT_TRUE(make(nfs, 0));
  ASSERT_TRUE(make_through_node_2(1, kFiles - 1, make));
  ASSERT_TRUE(make(nfs, kFiles - 1));
  ASSERT_EQ(tide(1, {"storagepool", "tiers", "create", "cold-tier", "--children", "h500"}).exit_code, 0);
  const Ran made = tide(1, {"filepool", "policies", "create", "cold", "--filter",
                            "path =~ /ifs/cold/**", "--data-storage-target", "cold-tier"});
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const std::uint64_t id = start(3, {"SmartPoolsTree", "--paths", "/ifs/cold", "--policy", "LOW"});
  ASSERT_NE(id, 0u);
  const json moving = wait_for(3, id, [](const json& j) {
    return j["state"] == "running" && j["progress"]["files_moved"] >= 50;
  });
  ASSERT_EQ(moving["state"], "running") << moving.dump();
  const Ran limited = tide(1, {"sysctl", "efs.smartpools.transfer_limit=1"});
  ASSERT_EQ(limited.exit_code, 0) << limited.output;

  const json done = wait_for(3, id, has_ended, 120s);
  EXPECT_EQ(done["state"], "succeeded") << done.dump();
  const json& progress = done["progress"];
  EXPECT_EQ(progress["files_moved"].get<int>() + progress["files_misplaced"].get<int>(), kFiles)
      << done.dump();
  EXPECT_GE(progress["files_moved"], 50) << done.dump();
  EXPECT_GT(progress["files_misplaced"], 0) << "skipped once the pool was past its limit: "
                                            << done.dump();
  EXPECT_EQ(progress["errors"], 0) << done.dump();
  // Files are walked in the order they were made: the first moved, the last skipped.
  EXPECT_EQ(placement_of(4, "/ifs/cold/c0").first, "h500");
  EXPECT_EQ(placement_of(4, "/ifs/cold/c" + std::to_string(kFiles - 1)).first, "f800")
      << "where a new cluster's default policy put it";
  NfsClient reader(cluster_->node(4).endpoint());
  for (const int i : {0, kFiles - 1}) {
    const std::string name = "c" + std::to_string(i);
    EXPECT_EQ(reader.read_all(reader.lookup(dir, name).fh), "data of " + name);
  }
}

// FilePolicy finds the files a policy's filter selects through the home's database, asked
// from whichever node coordinates: only the file not read for 30 days is its candidate, and it
// moves to the cold tier.
TEST_F(JobTest, FilePolicyMovesTheFilesItsPoliciesSelectWithoutAWalk) {
  const FileHandle root = root_via(2);
  ASSERT_FALSE(root.empty());
  NfsClient nfs(cluster_->node(2).endpoint());
  const FileHandle dir = nfs.make_dir(root, "mixed");
  std::vector<FileHandle> files;
  for (int i = 0; i < 3; ++i) {
    files.push_back(nfs.make_file(dir, "m" + std::to_string(i), 0644, "contents " + std::to_string(i)));
    ASSERT_FALSE(files.back().empty());
  }
  Sattr long_ago;
  long_ago.atime_how = SET_TO_CLIENT_TIME;
  long_ago.atime.seconds = 1'514'764'800;  // 2018-01-01
  ASSERT_EQ(nfs.setattr(files[1], long_ago).status, NFS3_OK);
  ASSERT_EQ(tide(1, {"storagepool", "tiers", "create", "cold-tier", "--children", "h500"}).exit_code, 0);
  const Ran made = tide(1, {"filepool", "policies", "create", "cold", "--filter", "accessed > 30d",
                            "--data-storage-target", "cold-tier"});
  ASSERT_EQ(made.exit_code, 0) << made.output;

  const std::uint64_t id = start(3, {"FilePolicy", "--policy", "HIGH"});
  ASSERT_NE(id, 0u);
  const json done = wait_for(3, id, has_ended);
  EXPECT_EQ(done["state"], "succeeded") << done.dump();
  EXPECT_EQ(done["progress"]["files_scanned"], 1) << "its one candidate: " << done.dump();
  EXPECT_EQ(done["progress"]["files_moved"], 1) << done.dump();
  EXPECT_EQ(done["progress"]["directories_scanned"], 0) << "no walk";
  EXPECT_EQ(placement_of(4, "/ifs/mixed/m1").first, "h500");
  EXPECT_EQ(placement_of(4, "/ifs/mixed/m0").first, "f800");
  EXPECT_EQ(placement_of(4, "/ifs/mixed/m2").first, "f800");
  NfsClient reader(cluster_->node(4).endpoint());
  EXPECT_EQ(reader.read_all(files[1]), "contents 1");
}

}  // namespace
}  // namespace tidepool::test
