// The cluster layer and admin plane end to end: three real tided processes formed into a
// cluster with the real `tide` CLI; configuration made through one node is read through
// another; a killed node is seen down and comes back with the same configuration. Also the
// refusals of the admin plane: no token, a data directory of another cluster, an address in
// use; the statistics of what a node's NFS clients do; file pool policies; a removed node's
// certificate used against the backend.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "cluster/group_client.h"
#include "cluster/internal/config_db.h"
#include "cluster/rpc.h"
#include "cluster/tcp_transport.h"
#include "common/callback_awaitable.h"
#include "store/remote_store.h"
#include "tests/process/nfs_client.h"
#include "tests/process/tide_cluster.h"

namespace tidepool::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

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
    cluster_ = std::make_unique<TideCluster>("lab", std::vector<std::string>{"f800", "f800", "h500"},
                                             "cluster-admin");
    std::string error;
    ASSERT_TRUE(cluster_->start(&error)) << error;
  }

  void TearDown() override { cluster_.reset(); }

  std::string admin(std::size_t node) const { return cluster_->admin(node); }
  TidedNode& node(std::size_t node) { return cluster_->node(node); }
  Ran tide(std::size_t via, std::vector<std::string> args) { return cluster_->tide(via, args); }
  json tide_json(std::size_t via, std::vector<std::string> args) {
    return cluster_->tide_json(via, args);
  }
  void form_cluster() { cluster_->form(); }
  std::string state_of(std::size_t via, std::uint64_t id) { return cluster_->state_of(via, id); }
  FileHandle root_via(std::size_t id) { return cluster_->root_via(id); }

  // Runs `command` (a tide command node 1 carries out) while node 1 is paused at a fail point,
  // which it logs as `paused`, and kills node 1 there: the command must fail.
  void kill_node_1_paused_at(const std::string& paused, const std::function<Ran()>& command) {
    Ran cut_short;
    std::thread running([&] { cut_short = command(); });
    for (const auto deadline = Clock::now() + 30s;
         node(1).log_tail(1 << 20).find(paused) == std::string::npos && Clock::now() < deadline;) {
      std::this_thread::sleep_for(50ms);
    }
    const bool reached = node(1).log_tail(1 << 20).find(paused) != std::string::npos;
    node(1).kill();
    running.join();
    ASSERT_TRUE(reached) << node(1).log_tail();
    EXPECT_NE(cut_short.exit_code, 0) << cut_short.output;
  }

  std::unique_ptr<TideCluster> cluster_;
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
  // Asked before it has caught up, the node says so; it never calls the token wrong.
  for (Ran asked = tide(2, {"status"}); asked.exit_code != 0; asked = tide(2, {"status"})) {
    EXPECT_EQ(asked.output.find("bearer token"), std::string::npos) << asked.output;
    ASSERT_LT(Clock::now() - restarted_at, 15s) << asked.output << node(2).log_tail();
    std::this_thread::sleep_for(100ms);
  }
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

