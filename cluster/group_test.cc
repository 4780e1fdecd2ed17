// GroupMember's documented behaviour, one promise per test, on the simulated network of
// cluster/sim.h: three or five nodes, a fixed seed per test, every wait bounded in virtual
// time. Raft logs live in a scratch directory under /dev/shm that each test removes; the
// config databases are in memory, rebuilt from the log when a node restarts.
#include "cluster/group.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "cluster/sim.h"
#include "common/fail_points.h"

namespace tidepool::cluster {
namespace {

namespace fs = std::filesystem;

// Every test runs on this seed; TIDEPOOL_GROUP_TEST_SEED runs them on another.
constexpr std::uint64_t kSeed = 41;
// Every node's timing.
constexpr std::uint64_t kHeartbeatMs = 100;
constexpr std::uint64_t kElectionTimeoutMs = 1'000;
constexpr std::uint64_t kDownAfterMs = 2'000;
// A generous bound for what takes a few round trips or an election.
constexpr std::uint64_t kSoonMs = 10'000;

NodeInfo info(NodeId id) {
  std::string n = std::to_string(id);
  return NodeInfo{id,       "node-" + n, "sim:" + n, "127.0.0." + n, "127.0.0." + n + ":8080",
                  id <= 2 ? "f800" : "h500", true};
}

bool names(const Status& status, NodeId node) {
  return status.message().find("node " + std::to_string(node)) != std::string::npos;
}

// One change as an on_applied observer saw it.
struct Seen {
  std::uint64_t applied = 0;
  Epoch epoch = 0;
  std::uint64_t digest = 0;
  Change::Kind kind{};
  NodeId node = 0;
  std::string object;  // "kind/name"
  Errc outcome = Errc::ok;
  bool operator==(const Seen&) const = default;
};

void PrintTo(const Seen& seen, std::ostream* out) {
  *out << "#" << seen.applied << " epoch " << seen.epoch << " kind "
       << static_cast<int>(seen.kind) << " node " << seen.node << " object '" << seen.object
       << "' -> " << errc_name(seen.outcome);
}

std::uint64_t seed() {
  const char* chosen = std::getenv("TIDEPOOL_GROUP_TEST_SEED");
  return chosen != nullptr ? std::strtoull(chosen, nullptr, 10) : kSeed;
}

// What a proposal's callback reported, and how often it ran. Shared with the callback, which
// may run when a member is destroyed at the end of a test.
struct Answer {
  std::optional<Status> status;
  int calls = 0;
};

class GroupTest : public ::testing::Test {
 protected:
  GroupTest() : world_(seed()), dir_(scratch_dir()) {
    options_.heartbeat = std::chrono::milliseconds(kHeartbeatMs);
    options_.election_timeout = std::chrono::milliseconds(kElectionTimeoutMs);
    options_.down_after = std::chrono::milliseconds(kDownAfterMs);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  ~GroupTest() override {
    if (HasFailure()) {
      std::printf("  on seed %llu; replay: TIDEPOOL_GROUP_TEST_SEED=%llu cluster_test "
                  "--gtest_filter=%s\n",
                  static_cast<unsigned long long>(seed()), static_cast<unsigned long long>(seed()),
                  test_name().c_str());
    }
    // Crashed first, so that no task a member posted runs after it is gone.
    for (auto& [id, member] : members_) world_.crash(id);
    members_.clear();
    fs::remove_all(dir_);
    std::error_code ignored;
    fs::remove(dir_.parent_path(), ignored);  // once the last test of this process is done
  }

  static std::string test_name() {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    return std::string(test->test_suite_name()) + "." + test->name();
  }

  // tmpfs when there is one: the Raft logs sync on every append.
  static fs::path scratch_dir() {
    fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    return base / ("tidepool-group-test-" + std::to_string(::getpid())) / test_name();
  }

  GroupOptions options(NodeId id) const {
    GroupOptions o = options_;
    o.id = id;
    o.address = info(id).backend_address;
    o.raft_log_path = (dir_ / ("raft-" + std::to_string(id) + ".db")).string();
    o.config_db_path = ":memory:";
    return o;
  }

  // Opens node `id` on its Raft log and records what it applies in seen(id).
  void open(NodeId id) {
    auto opened = GroupMember::open(world_.loop(id), world_.transport(id), options(id));
    ASSERT_TRUE(opened.ok()) << "node " << id << ": " << opened.status().to_string();
    members_[id] = std::move(opened).value();
    seen_[id].clear();
    members_[id]->on_applied([this, id](const AppliedChange& a) {
      seen_[id].push_back(Seen{a.applied, a.epoch, a.digest, a.change.kind, a.change.node.id,
                               a.change.object.kind + "/" + a.change.object.name,
                               a.outcome.code()});
    });
  }

  void boot(NodeId id, bool bootstrap) {
    ASSERT_NO_FATAL_FAILURE(open(id));
    if (bootstrap) {
      Status s = member(id).bootstrap(info(id));
      ASSERT_TRUE(s.ok()) << s.to_string();
    }
    Status s = member(id).start();
    ASSERT_TRUE(s.ok()) << "node " << id << ": " << s.to_string();
  }

  // Nodes 1..n, node 1 bootstrapped and the others added through it, all up in every view.
  void form_cluster(NodeId n) {
    for (NodeId id = 1; id <= n; ++id) ASSERT_NO_FATAL_FAILURE(boot(id, id == 1));
    ASSERT_TRUE(wait([&] { return member(1).view().node(1) != nullptr; }, kSoonMs));
    for (NodeId id = 2; id <= n; ++id) {
      Status s = add_node(1, id);
      ASSERT_TRUE(s.ok()) << "adding node " << id << ": " << s.to_string();
    }
    ASSERT_TRUE(wait([&] { return converged(all()) && all_see_up(all(), all()); }, kSoonMs))
        << "the cluster of " << n << " did not settle";
    // add_node answers once the leader committed the last promotion to voter; a node learns
    // of it from the entries that follow. Until every node has applied a later change, a
    // partition could leave a side that, by the configuration its nodes know, has no majority.
    Status marked = propose_and_wait(1, Change::create_object("test", "settled", "{}"));
    ASSERT_TRUE(marked.ok()) << marked.to_string();
    ASSERT_TRUE(wait([&] {
      for (NodeId id : all()) {
        if (member(id).view().object("test", "settled") == nullptr) return false;
      }
      return true;
    }, kSoonMs)) << "the settling change did not reach every node";
  }

  GroupMember& member(NodeId id) { return *members_.at(id); }

  std::vector<NodeId> all() const {
    std::vector<NodeId> ids;
    for (const auto& [id, m] : members_) ids.push_back(id);
    return ids;
  }

  bool wait(const std::function<bool()>& done, std::uint64_t for_ms) {
    return world_.run_until(done, world_.now_ms() + for_ms);
  }
  void run_for(std::uint64_t ms) { world_.run_until(world_.now_ms() + ms); }

  std::shared_ptr<Answer> propose(NodeId on, const Change& change) {
    auto answer = std::make_shared<Answer>();
    member(on).propose(change, [answer](Status s) {
      answer->status = std::move(s);
      answer->calls++;
    });
    return answer;
  }

  Status await(const std::shared_ptr<Answer>& answer, std::uint64_t for_ms = kSoonMs) {
    if (!wait([&] { return answer->status.has_value(); }, for_ms)) {
      return error(Errc::timed_out, "no answer within " + std::to_string(for_ms) + " ms");
    }
    return *answer->status;
  }

  Status propose_and_wait(NodeId on, const Change& change) { return await(propose(on, change)); }

  std::shared_ptr<Answer> start_adding(NodeId on, NodeId id) {
    auto answer = std::make_shared<Answer>();
    member(on).add_node(info(id), [answer](Status s) { answer->status = std::move(s); });
    return answer;
  }

  Status add_node(NodeId on, NodeId id) { return await(start_adding(on, id)); }

  // Nodes 1 and 2 in a group, node 3 started but cut off from them, and node 1 adding it:
  // `answer` is add_node's.
  void add_third_node_out_of_reach(std::shared_ptr<Answer>& answer) {
    ASSERT_NO_FATAL_FAILURE(form_cluster(2));
    ASSERT_NO_FATAL_FAILURE(boot(3, false));
    world_.partition({{1, 2}, {3}});
    answer = start_adding(1, 3);
  }

  // A change through node 1 once node `gone` crashed. In a group of three, node 1 has a
  // majority then only if the third node is a voting member.
  Status change_without(NodeId gone) {
    crash(gone);
    return propose_and_wait(1, Change::create_object("tier", "gold", "{}"));
  }

  Status remove_node(NodeId on, NodeId id) {
    auto answer = std::make_shared<Answer>();
    member(on).remove_node(id, [answer](Status s) { answer->status = std::move(s); });
    return await(answer);
  }

  // The leader among `ids` that are up, or 0.
  NodeId leader_among(const std::vector<NodeId>& ids) {
    for (NodeId id : ids) {
      if (members_.contains(id) && world_.is_up(id) && member(id).is_leader()) return id;
    }
    return 0;
  }
  NodeId leader() { return leader_among(all()); }

  // Every one of `ids` applied the same history.
  bool converged(const std::vector<NodeId>& ids) {
    for (NodeId id : ids) {
      if (member(id).applied() != member(ids[0]).applied() ||
          member(id).digest() != member(ids[0]).digest()) {
        return false;
      }
    }
    return true;
  }

  // Every one of `viewers` has exactly `nodes` in its view, all up.
  bool all_see_up(const std::vector<NodeId>& viewers, const std::vector<NodeId>& nodes) {
    for (NodeId id : viewers) {
      if (member(id).view().up_nodes() != nodes || member(id).view().nodes.size() != nodes.size()) {
        return false;
      }
    }
    return true;
  }

  bool recorded_up(NodeId viewer, NodeId node) {
    const NodeInfo* n = member(viewer).view().node(node);
    return n != nullptr && n->up;
  }
  bool recorded_down(NodeId viewer, NodeId node) {
    const NodeInfo* n = member(viewer).view().node(node);
    return n != nullptr && !n->up;
  }

  // The node stops at once, as a crash would; its log stays.
  void crash(NodeId id) {
    world_.crash(id);
    members_.erase(id);
  }
  void restart(NodeId id) {
    world_.restart(id);
    boot(id, false);
  }

  const std::vector<Seen>& seen(NodeId id) { return seen_[id]; }

  GroupOptions options_;
  SimWorld world_;
  fs::path dir_;
  std::map<NodeId, std::unique_ptr<GroupMember>> members_;
  std::map<NodeId, std::vector<Seen>> seen_;
};

// --- bootstrap -----------------------------------------------------------------------------

TEST_F(GroupTest, BootstrappedNodeLeadsAndRegistersItselfUpWithItsPool) {
  ASSERT_NO_FATAL_FAILURE(boot(1, /*bootstrap=*/true));

  ASSERT_TRUE(wait([&] { return member(1).view().node(1) != nullptr; }, kSoonMs));
  EXPECT_TRUE(member(1).is_leader());
  EXPECT_EQ(member(1).leader(), 1u);
  EXPECT_EQ(*member(1).view().node(1), info(1));
  EXPECT_TRUE(member(1).view().node(1)->up);
  EXPECT_EQ(member(1).view().up_nodes_in_pool("f800"), std::vector<NodeId>{1});
  EXPECT_EQ(member(1).epoch(), 1u);
  EXPECT_EQ(member(1).applied(), 1u);
}

TEST_F(GroupTest, BootstrappingTwiceFailsWithAlreadyExists) {
  ASSERT_NO_FATAL_FAILURE(open(1));
  Status first = member(1).bootstrap(info(1));
  ASSERT_TRUE(first.ok()) << first.to_string();

  Status second = member(1).bootstrap(info(1));
  EXPECT_EQ(second.code(), Errc::already_exists) << second.to_string();
}

TEST_F(GroupTest, BootstrappingANodeWhoseLogIsNotEmptyFailsWithAlreadyExists) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));
  ASSERT_TRUE(propose_and_wait(1, Change::create_object("tier", "gold", "{}")).ok());
  ASSERT_TRUE(wait([&] { return converged(all()); }, kSoonMs));

