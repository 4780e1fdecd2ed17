// GroupClient on the simulated network: changes proposed through any member reach the leader
// and are applied on the proposing node before it answers.
#include "cluster/group_client.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include "cluster/sim.h"

namespace tidepool::cluster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr std::uint64_t kSoonMs = 10'000;

NodeInfo info(NodeId id) {
  const std::string n = std::to_string(id);
  return NodeInfo{id, "node-" + n, "sim:" + n, "127.0.0." + n, "127.0.0." + n + ":8080", "f800",
                  true};
}

class GroupClientTest : public ::testing::Test {
 protected:
  GroupClientTest()
      : world_(7),
        dir_(fs::path(fs::exists("/dev/shm") ? "/dev/shm" : fs::temp_directory_path()) /
             ("tidepool-group-client-test-" + std::to_string(::getpid()))) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  ~GroupClientTest() override {
    for (auto& [id, node] : nodes_) world_.crash(id);
    nodes_.clear();
    fs::remove_all(dir_);
  }

  struct Node {
    std::unique_ptr<GroupMember> member;
    std::unique_ptr<RpcEndpoint> rpc;
    std::unique_ptr<GroupClient> client;
  };

  void boot(NodeId id) {
    GroupOptions options;
    options.id = id;
    options.address = info(id).backend_address;
    options.raft_log_path = (dir_ / ("raft-" + std::to_string(id) + ".db")).string();
    options.config_db_path = ":memory:";
    auto member = GroupMember::open(world_.loop(id), world_.transport(id), options);
    ASSERT_TRUE(member.ok()) << member.status().to_string();
    Node& node = nodes_[id];
    node.member = std::move(member).value();
    GroupMember* raw = node.member.get();
    node.rpc = std::make_unique<RpcEndpoint>(world_.loop(id), world_.transport(id),
                                             [raw] { return raw->epoch(); });
    node.client = std::make_unique<GroupClient>(world_.loop(id), *node.member, *node.rpc);
    if (id == 1) {
      ASSERT_TRUE(node.member->bootstrap(info(1)).ok());
    }
    ASSERT_TRUE(node.member->start().ok());
  }

  // Runs the simulation until `client` on node `on` answers, or kSoonMs passes.
  template <typename Call>
  std::optional<Status> answer(Call call) {
    auto result = std::make_shared<std::optional<Status>>();
    call([result](Status s) { *result = std::move(s); });
    world_.run_until([&] { return result->has_value(); }, world_.now_ms() + kSoonMs);
    return *result;
  }

  GroupMember& member(NodeId id) { return *nodes_.at(id).member; }
  GroupClient& client(NodeId id) { return *nodes_.at(id).client; }

  void form_three() {
    for (NodeId id = 1; id <= 3; ++id) ASSERT_NO_FATAL_FAILURE(boot(id));
    ASSERT_TRUE(world_.run_until([&] { return member(1).view().node(1) != nullptr; },
                                 world_.now_ms() + kSoonMs));
    for (NodeId id = 2; id <= 3; ++id) {
      auto added = answer([&](GroupMember::Done done) { client(1).add_node(info(id), 5s, done); });
      ASSERT_TRUE(added && added->ok()) << (added ? added->to_string() : "no answer");
    }
  }

  void remove_the_leader(bool through_the_leader) {
    ASSERT_NO_FATAL_FAILURE(form_three());
    NodeId leader = 1;
    while (leader <= 3 && !member(leader).is_leader()) ++leader;
    ASSERT_LE(leader, 3u);
    const NodeId asked = through_the_leader ? leader : (leader == 2 ? 3 : 2);
    auto removed =
        answer([&](GroupMember::Done done) { client(asked).remove_node(leader, 10s, done); });
    ASSERT_TRUE(removed && removed->ok()) << (removed ? removed->to_string() : "no answer");
    std::vector<NodeId> rest;
    for (NodeId id = 1; id <= 3; ++id) {
      if (id != leader) rest.push_back(id);
    }
    for (NodeId id : rest) {
      ASSERT_TRUE(world_.run_until([&] { return member(id).view().node(leader) == nullptr; },
                                   world_.now_ms() + kSoonMs))
          << "node " << id;
      EXPECT_NE(member(id).leader(), leader) << "node " << id;
      EXPECT_NE(member(id).leader(), 0u) << "node " << id;
    }
    auto created = answer([&](GroupMember::Done done) {
      client(rest[0]).propose(Change::create_object("tier", "after", "{}"), 5s, done);
    });
    EXPECT_TRUE(created && created->ok()) << "the two left form a majority";
  }

  SimWorld world_;
  fs::path dir_;
  std::map<NodeId, Node> nodes_;
};

