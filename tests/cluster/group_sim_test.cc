// The group view under a hostile network, in simulation: five nodes, random partitions,
// message loss, duplication and reordering, nodes crashing and restarting, and nodes recorded
// down while alive (as the lock manager does with one that leaves a callback unanswered),
// over a thousand seeds. Checked throughout: no two nodes ever apply different changes at the
// same position of the history (every node's applied log is a prefix of the longest), no side
// without a majority ever commits, and no node is recorded down or removed while its lease
// (cluster/lease.h) still runs — one clock serves every node here. Checked at the end: once
// the network heals and every node is back, all nodes converge on the same history, see each
// other up, hold their leases, and accept new changes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "cluster/group.h"
#include "cluster/sim.h"
#include "common/fail_points.h"
#include "tests/seeds/seeds.h"

namespace tidepool::cluster {
namespace {

namespace fs = std::filesystem;

constexpr NodeId kNodes = 5;
constexpr std::uint64_t kChaosMs = 15'000;
constexpr std::uint64_t kSettleMs = 60'000;

fs::path scratch_root() {
  // tmpfs when there is one: the simulated disks fsync on every Raft append.
  fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
  return base / ("tidepool-sim-" + std::to_string(::getpid()));
}

NodeInfo info(NodeId id) {
  return NodeInfo{id, "node-" + std::to_string(id), "sim:" + std::to_string(id),
                  "127.0.0." + std::to_string(id), "127.0.0." + std::to_string(id) + ":8080",
                  id <= 2 ? "f800" : "h500", true};
}

class Scenario {
 public:
  explicit Scenario(std::uint64_t seed)
      : seed_(seed), world_(seed), dir_(scratch_root() / std::to_string(seed)) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~Scenario() {
    members_.clear();
    // A replay can keep the nodes' Raft logs for inspection.
    if (std::getenv("TIDEPOOL_SIM_KEEP") == nullptr) fs::remove_all(dir_);
  }

  // Returns the first violation, or nothing when the run held every invariant.
  std::optional<std::string> run() {
    form_cluster();
    if (failure_) return failure_;
    chaos();
    if (failure_) return failure_;
    settle();
    return failure_;
  }

  std::uint64_t proposed() const { return proposed_; }
  std::uint64_t committed() const { return committed_; }

  std::string summary() const {
    std::ostringstream out;
    out << "seed " << seed_ << " at " << world_.now_ms() << " ms: " << proposed_ << " proposed, " << committed_
        << " committed, longest history " << oracle_.size() << ", " << world_.messages_sent()
        << " messages sent";
    return out.str();
  }

 private:
  struct Proposal {
    NodeId node;
    int episode;        // partition episode it was proposed in, 0 when the network was whole
    bool from_minority;  // proposed on a node cut off from a majority
  };

  GroupOptions options(NodeId id) const {
    GroupOptions o;
    o.id = id;
    o.address = info(id).backend_address;
    o.raft_log_path = (dir_ / ("raft-" + std::to_string(id) + ".db")).string();
    o.config_db_path = ":memory:";
    // Small snapshots, so that restarts and lagging nodes go through snapshot installs.
    o.snapshot_threshold = 24;
    o.snapshot_trailing = 8;
    return o;
  }

  void fail(std::string what) {
    if (!failure_) failure_ = "t=" + std::to_string(world_.now_ms()) + "ms: " + std::move(what);
  }

  void boot(NodeId id, bool bootstrap) {
    auto opened = GroupMember::open(world_.loop(id), world_.transport(id), options(id));
    if (!opened.ok()) return fail("node " + std::to_string(id) + " cannot open: " +
                                  opened.status().to_string());
    auto& member = members_[id];
    member = std::move(opened).value();
    member->on_applied([this, id](const AppliedChange& applied) { observe(id, applied); });
    if (bootstrap) {
      if (Status s = member->bootstrap(info(id)); !s.ok()) return fail(s.to_string());
    }
    if (Status s = member->start(); !s.ok()) {
      fail("node " + std::to_string(id) + " cannot start: " + s.to_string());
    }
  }