  // Node 1 was bootstrapped; node 3 joined. Neither log can start a new cluster.
  for (NodeId id : {NodeId{1}, NodeId{3}}) {
    crash(id);
    world_.restart(id);
    ASSERT_NO_FATAL_FAILURE(open(id));
    Status again = member(id).bootstrap(info(id));
    EXPECT_EQ(again.code(), Errc::already_exists) << "node " << id << ": " << again.to_string();
    Status started = member(id).start();
    ASSERT_TRUE(started.ok()) << started.to_string();
  }
  // And the refused bootstraps changed nothing: the group carries on with its history.
  ASSERT_TRUE(wait([&] { return converged(all()) && leader() != 0; }, kSoonMs));
  EXPECT_NE(member(3).view().object("tier", "gold"), nullptr);
  EXPECT_TRUE(wait([&] { return all_see_up(all(), {1, 2, 3}); }, kSoonMs));
}

TEST_F(GroupTest, NodeNeverBootstrappedWaitsWithAnEmptyViewUntilAMemberAddsIt) {
  ASSERT_NO_FATAL_FAILURE(boot(1, /*bootstrap=*/true));
  ASSERT_NO_FATAL_FAILURE(boot(2, /*bootstrap=*/false));

  run_for(5 * kElectionTimeoutMs);
  EXPECT_FALSE(member(2).is_leader());
  EXPECT_EQ(member(2).leader(), 0u);
  EXPECT_EQ(member(2).applied(), 0u);
  EXPECT_TRUE(member(2).view().nodes.empty());
  EXPECT_EQ(member(1).view().node(2), nullptr);

  Status added = add_node(1, 2);
  ASSERT_TRUE(added.ok()) << added.to_string();
  ASSERT_TRUE(wait([&] { return converged({1, 2}) && all_see_up({1, 2}, {1, 2}); }, kSoonMs));
  EXPECT_EQ(member(2).leader(), 1u);
  EXPECT_EQ(*member(2).view().node(2), info(2));
}

