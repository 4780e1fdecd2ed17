// Issue 4's kill test for file data in a node pool: four real tided processes, all in pool f800,
// and files the default policy placed there (two copies of each unit). One node that holds
// units is killed while writers through the others keep changing the files, FILE_SYNC or
// UNSTABLE then COMMIT: the writes go on with the copies left, every acknowledged byte reads
// back through each survivor, and when the node returns the home puts back the units it missed
// — proved by reading every file with another owner down, so that the units the two shared come
// from the returned node alone. A second test keeps the node down past the repair delay: the
// cluster then restores two copies of every unit on the others, and spreads the files over the
// node again when it returns. A third SmartFails the namespace's home while writers go on: it
// leaves the cluster only once every unit and the shard have two copies on the others.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/process/cluster.h"
#include "tests/process/nfs_client.h"
#include "tests/process/tide_cluster.h"

namespace tidepool::test {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr std::size_t kNodes = 4;
constexpr std::size_t kFiles = 12;
constexpr std::size_t kFileBytes = 4 * 128 * 1024;  // four stripe units
constexpr std::size_t kPieceBytes = 48 * 1024;      // a write: within one unit or across two

std::string random_text(std::mt19937_64& random, std::size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(random());
  return s;
}

// The files and what each holds as its writer knows it: every write is acknowledged (and
// committed, when UNSTABLE) before it counts, and a file has one writer.
struct Files {
  std::vector<FileHandle> handles;
  std::vector<std::string> contents;
};

// Writers through the nodes given, each changing its own files at random offsets until stopped
// (at most 100,000 writes each). A write that fails (while a node dies) is sent again, the same
// bytes, until it is acknowledged: what a file holds stays known. One stopped before it was is
// kept, for settle() to finish.
class Writers {
 public:
  Writers(std::vector<Endpoint> via, Files& files) : files_(files) {
    for (std::size_t w = 0; w < via.size(); ++w) {
      threads_.emplace_back([this, w, ep = via[w], writers = via.size()] {
        std::mt19937_64 random(w + 7);
        NfsClient nfs(ep);
        for (int i = 0; i < 100'000 && !stop_.load(); ++i) {
          const std::size_t file = w + writers * (random() % (kFiles / writers));
          const std::uint64_t offset = random() % (kFileBytes - kPieceBytes);
          const std::string piece = random_text(random, kPieceBytes);
          const bool stable = random() % 2 == 0;
          const bool done = write_until_acknowledged(nfs, file, offset, piece, stable, true);
          std::lock_guard lock(mutex_);
          if (!done) {
            unsettled_.push_back({file, offset, piece});
            return;
          }
          files_.contents[file].replace(offset, piece.size(), piece);
          ++acknowledged_;
        }
      });
    }
  }
  ~Writers() { stop(); }
  void stop() {
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  std::size_t acknowledged() {
    std::lock_guard lock(mutex_);
    return acknowledged_;
  }
  // After stop(): the writes stopped before they were acknowledged, each sent again through
  // `via` until it is, so that every file's contents are known again.
  void settle(const Endpoint& via) {
    NfsClient nfs(via);
    for (const Unsettled& write : unsettled_) {
      ASSERT_TRUE(
          write_until_acknowledged(nfs, write.file, write.offset, write.piece, true, false));
      files_.contents[write.file].replace(write.offset, write.piece.size(), write.piece);
    }
    unsettled_.clear();
  }

 private:
  struct Unsettled {
    std::size_t file;
    std::uint64_t offset;
    std::string piece;
  };

  // False when stopped before it was acknowledged (its bytes may be in the file or not), or
  // with a gtest failure when answered anything but success or "retry later" (JUKEBOX, or no
  // answer while a node dies), or never acknowledged in a minute.
  bool write_until_acknowledged(NfsClient& nfs, std::size_t file, std::uint64_t offset,
                                const std::string& piece, bool stable, bool stoppable) {
    for (int attempt = 0; attempt < 600; ++attempt) {
      const WriteResult written =
          nfs.write(files_.handles[file], offset, piece, stable ? FILE_SYNC : UNSTABLE);
      nfsstat3 status = written.status;
      if (status == NFS3_OK) {
        if (written.count != piece.size() || (stable && written.committed != FILE_SYNC)) {
          ADD_FAILURE() << "a write of " << piece.size() << " bytes to file " << file
                        << " was acknowledged for " << written.count << " bytes, "
                        << (written.committed == FILE_SYNC ? "stable" : "unstable");
          return false;
        }
        if (!stable) status = nfs.commit(files_.handles[file]).status;
        if (status == NFS3_OK) return true;
      }
      if (status != NFS3ERR_JUKEBOX && status != kNoReply) {
        ADD_FAILURE() << "a write to file " << file << " was answered " << status
                      << ", neither success nor retry later";
        return false;
      }
      if (stoppable && stop_.load()) return false;
      std::this_thread::sleep_for(100ms);
    }
    ADD_FAILURE() << "a write to file " << file << " was never acknowledged";
    return false;
  }

  Files& files_;
  std::atomic<bool> stop_ = false;
  std::mutex mutex_;
  std::size_t acknowledged_ = 0;
  std::vector<Unsettled> unsettled_;  // guarded by mutex_ until stop()
  std::vector<std::thread> threads_;
};

class DegradedWriteTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(start(kNodes)); }

