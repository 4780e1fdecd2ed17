// The cluster layer and admin plane end to end: three real tided processes formed into a
// cluster with the real `tide` CLI; configuration made through one node is read through
// another; a killed node is seen down and comes back with the same configuration. Also the
// refusals of the admin plane: no token, a data directory of another cluster, an address in
// use.
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/process/cluster.h"

namespace tidepool::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct Ran {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// Runs `program` with `args` through the shell, output captured; bounded by `timeout`.
Ran run(const std::string& program, const std::vector<std::string>& args,
        std::chrono::seconds timeout = 60s) {
  std::string command = "timeout " + std::to_string(timeout.count()) + " " + quoted(program);
  for (const std::string& a : args) command += " " + quoted(a);
  command += " 2>&1";
  Ran ran;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return ran;
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) ran.output.append(buffer, n);
  const int status = ::pclose(pipe);
  ran.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return ran;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "no '" << from << "' in:\n" << text;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

class ClusterAdminTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (tide_path().empty()) GTEST_SKIP() << "no tide binary in this build";
    workdir_ = fs::temp_directory_path() / ("tidepool-cluster-admin-" + std::to_string(::getpid()));
    fs::create_directories(workdir_);
    const char* pools[] = {"f800", "f800", "h500"};
    for (std::uint32_t id = 1; id <= 3; ++id) {
      NodeOptions options;
      options.node_id = id;
      options.pool = pools[id - 1];
      options.exports = {ExportSpec{.path = "/ifs"}};
      options.extra_toml = "[cluster]\nname = \"lab\"\n";
      nodes_.push_back(std::make_unique<TidedNode>(options));
      std::string error;
      ASSERT_TRUE(nodes_.back()->start(&error)) << "node " << id << ": " << error;
    }
  }

  void TearDown() override {
    nodes_.clear();
    std::error_code ignored;
    fs::remove_all(workdir_, ignored);
  }

  std::string admin(std::size_t node) const { return node_(node).endpoint().address + ":8080"; }
  const TidedNode& node_(std::size_t node) const { return *nodes_.at(node - 1); }
  TidedNode& node(std::size_t node) { return *nodes_.at(node - 1); }

  // `tide` with the test's work directory, through node `via`.
  Ran tide(std::size_t via, std::vector<std::string> args) {
    std::vector<std::string> all{"--workdir", workdir_.string(), "--cluster", admin(via)};
    all.insert(all.end(), args.begin(), args.end());
    return run(tide_path(), all);
  }

  json tide_json(std::size_t via, std::vector<std::string> args) {
    args.push_back("--format");
    args.push_back("json");
    const Ran ran = tide(via, args);
    EXPECT_EQ(ran.exit_code, 0) << ran.output;
    json parsed = json::parse(ran.output, nullptr, false);
    EXPECT_FALSE(parsed.is_discarded()) << ran.output;
    return parsed;
  }

  void form_cluster() {
    Ran created = run(tide_path(), {"--workdir", workdir_.string(), "cluster", "create", "lab",
                                    "--node", admin(1)});
    ASSERT_EQ(created.exit_code, 0) << created.output << node(1).log_tail();
    for (std::size_t id = 2; id <= 3; ++id) {
      Ran added = tide(1, {"cluster", "add-node", admin(id)});
      ASSERT_EQ(added.exit_code, 0) << added.output << node(1).log_tail() << node(id).log_tail();
    }
  }

  std::string state_of(std::size_t via, std::uint64_t id) {
    const Ran ran = tide(via, {"status", "--format", "json"});
    const json status = json::parse(ran.output, nullptr, false);
    if (ran.exit_code != 0 || !status.is_object()) return "error: " + ran.output;
    for (const json& n : status["nodes"]) {
      if (n["id"] == id) return n["state"];
    }
    return "absent";
  }

  fs::path workdir_;
  std::vector<std::unique_ptr<TidedNode>> nodes_;
};

