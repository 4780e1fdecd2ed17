// The job engine end to end (issue 7): three real tided processes, files made over NFS, file pool
// policies and jobs driven with the real `tide` CLI. A SmartPools job applies the policies'
// access patterns; it can be paused, resumed and cancelled; a second start of a running type is
// refused; and when the node coordinating it is killed, another takes it up from its checkpoint.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/process/nfs_client.h"
#include "tests/process/tide_cluster.h"

namespace tidepool::test {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Files under /ifs/data (a policy makes them stream) and /ifs/logs (left to the default).
constexpr int kDataFiles = 600;
constexpr int kLogFiles = 200;

class JobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (tide_path().empty()) GTEST_SKIP() << "no tide binary in this build";
    cluster_ = std::make_unique<TideCluster>("jobs", std::vector<std::string>{"f800", "f800", "h500"},
                                             "job");
    std::string error;
    ASSERT_TRUE(cluster_->start(&error)) << error;
    ASSERT_NO_FATAL_FAILURE(cluster_->form());
  }
  void TearDown() override { cluster_.reset(); }

  Ran tide(std::size_t via, std::vector<std::string> args) { return cluster_->tide(via, args); }
  json tide_json(std::size_t via, std::vector<std::string> args) {
    return cluster_->tide_json(via, args);
  }

  // /ifs mounted through node `id`, once it serves the cluster's namespace (bounded).
  FileHandle root_via(std::size_t id) {
    const Endpoint& via = cluster_->node(id).endpoint();
    for (const auto deadline = Clock::now() + 20s; Clock::now() < deadline;) {
      MountClient mount(via);
      MountResult m = mount.connected() ? mount.mnt("/ifs") : MountResult{};
      if (m.status == MNT3_OK && NfsClient(via).getattr(m.fh).status == NFS3_OK) return m.fh;
      std::this_thread::sleep_for(200ms);
    }
    ADD_FAILURE() << "node " << id << " never served /ifs";
    return {};
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
    for (int i = 0; i < kDataFiles; ++i) {
      ASSERT_FALSE(nfs.make_file(i % 2 ? data : shards, "r" + std::to_string(i) + ".rec").empty());
    }
    for (int i = 0; i < kLogFiles; ++i) {
      ASSERT_FALSE(nfs.make_file(logs, "l" + std::to_string(i) + ".log").empty());
    }
    const Ran made = tide(1, {"filepool", "policies", "create", "datasets", "--filter",
                              "path =~ /ifs/data/**", "--data-access-pattern", "streaming"});
    ASSERT_EQ(made.exit_code, 0) << made.output;
  }

  // `tide job jobs start ...` through `via`; the new job's id (0 and a failure if it did not start).
  std::uint64_t start(std::size_t via, std::vector<std::string> args) {
    args.insert(args.begin(), {"job", "jobs", "start"});
    const Ran started = tide(via, args);
    EXPECT_EQ(started.exit_code, 0) << started.output;
    const std::size_t open = started.output.find("Started job [");
    if (open == std::string::npos) {
      ADD_FAILURE() << started.output;
      return 0;
    }
    return std::stoull(started.output.substr(open + std::string("Started job [").size()));
  }

  json job(std::size_t via, std::uint64_t id) {
    return tide_json(via, {"job", "jobs", "view", std::to_string(id)});
  }

  // Polls the job through `via` until `done` holds for it (bounded); the job as last seen.
  json wait_for(std::size_t via, std::uint64_t id, const std::function<bool(const json&)>& done,
                std::chrono::seconds bound = 60s) {
    json seen;
    for (const auto deadline = Clock::now() + bound; Clock::now() < deadline;) {
      const Ran viewed = tide(via, {"job", "jobs", "view", std::to_string(id), "--format", "json"});
      if (viewed.exit_code == 0) {
        seen = json::parse(viewed.output, nullptr, false);
        if (!seen.is_discarded() && done(seen)) return seen;
      }
      std::this_thread::sleep_for(100ms);
    }
    ADD_FAILURE() << "job " << id << " never got there; last seen: " << seen.dump();
    return seen;
  }

  std::string pattern_of(std::size_t via, const std::string& path) {
    const json file = tide_json(via, {"get", "-D", path});
    return file.contains("layout") ? file["layout"]["access_pattern"].get<std::string>() : "";
  }

  std::unique_ptr<TideCluster> cluster_;
};

bool has_ended(const json& job) {
  return job["state"] == "succeeded" || job["state"] == "failed" || job["state"] == "cancelled";
}

TEST_F(JobTest, SmartPoolsAppliesThePoliciesAndCanBePausedResumedAndCancelled) {
  ASSERT_NO_FATAL_FAILURE(make_data_set());
  const json types = tide_json(3, {"job", "types", "list"});
  ASSERT_EQ(types["types"].size(), 2u) << types.dump();
  EXPECT_EQ(types["types"][0]["name"], "SmartPools");
  EXPECT_EQ(types["types"][0]["schedule"], "every day at 22:00");
  EXPECT_EQ(types["types"][0]["priority"], 6);

  // At LOW impact (200 files a second) the walk takes about four seconds.
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
  std::this_thread::sleep_for(1s);
  const std::uint64_t scanned_while_paused = job(1, id)["progress"]["files_scanned"];
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
  EXPECT_EQ(pattern_of(survivor, "/ifs/data/r599.rec"), "streaming");
}

}  // namespace
}  // namespace tidepool::test
