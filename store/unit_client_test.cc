#include "store/unit_client.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>

#include "store/internal/test_util.h"

namespace tidepool::store {
namespace {

constexpr std::uint32_t kUnit = 128 * 1024;

Layout hot_layout() {
  Layout layout;
  layout.pool = "f800";
  layout.stripe_unit = kUnit;
  layout.protection = 2;
  layout.nodes = {1, 2, 3};
  return layout;
}

class UnitClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = internal::fresh_test_directory("tidepool-unit-client-test");
    nodes_ = std::make_shared<internal::InProcessPools>(dir_, 3);
    client_ = std::make_unique<UnitClient>(nodes_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Status write(InodeId inode, std::uint64_t offset, const std::vector<std::uint8_t>& bytes,
               bool durable = false) {
    return internal::run_to_completion(client_->write(layout_, inode, offset, bytes, durable));
  }
  Result<xdr::Buffer> read(InodeId inode, std::uint64_t offset, std::uint32_t length) {
    return internal::run_to_completion(client_->read(layout_, inode, offset, length));
  }
  std::uint64_t reads_asked_of_all() const {
    return std::accumulate(nodes_->reads_asked.begin(), nodes_->reads_asked.end(),
                           std::uint64_t{0},
                           [](std::uint64_t sum, const auto& count) { return sum + count.load(); });
  }

  std::filesystem::path dir_;
  std::shared_ptr<internal::InProcessPools> nodes_;
  std::unique_ptr<UnitClient> client_;
  Layout layout_ = hot_layout();
};

TEST_F(UnitClientTest, AWriteReachesEveryOwnerOfEveryUnitItTouchesAndReadsBackFromEither) {
  const auto bytes = internal::random_bytes(2 * kUnit, 1);
  ASSERT_TRUE(write(7, 0, bytes).ok());
  EXPECT_EQ(nodes_->unit_writes.load(), 4u) << "two units, two copies each";
  for (std::uint64_t unit = 0; unit < 2; ++unit) {
    const std::vector<cluster::NodeId> owners = unit_owners(layout_.nodes, 7, unit, 2);
    for (cluster::NodeId down : owners) {
      nodes_->set_down({down});
      Result<xdr::Buffer> got = read(7, unit * kUnit, kUnit);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      EXPECT_TRUE(std::equal(got->begin(), got->end(), bytes.begin() + unit * kUnit))
          << "unit " << unit << " with node " << down << " down";
    }
  }
}

TEST_F(UnitClientTest, AReadAsksTheFirstOwnerThatIsUpAndNoOther) {
  // The first owner of a unit serves its reads, so that only its L2 keeps the unit: the
  // cluster's cache is every node's L2, no unit kept twice (tests/process/cache_law_test.cc).
  ASSERT_TRUE(write(9, 0, internal::random_bytes(kUnit, 2)).ok());
  const std::vector<cluster::NodeId> owners = unit_owners(layout_.nodes, 9, 0, 2);
  ASSERT_TRUE(read(9, 0, kUnit).ok());
  EXPECT_EQ(nodes_->reads_asked[owners[0] - 1].load(), 1u);
  EXPECT_EQ(reads_asked_of_all(), 1u) << "no other owner was asked";

  nodes_->set_down({owners[0]});
  ASSERT_TRUE(read(9, 0, kUnit).ok()) << "the first owner away, the second answers";
  EXPECT_EQ(nodes_->reads_asked[owners[1] - 1].load(), 1u);
  EXPECT_EQ(reads_asked_of_all(), 2u) << "an owner down is not asked";
}

TEST_F(UnitClientTest, AUnitNoOwnerHoldsReadsAsZerosAndAnOwnerAwayFailsTheRead) {
  Result<xdr::Buffer> hole = read(11, 3 * kUnit, 4096);
  ASSERT_TRUE(hole.ok()) << hole.status().to_string();
  EXPECT_EQ(*hole, xdr::Buffer(4096, 0));

  ASSERT_TRUE(write(11, 0, internal::random_bytes(kUnit, 3)).ok());
  nodes_->set_down(
      {unit_owners(layout_.nodes, 11, 0, 2)[0], unit_owners(layout_.nodes, 11, 0, 2)[1]});
  EXPECT_EQ(read(11, 0, kUnit).code(), Errc::unavailable);
}

TEST_F(UnitClientTest, AWriteWithAnOwnerDownFailsForTheHomeToTakeOver) {
  const std::vector<cluster::NodeId> owners = unit_owners(layout_.nodes, 13, 0, 2);
  nodes_->set_down({owners[0]});
  EXPECT_EQ(write(13, 0, internal::random_bytes(kUnit, 4)).code(), Errc::unavailable);
}

TEST_F(UnitClientTest, ARestartOfAnOwnerSeenByAWriteOrSyncIsCounted) {
  ASSERT_TRUE(write(15, 0, internal::random_bytes(kUnit, 5)).ok());
  EXPECT_EQ(client_->restarts(), 0u);
  const std::vector<SyncedNode> before = internal::run_to_completion(client_->sync(layout_, 15));
  const cluster::NodeId restarted = unit_owners(layout_.nodes, 15, 0, 2)[0];
  nodes_->restart(restarted);
  const std::vector<SyncedNode> after = internal::run_to_completion(client_->sync(layout_, 15));
  EXPECT_EQ(client_->restarts(), 1u) << "what it took UNSTABLE may be gone: the verifier changes";
  // The boot ids a sync returns are those the home is told (SyncedCopies): a new one for the
  // node that restarted only.
  ASSERT_EQ(before.size(), 3u);
  ASSERT_EQ(after.size(), 3u);
  for (const SyncedNode& node : after) {
    const auto earlier = std::ranges::find(before, node.node, &SyncedNode::node);
    ASSERT_NE(earlier, before.end());
    EXPECT_EQ(node.boot != earlier->boot, node.node == restarted) << "node " << node.node;
  }
}

// A COMMIT while an owner is down: a call to it would wait out its deadline on every COMMIT.
// The home is told which owners were synced, with their boot ids, and syncs only the others.
TEST_F(UnitClientTest, ASyncMakesTheOwnersUpDurableAndAsksNoneThatIsDown) {
  ASSERT_TRUE(write(17, 0, internal::random_bytes(kUnit, 6)).ok());
  const cluster::NodeId down = unit_owners(layout_.nodes, 17, 0, 2)[0];
  nodes_->set_down({down});
  const std::vector<SyncedNode> synced = internal::run_to_completion(client_->sync(layout_, 17));
  EXPECT_EQ(nodes_->calls_to_down.load(), 0u);
  std::vector<cluster::NodeId> nodes;
  for (const SyncedNode& node : synced) nodes.push_back(node.node);
  std::ranges::sort(nodes);
  std::vector<cluster::NodeId> up = {1, 2, 3};
  std::erase(up, down);
  EXPECT_EQ(nodes, up);
}

TEST_F(UnitClientTest, OnlyALayoutInAPoolWithNoMoveAndNoCopyBehindIsServed) {
  EXPECT_TRUE(UnitClient::serves(layout_));
  Layout with_shard = layout_;
  with_shard.pool = kWithShard;
  EXPECT_FALSE(UnitClient::serves(with_shard));
  Layout moving = layout_;
  moving.moving_to = "h500";
  EXPECT_FALSE(UnitClient::serves(moving));
  Layout behind = layout_;
  behind.copies_behind = true;
  EXPECT_FALSE(UnitClient::serves(behind));
  EXPECT_EQ(read(17, kUnit - 10, 20).code(), Errc::invalid_argument) << "a read across units";
}

}  // namespace
}  // namespace tidepool::store