TEST_F(ClusterAdminTest, ATierMadeThroughOneNodeIsReadThroughAnotherAndSurvivesANodeKill) {
  ASSERT_NO_FATAL_FAILURE(form_cluster());
  const json status = tide_json(3, {"status"});
  ASSERT_EQ(status["nodes"].size(), 3u) << status.dump();
  EXPECT_EQ(status["name"], "lab");

  Ran tier = tide(1, {"storagepool", "tiers", "create", "hot-tier", "--children", "f800"});
  ASSERT_EQ(tier.exit_code, 0) << tier.output;
  const json seen = tide_json(3, {"storagepool", "tiers", "view", "hot-tier"});
  EXPECT_EQ(seen["children"], json::array({"f800"})) << seen.dump();
  const json pools = tide_json(3, {"storagepool", "nodepools", "view", "f800"});
  EXPECT_EQ(pools["tier"], "hot-tier") << pools.dump();
  EXPECT_EQ(pools["nodes"], json::array({1, 2})) << pools.dump();

  node(2).kill();
  const auto killed_at = Clock::now();
  std::string state;
  while (Clock::now() - killed_at < 15s) {
    state = state_of(1, 2);
    if (state == "down") break;
    std::this_thread::sleep_for(200ms);
  }
  const auto seen_down_after = Clock::now() - killed_at;
  ASSERT_EQ(state, "down") << node(1).log_tail();
  std::printf("node 2 seen down %lld ms after SIGKILL\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(seen_down_after).count()));
  EXPECT_LE(seen_down_after, 5s) << "node 2 was seen down only after "
                                 << std::chrono::duration_cast<std::chrono::milliseconds>(
                                        seen_down_after)
                                        .count()
                                 << " ms";

  std::string error;
  ASSERT_TRUE(node(2).start(&error)) << error;
  const auto restarted_at = Clock::now();
  while (Clock::now() - restarted_at < 15s && state_of(1, 2) != "up") {
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_EQ(state_of(1, 2), "up");
  const json after = tide_json(2, {"storagepool", "tiers", "view", "hot-tier"});
  EXPECT_EQ(after["children"], json::array({"f800"})) << after.dump();
}

TEST_F(ClusterAdminTest, ExportsLiveInTheClusterConfigurationAndReachEveryNode) {
  ASSERT_NO_FATAL_FAILURE(form_cluster());
  Ran made = tide(2, {"nfs", "exports", "create", "/ifs", "--clients", "10.9.0.0/16"});
  EXPECT_NE(made.exit_code, 0) << "a second export of /ifs must be refused: " << made.output;
  const json exports = tide_json(3, {"nfs", "exports", "list"});
  ASSERT_EQ(exports["exports"].size(), 1u) << exports.dump();
  EXPECT_EQ(exports["exports"][0]["path"], "/ifs");
  Ran modified = tide(3, {"nfs", "exports", "modify", "1", "--read-only", "true"});
  ASSERT_EQ(modified.exit_code, 0) << modified.output;
  EXPECT_EQ(tide_json(1, {"nfs", "exports", "view", "1"})["read_only"], true);
}

TEST_F(ClusterAdminTest, RefusalsAreClearAndChangeNothing) {
  ASSERT_NO_FATAL_FAILURE(form_cluster());
  Ran forged = run(tide_path(), {"--workdir", workdir_.string(), "--cluster", admin(1), "--token",
                                 "not-the-token", "storagepool", "tiers", "create", "t",
                                 "--children", "h500"});
  EXPECT_EQ(forged.exit_code, 1) << forged.output;
  EXPECT_NE(forged.output.find("token"), std::string::npos) << forged.output;
  EXPECT_TRUE(tide_json(1, {"storagepool", "tiers", "list"})["tiers"].empty());

  Ran bad_pool = tide(1, {"storagepool", "tiers", "create", "t", "--children", "nope"});
  EXPECT_EQ(bad_pool.exit_code, 1);
  EXPECT_NE(bad_pool.output.find("no node pool 'nope'"), std::string::npos) << bad_pool.output;

  Ran unreachable = run(tide_path(), {"--workdir", workdir_.string(), "--cluster",
                                      "127.0.0.1:1", "status"});
  EXPECT_EQ(unreachable.exit_code, 1) << unreachable.output;
  EXPECT_NE(unreachable.output.find("cannot reach"), std::string::npos) << unreachable.output;

  // Node 3's data directory under a configuration naming another cluster.
  node(3).stop();
  const fs::path other = workdir_ / "other.toml";
  std::ofstream(other) << replaced(read_text(node(3).config_path()), "name = \"lab\"",
                                   "name = \"other\"");
  Ran refused = run(tided_path(), {"--config", other.string()}, 20s);
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("belongs to cluster 'lab', not 'other'"), std::string::npos)
      << refused.output;

  // A new node on node 1's addresses.
  const fs::path twin = workdir_ / "twin.toml";
  std::ofstream(twin) << replaced(read_text(node(1).config_path()),
                                  "data_dir = \"" + node(1).data_dir() + "\"",
                                  "data_dir = \"" + (workdir_ / "twin").string() + "\"");
  Ran in_use = run(tided_path(), {"--config", twin.string()}, 20s);
  EXPECT_EQ(in_use.exit_code, 1) << in_use.output;
  EXPECT_NE(in_use.output.find("in use"), std::string::npos) << in_use.output;
  EXPECT_TRUE(node(1).running());
}

}  // namespace
}  // namespace tidepool::test
