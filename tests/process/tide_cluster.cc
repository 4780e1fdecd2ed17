#include "tests/process/tide_cluster.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <thread>

#include "cli/https_transport.h"

namespace tidepool::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

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

}  // namespace

Ran run(const std::string& program, const std::vector<std::string>& args,
        std::chrono::seconds timeout) {
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

TideCluster::TideCluster(std::string name, const std::vector<std::string>& pools, std::string tag,
                         const std::string& extra_toml, const std::string& node_toml,
                         const Placement& place)
    : name_(std::move(name)),
      workdir_(fs::temp_directory_path() / ("tidepool-" + tag + "-" + std::to_string(::getpid()))) {
  fs::create_directories(workdir_);
  for (std::size_t i = 0; i < pools.size(); ++i) {
    NodeOptions options;
    options.node_id = static_cast<std::uint32_t>(i + 1);
    options.pool = pools[i];
    options.node_toml = node_toml;
    options.exports = {ExportSpec{.path = "/ifs", .root_squash = false}};
    options.extra_toml = "[cluster]\nname = \"" + name_ + "\"\n" + extra_toml;
    if (place) place(i + 1, options);
    nodes_.push_back(std::make_unique<TidedNode>(options));
  }
}

TideCluster::~TideCluster() {
  const std::string crashed = crashed_nodes();
  EXPECT_TRUE(crashed.empty()) << crashed;
  // Node 1 made the cluster and homes shard 0: it stops first, so that its shard's last flush
  // reaches a mirror still serving (stopped with the others at once, it waited 5 s for a
  // mirror gone and 5 s more for a group without a majority). The rest stop together.
  if (!nodes_.empty()) nodes_.front()->stop();
  for (const auto& node : nodes_) node->ask_to_stop();
  nodes_.clear();
  std::error_code ignored;
  if (!keep_test_dirs()) fs::remove_all(workdir_, ignored);
}

std::string TideCluster::crashed_nodes() {
  std::string report;
  for (std::size_t id = 1; id <= size(); ++id) {
    if (!node(id).running() && node(id).exited_unasked()) {
      report += "node " + std::to_string(id) + " exited on its own (" +
                node(id).exit_description() + "); its log ends:\n" + node(id).log_tail() + "\n";
    }
  }
  return report;
}

bool TideCluster::start(std::string* error) {
  for (std::size_t id = 1; id <= nodes_.size(); ++id) {
    if (!node(id).start(error)) {
      *error = "node " + std::to_string(id) + ": " + *error;
      return false;
    }
  }
  return true;
}

void TideCluster::form(std::size_t members) {
  Ran created = run(tide_path(), {"--workdir", workdir_.string(), "cluster", "create", name_,
                                  "--node", admin(1), "--setup-secret-file", setup_secret_file(1)});
  // What tide said goes last: a report cut short keeps its end.
  ASSERT_EQ(created.exit_code, 0) << node(1).log_tail()
                                  << "\ntide cluster create: " << created.output;
  // A cluster is made with its first node in it: what comes next may name that node's pool.
  const json made = tide_json(1, {"status"});
  ASSERT_EQ(made["nodes"].size(), 1u) << made.dump();
  Ran unscheduled = tide(1, {"job", "types", "modify", "SmartPools", "--clear-schedule"});
  ASSERT_EQ(unscheduled.exit_code, 0)
      << node(1).log_tail() << "\ntide job types modify: " << unscheduled.output;
  for (std::size_t id = 2; id <= members; ++id) {
    Ran added =
        tide(1, {"cluster", "add-node", admin(id), "--setup-secret-file", setup_secret_file(id)});
    ASSERT_EQ(added.exit_code, 0) << "--- node 1\n"
                                  << node(1).log_tail() << "\n--- node " << id << "\n"
                                  << node(id).log_tail() << "\ntide cluster add-node " << admin(id)
                                  << ": " << added.output;
  }
}

std::string TideCluster::setup_secret_file(std::size_t id) {
  return node(id).data_dir() + "/setup-secret";
}

Ran TideCluster::tide(std::size_t via, std::vector<std::string> args) {
  std::vector<std::string> all{"--workdir", workdir_.string(), "--cluster", admin(via)};
  all.insert(all.end(), args.begin(), args.end());
  return run(tide_path(), all);
}

json TideCluster::tide_json(std::size_t via, std::vector<std::string> args) {
  args.push_back("--format");
  args.push_back("json");
  const Ran ran = tide(via, args);
  EXPECT_EQ(ran.exit_code, 0) << ran.output;
  json parsed = json::parse(ran.output, nullptr, false);
  EXPECT_FALSE(parsed.is_discarded()) << ran.output;
  return parsed;
}

std::string TideCluster::state_of(std::size_t via, std::uint64_t id) {
  const Ran ran = tide(via, {"status", "--format", "json"});
  const json status = json::parse(ran.output, nullptr, false);
  if (ran.exit_code != 0 || !status.is_object()) return "error: " + ran.output;
  for (const json& n : status["nodes"]) {
    if (n["id"] == id) return n["state"];
  }
  return "absent";
}

std::pair<unsigned, std::string> TideCluster::admin_get(std::size_t id, const std::string& path) {
  cli::ConnectionSettings settings;
  settings.addresses = {cli::AdminAddress{node(id).endpoint().address}};
  settings.timeout = std::chrono::seconds(10);
  auto transport = cli::make_https_transport(settings);
  if (!transport.ok()) return {0, transport.status().to_string()};
  auto reply = (*transport)->send(cli::Method::get, path, "");
  if (!reply.ok()) return {0, reply.status().to_string()};
  return {reply->status, reply->body};
}

std::int64_t TideCluster::metric(std::size_t id, const std::string& name) {
  const auto [status, body] = admin_get(id, "/metrics");
  EXPECT_EQ(status, 200u) << body;
  if (status != 200) return -1;
  std::istringstream lines(body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + " ", 0) == 0) return std::stoll(line.substr(name.size() + 1));
  }
  ADD_FAILURE() << "no " << name << " in the metrics of node " << id << ":\n" << body;
  return -1;
}