  // The cluster of kNodes nodes in pool f800, of which nodes 1..`members` are formed and
  // serving; new files placed in f800.
  void start(std::size_t members) {
    if (tide_path().empty()) GTEST_SKIP() << "no tide binary in this build";
    cluster_ = std::make_unique<TideCluster>("degraded", std::vector<std::string>(kNodes, "f800"),
                                             "degraded-write");
    std::string error;
    ASSERT_TRUE(cluster_->start(&error)) << error;
    ASSERT_NO_FATAL_FAILURE(cluster_->form(members));
    for (std::size_t id = 1; id <= members; ++id) ASSERT_FALSE(cluster_->root_via(id).empty());
    ASSERT_NO_FATAL_FAILURE(cluster_->place_new_files_in("f800"));
  }

  // Every file read whole through node `via` matches what its writer knows.
  void expect_files_read_through(std::size_t via, const Files& files) {
    NfsClient nfs(cluster_->node(via).endpoint());
    for (std::size_t f = 0; f < kFiles; ++f) {
      EXPECT_TRUE(nfs.read_all(files.handles[f]) == files.contents[f])
          << "file " << f << " read through node " << via;
    }
  }

  // Waits (bounded) until node `id`'s gauge `name` is 0; its last value.
  std::int64_t wait_for_zero(std::size_t id, const std::string& name, std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    std::int64_t value = cluster_->metric(id, name);
    while (value != 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(250ms);
      value = cluster_->metric(id, name);
    }
    return value;
  }

  // Files made in /ifs/work through node 1, each written whole FILE_SYNC.
  Files make_files() {
    Files files;
    NfsClient nfs(cluster_->node(1).endpoint());
    const FileHandle dir = nfs.make_dir(cluster_->root_via(1), "work");
    EXPECT_FALSE(dir.empty());
    std::mt19937_64 random(1);
    for (std::size_t f = 0; f < kFiles; ++f) {
      files.contents.push_back(random_text(random, kFileBytes));
      files.handles.push_back(nfs.make_file(dir, "f" + std::to_string(f)));
      EXPECT_FALSE(files.handles.back().empty());
      EXPECT_EQ(nfs.write(files.handles.back(), 0, files.contents.back(), FILE_SYNC).status,
                NFS3_OK);
    }
    return files;
  }

  // The nodes `tide get -D` (through `via`) lists for each stripe unit of file `f`, in order.
  std::vector<std::set<std::uint64_t>> unit_nodes(std::size_t via, std::size_t f) {
    return unit_nodes(via, "f" + std::to_string(f));
  }
  // The same for /ifs/work/`name`.
  std::vector<std::set<std::uint64_t>> unit_nodes(std::size_t via, const std::string& name) {
    const nlohmann::json file = cluster_->tide_json(via, {"get", "-D", "/ifs/work/" + name});
    std::vector<std::set<std::uint64_t>> units;
    for (const nlohmann::json& run : file.value("stripe_units", nlohmann::json::array())) {
      std::set<std::uint64_t> nodes;
      for (const nlohmann::json& node : run["nodes"]) nodes.insert(node.get<std::uint64_t>());
      for (std::uint64_t i = 0; i < run["count"].get<std::uint64_t>(); ++i) units.push_back(nodes);
    }
    return units;
  }