// --- proposing changes ---------------------------------------------------------------------

TEST_F(GroupTest, ChangeProposedOnAFollowerFailsWithUnavailableNamingTheLeader) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));
  NodeId leader_id = leader();
  ASSERT_NE(leader_id, 0u);
  std::uint64_t applied = member(leader_id).applied();

  for (NodeId follower : all()) {
    if (follower == leader_id) continue;
    auto answer = propose(follower, Change::create_object("tier", "gold", "{}"));
    Status s = await(answer);
    EXPECT_EQ(s.code(), Errc::unavailable) << s.to_string();
    EXPECT_TRUE(names(s, leader_id)) << "'" << s.message() << "' does not name node "
                                     << leader_id;
    run_for(1'000);
    EXPECT_EQ(answer->calls, 1);
  }
  for (NodeId id : all()) {
    EXPECT_EQ(member(id).applied(), applied) << "node " << id;
    EXPECT_EQ(member(id).view().object("tier", "gold"), nullptr) << "node " << id;
  }
}

TEST_F(GroupTest, AfterTheLeaderCrashesAFollowerNamesTheNewLeader) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));
  ASSERT_EQ(leader(), 1u);
  crash(1);

  NodeId next = 0;
  ASSERT_TRUE(wait([&] { return (next = leader_among({2, 3})) != 0; }, kSoonMs));
  NodeId follower = next == 2 ? 3 : 2;
  ASSERT_TRUE(wait([&] { return member(follower).leader() == next; }, kSoonMs));

  Status s = propose_and_wait(follower, Change::create_object("tier", "gold", "{}"));
  EXPECT_EQ(s.code(), Errc::unavailable) << s.to_string();
  EXPECT_TRUE(names(s, next)) << "'" << s.message() << "' does not name node " << next;
}

TEST_F(GroupTest, ChangesPendingWhenTheLeaderGoesAwayFailWithUnavailable) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));
  ASSERT_EQ(leader(), 1u);
  auto pending = propose(1, Change::create_object("tier", "gold", "{}"));
  ASSERT_FALSE(pending->status.has_value());

  crash(1);  // destroys the member without running the loop again
  ASSERT_TRUE(pending->status.has_value());
  EXPECT_EQ(pending->status->code(), Errc::unavailable) << pending->status->to_string();
  EXPECT_EQ(pending->calls, 1);
}

TEST_F(GroupTest, ChangeThroughTheLeaderAppliesOnEveryNodeAlike) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));
  NodeId leader_id = leader();
  ASSERT_NE(leader_id, 0u);

  Status s = propose_and_wait(leader_id, Change::create_object("tier", "gold", R"({"ssd":1})"));
  ASSERT_TRUE(s.ok()) << s.to_string();
  // Applied on the leader when it answers; on the others once they hear the commit.
  ASSERT_NE(member(leader_id).view().object("tier", "gold"), nullptr);
  ASSERT_TRUE(wait([&] { return converged(all()); }, kSoonMs));

  const ConfigObject expected{"tier", "gold", R"({"ssd":1})", member(leader_id).epoch()};
  for (NodeId id : all()) {
    EXPECT_EQ(member(id).epoch(), member(leader_id).epoch()) << "node " << id;
    EXPECT_EQ(member(id).applied(), member(leader_id).applied()) << "node " << id;
    EXPECT_EQ(member(id).digest(), member(leader_id).digest()) << "node " << id;
    EXPECT_EQ(member(id).view().epoch, member(id).epoch()) << "node " << id;
    ASSERT_NE(member(id).view().object("tier", "gold"), nullptr) << "node " << id;
    EXPECT_EQ(*member(id).view().object("tier", "gold"), expected) << "node " << id;
  }
}