  void observe(NodeId node, const AppliedChange& applied) {
    auto [it, first] = oracle_.try_emplace(applied.applied, applied.digest, node);
    if (!first && it->second.first != applied.digest) {
      fail("history diverged: node " + std::to_string(node) + " applied change #" +
           std::to_string(applied.applied) + " unlike node " + std::to_string(it->second.second));
    }
    const Change& change = applied.change;
    const bool takes_a_node = (change.kind == Change::Kind::set_node_state && !change.node.up) ||
                              change.kind == Change::Kind::remove_node;
    // Only the first node to apply it acts on the change when it is made; one that applies it
    // later, catching up, is fenced by the later changes it has yet to apply.
    if (takes_a_node && applied.outcome.ok() && first) {
      auto taken = members_.find(change.node.id);
      if (taken != members_.end() && taken->second != nullptr &&
          taken->second->lease()->held()) {
        fail("node " + std::to_string(node) + " applied change #" +
             std::to_string(applied.applied) + " taking node " + std::to_string(change.node.id) +
             " while its lease runs until " + std::to_string(taken->second->lease()->until_ms()) +
             " ms");
      }
    }
    const std::string& name = applied.change.object.name;
    if (applied.change.kind != Change::Kind::create_object || name.empty() || name[0] != 't') {
      return;
    }
    auto proposal = proposals_.find(std::stoull(name.substr(1)));
    if (proposal != proposals_.end() && proposal->second.from_minority &&
        proposal->second.episode == episode_ && partitioned_) {
      fail("node " + std::to_string(node) + " applied change " + name + " proposed on node " +
           std::to_string(proposal->second.node) + " on a side without a majority");
    }
  }

  GroupMember* leader() {
    for (auto& [id, member] : members_) {
      if (member && world_.is_up(id) && member->is_leader()) return member.get();
    }
    return nullptr;
  }

  bool wait(const std::function<bool()>& done, std::uint64_t for_ms) {
    return world_.run_until([&] { return failure_.has_value() || done(); },
                            world_.now_ms() + for_ms) &&
           !failure_;
  }