  using UnitTest = std::function<bool(const std::set<std::uint64_t>& nodes)>;
  // Whether `placed` holds for every unit of every file, as `tide get -D` shows them through
  // `via`.
  bool every_unit(std::size_t via, const UnitTest& placed) {
    for (std::size_t f = 0; f < kFiles; ++f) {
      const auto units = unit_nodes(via, f);
      if (units.size() != kFileBytes / (128 * 1024) ||
          !std::all_of(units.begin(), units.end(), placed)) {
        return false;
      }
    }
    return true;
  }
  // How many units of the files node `node` holds.
  std::size_t units_on(std::size_t via, std::size_t node) {
    std::size_t held = 0;
    for (std::size_t f = 0; f < kFiles; ++f) {
      for (const auto& nodes : unit_nodes(via, f)) held += nodes.contains(node) ? 1 : 0;
    }
    return held;
  }
  // Polls (bounded) until `done` holds; false if it never did.
  static bool eventually(std::chrono::seconds limit, const std::function<bool()>& done) {
    for (const auto deadline = Clock::now() + limit; Clock::now() < deadline;) {
      if (done()) return true;
      std::this_thread::sleep_for(500ms);
    }
    return done();
  }

  // The FlexProtect runs the leader started, as `tide job reports list` shows them through
  // `via`: the number that succeeded with every file restriped that had to be.
  std::size_t flexprotect_runs(std::size_t via) {
    const nlohmann::json reports = cluster_->tide_json(via, {"job", "reports", "list"});
    std::size_t whole = 0;
    for (const nlohmann::json& job : reports.value("reports", nlohmann::json::array())) {
      if (job["type"] == "FlexProtect" && job["state"] == "succeeded" &&
          job["progress"]["files_misplaced"] == 0 && job["progress"]["errors"] == 0) {
        ++whole;
      }
    }
    return whole;
  }

  // The files made, once the namespace is fully protected; its home; and the first node from
  // `first` on that is neither home nor mirror, which holds units of the files.
  struct Scene {
    Files files;
    std::size_t home = 0;
    std::size_t holder = 0;
  };
  Scene scene(std::size_t first) {
    Scene made;
    const auto [home, mirror] = cluster_->wait_for_full_protection(1, 30s);
    made.home = home;
    made.holder = first;
    while (made.holder == home || made.holder == mirror) ++made.holder;
    made.files = make_files();
    EXPECT_GT(units_on(home, made.holder), 0u);
    return made;
  }

  // A new file /ifs/work/`name` of `units` stripe units written through node `via`: the nodes
  // of each of its units.
  std::vector<std::set<std::uint64_t>> new_file_units(std::size_t via, const std::string& name,
                                                      std::size_t units) {
    NfsClient nfs(cluster_->node(via).endpoint());
    const FileHandle dir = nfs.lookup(cluster_->root_via(via), "work").fh;
    const FileHandle file = nfs.make_file(dir, name);
    EXPECT_FALSE(file.empty()) << name;
    std::mt19937_64 random(units);
    for (std::size_t at = 0; at < units * 128 * 1024; at += kFileBytes) {
      EXPECT_EQ(nfs.write(file, at, random_text(random, kFileBytes), FILE_SYNC).status, NFS3_OK);
    }
    return unit_nodes(via, name);
  }
  // Whether `tide status` through `via` shows node `id` being SmartFailed.
  bool smartfailing(std::size_t via, std::size_t id) {
    const nlohmann::json status = cluster_->tide_json(via, {"status"});
    for (const nlohmann::json& node : status.value("nodes", nlohmann::json::array())) {
      if (node["id"] == id) return node.value("smartfailing", false);
    }
    return false;
  }

  // Node `id`'s low-water mark of copies `of` "units" or "shards"
  // (tidepool_protection_low_water_copies); -1 while it has none.
  std::int64_t low_water(std::size_t id, const std::string& of) {
    const auto [status, body] = cluster_->admin_get(id, "/metrics");
    EXPECT_EQ(status, 200u) << body;
    const std::string name = "tidepool_protection_low_water_copies{of=\"" + of + "\"} ";
    std::istringstream lines(body);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(name, 0) == 0) return std::stoll(line.substr(name.size()));
    }
    return -1;
  }

  std::unique_ptr<TideCluster> cluster_;
};

