// For the admin API's tests: one node's admin API in this process, over the real parts tided
// gives it — a Membership (its backend on a free loopback port), which becomes a one-node
// cluster through POST /v1/cluster/create, and a local store of the namespace's one shard.
// Requests go to AdminApi::handle as the HTTPS server hands them over; TLS and HTTP parsing
// are http.cc's, tested on their own. Every wait is bounded.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "daemon/admin_api.h"
#include "daemon/membership.h"
#include "store/store.h"

namespace tidepool::daemon::admin::testing {

using nlohmann::json;

// Longer than anything a one-node cluster does (the longest: becoming one).
inline constexpr std::chrono::seconds kAnswerWithin{30};
inline constexpr cluster::NodeId kNodeId = 7;
inline constexpr char kPool[] = "f800";
inline constexpr std::string_view kMetrics = "tidepool_test_up 1\n";
inline constexpr NodeStats kStats{1'000, 2'000, 3'000, 4'000};

inline nlohmann::json json_of(const HttpResponse& response) {
  return nlohmann::json::parse(response.body, nullptr, false);
}

// What an error response says was wrong.
inline std::string error_of(const HttpResponse& response) {
  return json_of(response).value("error", std::string());
}

class TestNode {
 public:
  TestNode() : dir_(scratch_dir()), strand_(boost::asio::make_strand(io_)) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    NodeConfig config;
    config.node_id = kNodeId;
    config.data_dir = (dir_ / "node").string();
    config.pool = std::string(kPool);
    config.backend_address = "127.0.0.1:0";
    // Named in the node's certificate; the API is called in this process, never there.
    config.admin_address = "127.0.0.1:8080";
    // In place of what tided wires in (the NFS server's counters, the caches): the API only
    // passes these on, and a flush is recorded to be checked.
    Membership::Hooks hooks;
    hooks.view_changed = [](const cluster::GroupView&) {};
    hooks.local_stats = [] { return kStats; };
    hooks.flush_cache = [this](bool l1, bool l2, std::function<void(Status)> done) {
      flushes_.emplace_back(l1, l2);
      done({});
    };
    auto membership = Membership::open(strand_, config, std::move(hooks));
    EXPECT_TRUE(membership.ok()) << membership.status().message();
    if (!membership.ok()) return;
    membership_ = std::move(membership).value();
    store::StoreOptions options;
    options.data_dir = config.data_dir;
    options.threads = 1;
    auto store = store::Store::open(options);
    EXPECT_TRUE(store.ok()) << store.status().message();
    if (!store.ok()) return;
    store_ = std::move(store).value();
    api_ = std::make_unique<AdminApi>(
        strand_, *membership_, *store_, [] { return std::string(kMetrics); },
        [this] { ++joined_; });
  }