TEST_F(ClusterAdminTest, StatisticsShowWhatANodesClientsDo) {
  ASSERT_NO_FATAL_FAILURE(form_cluster());
  const Endpoint& via = node(2).endpoint();
  const FileHandle root = root_via(2);
  ASSERT_FALSE(root.empty());

  // GETATTRs through node 2 until the rates show them (bounded).
  std::atomic<bool> stop = false;
  std::atomic<std::uint64_t> answered = 0;
  std::thread client([&] {
    NfsClient nfs(via);
    for (const auto deadline = Clock::now() + 30s; !stop && Clock::now() < deadline;) {
      if (nfs.getattr(root).status == NFS3_OK) ++answered;
    }
  });
  json pstat;
  for (const auto deadline = Clock::now() + 15s; Clock::now() < deadline;) {
    pstat = tide_json(1, {"statistics", "pstat", "--node", "2"});
    if (pstat["nfs"]["procedures"]["getattr"].get<std::uint64_t>() > 0) break;
    std::this_thread::sleep_for(300ms);
  }
  const json system = tide_json(3, {"statistics", "system"});
  stop = true;
  client.join();
  EXPECT_GT(pstat["nfs"]["procedures"]["getattr"].get<std::uint64_t>(), 0u) << pstat.dump();
  EXPECT_GT(pstat["cpu_percent"].get<double>(), 0.0) << pstat.dump();
  EXPECT_GT(pstat["network"]["out_bytes_per_second"].get<std::uint64_t>(), 0u) << pstat.dump();
  ASSERT_EQ(system["statistics"].size(), 3u) << system.dump();
  EXPECT_GE(system["total"]["nfs"]["ops_per_second"].get<std::uint64_t>(),
            pstat["nfs"]["procedures"]["getattr"].get<std::uint64_t>() / 4)
      << system.dump();

  // Every GETATTR answered is one call of this client's on node 2, counted by now.
  std::uint64_t counted = 0;
  const json clients = tide_json(1, {"statistics", "client"});
  for (const json& c : clients["clients"]) {
    if (c["node"] == 2) {
      counted += c["calls"].get<std::uint64_t>();
      EXPECT_GT(c["latency_max_us"].get<double>(), 0.0) << c.dump();
      EXPECT_LE(c["latency_average_us"].get<double>(), c["latency_max_us"].get<double>());
    }
  }
  EXPECT_GE(counted, answered.load()) << clients.dump();
  EXPECT_GE(cluster_->metric(2, "tidepool_nfs3_calls_total{procedure=\"getattr\"}"),
            static_cast<std::int64_t>(answered.load()));
  EXPECT_GE(cluster_->metric(2, "tidepool_process_cpu_microseconds_total"), 1);
  EXPECT_GT(answered.load(), 0u);
  const Ran text = tide(2, {"statistics", "client"});
  EXPECT_NE(text.output.find("Avg Latency"), std::string::npos) << text.output;
}

