#include "cluster/ring.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>

namespace tidepool::cluster {
namespace {

std::vector<NodeId> node_ids(std::size_t n) {
  std::vector<NodeId> ids(n);
  std::iota(ids.begin(), ids.end(), NodeId{1});
  return ids;
}

constexpr std::uint64_t kKeys = 1'000'000;

class RingBalance : public ::testing::TestWithParam<std::size_t> {};

TEST_P(RingBalance, MaxLoadIsWithinTenPercentOfTheMeanForAMillionKeys) {
  Ring ring(node_ids(GetParam()));
  std::map<NodeId, std::uint64_t> load;
  for (std::uint64_t key = 0; key < kKeys; ++key) load[ring.owner(Ring::key_of(key, 0))]++;
  ASSERT_EQ(load.size(), GetParam());
  std::uint64_t max = 0;
  for (auto& [node, keys] : load) max = std::max(max, keys);
  double mean = static_cast<double>(kKeys) / static_cast<double>(GetParam());
  EXPECT_LE(static_cast<double>(max) / mean, 1.10) << "max " << max << " mean " << mean;
}

TEST_P(RingBalance, RemovingANodeMovesOnlyTheKeysItOwned) {
  std::vector<NodeId> nodes = node_ids(GetParam());
  Ring before(nodes);
  NodeId removed = nodes[nodes.size() / 2];
  nodes.erase(std::find(nodes.begin(), nodes.end(), removed));
  Ring after(nodes);
  std::uint64_t moved = 0;
  for (std::uint64_t key = 0; key < kKeys; ++key) {
    std::uint64_t k = Ring::key_of(key, 7);
    NodeId was = before.owner(k);
    NodeId is = after.owner(k);
    if (was != removed) {
      ASSERT_EQ(was, is) << "key " << key << " moved although node " << was << " stayed";
    } else {
      moved++;
    }
  }
  EXPECT_GT(moved, 0u);
}

// OneFS's largest cluster has 252 nodes.
INSTANTIATE_TEST_SUITE_P(ClusterSizes, RingBalance, ::testing::Values(3, 16, 252));

TEST(Ring, OwnersAreDistinctOrderedAndStartWithTheOwner) {
  Ring ring(node_ids(16));
  for (std::uint64_t key = 0; key < 1000; ++key) {
    std::vector<NodeId> owners = ring.owners(Ring::key_of(key, 1), 3);
    ASSERT_EQ(owners.size(), 3u);
    EXPECT_EQ(owners[0], ring.owner(Ring::key_of(key, 1)));
    EXPECT_NE(owners[0], owners[1]);
    EXPECT_NE(owners[1], owners[2]);
    EXPECT_NE(owners[0], owners[2]);
  }
}

TEST(Ring, TheMirrorTakesOverWhenTheHomeLeaves) {
  std::vector<NodeId> nodes = node_ids(5);
  Ring ring(nodes);
  for (std::uint64_t key = 0; key < 1000; ++key) {
    std::vector<NodeId> owners = ring.owners(key, 2);
    std::vector<NodeId> rest = nodes;
    rest.erase(std::find(rest.begin(), rest.end(), owners[0]));
    EXPECT_EQ(Ring(rest).owner(key), owners[1]);
  }
}

TEST(Ring, OrderAndRepeatsOfTheNodeListDoNotMatter) {
  Ring a({1, 2, 3, 4, 5});
  Ring b({5, 3, 3, 1, 4, 2, 1});
  EXPECT_EQ(a.nodes(), b.nodes());
  for (std::uint64_t key = 0; key < 1000; ++key) EXPECT_EQ(a.owners(key, 5), b.owners(key, 5));
}

TEST(Ring, AskingForMoreOwnersThanNodesGivesEveryNode) {
  Ring ring({4, 9});
  EXPECT_EQ(ring.owners(42, 3).size(), 2u);
  EXPECT_TRUE(Ring({}).owners(42, 2).empty());
}

TEST(Ring, KeysAndOwnersNeverChangeBetweenReleases) {
  // These answers decide where data lives: a release that changed them would lose track of
  // every file written before it.
  EXPECT_EQ(Ring::key_of("lock:inode:42"), 17657309280715456361ULL);
  EXPECT_EQ(Ring::key_of(42, 7), 18315876358090669558ULL);
  EXPECT_EQ(Ring({1, 2, 3, 4, 5}).owner(Ring::key_of("f800")), 4u);
  EXPECT_NE(Ring::key_of("a"), Ring::key_of("b"));
}

}  // namespace
}  // namespace tidepool::cluster
