// Deterministic simulation of the distributed lock manager: several nodes on the simulated
// network, each with users that lock, convert, hold and release byte ranges of a few shared
// resources at random, and give way when a blocking callback asks. The network delays,
// reorders, loses and duplicates messages; partitions come and heal; nodes are killed (the
// group view then drops them) and restarted (the view takes them back); live nodes are dropped
// from the view and taken back (a node marked down for not answering), which fences them: their
// users lose every lock. The dropped node learns of it first: one that learnt only after others
// were granted its locks could go on using them meanwhile — closing that needs leases, which the
// lock manager does not have yet.
//
// Checked throughout: no grant ever meets an incompatible lock of another owner held on an
// overlapping range. Checked once the faults stop: every node's own record of its locks equals the
// coordinators' tables (recovery lost nothing and invented nothing), and when users stop asking
// every request still open ends — granted, refused or timed out — and every table empties.
// A failing seed replays exactly: TIDEPOOL_LOCK_SIM_SEED=n lock_sim_test
// --gtest_filter=LockSimReplay.ReplayOneSeed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cluster/sim.h"
#include "common/fail_points.h"
#include "lockmgr/lock_manager.h"
#include "tests/seeds/seeds.h"

namespace tidepool::lockmgr {
namespace {

using cluster::NodeId;
using cluster::SimWorld;

constexpr NodeId kDriver = 1000;  // the scenario's own loop: faults, kills, view changes
constexpr Range kRanges[] = {{0, 100}, {50, 150}, {100, 200}, {150, 151}, kWholeResource};
constexpr Mode kModes[] = {
    Mode::concurrent_read, Mode::concurrent_write, Mode::protected_read, Mode::protected_write,
    Mode::exclusive,       Mode::protected_read,   Mode::exclusive,      Mode::null};
// Some users lock as POSIX processes (NLM's clients) do; one process may lock through several
// nodes.
constexpr LockOwner kProcesses[] = {{7, 1}, {7, 2}};

std::string describe(LockId id) {
  return std::to_string(id.node) + ":" + std::to_string(id.sequence);
}

std::string describe(const ResourceName& resource, Range range) {
  return "r" + std::to_string(resource.id) + "[" + std::to_string(range.start) + "," +
         (range.end == kWholeResource.end ? std::string("end") : std::to_string(range.end)) + ")";
}

class Scenario {
 public:
  Scenario(std::uint64_t seed, bool trace) : seed_(seed), world_(seed), trace_(trace) {}

  std::optional<std::string> run() {
    const auto node_count = static_cast<NodeId>(world_.random_between(2, 5));
    resources_ = world_.random_between(1, 3);
    cluster::SimFaults faults;
    faults.loss = world_.random_fraction() < 0.5 ? 0 : world_.random_fraction() * 0.1;
    faults.duplicate = world_.random_fraction() < 0.5 ? 0 : world_.random_fraction() * 0.05;
    world_.set_faults(faults);
    for (NodeId node = 1; node <= node_count; ++node) start_node(node);
    change_view();
    for (NodeId node = 1; node <= node_count; ++node) act_later(node);
    plan_faults(node_count);

    world_.run_until(kActiveMs);
    if (failure_) return failure_;
    calm_down();
    if (!failure_) compare_tables();
    if (!failure_) wind_down();
    return failure_;
  }

  std::string summary() const {
    std::ostringstream out;
    out << "seed " << seed_ << ": " << managers_.size() << " nodes up at the end, " << grants_
        << " grants, " << refusals_ << " refusals, " << kills_ << " kills, " << evictions_
        << " evictions, " << epoch_ << " epochs, " << world_.messages_sent() << " messages";
    return out.str();
  }

 private:
  static constexpr std::uint64_t kActiveMs = 3'000;

  // What a user of a node believes about one of its locks.
  struct Use {
    NodeId node = 0;
    ResourceName resource;
    Range range;
    Mode mode = Mode::null;
    bool granted = false;
    bool busy = false;  // a request or conversion of it is open
    LockOwner owner;
  };