  ~TestNode() {
    api_.reset();
    membership_.reset();
    if (store_) store_->close();
    store_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  TestNode(const TestNode&) = delete;
  TestNode& operator=(const TestNode&) = delete;

  bool ready() const { return api_ != nullptr; }

  // Sends a request with `token` as its bearer token (none when empty); the answer, or 0 with
  // the reason when none came in time.
  HttpResponse call(std::string method, std::string target, std::string body,
                    const std::string& token) {
    HttpRequest request{std::move(method), std::move(target),
                        token.empty() ? std::string() : "Bearer " + token, std::move(body)};
    std::optional<HttpResponse> answer = run(api_->handle(std::move(request)));
    return answer ? *answer : HttpResponse{0, "no answer within the test's bound"};
  }
  // The same with the cluster's token, once made.
  HttpResponse call(std::string method, std::string target,
                    const nlohmann::json& body = nlohmann::json()) {
    return call(std::move(method), std::move(target), body.is_null() ? "" : body.dump(), token_);
  }

  // The setup secret the node made at its first start, as an administrator reads it.
  std::string setup_secret() const {
    std::ifstream file(dir_ / "node" / "setup-secret");
    std::string secret;
    std::getline(file, secret);
    return secret;
  }

  // Makes the node a cluster of its own, as `tide cluster create` does, and keeps its token.
  ::testing::AssertionResult create_cluster() {
    const HttpResponse created =
        call("POST", "/v1/cluster/create", R"({"name": "tidepool"})", setup_secret());
    const nlohmann::json body = json_of(created);
    if (created.status != 201 || !body.is_object() ||
        !body.value("token", nlohmann::json()).is_string()) {
      return ::testing::AssertionFailure()
             << "create answered " << created.status << " " << created.body;
    }
    token_ = body["token"].get<std::string>();
    // The leader registers itself in the view a heartbeat or so after it leads.
    const bool registered =
        run_until([this] { return membership_->group()->view().node(kNodeId) != nullptr; });
    if (!registered) return ::testing::AssertionFailure() << "the node never joined its view";
    return ::testing::AssertionSuccess();
  }

  // Runs the node until `done()` holds, or gives up after kAnswerWithin: whether it held.
  template <typename Predicate>
  bool run_until(Predicate done) {
    const auto give_up = std::chrono::steady_clock::now() + kAnswerWithin;
    while (!done() && std::chrono::steady_clock::now() < give_up) {
      io_.run_one_for(std::chrono::milliseconds(100));
    }
    return done();
  }

  // Runs `operation` on the API's strand to its end, or gives up after kAnswerWithin.
  template <typename T>
  std::optional<T> run(boost::asio::awaitable<T> operation) {
    // Shared with the completion, which may run after a give-up, on a later call's turn.
    struct Outcome {
      std::optional<T> value;
      std::exception_ptr exception;
      bool done = false;
    };
    auto outcome = std::make_shared<Outcome>();
    boost::asio::co_spawn(strand_, std::move(operation),
                          [outcome](std::exception_ptr exception, T value) {
                            outcome->exception = exception;
                            if (!exception) outcome->value = std::move(value);
                            outcome->done = true;
                          });
    run_until([&outcome] { return outcome->done; });
    if (outcome->exception) std::rethrow_exception(outcome->exception);
    return std::move(outcome->value);
  }

  // Makes a regular file (or a directory) named `name` in /ifs, as root: its inode, or 0.
  store::InodeId create_in_root(const std::string& name, bool directory = false) {
    const store::Caller root{0, 0, {}};
    std::optional<Result<store::NewObject>> made =
        directory ? run(store_->mkdir(store::kRootInode, name, {}, root))
                  : run(store_->create(store::kRootInode, name, store::CreateMode::guarded, {}, {},
                                       root));
    EXPECT_TRUE(made && made->ok()) << name << ": " << (made ? made->status().message() : "");
    return made && made->ok() ? (*made)->attributes.inode : 0;
  }

  store::Store& store() { return *store_; }
  Membership& membership() { return *membership_; }
  const std::string& token() const { return token_; }
  int joined() const { return joined_; }
  // The levels (L1, L2) each cache flush asked this node to empty, in order.
  const std::vector<std::pair<bool, bool>>& flushes() const { return flushes_; }

 private:
  static std::filesystem::path scratch_dir() {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    return std::filesystem::temp_directory_path() /
           ("tidepool-admin-test-" + std::to_string(::getpid()) + "-" + test->test_suite_name() +
            "-" + test->name());
  }

  std::filesystem::path dir_;
  boost::asio::io_context io_;
  // Keeps run_one_for() waiting for work rather than returning once the queue is empty.
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_ =
      boost::asio::make_work_guard(io_);
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<AdminApi> api_;
  std::string token_;
  int joined_ = 0;
  std::vector<std::pair<bool, bool>> flushes_;
};

// A test on a node that has made a cluster of its own.
class OneNodeClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(node_.ready());
    ASSERT_TRUE(node_.create_cluster());
  }

  TestNode node_;
};

}  // namespace tidepool::daemon::admin::testing
