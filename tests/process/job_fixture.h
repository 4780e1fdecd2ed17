// What the process tests of the job engine share (job_test, migration_test): four real tided
// processes (two f800 nodes, two h500), driven with the real `tide` CLI.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tests/process/nfs_client.h"
#include "tests/process/tide_cluster.h"

namespace tidepool::test {

inline bool has_ended(const nlohmann::json& job) {
  return job["state"] == "succeeded" || job["state"] == "failed" || job["state"] == "cancelled";
}

class JobFixture : public ::testing::Test {
 protected:
  using json = nlohmann::json;
  using Clock = std::chrono::steady_clock;

  void SetUp() override {
    if (tide_path().empty()) GTEST_SKIP() << "no tide binary in this build";
    // Checkpoints every second, not five: what the tests wait to see of a running job shows
    // sooner, and a job taken up elsewhere loses less.
    cluster_ = std::make_unique<TideCluster>(
        "jobs", std::vector<std::string>{"f800", "f800", "h500", "h500"}, "job",
        "[jobs]\ncheckpoint_interval = \"1s\"\nretry_after = \"1s\"\n");
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
                std::chrono::seconds bound = std::chrono::seconds(60)) {
    json seen;
    for (const auto deadline = Clock::now() + bound; Clock::now() < deadline;) {
      const Ran viewed = tide(via, {"job", "jobs", "view", std::to_string(id), "--format", "json"});
      if (viewed.exit_code == 0) {
        seen = json::parse(viewed.output, nullptr, false);
        if (!seen.is_discarded() && done(seen)) return seen;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
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

}  // namespace tidepool::test