  LockManager& manager(NodeId node) { return *managers_.at(node); }

  // The users' side of the story, for a replayed seed.
  void trace(const std::string& line) {
    if (trace_)
      std::printf("%6llu ms  %s\n", static_cast<unsigned long long>(world_.now_ms()), line.c_str());
  }
  void start_node(NodeId node) {
    LockManagerOptions options;
    options.self = node;
    options.first_sequence = world_.now_ms() * 1000 + 1;
    options.retransmit = std::chrono::milliseconds(60);
    options.poll = std::chrono::milliseconds(300);
    options.remind = std::chrono::milliseconds(150);
    managers_[node] =
        std::make_unique<LockManager>(world_.loop(node), world_.transport(node), options);
    members_.insert(node);
  }

  // A new group view, learned by each live node after its own delay, as Raft's apply would be;
  // at once by a node it leaves out.
  void change_view() {
    epoch_++;
    std::vector<NodeId> up(members_.begin(), members_.end());
    for (const auto& running : managers_) {
      const NodeId node = running.first;
      const bool member = members_.contains(node);
      world_.loop(node).schedule(
          std::chrono::milliseconds(member ? world_.random_between(1, 40) : 0),
          [this, node, epoch = epoch_, up] {
            if (managers_.contains(node)) manager(node).set_view(epoch, up);
          });
    }
  }

  void plan_faults(NodeId node_count) {
    cluster::EventLoop& driver = world_.loop(kDriver);
    if (world_.random_fraction() < 0.4) {
      auto at = std::chrono::milliseconds(world_.random_between(100, kActiveMs - 500));
      driver.schedule(at, [this, node_count] {
        std::vector<NodeId> side;
        for (NodeId node = 1; node <= node_count; ++node) {
          if (world_.random_fraction() < 0.5) side.push_back(node);
        }
        std::vector<NodeId> rest;
        for (NodeId node = 1; node <= node_count; ++node) {
          if (std::find(side.begin(), side.end(), node) == side.end()) rest.push_back(node);
        }
        world_.partition({side, rest});
        world_.loop(kDriver).schedule(std::chrono::milliseconds(world_.random_between(100, 1500)),
                                      [this] { world_.heal(); });
      });
    }
    if (node_count > 2 && world_.random_fraction() < 0.4) {
      auto at = std::chrono::milliseconds(world_.random_between(100, kActiveMs - 1000));
      driver.schedule(at, [this, node_count] {
        const auto victim = static_cast<NodeId>(world_.random_between(1, node_count));
        kill(victim);
        if (world_.random_fraction() < 0.6) {
          world_.loop(kDriver).schedule(std::chrono::milliseconds(world_.random_between(50, 800)),
                                        [this, victim] {
                                          world_.restart(victim);
                                          start_node(victim);
                                          change_view();
                                          act_later(victim);
                                        });
        }
      });
    }
    if (node_count > 2 && world_.random_fraction() < 0.3) {
      auto at = std::chrono::milliseconds(world_.random_between(100, kActiveMs - 1000));
      driver.schedule(at, [this, node_count] {
        const auto victim = static_cast<NodeId>(world_.random_between(1, node_count));
        if (!members_.contains(victim)) return;
        members_.erase(victim);
        evictions_++;
        trace("evict node " + std::to_string(victim));
        change_view();
        world_.loop(kDriver).schedule(
            std::chrono::milliseconds(world_.random_between(50, 800)), [this, victim] {
              if (!managers_.contains(victim) || members_.contains(victim)) return;
              members_.insert(victim);
              trace("readmit node " + std::to_string(victim));
              change_view();
            });
      });
    }
    if (world_.random_fraction() < 0.2) {
      // A view change that moves nothing: recovery must still rebuild the same tables.
      driver.schedule(std::chrono::milliseconds(world_.random_between(100, kActiveMs)),
                      [this] { change_view(); });
    }
  }