TEST_F(GroupTest, CreatingAnObjectThatExistsFailsWithAlreadyExistsAndKeepsIt) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));
  ASSERT_TRUE(propose_and_wait(1, Change::create_object("export", "/ifs", "{}")).ok());

  Status s = propose_and_wait(1, Change::create_object("export", "/ifs", R"({"ro":1})"));
  EXPECT_EQ(s.code(), Errc::already_exists) << s.to_string();

  ASSERT_TRUE(wait([&] { return converged(all()); }, kSoonMs));
  for (NodeId id : all()) {
    ASSERT_NE(member(id).view().object("export", "/ifs"), nullptr) << "node " << id;
    EXPECT_EQ(member(id).view().object("export", "/ifs")->body, "{}") << "node " << id;
    ASSERT_FALSE(seen(id).empty());
    EXPECT_EQ(seen(id).back().outcome, Errc::already_exists) << "node " << id;
  }
}

TEST_F(GroupTest, UpdatingOrDeletingAMissingObjectFailsWithNotFound) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));

  Status updated = propose_and_wait(1, Change::update_object("export", "/ifs", "{}"));
  EXPECT_EQ(updated.code(), Errc::not_found) << updated.to_string();
  Status deleted = propose_and_wait(1, Change::delete_object("export", "/ifs"));
  EXPECT_EQ(deleted.code(), Errc::not_found) << deleted.to_string();

  ASSERT_TRUE(wait([&] { return converged(all()); }, kSoonMs));
  for (NodeId id : all()) {
    EXPECT_EQ(member(id).view().object("export", "/ifs"), nullptr) << "node " << id;
  }
}

// --- membership ----------------------------------------------------------------------------

TEST_F(GroupTest, AddingANodeAgainSucceedsAndRegistersItOnce) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));

  Status again = add_node(1, 3);
  EXPECT_TRUE(again.ok()) << again.to_string();

  ASSERT_TRUE(wait([&] { return converged(all()); }, kSoonMs));
  for (NodeId id : all()) {
    const GroupView& view = member(id).view();
    ASSERT_EQ(view.nodes.size(), 3u) << "node " << id;
    EXPECT_EQ(view.nodes[2], info(3)) << "node " << id;
  }
}

TEST_F(GroupTest, AddedNodeVotesSoTheGroupSurvivesLosingAnother) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));
  Status s = change_without(2);
  EXPECT_TRUE(s.ok()) << s.to_string();
}

// Raft gives up promoting a node that does not catch up within a few election timeouts;
// add_node tries again, so a node out of reach a moment still becomes a voter.
TEST_F(GroupTest, ANodeOutOfReachWhileItIsAddedBecomesAVoterOnceItIsBack) {
  std::shared_ptr<Answer> answer;
  ASSERT_NO_FATAL_FAILURE(add_third_node_out_of_reach(answer));
  run_for(7 * kElectionTimeoutMs);  // past the first promotion Raft gives up
  EXPECT_FALSE(answer->status.has_value());
  world_.heal();
  Status added = await(answer);
  ASSERT_TRUE(added.ok()) << added.to_string();
  ASSERT_TRUE(wait([&] { return converged(all()); }, kSoonMs));
  Status s = change_without(2);
  EXPECT_TRUE(s.ok()) << s.to_string();
}

TEST_F(GroupTest, AddingANodeThatStaysOutOfReachFailsAsTimedOut) {
  std::shared_ptr<Answer> answer;
  ASSERT_NO_FATAL_FAILURE(add_third_node_out_of_reach(answer));
  Status added = await(answer, 60'000);
  EXPECT_EQ(added.code(), Errc::timed_out) << added.to_string();
  // The group goes on without it.
  Status s = propose_and_wait(1, Change::create_object("tier", "gold", "{}"));
  EXPECT_TRUE(s.ok()) << s.to_string();
}

TEST_F(GroupTest, AddingANodeUnderATakenIdWithOtherAddressesFailsWithAlreadyExists) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));
  NodeInfo impostor = info(3);
  impostor.name = "node-33";

  auto answer = std::make_shared<Answer>();
  member(1).add_node(impostor, [answer](Status s) { answer->status = std::move(s); });
  Status s = await(answer);
  EXPECT_EQ(s.code(), Errc::already_exists) << s.to_string();
  ASSERT_TRUE(wait([&] { return converged(all()); }, kSoonMs));
  EXPECT_EQ(*member(2).view().node(3), info(3));
}

TEST_F(GroupTest, RemovedNodeLeavesTheViewOfEveryMemberAndRemovingAgainSucceeds) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(5));

  Status removed = remove_node(1, 5);
  ASSERT_TRUE(removed.ok()) << removed.to_string();
  std::vector<NodeId> rest{1, 2, 3, 4};
  ASSERT_TRUE(wait([&] { return converged(rest); }, kSoonMs));
  for (NodeId id : rest) {
    EXPECT_EQ(member(id).view().node(5), nullptr) << "node " << id;
    EXPECT_EQ(member(id).view().up_nodes(), rest) << "node " << id;
  }

  Status again = remove_node(1, 5);
  EXPECT_TRUE(again.ok()) << again.to_string();
  ASSERT_TRUE(wait([&] { return converged(rest); }, kSoonMs));
  EXPECT_EQ(member(2).view().nodes.size(), 4u);
}