TEST_F(ClusterAdminTest, FilePoolPoliciesLiveInTheClusterAndExplainWhatAppliesToAFile) {
  ASSERT_NO_FATAL_FAILURE(form_cluster());
  ASSERT_EQ(
      tide(1, {"storagepool", "tiers", "create", "cold-tier", "--children", "h500"}).exit_code, 0);
  Ran made =
      tide(1, {"filepool", "policies", "create", "cold", "--begin-filter", "--accessed-time=30D",
               "--operator=gt", "--end-filter", "--data-storage-target", "cold-tier"});
  ASSERT_EQ(made.exit_code, 0) << made.output;
  made = tide(2, {"filepool", "policies", "create", "images", "--filter", "iname =~ *.jpg",
                  "--data-access-pattern", "random", "--set-requested-protection", "3x",
                  "--apply-order", "1"});
  ASSERT_EQ(made.exit_code, 0) << made.output;
  ASSERT_EQ(
      tide(3, {"filepool", "default-policy", "modify", "--data-storage-target", "f800"}).exit_code,
      0);
  const json listed = tide_json(3, {"filepool", "policies", "list"});
  ASSERT_EQ(listed["policies"].size(), 2u) << listed.dump();
  EXPECT_EQ(listed["policies"][0]["name"], "images");
  EXPECT_EQ(listed["policies"][1]["filter"], "accessed > 30d");
  EXPECT_EQ(listed["default"]["storage_target"], "f800");

  // A file read 60 days ago, and a new one, through node 2.
  const FileHandle root = root_via(2);
  ASSERT_FALSE(root.empty());
  NfsClient nfs(node(2).endpoint());
  const FileHandle old_file = nfs.make_file(root, "old.bin", 0644, "data");
  Sattr long_ago;
  long_ago.atime_how = SET_TO_CLIENT_TIME;
  long_ago.atime.seconds = static_cast<std::uint32_t>(std::time(nullptr) - 60 * 86400);
  ASSERT_EQ(nfs.setattr(old_file, long_ago).status, NFS3_OK);
  nfs.make_file(root, "new.txt", 0644, "data");

  const json cold = tide_json(1, {"filepool", "explain", "/ifs/old.bin"});
  EXPECT_EQ(cold["policy"], "cold") << cold.dump();
  EXPECT_EQ(cold["storage_target"]["value"], "cold-tier");
  EXPECT_EQ(cold["protection"]["from"], "default");
  const json fresh = tide_json(3, {"filepool", "explain", "/ifs/new.txt"});
  EXPECT_EQ(fresh["policy"], "default") << fresh.dump();
  EXPECT_EQ(fresh["storage_target"]["value"], "f800");

  Ran refused = tide(1, {"filepool", "policies", "create", "bad", "--filter", "size >> 1"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.output.find("filter: at column 7"), std::string::npos) << refused.output;
  refused = tide(1, {"filepool", "policies", "delete", "default", "--force"});
  EXPECT_NE(refused.output.find("the default policy cannot be deleted"), std::string::npos)
      << refused.output;
  refused = tide(1, {"filepool", "policies", "create", "cold", "--filter", "size > 1"});
  EXPECT_NE(refused.output.find("already exists"), std::string::npos) << refused.output;
  ASSERT_EQ(tide(2, {"filepool", "policies", "delete", "images", "--force"}).exit_code, 0);
  EXPECT_EQ(tide_json(1, {"filepool", "policies", "list"})["policies"].size(), 1u);
}

// A node in no cluster is made a member only by who has its setup secret: `create` with another
// node's secret (tide sees the node's proof fail, and sends it nothing) and `add-node` with
// another node's secret are refused and change nothing.
TEST_F(ClusterAdminTest, FormingAClusterNeedsEachNodesOwnSetupSecret) {
  const std::string workdir = cluster_->workdir().string();
  Ran foreign = run(tide_path(), {"--workdir", workdir, "cluster", "create", "lab", "--node",
                                  admin(1), "--setup-secret-file", cluster_->setup_secret_file(2)});
  EXPECT_EQ(foreign.exit_code, 1) << foreign.output;
  EXPECT_NE(foreign.output.find(admin(1) + " did not prove it knows the setup secret given"),
            std::string::npos)
      << foreign.output;
  EXPECT_FALSE(fs::exists(cluster_->workdir() / "tide.json"));

  Ran created = run(tide_path(), {"--workdir", workdir, "cluster", "create", "lab", "--node",
                                  admin(1), "--setup-secret-file", cluster_->setup_secret_file(1)});
  ASSERT_EQ(created.exit_code, 0) << created.output;
  Ran wrong = tide(1, {"cluster", "add-node", admin(2), "--setup-secret-file",
                       cluster_->setup_secret_file(3)});
  EXPECT_EQ(wrong.exit_code, 1) << wrong.output;
  EXPECT_NE(wrong.output.find(admin(2) + " did not prove it knows the setup secret given"),
            std::string::npos)
      << wrong.output;
  EXPECT_EQ(tide_json(1, {"status"})["nodes"].size(), 1u);

  Ran added = tide(1, {"cluster", "add-node", admin(2), "--setup-secret-file",
                       cluster_->setup_secret_file(2)});
  EXPECT_EQ(added.exit_code, 0) << added.output;
  EXPECT_EQ(tide_json(1, {"status"})["nodes"].size(), 2u);
}

// Rotated through one node, the old token is refused by every node, and the new one, which
// `tide` keeps in its credentials file, is taken by every node.
TEST_F(ClusterAdminTest, ARotatedTokenIsRefusedByEveryNode) {
  ASSERT_NO_FATAL_FAILURE(form_cluster());
  const fs::path credentials = cluster_->workdir() / "tide.json";
  const std::string old = json::parse(read_text(credentials.string()))["token"];
  Ran rotated = tide(1, {"cluster", "token", "rotate"});
  ASSERT_EQ(rotated.exit_code, 0) << rotated.output;
  EXPECT_NE(json::parse(read_text(credentials.string()))["token"], old);
  for (std::size_t via = 1; via <= 3; ++via) {
    // A node applies the change when it hears of it: the old token may work a moment longer.
    Ran refused;
    for (int attempt = 0; attempt < 50; ++attempt) {
      refused = run(tide_path(), {"--workdir", cluster_->workdir().string(), "--cluster",
                                  admin(via), "--token", old, "status"});
      if (refused.exit_code != 0) break;
      std::this_thread::sleep_for(100ms);
    }
    EXPECT_EQ(refused.exit_code, 1) << "through node " << via << ": " << refused.output;
    EXPECT_NE(refused.output.find("a valid bearer token is required"), std::string::npos)
        << refused.output;
    EXPECT_EQ(tide_json(via, {"status"})["nodes"].size(), 3u) << "through node " << via;
  }
}

// Speaks the backend protocol with the identity files a node keeps in DATA_DIR/cluster — what
// whoever holds a removed node's disk can do — claiming to be node `claimed`, listening at
// `listen` for the replies.
class BackendIntruder {
 public:
  BackendIntruder(cluster::NodeId claimed, const std::string& listen, const fs::path& identity) {
    loop_ = cluster::make_asio_event_loop(io_.get_executor());
    cluster::TcpTransportOptions options;
    options.self = claimed;
    options.listen_address = listen;
    options.tls =
        cluster::TlsFiles{(identity / "ca.pem").string(), (identity / "node.pem").string(),
                          (identity / "node.key").string()};
    auto started = cluster::TcpTransport::start(io_.get_executor(), *loop_, options);
    EXPECT_TRUE(started.ok()) << started.status().to_string();
    if (started.ok()) transport_ = std::move(started).value();
    // Stamped with an epoch no node has reached: no call is refused as behind.
    if (transport_) {
      rpc_ = std::make_unique<cluster::RpcEndpoint>(*loop_, *transport_,
                                                    [] { return cluster::Epoch{1} << 40; });
    }
    thread_ = std::thread([this] { io_.run(); });
  }
  ~BackendIntruder() {
    boost::asio::post(io_, boost::asio::use_future([this] { rpc_.reset(); })).get();
    transport_.reset();
    work_.reset();
    io_.stop();
    thread_.join();
  }

  // Calls `method` on node `node` at `address`: its reply, or why none came in four attempts of
  // a second.
  Result<xdr::Buffer> call(cluster::NodeId node, const std::string& address, std::uint32_t method,
                           xdr::Buffer request) {
    if (!rpc_) return error(Errc::unavailable, "no transport");
    auto calling = boost::asio::co_spawn(io_, send(node, address, method, std::move(request)),
                                         boost::asio::use_future);
    return calling.get();
  }

  // Ships `operation` on a store whose calls go to shard 0 at node `node`.
  template <typename Operation>
  auto on_shard_zero_of(cluster::NodeId node, const std::string& address, Operation operation) {
    using Awaitable = std::invoke_result_t<Operation, store::Store&>;
    auto channel = std::make_shared<Channel>(*this, node, address);
    auto run = [channel, operation]() -> Awaitable {
      std::unique_ptr<store::Store> store = store::make_remote_store(channel);
      co_return co_await operation(*store);
    };
    return boost::asio::co_spawn(io_, run, boost::asio::use_future).get();
  }

 private:
  class Channel final : public store::ShardChannel {
   public:
    Channel(BackendIntruder& intruder, cluster::NodeId node, std::string address)
        : intruder_(intruder), node_(node), address_(std::move(address)) {}
    boost::asio::awaitable<Result<xdr::Buffer>> call(store::StoreMethod method,
                                                     xdr::Buffer request) override {
      xdr::Buffer message;
      xdr::Encoder out(message);
      out.u32(0);
      message.insert(message.end(), request.begin(), request.end());
      co_return co_await intruder_.send(
          node_, address_, store::kStoreMethodBase + static_cast<std::uint32_t>(method),
          std::move(message));
    }

   private:
    BackendIntruder& intruder_;
    cluster::NodeId node_;
    std::string address_;
  };

  // As a node's own calls do, asks again when no answer came: the first replies may go into the
  // connection the callee still had to the node that stopped, and be lost with it.
  boost::asio::awaitable<Result<xdr::Buffer>> send(cluster::NodeId node, std::string address,
                                                   std::uint32_t method, xdr::Buffer request) {
    transport_->set_address(node, address);
    cluster::RpcEndpoint* rpc = rpc_.get();
    Result<xdr::Buffer> answer = error(Errc::timed_out, "not sent");
    for (int attempt = 0; attempt < 4 && answer.code() == Errc::timed_out; ++attempt) {
      answer = co_await await_callback<Result<xdr::Buffer>>(
          [rpc, node, method, &request](auto done) { rpc->call(node, method, request, 1s, done); });
    }
    co_return answer;
  }

  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_{
      io_.get_executor()};
  std::unique_ptr<cluster::EventLoop> loop_;
  std::unique_ptr<cluster::TcpTransport> transport_;
  std::unique_ptr<cluster::RpcEndpoint> rpc_;
  std::thread thread_;
};

// A removed node's certificate opens no door. With node 3's files, after node 3 was removed and
// stopped: a READ shipped as root, saying it is node 3, gets no answer; a proposal to delete the
// export, saying it is a member, changes nothing; the nodes count the connections refused.
// Before certificates named node ids and removal revoked them, both were carried out.
TEST_F(ClusterAdminTest, ARemovedNodesCertificateOpensNoDoor) {
  ASSERT_NO_FATAL_FAILURE(form_cluster());
  const FileHandle root = root_via(1);
  ASSERT_FALSE(root.empty());
  NfsClient nfs(node(1).endpoint());
  const FileHandle payroll = nfs.make_file(root, "payroll.txt", 0600, "salaries");
  ASSERT_FALSE(payroll.empty());

  const fs::path identity = fs::path(node(3).data_dir()) / "cluster";
  ASSERT_TRUE(fs::exists(identity / "node.key"));
  const json formed = tide_json(1, {"status"});
  std::map<std::uint64_t, std::string> backend;
  for (const json& member : formed["nodes"]) backend[member["id"]] = member["backend_address"];
  ASSERT_EQ(backend.size(), 3u) << formed.dump();
  auto backend_of = [&backend](std::uint64_t id) { return backend[id]; };
  Ran removed = tide(1, {"cluster", "remove-node", "--no-smartfail", "3"});
  ASSERT_EQ(removed.exit_code, 0) << removed.output;
  node(3).stop();
  const auto [home, mirror] = cluster_->wait_for_full_protection(1, 120s);
  ASSERT_NE(home, 0u);
  const json status = tide_json(1, {"status"});
  const std::uint64_t leader = status["leader"];
  ASSERT_TRUE(leader == 1 || leader == 2) << status.dump();
  const std::int64_t refused_before =
      cluster_->metric(home, "tidepool_backend_connections_refused_total") +
      (leader == home ? 0 : cluster_->metric(leader, "tidepool_backend_connections_refused_total"));

  {
    // Node 3's own id, at node 3's address, where the home would send its replies.
    BackendIntruder as_itself(3, backend_of(3), identity);
    const auto found = as_itself.on_shard_zero_of(home, backend_of(home), [](store::Store& s) {
      return s.lookup(store::kRootInode, "payroll.txt", store::Caller{.uid = 0, .gid = 0});
    });
    EXPECT_FALSE(found.ok()) << "a removed node looked up /ifs/payroll.txt on node " << home;
    if (found.ok()) {
      const store::InodeId inode = found->object.inode;
      const auto read =
          as_itself.on_shard_zero_of(home, backend_of(home), [inode](store::Store& s) {
            return s.read_pieces(inode, 0, 64, store::Caller{.uid = 0, .gid = 0});
          });
      EXPECT_FALSE(read.ok()) << "a removed node read /ifs/payroll.txt as root";
    }
  }
  {
    const cluster::NodeId member = leader == 1 ? 2 : 1;
    BackendIntruder as_member(member, "127.0.0.1:0", identity);
    xdr::Buffer proposal;
    xdr::Encoder out(proposal);
    cluster::internal::encode_change(cluster::Change::delete_object("export", "1"), out);
    // Its answer would go to the member it claims to be: what counts is whether it was applied.
    static_cast<void>(as_member.call(leader, backend_of(leader),
                                     cluster::GroupClient::kProposeMethod, std::move(proposal)));
  }
  const json exports = tide_json(1, {"nfs", "exports", "list"});
  ASSERT_EQ(exports["exports"].size(), 1u) << exports.dump();
  EXPECT_EQ(exports["exports"][0]["path"], "/ifs");
  const std::int64_t refused_after =
      cluster_->metric(home, "tidepool_backend_connections_refused_total") +
      (leader == home ? 0 : cluster_->metric(leader, "tidepool_backend_connections_refused_total"));
  EXPECT_GE(refused_after - refused_before, 2) << "the READ's connection and the proposal's";
  EXPECT_EQ(nfs.read_all(payroll), "salaries") << "the members carry on";
}

// A removed node learns it from the first member it calls, which refuses it for its revoked
// certificate: it stops serving NFS and the backend, says why in its log and on /health (the
// only admin path it still answers), so the members hear from it no more; and it does not start
// again. Before, it went on serving its clients and calling its old peers every ~2 s.
TEST_F(ClusterAdminTest, ARemovedNodeLearnsItWasRemovedAndStopsServing) {
  ASSERT_NO_FATAL_FAILURE(form_cluster());
  ASSERT_FALSE(root_via(3).empty());
  Ran removed = tide(1, {"cluster", "remove-node", "--no-smartfail", "3"});
  ASSERT_EQ(removed.exit_code, 0) << removed.output;

  json health;
  for (const auto deadline = Clock::now() + 30s; Clock::now() < deadline;) {
    const auto [status, body] = cluster_->admin_get(3, "/health");
    health = json::parse(body, nullptr, false);
    if (status == 503 && health.is_object() && health.value("status", "") == "removed") break;
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_TRUE(health.is_object() && health.value("status", "") == "removed")
      << health.dump() << "\n"
      << node(3).log_tail();
  EXPECT_EQ(health["cluster"], "lab");
  EXPECT_NE(health.value("reason", "").find("revoked"), std::string::npos) << health.dump();
  EXPECT_TRUE(node(3).running());
  EXPECT_NE(node(3).log_tail().find("this node was removed from cluster 'lab'"), std::string::npos)
      << node(3).log_tail();
  EXPECT_FALSE(MountClient(node(3).endpoint()).connected()) << "node 3 still serves NFS";
  const auto [status, refusal] = cluster_->admin_get(3, "/v1/cluster/nodes");
  EXPECT_EQ(status, 410u) << refusal;
  EXPECT_NE(refusal.find("removed from cluster 'lab'"), std::string::npos) << refusal;

  auto refused = [this] {
    return cluster_->metric(1, "tidepool_backend_connections_refused_total") +
           cluster_->metric(2, "tidepool_backend_connections_refused_total");
  };
  const std::int64_t refused_once = refused();
  EXPECT_GE(refused_once, 1) << "node 3 learnt it from a refusal";
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(refused(), refused_once) << "node 3 still calls its old peers";

  node(3).stop();
  Ran restarted = run(tided_path(), {"--config", node(3).config_path()}, 20s);
  EXPECT_EQ(restarted.exit_code, 1) << restarted.output;
  EXPECT_NE(restarted.output.find("removed from cluster 'lab'"), std::string::npos)
      << restarted.output;
  EXPECT_EQ(tide_json(1, {"status"})["nodes"].size(), 2u);
}

// The CA's private key is in no member's Raft log, snapshots or configuration database (it is
// kept sealed under the admin token), and any member adds a node with the token: here after the
// node that made the cluster is gone.
// An add cut short once the node joined — the member adding it killed there (fail point
// add_node_after_join) — leaves a node holding the certificate the cluster issued to it but in
// neither the view nor the group. The same add-node, run again, finishes the add: the node is
// up and serves the namespace.
TEST_F(ClusterAdminTest, AnAddCutShortAfterTheJoinIsFinishedByTheSameCommandRunAgain) {
  Ran created =
      run(tide_path(), {"--workdir", cluster_->workdir().string(), "cluster", "create", "lab",
                        "--node", admin(1), "--setup-secret-file", cluster_->setup_secret_file(1)});
  ASSERT_EQ(created.exit_code, 0) << created.output;
  ASSERT_EQ(tide(1, {"sysctl", "debug.fail_point.add_node_after_join=60s"}).exit_code, 0);
  const std::vector<std::string> add_node_2{"cluster", "add-node", admin(2), "--setup-secret-file",
                                            cluster_->setup_secret_file(2)};
  ASSERT_NO_FATAL_FAILURE(kill_node_1_paused_at("fail point add_node_after_join: node 2 joined",
                                                 [&] { return tide(1, add_node_2); }));

  std::string error;
  ASSERT_TRUE(node(1).start(&error)) << error;
  std::string state;
  for (int attempt = 0; attempt < 100; ++attempt) {
    state = state_of(1, 2);
    if (!state.starts_with("error")) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(state, "absent");
  ASSERT_EQ(tide(1, {"sysctl", "debug.fail_point.add_node_after_join=0"}).exit_code, 0);
  const Ran finished = tide(1, add_node_2);
  ASSERT_EQ(finished.exit_code, 0) << finished.output << node(1).log_tail();
  EXPECT_NE(finished.output.find("Added node 2"), std::string::npos) << finished.output;
  EXPECT_NE(node(1).log_tail(1 << 20).find("joined before: finishing its add"), std::string::npos);
  for (int attempt = 0; attempt < 300 && state_of(1, 2) != "up"; ++attempt) {
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(state_of(1, 2), "up");
  EXPECT_FALSE(root_via(2).empty());

  // A node in no cluster still needs its own setup secret.
  const Ran foreign = tide(
      1, {"cluster", "add-node", admin(3), "--setup-secret-file", cluster_->setup_secret_file(2)});
  EXPECT_NE(foreign.exit_code, 0) << foreign.output;
}

// Issue 45's crash-safe create: node 1 killed after `tide cluster create` made its group but
// before the cluster's records were written (fail point cluster_create_records, set in its
// configuration as no cluster exists yet) comes back in no cluster, the creation undone, and
// the same command then makes the cluster. Before, it came back with no node record and no
// namespace, and answered every MOUNT MNT3ERR_SERVERFAULT for ever.
TEST_F(ClusterAdminTest, ACreationCutShortIsUndoneAtTheNextStartAndTheCommandMakesItAgain) {
  node(1).stop();
  std::stringstream plain;
  plain << std::ifstream(node(1).config_path()).rdbuf();
  std::ofstream(node(1).config_path())
      << plain.str() << "\n[debug]\ncluster_create_pause = \"60s\"\n";
  std::string error;
  ASSERT_TRUE(node(1).start(&error)) << error;
  const std::vector<std::string> create{"--workdir",
                                        cluster_->workdir().string(),
                                        "cluster",
                                        "create",
                                        "lab",
                                        "--node",
                                        admin(1),
                                        "--setup-secret-file",
                                        cluster_->setup_secret_file(1)};
  ASSERT_NO_FATAL_FAILURE(kill_node_1_paused_at(
      "fail point cluster_create_records: cluster 'lab' made",
      [&] { return run(tide_path(), create); }));

  std::ofstream(node(1).config_path()) << plain.str();
  ASSERT_TRUE(node(1).start(&error)) << error;
  EXPECT_NE(node(1).log_tail().find("the creation of cluster 'lab' was cut short"),
            std::string::npos)
      << node(1).log_tail();
  const Ran made = run(tide_path(), create);
  ASSERT_EQ(made.exit_code, 0) << made.output << node(1).log_tail();
  const json status = tide_json(1, {"status"});
  ASSERT_EQ(status["nodes"].size(), 1u) << status.dump();
  EXPECT_FALSE(root_via(1).empty()) << "node 1 serves the new cluster's namespace";
}

TEST_F(ClusterAdminTest, NoMemberKeepsTheCasKeyAndAnyMemberAddsANode) {
  cluster_ = std::make_unique<TideCluster>(
      "lab", std::vector<std::string>{"f800", "f800", "f800", "f800"}, "ca-key");
  std::string error;
  ASSERT_TRUE(cluster_->start(&error)) << error;
  Ran created =
      run(tide_path(), {"--workdir", cluster_->workdir().string(), "cluster", "create", "lab",
                        "--node", admin(1), "--setup-secret-file", cluster_->setup_secret_file(1)});
  ASSERT_EQ(created.exit_code, 0) << created.output;
  for (std::size_t id : {2, 3}) {
    Ran added = tide(1, {"cluster", "add-node", admin(id), "--setup-secret-file",
                         cluster_->setup_secret_file(id)});
    ASSERT_EQ(added.exit_code, 0) << added.output;
  }
  node(1).stop();
  // As an administrator would, once the others lead without it.
  for (int attempt = 0; attempt < 300 && state_of(2, 1) != "down"; ++attempt) {
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(state_of(2, 1), "down");
  Ran added = tide(
      2, {"cluster", "add-node", admin(4), "--setup-secret-file", cluster_->setup_secret_file(4)});
  ASSERT_EQ(added.exit_code, 0) << added.output;
  for (int attempt = 0; attempt < 300 && state_of(3, 4) != "up"; ++attempt) {
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(state_of(3, 4), "up");

  const fs::path own_key = fs::path(node(1).data_dir()) / "cluster" / "node.key";
  ASSERT_NE(read_text(own_key.string()).find("PRIVATE KEY"), std::string::npos)
      << "what is looked for is what a key's PEM holds";
  for (std::size_t id = 1; id <= 4; ++id) {
    for (const auto& entry : fs::directory_iterator(fs::path(node(id).data_dir()) / "cluster")) {
      const std::string name = entry.path().filename().string();
      if (!name.starts_with("raft.db") && !name.starts_with("config.db")) continue;
      EXPECT_EQ(read_text(entry.path().string()).find("PRIVATE KEY"), std::string::npos)
          << "node " << id << "'s " << name;
    }
  }
}

TEST_F(ClusterAdminTest, RefusalsAreClearAndChangeNothing) {
  ASSERT_NO_FATAL_FAILURE(form_cluster());
  Ran forged = run(tide_path(), {"--workdir", cluster_->workdir().string(), "--cluster", admin(1), "--token",
                                 "not-the-token", "storagepool", "tiers", "create", "t",
                                 "--children", "h500"});
  EXPECT_EQ(forged.exit_code, 1) << forged.output;
  EXPECT_NE(forged.output.find("token"), std::string::npos) << forged.output;
  EXPECT_TRUE(tide_json(1, {"storagepool", "tiers", "list"})["tiers"].empty());

  Ran bad_pool = tide(1, {"storagepool", "tiers", "create", "t", "--children", "nope"});
  EXPECT_EQ(bad_pool.exit_code, 1);
  EXPECT_NE(bad_pool.output.find("no node pool 'nope'"), std::string::npos) << bad_pool.output;

  Ran unreachable = run(tide_path(), {"--workdir", cluster_->workdir().string(), "--cluster",
                                      "127.0.0.1:1", "status"});
  EXPECT_EQ(unreachable.exit_code, 1) << unreachable.output;
  EXPECT_NE(unreachable.output.find("cannot reach"), std::string::npos) << unreachable.output;

  // Node 3's data directory under a configuration naming another cluster.
  node(3).stop();
  const fs::path other = cluster_->workdir() / "other.toml";
  std::ofstream(other) << replaced(read_text(node(3).config_path()), "name = \"lab\"",
                                   "name = \"other\"");
  Ran refused = run(tided_path(), {"--config", other.string()}, 20s);
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("belongs to cluster 'lab', not 'other'"), std::string::npos)
      << refused.output;

  // A new node on node 1's addresses.
  const fs::path twin = cluster_->workdir() / "twin.toml";
  std::ofstream(twin) << replaced(read_text(node(1).config_path()),
                                  "data_dir = \"" + node(1).data_dir() + "\"",
                                  "data_dir = \"" + (cluster_->workdir() / "twin").string() + "\"");
  Ran in_use = run(tided_path(), {"--config", twin.string()}, 20s);
  EXPECT_EQ(in_use.exit_code, 1) << in_use.output;
  EXPECT_NE(in_use.output.find("in use"), std::string::npos) << in_use.output;
  EXPECT_TRUE(node(1).running());
}

}  // namespace
}  // namespace tidepool::test
