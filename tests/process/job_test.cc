// The job engine end to end (issue 7): four real tided processes (two f800 nodes, two h500),
// files made over NFS, file pool policies and jobs driven with the real `tide` CLI. A SmartPools
// job applies the policies' access patterns; it can be paused, resumed and cancelled; a second
// start of a running type is refused; when the node coordinating it is killed, another takes it
// up from its checkpoint; and it moves files between the hot and the cold tier as the seeds'
// walk-through does, their data intact.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <utility>
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
constexpr int kDataFiles = 1500;
constexpr int kLogFiles = 500;

bool has_ended(const json& job) {
  return job["state"] == "succeeded" || job["state"] == "failed" || job["state"] == "cancelled";
}

class JobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (tide_path().empty()) GTEST_SKIP() << "no tide binary in this build";
    cluster_ = std::make_unique<TideCluster>(
        "jobs", std::vector<std::string>{"f800", "f800", "h500", "h500"}, "job");
    std::string error;
    ASSERT_TRUE(cluster_->start(&error)) << error;
    ASSERT_NO_FATAL_FAILURE(cluster_->form());
  }
  void TearDown() override { cluster_.reset(); }

  Ran tide(std::size_t via, std::vector<std::string> args) { return cluster_->tide(via, args); }
  json tide_json(std::size_t via, std::vector<std::string> args) {
    return cluster_->tide_json(via, args);
  }

  FileHandle root_via(std::size_t id) { return cluster_->root_via(id); }

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

  // The pool `tide get -D` names for the file's data, and every node holding a unit of it.
  std::pair<std::string, std::set<std::uint64_t>> placement_of(std::size_t via,
                                                               const std::string& path) {
    const json file = tide_json(via, {"get", "-D", path});
    std::set<std::uint64_t> nodes;
    for (const json& run : file.value("stripe_units", json::array())) {
      for (const json& node : run["nodes"]) nodes.insert(node.get<std::uint64_t>());
    }
    return {file.contains("layout") ? file["layout"]["pool"].get<std::string>() : "", nodes};
  }

  // Runs SmartPools to its end through `via` (bounded); the job as it ended.
  json run_smartpools(std::size_t via) {
    const std::uint64_t id = start(via, {"SmartPools", "--policy", "HIGH"});
    return wait_for(via, id, has_ended);
  }

  std::string pattern_of(std::size_t via, const std::string& path) {
    const json file = tide_json(via, {"get", "-D", path});
    return file.contains("layout") ? file["layout"]["access_pattern"].get<std::string>() : "";
  }

  std::unique_ptr<TideCluster> cluster_;
};


TEST_F(JobTest, SmartPoolsAppliesThePoliciesAndCanBePausedResumedAndCancelled) {
  ASSERT_NO_FATAL_FAILURE(make_data_set());
  const json types = tide_json(3, {"job", "types", "list"});
  ASSERT_EQ(types["types"].size(), 2u) << types.dump();
  EXPECT_EQ(types["types"][0]["name"], "SmartPools");
  EXPECT_EQ(types["types"][0]["schedule"], "every day at 22:00");
  EXPECT_EQ(types["types"][0]["priority"], 6);

  // At LOW impact (200 files a second) the walk takes about ten seconds.
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
  EXPECT_EQ(pattern_of(survivor, "/ifs/data/r1499.rec"), "streaming");
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

  json job = run_smartpools(1);
  ASSERT_EQ(job["state"], "succeeded") << job.dump();
  EXPECT_EQ(job["progress"]["files_moved"], 3) << job.dump();
  for (int i = 0; i < 3; ++i) {
    const auto [pool, nodes] = placement_of(4, "/ifs/walkthrough/f" + std::to_string(i));
    EXPECT_EQ(pool, "f800");
    EXPECT_EQ(nodes, (std::set<std::uint64_t>{1, 2})) << "on the f800 nodes";
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

// A file being moved stays readable and writable: a client writes and reads it through another
// node for as long as the move takes, and every read returns what was last written.
TEST_F(JobTest, AFileBeingMovedStaysReadableAndWritable) {
  ASSERT_EQ(tide(1, {"storagepool", "tiers", "create", "cold-tier", "--children", "h500"}).exit_code, 0);
  const Ran made = tide(1, {"filepool", "policies", "create", "big", "--filter",
                            "name =~ big.bin", "--data-storage-target", "cold-tier"});
  ASSERT_EQ(made.exit_code, 0) << made.output;
  constexpr std::size_t kSize = 48u << 20;
  constexpr std::size_t kPiece = 64u << 10;
  const FileHandle root = root_via(2);
  ASSERT_FALSE(root.empty());
  NfsClient writer(cluster_->node(2).endpoint());
  const FileHandle file = writer.make_file(root, "big.bin");
  std::string model(kSize, '\0');
  for (std::size_t at = 0; at < kSize; at += 1u << 20) {
    for (std::size_t b = 0; b < (1u << 20); ++b) model[at + b] = static_cast<char>((at / 4096 + b) % 253);
    ASSERT_EQ(writer.write(file, at, std::string_view(model).substr(at, 1u << 20), UNSTABLE).status, NFS3_OK);
  }
  ASSERT_EQ(writer.commit(file).status, NFS3_OK);

  const std::uint64_t id = start(1, {"SmartPoolsTree", "--paths", "/ifs/big.bin", "--policy", "HIGH"});
  ASSERT_NE(id, 0u);
  NfsClient client(cluster_->node(3).endpoint());
  std::mt19937 random(7);
  int rounds = 0;
  json seen;
  for (const auto deadline = Clock::now() + 90s; Clock::now() < deadline; ++rounds) {
    const std::size_t at = random() % (kSize / kPiece) * kPiece;
    std::string piece(kPiece, static_cast<char>('a' + rounds % 26));
    const WriteResult written = client.write(file, at, piece, FILE_SYNC);
    ASSERT_EQ(written.status, NFS3_OK) << "write " << rounds << " at " << at;
    model.replace(at, kPiece, piece);
    const std::size_t check = random() % (kSize / kPiece) * kPiece;
    const ReadResult read = client.read(file, check, kPiece);
    ASSERT_EQ(read.status, NFS3_OK) << "read " << rounds << " at " << check;
    ASSERT_EQ(read.data, model.substr(check, kPiece)) << "read " << rounds << " at " << check;
    if (rounds % 8 == 0) {
      seen = job(2, id);
      if (has_ended(seen)) break;
    }
  }
  EXPECT_EQ(seen["state"], "succeeded") << seen.dump();
  EXPECT_EQ(seen["progress"]["files_moved"], 1) << seen.dump();
  EXPECT_GT(rounds, 0);
  EXPECT_EQ(placement_of(4, "/ifs/big.bin").first, "h500");
  NfsClient reader(cluster_->node(4).endpoint());
  EXPECT_TRUE(reader.read_all(file, 1u << 20) == model) << "the whole file as last written";
}

}  // namespace
}  // namespace tidepool::test
