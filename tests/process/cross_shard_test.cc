// A namespace of several shards across real tided processes: directories spread over the
// shards, and renames between directories of different shards are two-phase changes that the
// node coordinating them — the namespace's home — may die in the middle of. The fail point
// between the phases (debug.fail_point.cross_shard_decide) holds every such rename there for a
// second, so the home dies with renames prepared and not decided. After its mirror takes over
// and settles what the crash left, every file is under exactly one of its names — the new one
// if its rename was acknowledged — and its bytes are intact.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/process/tide_cluster.h"

namespace tidepool::test {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr nfsstat3 kJukebox = static_cast<nfsstat3>(10008);
constexpr int kShardBits = 48;
constexpr int kFiles = 96;
constexpr int kDirectoryPairs = 4;

std::string from_dir(int pair) { return "from" + std::to_string(pair); }
std::string to_dir(int pair) { return "to" + std::to_string(pair); }
std::string old_name(int file) { return "f" + std::to_string(file); }
std::string new_name(int file) { return "g" + std::to_string(file); }
std::string contents_of(int file) { return "the bytes of file " + std::to_string(file); }

TEST(CrossShardTest, ARenameCutShortByTheDeathOfItsCoordinatorLeavesEveryFileUnderOneName) {
  if (tide_path().empty()) GTEST_SKIP() << "no tide binary in this build";
  TideCluster cluster("xs", {"f800", "f800", "f800", "f800"}, "cross-shard",
                      "[store]\nshards = 4\n");
  ASSERT_NO_FATAL_FAILURE(cluster.start_serving());
  const auto [home, mirror] = cluster.wait_for_full_protection(1, 30s);
  ASSERT_EQ(home, 1u) << "node 1 made the cluster";
  ASSERT_NE(mirror, 0u);
  std::size_t survivor = 2;
  while (survivor == mirror) ++survivor;

  // Pairs of directories on different shards, each "from" directory with its files.
  NfsClient setup(cluster.node(survivor).endpoint());
  const FileHandle root = cluster.root_via(survivor);
  std::vector<FileHandle> from(kDirectoryPairs), to(kDirectoryPairs);
  std::set<std::uint64_t> shards_used;
  for (int pair = 0; pair < kDirectoryPairs; ++pair) {
    from[pair] = setup.make_dir(root, from_dir(pair));
    ASSERT_FALSE(from[pair].empty());
    LookupResult found = setup.lookup(root, from_dir(pair));
    ASSERT_TRUE(found.attr);
    const std::uint64_t from_shard = found.attr->fileid >> kShardBits;
    shards_used.insert(from_shard);
    // The first name whose directory lands on another shard.
    for (int attempt = 0; attempt < 64 && to[pair].empty(); ++attempt) {
      const std::string name = to_dir(pair) + "-" + std::to_string(attempt);
      ASSERT_FALSE(setup.make_dir(root, name).empty()) << name;
      LookupResult made = setup.lookup(root, name);
      ASSERT_TRUE(made.attr);
      if (made.attr->fileid >> kShardBits == from_shard) continue;
      shards_used.insert(made.attr->fileid >> kShardBits);
      ASSERT_EQ(setup.rename(root, name, root, to_dir(pair)).status, NFS3_OK);
      to[pair] = made.fh;
    }
    ASSERT_FALSE(to[pair].empty()) << "no directory on another shard than " << from_dir(pair);
  }
  EXPECT_GE(shards_used.size(), 2u);
  for (int file = 0; file < kFiles; ++file) {
    ASSERT_FALSE(
        setup.make_file(from[file % kDirectoryPairs], old_name(file), 0644, contents_of(file))
            .empty())
        << file;
  }

  const Ran armed = cluster.tide(1, {"sysctl", "debug.fail_point.cross_shard_decide=1s"});
  ASSERT_EQ(armed.exit_code, 0) << armed.output;

  // Renamers through the nodes that stay up, until the home has been dead a while.
  std::mutex mutex;
  std::set<int> acknowledged;
  std::atomic<bool> stop = false;
  std::atomic<int> next = 0;
  std::vector<std::thread> renamers;
  // Joined however the test ends.
  struct Joiner {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~Joiner() {
      stop = true;
      for (auto& thread : threads) {
        if (thread.joinable()) thread.join();
      }
    }
  } joiner{stop, renamers};
  // Two renamers through each other node: the more renames in flight when the home dies,
  // the likelier one is between its phases (the log says when one was).
  for (std::size_t renamer = 0; renamer < 2 * (cluster.size() - 1); ++renamer) {
    const std::size_t id = 2 + renamer % (cluster.size() - 1);
    renamers.emplace_back([&, id] {
      NfsClient nfs(cluster.node(id).endpoint());
      for (int file = next++; file < kFiles && !stop; file = next++) {
        const int pair = file % kDirectoryPairs;
        if (nfs.rename(from[pair], old_name(file), to[pair], new_name(file)).status == NFS3_OK) {
          std::lock_guard lock(mutex);
          acknowledged.insert(file);
        }
      }
    });
  }
  const auto started = Clock::now();
  auto count = [&] {
    std::lock_guard lock(mutex);
    return acknowledged.size();
  };
  while (count() < 20 && Clock::now() - started < 30s) std::this_thread::sleep_for(2ms);
  ASSERT_GE(count(), 20u) << cluster.node(home).log_tail();
  // Past the lookups and prepares of the renames under way: in their pause between phases.
  std::this_thread::sleep_for(500ms);
  cluster.node(home).kill();
  std::this_thread::sleep_for(1s);
  stop = true;
  for (auto& renamer : renamers) renamer.join();
  renamers.clear();

  // The mirror serves, and every file is under exactly one name.
  const auto [new_home, new_mirror] = cluster.wait_for_full_protection(survivor, 60s);
  ASSERT_EQ(new_home, mirror) << cluster.node(mirror).log_tail();
  (void)new_mirror;
  EXPECT_NE(cluster.node(mirror).log_tail(1 << 22).find("rolled back after a crash"),
            std::string::npos)
      << "no rename was between its phases when the home died";
  NfsClient check(cluster.node(survivor).endpoint());
  std::size_t moved = 0;
  for (int file = 0; file < kFiles; ++file) {
    const int pair = file % kDirectoryPairs;
    LookupResult at_old;
    LookupResult at_new;
    for (const auto at = Clock::now(); Clock::now() - at < 30s;) {
      at_old = check.lookup(from[pair], old_name(file));
      at_new = check.lookup(to[pair], new_name(file));
      if (at_old.status != kJukebox && at_new.status != kJukebox) break;
      std::this_thread::sleep_for(50ms);  // a part still held until recovery settles it
    }
    const bool under_old = at_old.status == NFS3_OK;
    const bool under_new = at_new.status == NFS3_OK;
    ASSERT_NE(under_old, under_new)
        << "file " << file << ": old " << at_old.status << ", new " << at_new.status;
    if (acknowledged.contains(file)) {
      EXPECT_TRUE(under_new) << "file " << file << ": its rename was acknowledged";
    }
    moved += under_new;
    EXPECT_EQ(check.read_all(under_new ? at_new.fh : at_old.fh), contents_of(file)) << file;
  }
  EXPECT_GE(moved, acknowledged.size());

  // Nothing stays held by a half-done rename: every file can be removed, and the "from"
  // directories then with it.
  for (int file = 0; file < kFiles; ++file) {
    const int pair = file % kDirectoryPairs;
    nfsstat3 removed = kJukebox;
    for (const auto at = Clock::now(); removed == kJukebox && Clock::now() - at < 30s;) {
      removed = check.remove(from[pair], old_name(file)).status;
      if (removed == NFS3ERR_NOENT) removed = check.remove(to[pair], new_name(file)).status;
      if (removed == kJukebox) std::this_thread::sleep_for(50ms);
    }
    EXPECT_EQ(removed, NFS3_OK) << "file " << file;
  }
  for (int pair = 0; pair < kDirectoryPairs; ++pair) {
    EXPECT_EQ(check.rmdir(root, from_dir(pair)).status, NFS3_OK) << from_dir(pair);
  }

  // The node comes back as the mirror, and everything is listed the same through it.
  std::string error;
  ASSERT_TRUE(cluster.node(home).start(&error)) << error;
  const auto [last_home, last_mirror] = cluster.wait_for_full_protection(home, 60s);
  EXPECT_EQ(last_home, mirror);
  EXPECT_NE(last_mirror, 0u);
  NfsClient back(cluster.node(home).endpoint());
  EXPECT_EQ(back.list(root).size(), check.list(root).size());
  for (int pair = 0; pair < kDirectoryPairs; ++pair) {
    EXPECT_EQ(back.list(to[pair]).size(), 2u) << to_dir(pair) << ": only . and ..";
  }

  // A rename between directories holds the cluster's locks on both. The home's lock cache
  // keeps them after use, until another node wants them: the lock manager lists them.
  ASSERT_FALSE(back.make_file(to[0], "last", 0644, "x").empty());
  ASSERT_EQ(back.rename(to[0], "last", to[1], "last").status, NFS3_OK);
  std::set<std::uint64_t> locked;
  const nlohmann::json listed = cluster.tide_json(1, {"locks", "list", "--kind", "directory"});
  for (const nlohmann::json& lock : listed["locks"]) {
    if (lock["state"] == "granted" && lock["node"] == mirror && lock["mode"] == "EX") {
      locked.insert(lock["file"].get<std::uint64_t>());
    }
  }
  for (int pair : {0, 1}) {
    const LookupResult dir = check.lookup(root, to_dir(pair));
    ASSERT_TRUE(dir.attr);
    EXPECT_TRUE(locked.contains(dir.attr->fileid)) << to_dir(pair) << ": " << listed.dump();
  }
}

}  // namespace
}  // namespace tidepool::test