  void form_cluster() {
    for (NodeId id = 1; id <= kNodes; ++id) boot(id, id == 1);
    if (!wait([&] { return members_[1]->view().node(1) != nullptr; }, 10'000)) {
      return fail("the bootstrapped node never registered itself");
    }
    for (NodeId id = 2; id <= kNodes && !failure_; ++id) {
      std::optional<Status> added;
      members_[1]->add_node(info(id), [&added](Status s) { added = std::move(s); });
      if (!wait([&] { return added.has_value(); }, 20'000) || !added->ok()) {
        return fail("adding node " + std::to_string(id) + " failed: " +
                    (added ? added->to_string() : "no answer"));
      }
    }
  }

  void propose_on(NodeId node) {
    std::uint64_t tag = next_tag_++;
    bool from_minority = partitioned_ && minority_.contains(node);
    proposals_[tag] = Proposal{node, partitioned_ ? episode_ : 0, from_minority};
    proposed_++;
    int episode = episode_;
    members_[node]->propose(
        Change::create_object("obj", "t" + std::to_string(tag), std::to_string(seed_)),
        [this, node, from_minority, episode](Status s) {
          if (!s.ok()) return;
          committed_++;
          if (from_minority && partitioned_ && episode == episode_) {
            fail("node " + std::to_string(node) +
                 " reported a change committed on a side without a majority");
          }
        });
  }

  NodeId random_node(bool up) {
    std::vector<NodeId> candidates;
    for (NodeId id = 1; id <= kNodes; ++id) {
      if (world_.is_up(id) == up) candidates.push_back(id);
    }
    if (candidates.empty()) return 0;
    return candidates[world_.random_between(0, candidates.size() - 1)];
  }

  void partition() {
    std::vector<NodeId> order;
    for (NodeId id = 1; id <= kNodes; ++id) order.push_back(id);
    for (std::size_t i = order.size() - 1; i > 0; --i) {
      std::swap(order[i], order[world_.random_between(0, i)]);
    }
    // 3|2, 4|1, or 2|2|1, in which no side has a majority.
    std::vector<std::vector<NodeId>> sides;
    switch (world_.random_between(0, 2)) {
      case 0: sides = {{order[0], order[1], order[2]}, {order[3], order[4]}}; break;
      case 1: sides = {{order[0], order[1], order[2], order[3]}, {order[4]}}; break;
      default: sides = {{order[0], order[1]}, {order[2], order[3]}, {order[4]}}; break;
    }
    minority_.clear();
    for (const auto& side : sides) {
      if (side.size() * 2 < kNodes) minority_.insert(side.begin(), side.end());
    }
    world_.partition(sides);
    partitioned_ = true;
    episode_++;
  }

  void heal() {
    world_.heal();
    partitioned_ = false;
    minority_.clear();
  }

  void crash(NodeId id) {
    world_.crash(id);
    members_[id].reset();
  }

  void restart(NodeId id) {
    world_.restart(id);
    boot(id, false);
  }

  void chaos() {
    std::uint64_t end = world_.now_ms() + kChaosMs;
    while (world_.now_ms() < end && !failure_) {
      world_.run_until([&] { return failure_.has_value(); },
                       world_.now_ms() + world_.random_between(50, 800));
      if (failure_) return;
      std::uint64_t dice = world_.random_between(0, 99);
      if (dice < 50) {
        // Most proposals go where the node they reached says the leader is, as the admin
        // plane forwards them; the rest are tried wherever they land.
        NodeId node = random_node(true);
        if (node == 0) continue;
        NodeId leader = members_[node]->leader();
        if (leader != 0 && world_.is_up(leader) && world_.random_between(0, 9) < 7) node = leader;
        if (world_.random_between(0, 9) == 0) {
          members_[node]->propose(Change::set_node_state(random_node(true), false), [](Status) {});
        } else {
          propose_on(node);
        }
      } else if (dice < 60) {
        if (!partitioned_) partition();
      } else if (dice < 70) {
        heal();
      } else if (dice < 80) {
        if (kNodes - static_cast<NodeId>(std::count_if(members_.begin(), members_.end(),
                                                       [](auto& m) { return m.second != nullptr; })) <
            2) {
          if (NodeId node = random_node(true)) crash(node);
        }
      } else if (dice < 90) {
        if (NodeId node = random_node(false)) restart(node);
      } else {
        SimFaults faults;
        faults.max_latency_ms = static_cast<std::uint32_t>(world_.random_between(2, 60));
        faults.loss = static_cast<double>(world_.random_between(0, 30)) / 100;
        faults.duplicate = static_cast<double>(world_.random_between(0, 10)) / 100;
        world_.set_faults(faults);
      }
    }
  }

  bool converged() {
    GroupMember* first = members_[1].get();
    for (auto& [id, member] : members_) {
      if (!member || member->applied() != first->applied() ||
          member->digest() != first->digest()) {
        return false;
      }
      const GroupView& view = member->view();
      if (view.up_nodes().size() != kNodes) return false;
    }
    return leader() != nullptr;
  }

  void settle() {
    heal();
    world_.set_faults(SimFaults{});
    for (NodeId id = 1; id <= kNodes; ++id) {
      if (!world_.is_up(id)) restart(id);
    }
    if (failure_) return;
    if (!wait([&] { return converged(); }, kSettleMs)) {
      std::ostringstream state;
      for (auto& [id, member] : members_) {
        state << " node " << id << ": applied " << member->applied() << " up "
              << member->view().up_nodes().size() << (member->is_leader() ? " leader" : "")
              << ";";
      }
      return fail("no convergence after the network healed:" + state.str());
    }
    // The healed cluster still takes changes, and every node applies them. A leadership
    // change right after healing may refuse one attempt, as it would refuse a client's.
    std::optional<Status> done;
    for (int attempt = 0; attempt < 5 && !(done && done->ok()); ++attempt) {
      done.reset();
      if (!wait([&] { return leader() != nullptr; }, 10'000)) break;
      leader()->propose(Change::create_object("obj", "final", "{}"),
                        [&done](Status s) { done = std::move(s); });
      if (!wait([&] { return done.has_value(); }, 10'000)) break;
      // A retry after an unknown outcome may find the first attempt applied.
      if (done->code() == Errc::already_exists) done = Status{};
    }
    if (!done || !done->ok()) {
      return fail("the healed cluster did not accept a change: " +
                  (done ? done->to_string() : "no answer"));
    }
    if (!wait([&] {
          for (auto& [id, member] : members_) {
            if (!member->lease()->held()) return false;
          }
          return true;
        }, 10'000)) {
      std::ostringstream state;
      for (auto& [id, member] : members_) {
        state << " node " << id << ": lease until " << member->lease()->until_ms() << ";";
      }
      fail("the healed cluster's nodes do not all hold their leases:" + state.str());
    }
    if (!wait([&] {
          for (auto& [id, member] : members_) {
            if (member->view().object("obj", "final") == nullptr) return false;
          }
          return true;
        }, 10'000)) {
      std::ostringstream state;
      for (auto& [id, member] : members_) {
        state << " node " << id << ": applied " << member->applied() << " leader "
              << member->leader() << ";";
      }
      fail("a change accepted after healing did not reach every node:" + state.str());
    }
  }

  std::uint64_t seed_;
  SimWorld world_;
  fs::path dir_;
  std::map<NodeId, std::unique_ptr<GroupMember>> members_;
  std::optional<std::string> failure_;
  // Position in the history -> (digest after it, first node seen applying it).
  std::map<std::uint64_t, std::pair<std::uint64_t, NodeId>> oracle_;
  std::map<std::uint64_t, Proposal> proposals_;
  std::uint64_t next_tag_ = 1;
  std::uint64_t proposed_ = 0;
  std::uint64_t committed_ = 0;
  bool partitioned_ = false;
  int episode_ = 0;
  std::set<NodeId> minority_;
};

std::uint64_t env_number(const char* name, std::uint64_t fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::strtoull(value, nullptr, 10) : fallback;
}

struct Outcome {
  std::uint64_t proposed = 0;   // during the chaos
  std::uint64_t committed = 0;  // of those, reported committed to the node that proposed it
};

// Runs one seed; what became of the changes its nodes proposed.
Outcome run_seed(std::uint64_t seed, bool verbose = false) {
  Scenario scenario(seed);
  std::optional<std::string> failure = scenario.run();
  if (verbose) std::printf("%s\n", scenario.summary().c_str());
  EXPECT_FALSE(failure.has_value())
      << *failure << "\n  " << scenario.summary() << "\n  replay: TIDEPOOL_SIM_SEED=" << seed
      << " group_sim_test --gtest_filter=GroupSimReplay.ReplayOneSeed";
  return {scenario.proposed(), scenario.committed()};
}

// Seeds from the commit under test each shard runs besides its fixed ones (tests/seeds/seeds.h).
constexpr std::size_t kCommitSeedsPerShard = 2;

// Ten shards of seeds, so that ctest runs them in parallel: 1,000 fixed runs in all by default.
class GroupSim : public ::testing::TestWithParam<int> {};

TEST_P(GroupSim, ViewNeverDivergesMinorityNeverCommitsAndHealedNodesConverge) {
  std::uint64_t per_shard = env_number("TIDEPOOL_SIM_RUNS_PER_SHARD", 100);
  const std::vector<std::uint64_t> seeds = test::shard_seeds(
      "group_sim", static_cast<std::uint64_t>(GetParam()), per_shard, kCommitSeedsPerShard);
  // A cluster that commits nothing keeps every safety invariant. Each run ends by committing a
  // change once healed (settle()); through the chaos too, a good share of what nodes propose
  // must commit: about half did over seeds 1 to 300 (4,827 proposed, 2,359 committed), and a
  // few runs cut so often that none of theirs did.
  Outcome all;
  for (const std::uint64_t seed : seeds) {
    const Outcome run = run_seed(seed);
    if (HasFailure()) return;
    all.proposed += run.proposed;
    all.committed += run.committed;
  }
  // A share of a handful of runs says little: one run can be all cuts.
  if (per_shard >= 20) {
    EXPECT_GE(all.committed * 4, all.proposed) << all.committed << " of " << all.proposed
                                               << " changes proposed during the chaos committed";
  }
}

INSTANTIATE_TEST_SUITE_P(Shards, GroupSim, ::testing::Range(0, 10));

// Removes the scratch folder the runs' own folders lived in.
class ScratchCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    if (std::getenv("TIDEPOOL_SIM_KEEP") == nullptr) fs::remove_all(scratch_root());
  }
};
const auto* const kScratchCleanup = ::testing::AddGlobalTestEnvironment(new ScratchCleanup);

// The checker is shown to fire: with a leader that records a node down after a heartbeat of
// silence, as one that forgot leases would, the first seeds see a node recorded down while its
// lease runs.
TEST(GroupSimChecker, ReportsANodeRecordedDownWhileItsLeaseRuns) {
  const fail_points::SwitchedOn broken(fail_points::kRecordDownWhileLeaseRuns);
  std::string failures;
  for (std::uint64_t seed = 1; seed <= 10 && failures.empty(); ++seed) {
    Scenario scenario(seed);
    failures = scenario.run().value_or("");
  }
  EXPECT_NE(failures.find("while its lease runs"), std::string::npos)
      << "the checker said: " << failures;
}

// Seeds that once found a bug, run every time.
// - 6534219653044057528 (a commit seed of e05c5a7): a leader elected in a new term revoked a
//   node's leases before its first heartbeat tick, which then forgot the revocation; the node
//   was granted leases again and recorded down 2 s later while its lease ran.
TEST(GroupSimRegression, SeedsThatFoundBugsPass) {
  for (const std::uint64_t seed : {std::uint64_t{6534219653044057528u}}) {
    run_seed(seed);
    if (HasFailure()) return;
  }
}

TEST(GroupSimReplay, ReplayOneSeed) {
  std::uint64_t seed = env_number("TIDEPOOL_SIM_SEED", 0);
  if (seed == 0) GTEST_SKIP() << "set TIDEPOOL_SIM_SEED to replay one seed";
  run_seed(seed, true);
}

}  // namespace
}  // namespace tidepool::cluster
