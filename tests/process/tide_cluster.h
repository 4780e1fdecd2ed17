// A cluster of real tided processes formed with the real `tide` CLI, for the process tests
// that need several nodes: the nodes, a work directory for tide's credentials, and tide itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tests/process/cluster.h"
#include "tests/process/nfs_client.h"

namespace tidepool::test {

struct Ran {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs `program` with `args` through the shell, output captured; bounded by `timeout`.
Ran run(const std::string& program, const std::vector<std::string>& args,
        std::chrono::seconds timeout = std::chrono::seconds(60));

class TideCluster {
 public:
  // Changes node `id`'s options before it is made (its address, its network namespace...).
  using Placement = std::function<void(std::size_t id, NodeOptions& options)>;

  // Nodes 1..pools.size() (node k in pools[k-1]) of the cluster `name`, exporting /ifs, with
  // `extra_toml` appended to each node's configuration and `node_toml` to its [node] table;
  // none started yet.
  TideCluster(std::string name, const std::vector<std::string>& pools, std::string tag,
              const std::string& extra_toml = "", const std::string& node_toml = "",
              const Placement& place = {});
  ~TideCluster();

  // Which nodes exited on their own (crashed), with how and their logs' tails; "" if none.
  // The destructor fails the test if any did.
  std::string crashed_nodes();
  // Starts every node (false with *error naming the node if one does not start).
  bool start(std::string* error);
  // `tide cluster create` on node 1, then `add-node` for every other; gtest failures if not.
  // SmartPools' schedule is cleared first thing, so that the only jobs that run are those the
  // test starts: its daily 22:00 UTC start would otherwise land in whichever test runs then.
  void form() { form(size()); }
  // The same with nodes 1..`members` only: the others stay out of the cluster.
  void form(std::size_t members);
  // start() and form(), then waits (bounded) until every node serves the namespace; gtest
  // failures if not.
  void start_serving();
  // A tier `hot-tier` of `pool`, made the default policy's storage target through node 1, so
  // that new files go to that pool; gtest failures if not.
  void place_new_files_in(const std::string& pool);
  // The default policy's storage target made `anywhere`, so that new files keep their data
  // with their shard (on its home and mirror) rather than in node 1's pool, a new cluster's
  // default; gtest failures if not.
  void keep_new_files_with_their_shard();

  std::size_t size() const { return nodes_.size(); }
  TidedNode& node(std::size_t id) { return *nodes_.at(id - 1); }
  std::string admin(std::size_t id) const { return nodes_.at(id - 1)->endpoint().address + ":8080"; }
  const std::filesystem::path& workdir() const { return workdir_; }
  // Where node `id` keeps the setup secret it made at its first start.
  std::string setup_secret_file(std::size_t id);

  // `tide` with the cluster's work directory, through node `via`.
  Ran tide(std::size_t via, std::vector<std::string> args);
  // The same with --format json, parsed (gtest failure if it fails or does not parse).
  nlohmann::json tide_json(std::size_t via, std::vector<std::string> args);
  // "up", "down", "absent" or "error: ..." for node `id`, as `tide status` through `via` says.
  std::string state_of(std::size_t via, std::uint64_t id);
  // The root handle of /ifs through node `id`, once that node serves the cluster's namespace
  // (a node that just joined answers "retry later" until its view names the home); bounded,
  // a gtest failure and an empty handle if it never does.
  FileHandle root_via(std::size_t id);
  // The value of a counter or gauge in node `id`'s /metrics, named with its labels as they are
  // printed there (`name{reason="x"}`); gtest failure and -1 if it cannot be read.
  std::int64_t metric(std::size_t id, const std::string& name);
  // Node `id`'s answer to GET `path` on its admin API, as {HTTP status, body}; {0, why} if
  // none came.
  std::pair<unsigned, std::string> admin_get(std::size_t id, const std::string& path);
  // Waits (bounded by `limit`) until `tide status` through `via` shows the nodes this test runs
  // up and no others, every shard of the namespace served by a home with an in-step mirror,
  // and nothing left to move; returns each
  // shard's {home, mirror}, or none with a gtest failure.
  using ShardPlace = std::pair<std::uint64_t, std::uint64_t>;
  std::vector<ShardPlace> wait_for_every_shard(std::size_t via, std::chrono::seconds limit);
  // As wait_for_every_shard, for a namespace of one shard: its {home, mirror}, or {0, 0}.
  ShardPlace wait_for_full_protection(std::size_t via, std::chrono::seconds limit);

 private:
  std::string name_;
  std::filesystem::path workdir_;
  std::vector<std::unique_ptr<TidedNode>> nodes_;
};

}  // namespace tidepool::test