  void kill(NodeId node) {
    world_.crash(node);
    managers_.erase(node);
    members_.erase(node);
    std::erase_if(uses_, [node](const auto& entry) { return entry.second.node == node; });
    kills_++;
    trace("kill node " + std::to_string(node));
    change_view();
  }

  // ---- the users ----

  void act_later(NodeId node) {
    world_.loop(node).schedule(std::chrono::milliseconds(world_.random_between(1, 60)),
                               [this, node] {
                                 if (winding_down_ || world_.now_ms() >= kActiveMs) return;
                                 act(node);
                                 act_later(node);
                               });
  }

  void act(NodeId node) {
    std::vector<LockId> mine;
    for (const auto& [id, use] : uses_) {
      if (use.node == node) mine.push_back(id);
    }
    const double dice = world_.random_fraction();
    if (mine.empty() || dice < 0.5) return request(node);
    const LockId id = mine[world_.random_between(0, mine.size() - 1)];
    Use& use = uses_.at(id);
    if (use.busy) {
      if (dice < 0.6 && manager(node).cancel(id).ok()) trace("cancel " + describe(id));
      return;
    }
    if (dice < 0.75) return convert(id, kModes[world_.random_between(0, std::size(kModes) - 1)]);
    release(id);
  }

  void request(NodeId node) {
    LockSpec spec;
    spec.resource = {ResourceKind::data, world_.random_between(1, resources_)};
    spec.mode = kModes[world_.random_between(0, std::size(kModes) - 2)];
    spec.range = kRanges[world_.random_between(0, std::size(kRanges) - 1)];
    spec.try_only = world_.random_fraction() < 0.2;
    spec.expandable = world_.random_fraction() < 0.2;
    if (world_.random_fraction() < 0.3) {
      spec.timeout = std::chrono::milliseconds(world_.random_between(50, 2000));
    }
    if (world_.random_fraction() < 0.3) {
      spec.owner = kProcesses[world_.random_between(0, std::size(kProcesses) - 1)];
    }
    auto id_holder = std::make_shared<LockId>();
    *id_holder = manager(node).lock(
        spec, [this, id_holder](const LockResult& result) { on_result(*id_holder, result); },
        [this, node](LockId holder, Mode, Range) { on_blocking(node, holder); },
        [this](LockId lost) {
          trace("lost " + describe(lost));
          uses_.erase(lost);
        });
    uses_[*id_holder] = Use{node, spec.resource, spec.range, Mode::null, false, true, spec.owner};
    trace("lock " + describe(*id_holder) + " " + std::string(mode_name(spec.mode)) + " " +
          describe(spec.resource, spec.range) + (spec.try_only ? " try" : "") +
          (spec.expandable ? " expandable" : "") +
          (spec.timeout.count() ? " timeout " + std::to_string(spec.timeout.count()) : "") +
          (spec.owner.none() ? "" : " owner " + std::to_string(spec.owner.low)));
  }

  void convert(LockId id, Mode mode) {
    Use& use = uses_.at(id);
    ConvertSpec spec;
    spec.mode = mode;
    spec.try_only = world_.random_fraction() < 0.3;
    if (world_.random_fraction() < 0.3) {
      spec.timeout = std::chrono::milliseconds(world_.random_between(50, 1000));
    }
    if ((use.mode == Mode::protected_write || use.mode == Mode::exclusive) &&
        conversion(use.mode, mode) != Conversion::up) {
      spec.value = LockValue{static_cast<std::uint8_t>(world_.random_between(0, 255))};
    }
    if (!manager(use.node)
             .convert(id, spec, [this, id](const LockResult& r) { on_result(id, r); })
             .ok()) {
      return fail("a granted, idle lock " + describe(id) + " could not be converted");
    }
    use.busy = true;
    trace("convert " + describe(id) + " " + std::string(mode_name(use.mode)) + " -> " +
          std::string(mode_name(mode)) + (spec.try_only ? " try" : ""));
    use.mode = protected_by_both(use.mode, mode);
  }

