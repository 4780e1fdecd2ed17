#include "store/shard_router.h"

#include <gtest/gtest.h>

#include "store/internal/test_util.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <filesystem>
#include <vector>

namespace tidepool::store {
namespace {

namespace asio = boost::asio;

using internal::run_to_completion;

template <typename T>
T run(asio::awaitable<T> op) {
  return run_to_completion(std::move(op));
}

// Reaches another node's store in this process, and says which node each call went to.
class CountingChannel final : public ShardChannel {
 public:
  CountingChannel(Store& home, cluster::NodeId node, std::vector<cluster::NodeId>& calls)
      : home_(home), node_(node), calls_(calls) {}
  awaitable<Result<xdr::Buffer>> call(StoreMethod method, xdr::Buffer request) override {
    calls_.push_back(node_);
    auto op = serve_store_call(home_, static_cast<std::uint32_t>(method), request);
    co_return co_await std::move(op);
  }

 private:
  Store& home_;
  cluster::NodeId node_;
  std::vector<cluster::NodeId>& calls_;
};

class ShardRouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 2; ++i) {
      dirs_.push_back(std::filesystem::temp_directory_path() /
                      ("tidepool-router-test-" + std::to_string(::getpid()) + "-" +
                       std::to_string(i)));
      std::filesystem::remove_all(dirs_.back());
      StoreOptions options;
      options.data_dir = dirs_.back().string();
      options.threads = 1;
      auto opened = Store::open(options);
      ASSERT_TRUE(opened.ok()) << opened.status().to_string();
      stores_.push_back(std::move(opened).value());
    }
    router_ = std::make_unique<ShardRouter>(1, [this](cluster::NodeId node) {
      return std::make_shared<CountingChannel>(*stores_[1], node, calls_);
    });
    router_->set_home(1, stores_[0]);
  }
  void TearDown() override {
    router_.reset();
    stores_.clear();
    for (const auto& d : dirs_) std::filesystem::remove_all(d);
  }

  Result<NewObject> make(const std::string& name) {
    return run(router_->create(kRootInode, name, CreateMode::guarded, {}, {}, Caller{0, 0, {}}));
  }
  Status look_up(const std::string& name) {
    return run(router_->lookup(kRootInode, name, Caller{0, 0, {}})).status();
  }

  std::vector<std::filesystem::path> dirs_;
  std::vector<std::shared_ptr<Store>> stores_;  // [0] this node's, [1] node 2's
  std::vector<cluster::NodeId> calls_;
  std::unique_ptr<ShardRouter> router_;
};

TEST_F(ShardRouterTest, OperationsGoWhereTheHomeIs) {
  ASSERT_TRUE(make("here").ok());
  EXPECT_TRUE(calls_.empty());

  router_->set_home(2);
  ASSERT_TRUE(make("there").ok());
  EXPECT_EQ(calls_, std::vector<cluster::NodeId>{2});
  EXPECT_EQ(look_up("here").code(), Errc::not_found);  // node 2's namespace has no "here"
  EXPECT_TRUE(look_up("there").ok());

  router_->set_home(1, stores_[0]);
  EXPECT_TRUE(look_up("here").ok());
  EXPECT_EQ(look_up("there").code(), Errc::not_found);
  EXPECT_EQ(calls_.size(), 3u);
}

TEST_F(ShardRouterTest, WithoutAHomeEveryOperationIsUnavailable) {
  router_->set_home(0);
  EXPECT_EQ(make("x").code(), Errc::unavailable);
  EXPECT_EQ(run(router_->getattr(kRootInode)).code(), Errc::unavailable);
  EXPECT_EQ(run(router_->fsstat()).code(), Errc::unavailable);
  router_->set_home(1);
  EXPECT_EQ(run(router_->getattr(kRootInode)).code(), Errc::unavailable)
      << "this node is the home but has no store open";
  router_->set_home(1, stores_[0]);
  EXPECT_TRUE(run(router_->getattr(kRootInode)).ok());
}

}  // namespace
}  // namespace tidepool::store