FileHandle TideCluster::root_via(std::size_t id) {
  using namespace std::chrono_literals;
  const Endpoint& via = node(id).endpoint();
  for (const auto deadline = std::chrono::steady_clock::now() + 20s;
       std::chrono::steady_clock::now() < deadline;) {
    MountClient mount(via);
    MountResult m = mount.connected() ? mount.mnt("/ifs") : MountResult{};
    if (m.status == MNT3_OK && NfsClient(via).getattr(m.fh).status == NFS3_OK) return m.fh;
    std::this_thread::sleep_for(200ms);
  }
  ADD_FAILURE() << "node " << id << " never served /ifs\n" << node(id).log_tail();
  return {};
}

TideCluster::ShardPlace TideCluster::wait_for_full_protection(std::size_t via,
                                                              std::chrono::seconds limit) {
  const std::vector<ShardPlace> places = wait_for_every_shard(via, limit);
  return places.empty() ? ShardPlace{0, 0} : places.front();
}

std::vector<TideCluster::ShardPlace> TideCluster::wait_for_every_shard(std::size_t via,
                                                                       std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    // A node that crashed would be settled around as down: that is a failure, not a place.
    if (const std::string crashed = crashed_nodes(); !crashed.empty()) {
      ADD_FAILURE() << crashed;
      return {};
    }
    // A node that just started answers only once it has caught up with the view.
    const Ran ran = tide(via, {"status", "--format", "json"});
    const nlohmann::json status = nlohmann::json::parse(ran.output, nullptr, false);
    last = ran.output;
    if (ran.exit_code == 0 && !status.is_discarded()) {
      const nlohmann::json& where = status["namespace"];
      const nlohmann::json shards = where.value("shards", nlohmann::json::array());
      bool served = where.value("settled", false) && !shards.empty();
      // Settled as the view has the nodes: the one this test started, and no other, up.
      for (const nlohmann::json& listed : status.value("nodes", nlohmann::json::array())) {
        const std::uint64_t id = listed.value("id", std::uint64_t{0});
        const bool running = id >= 1 && id <= size() && node(id).running();
        served = served && (listed.value("state", "") == "up") == running;
      }
      for (const nlohmann::json& shard : shards) {
        served = served && shard["state"] == "serving" && shard["mirror_state"] == "in step";
      }
      if (served) {
        std::vector<ShardPlace> places;
        for (const nlohmann::json& shard : shards) {
          places.emplace_back(shard["home"].get<std::uint64_t>(),
                              shard["mirror"].get<std::uint64_t>());
        }
        return places;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  std::string logs;
  for (std::size_t id = 1; id <= size(); ++id) {
    if (node(id).running()) logs += "\n--- node " + std::to_string(id) + "\n" + node(id).log_tail();
  }
  ADD_FAILURE() << "never fully protected: " << last << logs;
  return {};
}

void TideCluster::place_new_files_in(const std::string& pool) {
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"storagepool", "tiers", "create", "hot-tier", "--children", pool},
        {"filepool", "default-policy", "modify", "--data-storage-target", "hot-tier"}}) {
    const Ran ran = tide(1, command);
    ASSERT_EQ(ran.exit_code, 0) << ran.output;
  }
}

void TideCluster::keep_new_files_with_their_shard() {
  const Ran ran =
      tide(1, {"filepool", "default-policy", "modify", "--data-storage-target", "anywhere"});
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
}

void TideCluster::start_serving() {
  std::string error;
  ASSERT_TRUE(start(&error)) << error;
  ASSERT_NO_FATAL_FAILURE(form());
  for (std::size_t id = 1; id <= size(); ++id) ASSERT_FALSE(root_via(id).empty());
}

}  // namespace tidepool::test