  void release(LockId id) {
    const NodeId node = uses_.at(id).node;
    uses_.erase(id);
    trace("release " + describe(id));
    if (!manager(node).release(id).ok()) fail("a held lock " + describe(id) + " was unknown");
  }

  void on_result(LockId id, const LockResult& result) {
    auto it = uses_.find(id);
    if (it == uses_.end()) return;  // released while it waited
    Use& use = it->second;
    use.busy = false;
    if (!result.granted()) {
      refusals_++;
      trace("refused " + describe(id) + " reason " +
            std::to_string(static_cast<int>(*result.refused)) + ", holding " +
            std::string(mode_name(result.lock.mode)));
      if (!use.granted) return (void)uses_.erase(it);
      use.mode = result.lock.mode;  // a refused conversion leaves the lock held
      return hold_then_let_go(id);
    }
    const LockGrant& grant = result.lock;
    grants_++;
    trace("granted " + describe(id) + " " + std::string(mode_name(grant.mode)) + " " +
          describe(use.resource, grant.range));
    use.granted = true;
    use.mode = grant.mode;
    use.range = grant.range;
    check_grant(id, use);
    hold_then_let_go(id);
  }

  void on_blocking(NodeId node, LockId holder) {
    if (!winding_down_ && world_.random_fraction() < 0.3) return;  // a stubborn holder
    world_.loop(node).schedule(std::chrono::milliseconds(world_.random_between(0, 80)),
                               [this, holder] { let_go(holder); });
  }

  void hold_then_let_go(LockId id) {
    const NodeId node = uses_.at(id).node;
    auto hold = winding_down_ ? world_.random_between(0, 50) : world_.random_between(20, 1500);
    world_.loop(node).schedule(std::chrono::milliseconds(hold), [this, id] { let_go(id); });
  }

  // A holder gives way: down to null or concurrent read, or all the way.
  void let_go(LockId id) {
    if (frozen_) {
      deferred_.push_back(id);
      return;
    }
    auto it = uses_.find(id);
    if (it == uses_.end() || !it->second.granted || it->second.busy) return;
    if (!winding_down_ && world_.random_fraction() < 0.3 && it->second.mode != Mode::null) {
      return convert(id, world_.random_fraction() < 0.5 ? Mode::null : Mode::concurrent_read);
    }
    release(id);
  }

  // ---- the checks ----

  void fail(const std::string& why) {
    if (!failure_) failure_ = "at " + std::to_string(world_.now_ms()) + " ms: " + why;
  }

  // The safety invariant, checked at the only step that can break it: a grant.
  void check_grant(LockId id, const Use& use) {
    for (const auto& [other_id, other] : uses_) {
      const bool same_owner = !use.owner.none() && use.owner == other.owner;
      if (other_id == id || !other.granted || same_owner || other.resource != use.resource ||
          !other.range.overlaps(use.range) || compatible(other.mode, use.mode)) {
        continue;
      }
      fail("lock " + describe(id) + " granted " + std::string(mode_name(use.mode)) + " while " +
           describe(other_id) + " holds " + std::string(mode_name(other.mode)) +
           " on an overlapping range");
    }
  }

  bool all_settled() {
    for (const auto& [node, lock_manager] : managers_) {
      if (lock_manager->recovering() || !lock_manager->settled()) return false;
    }
    return true;
  }

  using Row =
      std::tuple<LockId, ResourceName, Range, LockState, Mode, Mode, std::uint64_t, LockOwner>;
  static Row row(const LockRecord& r) {
    return {r.id,
            r.resource,
            r.range,
            r.state,
            r.state == LockState::waiting ? Mode::null : r.granted,
            r.requested,
            r.position,
            r.owner};
  }