TEST_F(DegradedWriteTest, WritesGoOnWhileAnOwnerIsDownAndItCatchesUpWhenBack) {
  const auto [home, mirror] = cluster_->wait_for_full_protection(1, 30s);
  ASSERT_EQ(home, 1u) << "node 1 made the cluster";
  // The victim holds units but not the namespace: the test is about the data's copies.
  std::size_t victim = 2;
  while (victim == home || victim == mirror) ++victim;
  std::size_t other = 2;  // a second owner, killed once the victim caught up
  while (other == home || other == victim) ++other;

  Files files = make_files();
  ASSERT_FALSE(HasFailure());
  const nlohmann::json placed = cluster_->tide_json(2, {"get", "-D", "/ifs/work/f0"});
  ASSERT_EQ(placed["layout"]["pool"], "f800") << placed.dump();

  std::vector<Endpoint> via;
  for (std::size_t id = 1; id <= kNodes; ++id) {
    if (id != victim) via.push_back(cluster_->node(id).endpoint());
  }
  Writers writers(via, files);
  const auto started = Clock::now();
  while (writers.acknowledged() < 30 && Clock::now() - started < 30s) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_GE(writers.acknowledged(), 30u);

  cluster_->node(victim).kill();
  const std::size_t before_kill = writers.acknowledged();
  const auto killed_at = Clock::now();
  while (writers.acknowledged() < before_kill + 60 && Clock::now() - killed_at < 40s) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_GE(writers.acknowledged(), before_kill + 60) << "writes did not go on without the victim\n"
                                                      << cluster_->node(home).log_tail();
  writers.stop();
  ASSERT_NO_FATAL_FAILURE(writers.settle(cluster_->node(home).endpoint()));
  EXPECT_GT(cluster_->metric(home, "tidepool_copies_behind"), 0)
      << "the victim missed writes to units it holds";
  for (std::size_t id = 1; id <= kNodes; ++id) {
    if (id == victim) continue;
    ASSERT_NO_FATAL_FAILURE(expect_files_read_through(id, files));
  }

  std::string error;
  ASSERT_TRUE(cluster_->node(victim).start(&error)) << error;
  EXPECT_EQ(wait_for_zero(home, "tidepool_copies_behind", 60s), 0)
      << cluster_->node(home).log_tail();
  EXPECT_GT(cluster_->metric(home, "tidepool_units_caught_up_total"), 0);

  // With the other owner down too, the units it shared with the victim come from the victim.
  cluster_->node(other).kill();
  ASSERT_NO_FATAL_FAILURE(expect_files_read_through(home, files));
}