TEST_F(GroupTest, RemovedNodeThatKeepsRunningNeitherDisturbsNorCountsTowardsAMajority) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));
  Status removed = remove_node(1, 3);
  ASSERT_TRUE(removed.ok()) << removed.to_string();

  // Node 3 still runs and still talks. The group of two keeps its leader and takes changes.
  run_for(3 * kDownAfterMs);
  EXPECT_EQ(leader_among({1, 2}), 1u);
  EXPECT_EQ(member(1).leader(), 1u);
  EXPECT_EQ(member(2).leader(), 1u);
  Status s = propose_and_wait(1, Change::create_object("tier", "gold", "{}"));
  EXPECT_TRUE(s.ok()) << s.to_string();
  ASSERT_TRUE(wait([&] { return converged({1, 2}); }, kSoonMs));
  EXPECT_EQ(member(2).view().node(3), nullptr);
  EXPECT_EQ(member(2).view().up_nodes(), (std::vector<NodeId>{1, 2}));

  // Without node 2 there is no majority, however willing node 3 is.
  std::uint64_t applied = member(1).applied();
  crash(2);
  auto answer = propose(1, Change::create_object("tier", "silver", "{}"));
  Status lost = await(answer, kElectionTimeoutMs + kSoonMs);
  EXPECT_EQ(lost.code(), Errc::unavailable) << lost.to_string();
  run_for(3 * kDownAfterMs);
  EXPECT_FALSE(member(1).is_leader());
  EXPECT_FALSE(member(3).is_leader());
  EXPECT_EQ(member(1).applied(), applied);
  EXPECT_EQ(member(1).view().object("tier", "silver"), nullptr);
}

TEST_F(GroupTest, NodeCannotRemoveItself) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));
  std::uint64_t applied = member(1).applied();

  Status s = remove_node(1, 1);
  EXPECT_EQ(s.code(), Errc::invalid_argument) << s.to_string();

  run_for(1'000);
  EXPECT_TRUE(member(1).is_leader());
  EXPECT_EQ(member(1).applied(), applied);
  EXPECT_TRUE(all_see_up(all(), {1, 2, 3}));
}

TEST_F(GroupTest, TheLeaderHandsTheLeadToTheVoterItNamesOrToAnyWithNone) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));
  ASSERT_EQ(leader(), 1u);
  auto transfer = [&](NodeId on, NodeId to) {
    auto answer = std::make_shared<Answer>();
    member(on).transfer_leadership(to, [answer](Status s) {
      ++answer->calls;
      answer->status = std::move(s);
    });
    return await(answer, kElectionTimeoutMs + kSoonMs);
  };

  const Status to_three = transfer(1, 3);
  ASSERT_TRUE(to_three.ok()) << to_three.to_string();
  for (NodeId id : all()) EXPECT_EQ(member(id).leader(), 3u) << "node " << id;
  EXPECT_TRUE(propose_and_wait(3, Change::create_object("tier", "gold", "{}")).ok());

  EXPECT_EQ(transfer(3, 3).code(), Errc::ok) << "the node named leads already";
  EXPECT_EQ(transfer(3, 9).code(), Errc::invalid_argument);
  const Status on_a_follower = transfer(1, 2);
  EXPECT_EQ(on_a_follower.code(), Errc::unavailable) << on_a_follower.to_string();
  EXPECT_TRUE(names(on_a_follower, 3)) << on_a_follower.to_string();

  ASSERT_TRUE(transfer(3, 0).ok());
  const NodeId next = leader();
  EXPECT_TRUE(next == 1 || next == 2) << next;
  ASSERT_TRUE(wait([&] { return converged(all()); }, kSoonMs));
  EXPECT_TRUE(all_see_up(all(), {1, 2, 3}));
}

// A node that cannot be reached does not take the lead: the leader keeps it.
TEST_F(GroupTest, ALeadHandedToANodeOutOfReachStaysWithTheLeader) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));
  ASSERT_EQ(leader(), 1u);
  world_.partition({{1, 2}, {3}});
  auto answer = std::make_shared<Answer>();
  member(1).transfer_leadership(3, [answer](Status s) { answer->status = std::move(s); });
  const Status s = await(answer, 2 * kElectionTimeoutMs + kSoonMs);
  EXPECT_EQ(s.code(), Errc::timed_out) << s.to_string();
  world_.heal();
  ASSERT_TRUE(wait([&] { return leader() != 0 && converged(all()); }, kSoonMs));
  EXPECT_NE(leader(), 3u);
}

// --- failure detection and restart ---------------------------------------------------------