  std::pair<std::set<Row>, std::set<Row>> tables() {
    std::set<Row> held, coordinated;
    for (const auto& [node, lock_manager] : managers_) {
      for (const HeldLock& lock : lock_manager->held()) held.insert(row(lock.record));
      for (const LockRecord& record : lock_manager->coordinated()) coordinated.insert(row(record));
    }
    return {held, coordinated};
  }

  // Faults stop and users pause; the protocol alone must bring every node and every
  // coordinator to the same account of every lock.
  void calm_down() {
    world_.heal();
    world_.set_faults({});
    frozen_ = true;
    const bool agreed = world_.run_until(
        [this] {
          if (!all_settled()) return false;
          auto [held, coordinated] = tables();
          return held == coordinated;
        },
        world_.now_ms() + 20'000);
    if (!agreed) {
      auto [held, coordinated] = tables();
      std::string differences;
      auto show = [&differences](const char* where, const Row& r) {
        differences += std::string("\n    only ") + where + ": " + describe(std::get<0>(r)) + " " +
                       describe(std::get<1>(r), std::get<2>(r)) + " state " +
                       std::to_string(static_cast<int>(std::get<3>(r))) + " " +
                       std::string(mode_name(std::get<4>(r))) + "->" +
                       std::string(mode_name(std::get<5>(r))) + " @" +
                       std::to_string(std::get<6>(r));
      };
      for (const Row& r : held) {
        if (!coordinated.contains(r)) show("on its node", r);
      }
      for (const Row& r : coordinated) {
        if (!held.contains(r)) show("at its coordinator", r);
      }
      fail("after the faults the nodes' locks (" + std::to_string(held.size()) +
           ") and the coordinators' tables (" + std::to_string(coordinated.size()) +
           ") never agreed" + (all_settled() ? "" : " (some node never settled)") + differences);
    }
  }

  std::string state() {
    std::ostringstream out;
    auto print = [&out](const LockRecord& r) {
      out << " " << describe(r.id) << " " << describe(r.resource, r.range) << " state "
          << static_cast<int>(r.state) << " " << mode_name(r.granted) << "->"
          << mode_name(r.requested) << " @" << r.position << ";";
    };
    for (const auto& [node, lock_manager] : managers_) {
      out << "\n  node " << node << (lock_manager->recovering() ? " recovering" : "")
          << (lock_manager->settled() ? "" : " unsettled") << "\n    holds:";
      for (const HeldLock& lock : lock_manager->held()) print(lock.record);
      out << "\n    coordinates:";
      for (const LockRecord& record : lock_manager->coordinated()) print(record);
    }
    return out.str();
  }

  void compare_tables() {
    std::set<LockId> believed, recorded;
    for (const auto& [id, use] : uses_) {
      if (use.granted) believed.insert(id);
    }
    for (const auto& [node, lock_manager] : managers_) {
      for (const HeldLock& lock : lock_manager->held()) {
        if (lock.record.state == LockState::waiting) continue;
        recorded.insert(lock.record.id);
        auto use = uses_.find(lock.record.id);
        const Mode relied_on = lock.record.state == LockState::converting
                                   ? protected_by_both(lock.record.granted, lock.record.requested)
                                   : lock.record.granted;
        if (use == uses_.end() || use->second.mode != relied_on) {
          fail("node " + std::to_string(node) + " holds " + describe(lock.record.id) +
               " in a mode its user was not told");
        }
      }
    }
    if (believed != recorded) fail("users believe they hold locks their nodes do not");
  }

  // Users stop asking and let go of what they hold; everything open must end.
  void wind_down() {
    frozen_ = false;
    winding_down_ = true;
    for (LockId id : deferred_) {
      if (uses_.contains(id)) let_go(id);
    }
    deferred_.clear();
    std::vector<LockId> held;
    for (const auto& [id, use] : uses_) {
      if (use.granted && !use.busy) held.push_back(id);
    }
    for (LockId id : held) let_go(id);
    const bool emptied = world_.run_until(
        [this] {
          if (!uses_.empty() || !all_settled()) return false;
          auto [held_rows, coordinated] = tables();
          return held_rows.empty() && coordinated.empty();
        },
        world_.now_ms() + 30'000);
    if (!emptied) {
      std::string open;
      for (const auto& [id, use] : uses_) {
        open +=
            " " + describe(id) + (use.granted ? "(held" : "(asked") + (use.busy ? ",busy)" : ")");
      }
      fail("requests never ended after users stopped (lost wake-up?):" + open + state());
    }
  }

  std::uint64_t seed_;
  SimWorld world_;
  bool trace_;
  std::uint64_t resources_ = 1;
  std::map<NodeId, std::unique_ptr<LockManager>> managers_;
  std::set<NodeId> members_;
  cluster::Epoch epoch_ = 0;
  std::map<LockId, Use> uses_;
  bool frozen_ = false;
  bool winding_down_ = false;
  std::vector<LockId> deferred_;
  std::optional<std::string> failure_;
  std::uint64_t grants_ = 0;
  std::uint64_t refusals_ = 0;
  std::uint64_t kills_ = 0;
  std::uint64_t evictions_ = 0;
};

std::uint64_t env_number(const char* name, std::uint64_t fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::strtoull(value, nullptr, 10) : fallback;
}

void run_seed(std::uint64_t seed, bool verbose = false) {
  Scenario scenario(seed, verbose);
  std::optional<std::string> failure = scenario.run();
  if (verbose) std::printf("%s\n", scenario.summary().c_str());
  ASSERT_FALSE(failure.has_value())
      << *failure << "\n  " << scenario.summary() << "\n  replay: TIDEPOOL_LOCK_SIM_SEED=" << seed
      << " lock_sim_test --gtest_filter=LockSimReplay.ReplayOneSeed";
}

// Sanitizers make each run several times slower; they check fewer seeds.
#if defined(__SANITIZE_ADDRESS__)
constexpr std::uint64_t kRunsPerShard = 100;
#else
constexpr std::uint64_t kRunsPerShard = 1000;
#endif

// Seeds from the commit under test each shard runs besides its fixed ones (tests/seeds/seeds.h).
constexpr std::size_t kCommitSeedsPerShard = 3;

// Ten shards of seeds, so that ctest runs them in parallel: 10,000 fixed runs in all by default.
class LockSim : public ::testing::TestWithParam<int> {};

TEST_P(LockSim, NoConflictingGrantsNothingLostAndEveryRequestEnds) {
  const std::uint64_t per_shard = env_number("TIDEPOOL_LOCK_SIM_RUNS_PER_SHARD", kRunsPerShard);
  const std::vector<std::uint64_t> seeds = test::shard_seeds(
      "lock_sim", static_cast<std::uint64_t>(GetParam()), per_shard, kCommitSeedsPerShard);
  for (const std::uint64_t seed : seeds) {
    run_seed(seed);
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Shards, LockSim, ::testing::Range(0, 10));

// The checker is shown to fire: with coordinators granting over held locks, as a table that
// forgot to look would, the first seeds see conflicting grants.
TEST(LockSimChecker, ReportsTheConflictingGrantsOfCoordinatorsThatGrantOverHeldLocks) {
  const fail_points::SwitchedOn broken(fail_points::kGrantOverHeldLocks);
  std::string failures;
  for (std::uint64_t seed = 1; seed <= 10 && failures.empty(); ++seed) {
    Scenario scenario(seed, false);
    failures = scenario.run().value_or("");
  }
  EXPECT_NE(failures.find("on an overlapping range"), std::string::npos)
      << "the checker said: " << failures;
}

TEST(LockSimReplay, ReplayOneSeed) {
  const std::uint64_t seed = env_number("TIDEPOOL_LOCK_SIM_SEED", 0);
  if (seed == 0) GTEST_SKIP() << "set TIDEPOOL_LOCK_SIM_SEED to replay one seed";
  run_seed(seed, true);
}

}  // namespace
}  // namespace tidepool::lockmgr