// Issue 4's "protection restored by re-mirroring in the background": a node that stays down
// past the repair delay is lost, and FlexProtect restripes every file's units over the three
// nodes left while writers go on. When it returns, FlexProtect spreads the files over it again.
TEST_F(DegradedWriteTest,
       ANodeDownPastTheRepairDelayHasItsUnitsProtectedElsewhereAndBackWhenItReturns) {
  const auto [home, mirror] = cluster_->wait_for_full_protection(1, 30s);
  std::size_t victim = 2;
  while (victim == home || victim == mirror) ++victim;
  std::size_t other = 2;
  while (other == home || other == victim) ++other;
  ASSERT_EQ(cluster_->tide(1, {"sysctl", "efs.flexprotect.repair_delay=2s"}).exit_code, 0);

  Files files = make_files();
  ASSERT_FALSE(HasFailure());
  const UnitTest two_copies = [](const std::set<std::uint64_t>& nodes) {
    return nodes.size() == 2;
  };
  ASSERT_TRUE(every_unit(home, two_copies));
  ASSERT_GT(units_on(home, victim), 0u);

  std::vector<Endpoint> via;
  for (std::size_t id = 1; id <= kNodes; ++id) {
    if (id != victim) via.push_back(cluster_->node(id).endpoint());
  }
  Writers writers(via, files);
  cluster_->node(victim).kill();
  // Two copies of every unit again, neither on the victim.
  const bool protected_again = eventually(90s, [&] {
    return every_unit(home, [&](const std::set<std::uint64_t>& nodes) {
      return nodes.size() == 2 && !nodes.contains(victim);
    });
  });
  EXPECT_TRUE(protected_again) << cluster_->node(home).log_tail();
  const nlohmann::json status = cluster_->tide_json(home, {"status"});
  for (const nlohmann::json& node : status["nodes"]) {
    if (node["id"] == victim) {
      EXPECT_EQ(node["state"], "lost") << status.dump();
    }
  }
  EXPECT_TRUE(eventually(30s, [&] { return flexprotect_runs(home) >= 1; }))
      << "FlexProtect did the restripes";
  const std::size_t acknowledged = writers.acknowledged();
  const auto protected_at = Clock::now();
  while (writers.acknowledged() < acknowledged + 30 && Clock::now() - protected_at < 30s) {
    std::this_thread::sleep_for(50ms);
  }
  writers.stop();
  ASSERT_NO_FATAL_FAILURE(writers.settle(cluster_->node(home).endpoint()));
  EXPECT_GE(writers.acknowledged(), acknowledged + 30) << "writes did not go on";
  EXPECT_EQ(wait_for_zero(home, "tidepool_copies_behind", 30s), 0)
      << "no copy waits for the lost node: its units are elsewhere";
  EXPECT_GT(cluster_->metric(home, "tidepool_units_left"), 0)
      << "the lost node keeps the units of the old placements until it is back";
  for (std::size_t id = 1; id <= kNodes; ++id) {
    if (id == victim) continue;
    ASSERT_NO_FATAL_FAILURE(expect_files_read_through(id, files));
  }

  const std::size_t runs_before_return = flexprotect_runs(home);
  std::string error;
  ASSERT_TRUE(cluster_->node(victim).start(&error)) << error;
  const bool spread = eventually(90s, [&] {
    return flexprotect_runs(home) > runs_before_return && units_on(home, victim) > 0 &&
           every_unit(home, two_copies);
  });
  EXPECT_TRUE(spread) << "the files were not spread over the returned node again\n"
                      << cluster_->node(home).log_tail();
  EXPECT_EQ(wait_for_zero(home, "tidepool_units_left", 30s), 0)
      << "what the returned node kept of the old placements is gone";

  // With another owner down (not for long enough to be lost), the units it shares with the
  // returned node come from the latter.
  ASSERT_EQ(cluster_->tide(1, {"sysctl", "efs.flexprotect.repair_delay=10m"}).exit_code, 0);
  cluster_->node(other).kill();
  ASSERT_NO_FATAL_FAILURE(expect_files_read_through(home, files));
}