TEST_F(GroupTest, LeaderRecordsACrashedFollowerDownAfterDownAfter) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));
  ASSERT_EQ(leader(), 1u);
  std::uint64_t crashed_at = world_.now_ms();
  crash(3);

  // Not before it has been silent for down_after, less a heartbeat and a message's flight...
  world_.run_until(crashed_at + kDownAfterMs - 300);
  EXPECT_TRUE(recorded_up(1, 3)) << "recorded down after " << world_.now_ms() - crashed_at
                                 << " ms";
  // ...and no later than a few heartbeats after.
  ASSERT_TRUE(world_.run_until([&] { return recorded_down(1, 3); },
                               crashed_at + kDownAfterMs + 1'000))
      << "still up " << world_.now_ms() - crashed_at << " ms after the crash";
  ASSERT_TRUE(wait([&] { return converged({1, 2}); }, kSoonMs));
  EXPECT_TRUE(recorded_down(2, 3));
  EXPECT_EQ(member(2).view().up_nodes(), (std::vector<NodeId>{1, 2}));
}

TEST_F(GroupTest, RestartedNodeIsRecordedUpAndCatchesUpKeepingItsConfiguration) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));
  for (const char* tier : {"gold", "silver", "bronze"}) {
    ASSERT_TRUE(propose_and_wait(1, Change::create_object("tier", tier, tier)).ok());
  }
  ASSERT_TRUE(wait([&] { return converged(all()); }, kSoonMs));
  const ConfigObject silver = *member(3).view().object("tier", "silver");
  const ConfigObject bronze = *member(3).view().object("tier", "bronze");

  crash(3);
  ASSERT_TRUE(wait([&] { return recorded_down(1, 3); }, kDownAfterMs + 1'000));
  // What changes while it is down, it learns when it comes back.
  ASSERT_TRUE(propose_and_wait(1, Change::update_object("tier", "gold", "gold-2")).ok());
  ASSERT_TRUE(propose_and_wait(1, Change::create_object("export", "/ifs", "{}")).ok());

  ASSERT_NO_FATAL_FAILURE(restart(3));
  ASSERT_TRUE(wait([&] { return recorded_up(1, 3) && converged(all()); }, kSoonMs))
      << "node 3: applied " << member(3).applied() << " of " << member(1).applied();
  EXPECT_EQ(member(3).epoch(), member(1).epoch());
  ASSERT_EQ(member(3).view().objects, member(1).view().objects);
  ASSERT_EQ(member(3).view().objects_of("tier").size(), 3u);
  EXPECT_EQ(*member(3).view().object("tier", "silver"), silver);
  EXPECT_EQ(*member(3).view().object("tier", "bronze"), bronze);
  EXPECT_EQ(member(3).view().object("tier", "gold")->body, "gold-2");
  EXPECT_NE(member(3).view().object("export", "/ifs"), nullptr);
  EXPECT_TRUE(wait([&] { return all_see_up(all(), {1, 2, 3}); }, kSoonMs));
}

TEST_F(GroupTest, RestartedNodeKeepsItsConfigurationWhenItsLogWasCompacted) {
  // Snapshots every few entries: the restarted node loads its own snapshot, and the leader,
  // which kept only two entries behind its own, must send it one.
  options_.snapshot_threshold = 4;
  options_.snapshot_trailing = 2;
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(propose_and_wait(1, Change::create_object("sysctl", "k" + std::to_string(i),
                                                          std::to_string(i)))
                    .ok());
  }
  ASSERT_TRUE(wait([&] { return converged(all()); }, kSoonMs));
  std::vector<ConfigObject> before = member(3).view().objects;

  crash(3);
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(propose_and_wait(1, Change::update_object("sysctl", "k" + std::to_string(i),
                                                          "v2"))
                    .ok());
  }
  ASSERT_NO_FATAL_FAILURE(restart(3));
  ASSERT_TRUE(wait([&] { return recorded_up(1, 3) && converged(all()); }, kSoonMs))
      << "node 3: applied " << member(3).applied() << " of " << member(1).applied();
  ASSERT_EQ(member(3).view().objects, member(1).view().objects);
  ASSERT_EQ(member(3).view().objects.size(), before.size());
  EXPECT_EQ(member(3).view().object("sysctl", "k7")->body, "v2");
}

// --- partitions ----------------------------------------------------------------------------

TEST_F(GroupTest, MinorityCannotChangeTheViewWhileTheMajorityCanAndAllConvergeAfterHealing) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(5));
  NodeId old_leader = leader();
  ASSERT_NE(old_leader, 0u);
  // The leader finds itself on the small side.
  std::vector<NodeId> minority{old_leader};
  std::vector<NodeId> majority;
  for (NodeId id : all()) {
    if (id == old_leader) continue;
    (minority.size() < 2 ? minority : majority).push_back(id);
  }
  std::uint64_t applied_before = member(minority[0]).applied();
  world_.partition({minority, majority});

  // The old leader's change cannot commit: it fails once the leader sees it lost its majority.
  auto stranded = propose(old_leader, Change::create_object("tier", "minority", "{}"));
  Status s = await(stranded, kElectionTimeoutMs + kSoonMs);
  EXPECT_EQ(s.code(), Errc::unavailable) << s.to_string();

  NodeId new_leader = 0;
  ASSERT_TRUE(wait([&] { return (new_leader = leader_among(majority)) != 0; }, kSoonMs));
  Status taken = propose_and_wait(new_leader, Change::create_object("tier", "majority", "{}"));
  ASSERT_TRUE(taken.ok()) << taken.to_string();
  ASSERT_TRUE(wait([&] { return converged(majority); }, kSoonMs));

  run_for(3 * kDownAfterMs);
  for (NodeId id : minority) {
    EXPECT_FALSE(member(id).is_leader()) << "node " << id;
    Status refused = propose_and_wait(id, Change::create_object("tier", "minority-2", "{}"));
    EXPECT_EQ(refused.code(), Errc::unavailable) << "node " << id << ": " << refused.to_string();
    EXPECT_EQ(member(id).applied(), applied_before) << "node " << id;
    EXPECT_EQ(member(id).view().object("tier", "majority"), nullptr) << "node " << id;
  }
  for (NodeId id : majority) {
    ASSERT_NE(member(id).view().object("tier", "majority"), nullptr) << "node " << id;
  }

  world_.heal();
  ASSERT_TRUE(wait([&] { return converged(all()) && all_see_up(all(), all()); }, 3 * kSoonMs));
  for (NodeId id : all()) {
    EXPECT_NE(member(id).view().object("tier", "majority"), nullptr) << "node " << id;
    EXPECT_EQ(member(id).view().object("tier", "minority"), nullptr) << "node " << id;
    EXPECT_EQ(member(id).view().object("tier", "minority-2"), nullptr) << "node " << id;
  }
  EXPECT_EQ(stranded->calls, 1);
}

// --- epochs and observers ------------------------------------------------------------------

TEST_F(GroupTest, EpochRisesByOnePerSuccessfulChangeAndNotForARefusedOne) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));
  struct Step {
    Change change;
    Errc expected;
  };
  const std::vector<Step> steps{
      {Change::create_object("tier", "gold", "1"), Errc::ok},
      {Change::create_object("tier", "gold", "2"), Errc::already_exists},
      {Change::update_object("tier", "gold", "3"), Errc::ok},
      {Change::update_object("tier", "lead", "4"), Errc::not_found},
      {Change::delete_object("tier", "gold"), Errc::ok},
      {Change::delete_object("tier", "gold"), Errc::not_found},
  };
  for (const Step& step : steps) {
    Epoch epoch = member(1).epoch();
    std::uint64_t applied = member(1).applied();
    Status s = propose_and_wait(1, step.change);
    ASSERT_EQ(s.code(), step.expected) << s.to_string();
    ASSERT_TRUE(wait([&] { return converged(all()); }, kSoonMs));
    for (NodeId id : all()) {
      EXPECT_EQ(member(id).epoch(), epoch + (s.ok() ? 1 : 0))
          << "node " << id << " after " << s.to_string();
      EXPECT_EQ(member(id).applied(), applied + 1) << "node " << id;
      if (step.change.kind == Change::Kind::update_object && s.ok()) {
        EXPECT_EQ(member(id).view().object("tier", "gold")->changed, epoch + 1) << "node " << id;
      }
    }
  }
}