TEST_F(GroupClientTest, AFollowerProposesThroughTheLeaderAndHasAppliedItWhenItAnswers) {
  ASSERT_NO_FATAL_FAILURE(form_three());
  const NodeId follower = member(2).is_leader() ? 3 : 2;
  auto created = answer([&](GroupMember::Done done) {
    client(follower).propose(Change::create_object("tier", "hot-tier", R"({"children":[]})"), 5s,
                             done);
  });
  ASSERT_TRUE(created && created->ok()) << (created ? created->to_string() : "no answer");
  // No further simulation: the follower applied the change before it answered.
  EXPECT_NE(member(follower).view().object("tier", "hot-tier"), nullptr);
}

TEST_F(GroupClientTest, AFollowerThatCaughtUpSeesWhatTheLeaderApplied) {
  ASSERT_NO_FATAL_FAILURE(form_three());
  NodeId leader = 1;
  while (leader <= 3 && !member(leader).is_leader()) ++leader;
  ASSERT_LE(leader, 3u);
  const NodeId follower = leader == 2 ? 3 : 2;
  for (int i = 0; i < 5; ++i) {
    const std::string name = "t" + std::to_string(i);
    auto created = answer([&](GroupMember::Done done) {
      client(leader).propose(Change::create_object("tier", name, "{}"), 5s, done);
    });
    ASSERT_TRUE(created && created->ok());
    auto caught_up =
        answer([&](GroupMember::Done done) { client(follower).catch_up(5s, done); });
    ASSERT_TRUE(caught_up && caught_up->ok()) << (caught_up ? caught_up->to_string() : "none");
    EXPECT_NE(member(follower).view().object("tier", name), nullptr) << name;
  }
}

TEST_F(GroupClientTest, TheChangesOwnOutcomeComesBackFromTheLeader) {
  ASSERT_NO_FATAL_FAILURE(form_three());
  const NodeId follower = member(2).is_leader() ? 3 : 2;
  auto missing = answer([&](GroupMember::Done done) {
    client(follower).propose(Change::delete_object("tier", "nope"), 5s, done);
  });
  ASSERT_TRUE(missing.has_value());
  EXPECT_EQ(missing->code(), Errc::not_found) << missing->to_string();
}

TEST_F(GroupClientTest, AFollowerAddsANodeThroughTheLeader) {
  ASSERT_NO_FATAL_FAILURE(form_three());
  ASSERT_NO_FATAL_FAILURE(boot(4));
  const NodeId follower = member(2).is_leader() ? 3 : 2;
  auto added =
      answer([&](GroupMember::Done done) { client(follower).add_node(info(4), 5s, done); });
  ASSERT_TRUE(added && added->ok()) << (added ? added->to_string() : "no answer");
  EXPECT_NE(member(follower).view().node(4), nullptr);
}

TEST_F(GroupClientTest, AnIsolatedNodeGivesUpAtTheDeadline) {
  ASSERT_NO_FATAL_FAILURE(form_three());
  const NodeId follower = member(2).is_leader() ? 3 : 2;
  std::vector<NodeId> others;
  for (NodeId id = 1; id <= 3; ++id) {
    if (id != follower) others.push_back(id);
  }
  world_.partition({{follower}, others});
  world_.run_until(world_.now_ms() + 3'000);  // long enough to lose the leader
  const std::uint64_t asked_at = world_.now_ms();
  auto refused = answer([&](GroupMember::Done done) {
    client(follower).propose(Change::create_object("tier", "t", "{}"), 2s, done);
  });
  ASSERT_TRUE(refused.has_value());
  EXPECT_TRUE(refused->code() == Errc::unavailable || refused->code() == Errc::timed_out)
      << refused->to_string();
  EXPECT_GE(world_.now_ms() - asked_at, 2'000u);
  EXPECT_EQ(member(follower).view().object("tier", "t"), nullptr);
}

TEST_F(GroupClientTest, AFollowerHandsTheLeadToAnotherThroughTheLeader) {
  ASSERT_NO_FATAL_FAILURE(form_three());
  ASSERT_TRUE(member(1).is_leader());
  auto moved = answer([&](GroupMember::Done done) { client(2).transfer_leadership(3, 5s, done); });
  ASSERT_TRUE(moved && moved->ok()) << (moved ? moved->to_string() : "no answer");
  EXPECT_TRUE(member(3).is_leader());
  auto again = answer([&](GroupMember::Done done) { client(2).transfer_leadership(3, 5s, done); });
  EXPECT_TRUE(again && again->ok()) << "the node named leads already";
}

// The leader cannot take itself out of the group: asked through itself or another member, it
// hands on the lead, and the next leader removes it.
TEST_F(GroupClientTest, TheLeaderAskedToRemoveItselfHandsOnTheLeadAndTheNextRemovesIt) {
  ASSERT_NO_FATAL_FAILURE(remove_the_leader(true));
}

TEST_F(GroupClientTest, AFollowerAskedToRemoveTheLeaderHasItRemovedByTheNext) {
  ASSERT_NO_FATAL_FAILURE(remove_the_leader(false));
}

}  // namespace
}  // namespace tidepool::cluster