// Issue 45's SmartFail: the node taken out is the namespace's home (and the leader, which
// made the cluster), so its shard is handed over and the lead passed on as well as its units
// copied. Until it leaves, every unit keeps its two copies; after, two elsewhere.
TEST_F(DegradedWriteTest, ASmartFailedNodeLeavesOnlyOnceWhatItHeldHasTwoCopiesElsewhere) {
  const auto [home, mirror] = cluster_->wait_for_full_protection(1, 30s);
  const std::size_t victim = home;
  const std::size_t via = victim == 2 ? 3 : 2;
  Files files = make_files();
  ASSERT_FALSE(HasFailure());
  ASSERT_GT(units_on(via, victim), 0u);

  std::vector<Endpoint> writers_via;
  for (std::size_t id = 1; id <= kNodes; ++id) {
    if (id != victim) writers_via.push_back(cluster_->node(id).endpoint());
  }
  Writers writers(writers_via, files);
  for (const auto deadline = Clock::now() + 30s;
       writers.acknowledged() < 30 && Clock::now() < deadline;) {
    std::this_thread::sleep_for(20ms);
  }
  const std::size_t before = writers.acknowledged();
  ASSERT_GE(before, 30u);

  const Ran asked = cluster_->tide(via, {"cluster", "smartfail", std::to_string(victim)});
  ASSERT_EQ(asked.exit_code, 0) << asked.output;
  EXPECT_NE(asked.output.find("being SmartFailed"), std::string::npos) << asked.output;
  const Ran again = cluster_->tide(via, {"cluster", "smartfail", std::to_string(victim)});
  EXPECT_NE(again.exit_code, 0) << "a second SmartFail of the same node: " << again.output;

  // Polled until the node is gone from the cluster: while it is a member, every unit has two
  // copies (on it or not); it leaves only with none of them, so the first poll that finds it
  // gone finds no unit on it (a poll that saw units on it while a member proves nothing: the
  // last copies may leave just after).
  const auto in_cluster = [&] {
    const nlohmann::json status = cluster_->tide_json(via, {"status"});
    for (const nlohmann::json& node : status.value("nodes", nlohmann::json::array())) {
      if (node["id"] == victim) {
        EXPECT_TRUE(node.value("smartfailing", false)) << status.dump();
        return true;
      }
    }
    return false;
  };
  std::size_t polls = 0;
  std::size_t held_once_gone = 0;
  const bool left = eventually(120s, [&] {
    ++polls;
    EXPECT_TRUE(every_unit(via, [](const std::set<std::uint64_t>& nodes) {
      return nodes.size() == 2;
    })) << "a unit with fewer than two copies during the SmartFail";
    if (in_cluster()) return false;
    held_once_gone = units_on(via, victim);
    return true;
  });
  ASSERT_TRUE(left) << "node " << victim << " was not removed in 120 s (" << polls << " polls)\n"
                    << cluster_->node(via).log_tail();
  EXPECT_EQ(held_once_gone, 0u) << "it left while it still held units";
  EXPECT_GE(flexprotect_runs(via), 1u) << "FlexProtect did the copies";
  const auto [new_home, new_mirror] = cluster_->wait_for_full_protection(via, 60s);
  EXPECT_NE(new_home, victim);
  EXPECT_NE(new_mirror, victim);
  EXPECT_NE(new_mirror, 0u);

  EXPECT_EQ(low_water(new_home, "units"), 2) << "a unit had fewer than two copies at its home";
  const std::size_t removed_at = writers.acknowledged();
  for (const auto deadline = Clock::now() + 30s;
       writers.acknowledged() < removed_at + 30 && Clock::now() < deadline;) {
    std::this_thread::sleep_for(50ms);
  }
  writers.stop();
  ASSERT_NO_FATAL_FAILURE(writers.settle(cluster_->node(via).endpoint()));
  EXPECT_GE(writers.acknowledged(), removed_at + 30) << "writes did not go on after the removal";
  EXPECT_TRUE(every_unit(via, [&](const std::set<std::uint64_t>& nodes) {
    return nodes.size() == 2 && !nodes.contains(victim);
  }));
  for (std::size_t id = 1; id <= kNodes; ++id) {
    if (id == victim) continue;
    ASSERT_NO_FATAL_FAILURE(expect_files_read_through(id, files));
  }
  EXPECT_TRUE(eventually(30s, [&] { return cluster_->admin_get(victim, "/health").first == 503; }))
      << "the node SmartFailed does not know it left: "
      << cluster_->admin_get(victim, "/health").second;
}

// Issue 45's stopfail: a SmartFail called off before the node left. While another node of its
// pool is down, FlexProtect cannot restripe files off it (their new places include the node
// down), so it cannot leave first, whatever the timing.
TEST_F(DegradedWriteTest, ANodeWhoseSmartFailIsCalledOffStaysAndIsPlacedOnAgain) {
  const auto [files, home, victim] = scene(2);
  ASSERT_FALSE(HasFailure());
  const auto [same_home, mirror] = cluster_->wait_for_full_protection(home, 30s);
  std::size_t down = 1;
  while (down == home || down == mirror || down == victim) ++down;
  const std::size_t runs_before = flexprotect_runs(home);
  ASSERT_EQ(cluster_->tide(home, {"sysctl", "efs.flexprotect.repair_delay=10m"}).exit_code, 0);
  cluster_->node(down).kill();
  ASSERT_TRUE(eventually(30s, [&] { return cluster_->state_of(home, down) == "down"; }));

  const Ran failing = cluster_->tide(home, {"cluster", "smartfail", std::to_string(victim)});
  ASSERT_EQ(failing.exit_code, 0) << failing.output;
  EXPECT_TRUE(smartfailing(home, victim));
  for (const auto& nodes : new_file_units(home, "during", 16)) {
    EXPECT_FALSE(nodes.contains(victim)) << "a new file placed on a node being SmartFailed";
  }

  const Ran stopped = cluster_->tide(home, {"cluster", "stopfail", std::to_string(victim)});
  ASSERT_EQ(stopped.exit_code, 0) << stopped.output;
  EXPECT_NE(stopped.output.find("SmartFailed no more"), std::string::npos) << stopped.output;
  EXPECT_FALSE(smartfailing(home, victim));
  const Ran again = cluster_->tide(home, {"cluster", "stopfail", std::to_string(victim)});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.output.find("is not being SmartFailed"), std::string::npos) << again.output;

  std::string error;
  ASSERT_TRUE(cluster_->node(down).start(&error)) << error;
  EXPECT_TRUE(eventually(90s, [&] {
    return flexprotect_runs(home) > runs_before &&
           every_unit(home, [](const std::set<std::uint64_t>& nodes) { return nodes.size() == 2; });
  })) << "FlexProtect did not protect every file once the node down was back";
  EXPECT_EQ(cluster_->state_of(home, victim), "up") << "the node stays in the cluster";
  EXPECT_GT(units_on(home, victim), 0u);
  bool placed_on_it = false;
  for (const auto& nodes : new_file_units(home, "after", 16))
    placed_on_it |= nodes.contains(victim);
  EXPECT_TRUE(placed_on_it) << "a new file is placed on it again";
  ASSERT_NO_FATAL_FAILURE(expect_files_read_through(victim, files));
}