TEST_F(GroupTest, ObserversSeeEveryChangeOncePerNodeInOrder) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));
  // Proposed together, applied in the order proposed; one of them is refused.
  std::vector<std::shared_ptr<Answer>> answers;
  for (const char* name : {"a", "b", "c", "b", "d"}) {
    answers.push_back(propose(1, Change::create_object("tier", name, "{}")));
  }
  ASSERT_TRUE(wait([&] { return converged(all()) && answers.back()->status.has_value(); },
                   kSoonMs));
  run_for(1'000);

  for (NodeId id : all()) {
    const std::vector<Seen>& history = seen(id);
    ASSERT_EQ(history.size(), member(id).applied()) << "node " << id;
    Epoch epoch = 0;
    for (std::size_t i = 0; i < history.size(); ++i) {
      EXPECT_EQ(history[i].applied, i + 1) << "node " << id;
      epoch += history[i].outcome == Errc::ok ? 1 : 0;
      EXPECT_EQ(history[i].epoch, epoch) << "node " << id << " at #" << i + 1;
    }
    EXPECT_EQ(history.back().epoch, member(id).epoch()) << "node " << id;
    EXPECT_EQ(history.back().digest, member(id).digest()) << "node " << id;
    EXPECT_EQ(history, seen(1)) << "node " << id << " saw another history than node 1";

    std::vector<std::pair<std::string, Errc>> tiers;
    for (const Seen& s : history) {
      if (s.object.starts_with("tier/")) tiers.emplace_back(s.object, s.outcome);
    }
    EXPECT_EQ(tiers, (std::vector<std::pair<std::string, Errc>>{{"tier/a", Errc::ok},
                                                                 {"tier/b", Errc::ok},
                                                                 {"tier/c", Errc::ok},
                                                                 {"tier/b", Errc::already_exists},
                                                                 {"tier/d", Errc::ok}}))
        << "node " << id;
  }
  for (const auto& answer : answers) EXPECT_EQ(answer->calls, 1);
  EXPECT_EQ(answers[3]->status->code(), Errc::already_exists);
}

// --- leases --------------------------------------------------------------------------------

constexpr std::uint64_t kLeaseMs = 1'500;

TEST_F(GroupTest, EveryNodeOfAConnectedGroupHoldsItsLeaseWithoutABreak) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));
  ASSERT_TRUE(wait([&] {
    for (NodeId id : all()) {
      if (!member(id).lease()->held()) return false;
    }
    return true;
  }, kSoonMs));
  const std::uint64_t since = world_.now_ms();
  for (int step = 0; step < 200; ++step) {
    run_for(50);
    for (NodeId id : all()) {
      ASSERT_TRUE(member(id).lease()->held_since(since))
          << "node " << id << " lost its lease " << world_.now_ms() - since << " ms in";
    }
  }
}

// When `viewer` first applies a change recording `node` down (or up), by the shared clock.
class Recorded {
 public:
  Recorded(GroupMember& viewer, SimWorld& world, NodeId node, bool up = false) {
    viewer.on_applied([this, &world, node, up](const AppliedChange& a) {
      if (a.change.kind == Change::Kind::set_node_state && a.change.node.id == node &&
          a.change.node.up == up && !at_ms) {
        at_ms = world.now_ms();
      }
    });
  }
  std::optional<std::uint64_t> at_ms;
};

TEST_F(GroupTest, AFollowerCutOffLosesItsLeaseWithinALeaseAndIsRecordedDownOnlyAfter) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));
  ASSERT_EQ(leader(), 1u);
  ASSERT_TRUE(wait([&] { return member(3).lease()->held(); }, kSoonMs));
  Recorded down(member(1), world_, 3);
  const std::uint64_t cut_at = world_.now_ms();
  world_.partition({{1, 2}, {3}});

  ASSERT_TRUE(wait([&] { return down.at_ms.has_value(); }, kSoonMs));
  const std::uint64_t lapsed_at = member(3).lease()->until_ms();
  EXPECT_LE(lapsed_at, cut_at + kLeaseMs);
  EXPECT_LE(lapsed_at, *down.at_ms) << "recorded down while its lease ran";
  EXPECT_FALSE(member(3).lease()->held());

  world_.heal();
  ASSERT_TRUE(wait([&] { return recorded_up(1, 3) && member(3).lease()->held(); }, kSoonMs))
      << "no lease again after the cut healed";
}

TEST_F(GroupTest, TheFailPointIgnoringLeasesMakesALapsedLeaseCountAsHeldUntilSwitchedOff) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));
  ASSERT_TRUE(wait([&] { return member(3).lease()->held(); }, kSoonMs));
  world_.partition({{1, 2}, {3}});
  ASSERT_TRUE(wait([&] { return !member(3).lease()->held(); }, kSoonMs));

  fail_points::set_switch(fail_points::kIgnoreLeases, true);
  const bool held_while_ignored = member(3).lease()->held();
  fail_points::set_switch(fail_points::kIgnoreLeases, false);
  EXPECT_TRUE(held_while_ignored);
  EXPECT_FALSE(member(3).lease()->held());
}