// What SmartFail spares: a node removed at once (--no-smartfail, for one gone for good) while
// it holds units leaves them with one copy, which the home's low-water mark shows, until
// FlexProtect puts a second elsewhere.
TEST_F(DegradedWriteTest, ANodeRemovedWithoutSmartFailLeavesOneCopyUntilFlexProtect) {
  const auto [files, home, victim] = scene(2);
  ASSERT_FALSE(HasFailure());
  EXPECT_TRUE(eventually(10s, [&] { return low_water(home, "units") == 2; }))
      << low_water(home, "units");

  const Ran removed =
      cluster_->tide(home, {"cluster", "remove-node", "--no-smartfail", std::to_string(victim)});
  ASSERT_EQ(removed.exit_code, 0) << removed.output;
  EXPECT_TRUE(eventually(30s, [&] { return low_water(home, "units") == 1; }))
      << "the home's mark did not show the units left with one copy: " << low_water(home, "units");
  EXPECT_TRUE(eventually(90s, [&] {
    return every_unit(home, [&](const std::set<std::uint64_t>& nodes) {
      return nodes.size() == 2 && !nodes.contains(victim);
    });
  })) << cluster_->node(home).log_tail();
  for (std::size_t id = 1; id <= kNodes; ++id) {
    if (id == victim) continue;
    ASSERT_NO_FATAL_FAILURE(expect_files_read_through(id, files));
  }
}

// Issue 45's replace-node: node 4 stays out of the cluster of three until a node that holds
// units fails; it takes that node's place, and the units are rebuilt from the other copies,
// over it too.
class ReplaceNodeTest : public DegradedWriteTest {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(start(kNodes - 1)); }
};

TEST_F(ReplaceNodeTest, ANewNodeTakesAFailedNodesPlaceAndTheDataIsRebuiltOnIt) {
  const auto [files, home, failed] = scene(1);
  ASSERT_FALSE(HasFailure());

  cluster_->node(failed).kill();
  EXPECT_TRUE(eventually(30s, [&] { return cluster_->state_of(home, failed) == "down"; }));
  const std::size_t spare = kNodes;
  const Ran replaced = cluster_->tide(
      home, {"cluster", "replace-node", std::to_string(failed), cluster_->admin(spare),
             "--setup-secret-file", cluster_->setup_secret_file(spare)});
  ASSERT_EQ(replaced.exit_code, 0) << replaced.output << cluster_->node(home).log_tail();
  EXPECT_NE(replaced.output.find("Added node " + std::to_string(spare)), std::string::npos)
      << replaced.output;
  EXPECT_NE(replaced.output.find("is down"), std::string::npos) << replaced.output;

  EXPECT_TRUE(eventually(90s,
                         [&] {
                           return units_on(home, spare) > 0 &&
                                  every_unit(home, [&](const std::set<std::uint64_t>& nodes) {
                                    return nodes.size() == 2 && !nodes.contains(failed);
                                  });
                         }))
      << "the units were not rebuilt over the nodes left and the new one\n"
      << cluster_->node(home).log_tail();
  EXPECT_EQ(cluster_->state_of(home, failed), "absent");
  EXPECT_EQ(cluster_->state_of(home, spare), "up");
  for (std::size_t id = 1; id <= kNodes; ++id) {
    if (id == failed) continue;
    ASSERT_NO_FATAL_FAILURE(expect_files_read_through(id, files));
  }
}

}  // namespace
}  // namespace tidepool::test