TEST_F(GroupTest, ALeaseLapsesWhenItsClockStepsBackAndNoGrantAskedBeforeTheStepRenewsIt) {
  constexpr NodeId kNode = 9;
  world_.run_until(10'000);
  Lease lease(world_.loop(kNode));
  const std::uint64_t asked = lease.now_ms();
  lease.extend(asked, asked + kLeaseMs);
  ASSERT_TRUE(lease.held());

  world_.shift_clock(kNode, -500);
  EXPECT_FALSE(lease.held()) << "held on after its clock stepped back";
  lease.extend(asked, asked + kLeaseMs);
  EXPECT_FALSE(lease.held()) << "a grant asked for before the step renewed it";

  run_for(10);
  const std::uint64_t asked_after = lease.now_ms();
  EXPECT_GT(asked_after, asked) << "the lease's clock ran back";
  lease.extend(asked_after, asked_after + kLeaseMs);
  EXPECT_TRUE(lease.held());
}

TEST_F(GroupTest, ANodeWhoseClockJumpsEitherWayLosesItsLeaseAtOnceAndSoonHoldsOneAgain) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));
  run_for(10'000);  // so that a step back does not stop at 0
  for (const std::int64_t jump : {-5'000, 5'000}) {
    ASSERT_TRUE(wait([&] { return member(3).lease()->held(); }, kSoonMs)) << "jump " << jump;
    world_.shift_clock(3, jump);
    EXPECT_FALSE(member(3).lease()->held()) << "held on across a jump of " << jump << " ms";
  }
  EXPECT_TRUE(wait([&] { return member(3).lease()->held(); }, kSoonMs));
}

TEST_F(GroupTest, ALeaderWhoseClockJumpsRecordsNoNodeDownBeforeItsLeaseRanOut) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));
  ASSERT_EQ(leader(), 1u);
  ASSERT_TRUE(wait([&] {
    for (NodeId id : all()) {
      if (!member(id).lease()->held()) return false;
    }
    return true;
  }, kSoonMs));
  Recorded node2_down(member(2), world_, 2);
  Recorded node3_down(member(2), world_, 3);
  for (const std::int64_t jump : {10'000, -12'000}) {
    world_.shift_clock(1, jump);
    run_for(2 * kDownAfterMs);
    ASSERT_EQ(leader(), 1u) << "the jump of " << jump << " ms cost node 1 the lead";
  }
  EXPECT_FALSE(node2_down.at_ms.has_value()) << "node 2 recorded down at " << *node2_down.at_ms;
  EXPECT_FALSE(node3_down.at_ms.has_value()) << "node 3 recorded down at " << *node3_down.at_ms;

  // Jumps while a node is silent do not have it recorded down while its lease may run (its
  // clock, not shifted, is the world's).
  world_.partition({{1, 2}, {3}});
  for (int jump = 0; jump < 2; ++jump) {
    run_for(kHeartbeatMs * 3);
    world_.shift_clock(1, 10'000);
  }
  ASSERT_TRUE(wait([&] { return node3_down.at_ms.has_value(); }, kSoonMs));
  EXPECT_LE(member(3).lease()->until_ms(), *node3_down.at_ms) << "recorded down while its lease ran";
}

TEST_F(GroupTest, OpenRefusesTimingsThatLeaveTooLittleBetweenALeaseAndItsNodeRecordedDown) {
  for (const std::int64_t lease_ms : {2'000, 1'900}) {
    GroupOptions o = options(1);
    o.lease = std::chrono::milliseconds(lease_ms);
    auto opened = GroupMember::open(world_.loop(1), world_.transport(1), o);
    EXPECT_EQ(opened.status().code(), Errc::invalid_argument) << "a lease of " << lease_ms << " ms";
  }
}

TEST_F(GroupTest, AnIsolatedLeaderLosesItsLeaseBeforeTheNewLeaderRecordsItDown) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(5));
  const NodeId old_leader = leader();
  ASSERT_NE(old_leader, 0u);
  ASSERT_TRUE(wait([&] { return member(old_leader).lease()->held(); }, kSoonMs));
  std::vector<NodeId> others;
  for (NodeId id : all()) {
    if (id != old_leader) others.push_back(id);
  }
  Recorded down(member(others[0]), world_, old_leader);
  const std::uint64_t cut_at = world_.now_ms();
  world_.partition({{old_leader}, others});

  ASSERT_TRUE(wait([&] { return down.at_ms.has_value(); }, kSoonMs));
  const std::uint64_t lapsed_at = member(old_leader).lease()->until_ms();
  EXPECT_LE(lapsed_at, cut_at + kLeaseMs);
  EXPECT_LE(lapsed_at, *down.at_ms) << "recorded down while its lease ran";
  for (NodeId id : others) EXPECT_TRUE(member(id).lease()->held()) << "node " << id;
}

TEST_F(GroupTest, ANodeRecordedDownWhileAliveGetsNoLeaseFirstAndAnotherOnlyOnceItCaughtUp) {
  ASSERT_NO_FATAL_FAILURE(form_cluster(3));
  ASSERT_EQ(leader(), 1u);
  ASSERT_TRUE(wait([&] { return member(3).lease()->held(); }, kSoonMs));
  const std::uint64_t fences = member(3).lease()->fences();
  Recorded down(member(1), world_, 3);
  Recorded up_again(member(3), world_, 3, true);
  // As the lock manager does with a node that leaves a callback unanswered.
  const std::uint64_t asked_at = world_.now_ms();
  auto answer = propose(1, Change::set_node_state(3, false));

  ASSERT_TRUE(wait([&] { return down.at_ms.has_value(); }, kSoonMs));
  EXPECT_GE(*down.at_ms, asked_at + kDownAfterMs);
  EXPECT_LE(member(3).lease()->until_ms(), *down.at_ms) << "recorded down while its lease ran";
  EXPECT_TRUE(await(answer).ok());

  // Heard from, it is recorded up again; it holds a lease again only once it applied that.
  std::uint64_t lease_again_at = 0;
  ASSERT_TRUE(wait([&] {
    if (!lease_again_at && member(3).lease()->held()) lease_again_at = world_.now_ms();
    return lease_again_at != 0 && up_again.at_ms.has_value();
  }, kSoonMs));
  EXPECT_TRUE(recorded_up(1, 3));
  EXPECT_GE(lease_again_at, *up_again.at_ms);
  // A call that waited for the lease across this knows it (nfsd's held_lease).
  EXPECT_EQ(member(3).lease()->fences(), fences + 1);
}

}  // namespace
}  // namespace tidepool::cluster
