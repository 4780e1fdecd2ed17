// Moves of a big file between node pools (issue 7), with four real tided processes (two f800
// nodes, two h500) and the real `tide` CLI: the file stays readable and writable while it moves,
// and a move whose coordinating node is killed goes on elsewhere from its watermark. The file is
// 2 GiB, as the issue asks; 128 MiB (four of a move's 32 MiB watermark ranges) under the
// sanitizers, which move data some twenty times slower.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#include "tests/process/job_fixture.h"
#include "tests/process/nfs_client.h"

namespace tidepool::test {
namespace {

using namespace std::chrono_literals;

// The file is written and read back whole by kStreams clients at once: one client, waiting out
// every round trip, spent about a minute of each test on the 2 GiB. Under the sanitizers a single
// client, as before: a node there can take longer than its 5 s calls to the units' owners allow
// when four 1 MiB READs come at once (NFS3ERR_JUKEBOX, seen on a busy machine).
#if defined(__SANITIZE_ADDRESS__)
constexpr std::size_t kSize = 128u << 20;
constexpr int kStreams = 1;
#else
constexpr std::size_t kSize = 2048u << 20;
constexpr int kStreams = 4;
#endif
constexpr std::size_t kWrite = 1u << 20;
constexpr char kPath[] = "/ifs/big.bin";

class MigrationTest : public JobFixture {
 protected:
  // big.bin written through node `via` (every 8 bytes numbered, so a misplaced piece shows),
  // then the cold tier and a policy that sends it there: its handle.
  FileHandle make_big_file(std::size_t via) {
    model_.resize(kSize);
    for (std::uint64_t word = 0; word < kSize / 8; ++word) {
      const std::uint64_t value = word * 0x9e3779b97f4a7c15ull;
      std::memcpy(model_.data() + word * 8, &value, 8);
    }
    const FileHandle root = root_via(via);
    if (root.empty()) return {};
    const FileHandle file = NfsClient(cluster_->node(via).endpoint()).make_file(root, "big.bin");
    file_ = file;
    if (file.empty() ||
        !write_in_streams(cluster_->node(via).endpoint(), file, model_, kWrite, kStreams)) {
      return {};
    }
    // Made after the file, or the file would be placed there when it was created.
    EXPECT_EQ(tide(1, {"storagepool", "tiers", "create", "cold-tier", "--children", "h500"}).exit_code, 0);
    const Ran made = tide(1, {"filepool", "policies", "create", "big", "--filter",
                              "name =~ big.bin", "--data-storage-target", "cold-tier"});
    EXPECT_EQ(made.exit_code, 0) << made.output;
    return file;
  }

  // One round of the client that works on the file while it moves: a FILE_SYNC write of 64 KiB
  // somewhere, then a read somewhere else, which must return what was last written there. With
  // `retry_later`, what the cluster answers "retry later" (NFS3ERR_JUKEBOX: while a node takes
  // over the namespace) is sent again, as NFS clients do, for up to a minute. An empty string,
  // or what went wrong.
  std::string client_round(NfsClient& client, std::mt19937& random, int round, bool retry_later) {
    constexpr std::size_t kPiece = 64u << 10;
    auto sent = [&](auto call) {
      auto result = call();
      for (int attempt = 0; retry_later && result.status == NFS3ERR_JUKEBOX && attempt < 600;
           ++attempt) {
        std::this_thread::sleep_for(100ms);
        result = call();
      }
      return result;
    };
    const std::size_t at = random() % (kSize / kPiece) * kPiece;
    const std::string piece(kPiece, static_cast<char>('a' + round % 26));
    const WriteResult written = sent([&] { return client.write(file_, at, piece, FILE_SYNC); });
    if (written.status != NFS3_OK) {
      return "write " + std::to_string(round) + " at " + std::to_string(at) + ": " +
             std::to_string(written.status);
    }
    model_.replace(at, kPiece, piece);
    const std::size_t check = random() % (kSize / kPiece) * kPiece;
    const ReadResult read = sent([&] { return client.read(file_, check, kPiece); });
    if (read.status != NFS3_OK) {
      return "read " + std::to_string(round) + " at " + std::to_string(check) + ": " +
             std::to_string(read.status);
    }
    if (read.data != std::string_view(model_).substr(check, kPiece)) {
      return "read " + std::to_string(round) + " at " + std::to_string(check) +
             " is not what was last written there";
    }
    return "";
  }

  // The whole file read through node `via` is the model.
  void expect_intact(std::size_t via, const FileHandle& file) {
    EXPECT_TRUE(reads_back_as(cluster_->node(via).endpoint(), file, model_, kWrite, kStreams))
        << "the whole file as last written";
  }

  std::string model_;
  FileHandle file_;
};

// A client writes and reads the file through another node for as long as its move takes: no
// error, and every read returns what was last written.
TEST_F(MigrationTest, AFileBeingMovedStaysReadableAndWritable) {
  const FileHandle file = make_big_file(2);
  ASSERT_FALSE(file.empty());
  const std::uint64_t id = start(1, {"SmartPoolsTree", "--paths", kPath, "--policy", "HIGH"});
  ASSERT_NE(id, 0u);
  NfsClient client(cluster_->node(3).endpoint());
  std::mt19937 random(7);
  int rounds = 0;
  json seen;
  for (const auto deadline = Clock::now() + 300s; Clock::now() < deadline; ++rounds) {
    const std::string failed = client_round(client, random, rounds, false);
    ASSERT_EQ(failed, "");
    if (rounds % 8 == 0) {
      seen = job(2, id);
      if (has_ended(seen)) break;
    }
  }
  EXPECT_EQ(seen["state"], "succeeded") << seen.dump();
  EXPECT_EQ(seen["progress"]["files_moved"], 1) << seen.dump();
  EXPECT_EQ(seen["progress"]["bytes_moved"], kSize) << seen.dump();
  EXPECT_GT(rounds, 8);
  const auto [pool, nodes] = placement_of(4, kPath);
  EXPECT_EQ(pool, "h500");
  EXPECT_EQ(nodes, (std::set<std::uint64_t>{3, 4}));
  expect_intact(4, file);
}

// The namespace's home, which leads the cluster and so coordinates the job, is killed mid-move:
// the job is taken up elsewhere, and the move goes on from its watermark rather than from the
// start (`tide get -D` shows it under way). A client writes and reads the file through another
// node all along, and loses nothing it was told was written.
TEST_F(MigrationTest, AMoveWhoseCoordinatorIsKilledGoesOnFromItsWatermark) {
  const FileHandle file = make_big_file(3);
  ASSERT_FALSE(file.empty());
  // The node that formed the cluster leads it and is the namespace's home: killing it cuts the
  // move itself short, not only the job's walk. An election under load (seen on a machine
  // running other suites beside this one) can have moved the lead; it is handed back.
  const std::uint64_t home = tide_json(3, {"get", "-D", kPath})["shard"]["home"];
  const Ran handed = tide(3, {"cluster", "transfer-leadership", std::to_string(home)});
  ASSERT_EQ(handed.exit_code, 0) << handed.output;
  EXPECT_EQ(handed.output, "Node " + std::to_string(home) + " leads the cluster.\n");
  const std::uint64_t id = start(3, {"SmartPoolsTree", "--paths", kPath, "--policy", "HIGH"});
  ASSERT_NE(id, 0u);
  std::atomic<bool> stop{false};
  std::atomic<int> rounds{0};
  std::string failed;
  std::thread working([&] {
    NfsClient client(cluster_->node(3).endpoint());
    std::mt19937 random(11);
    while (!stop && failed.empty()) failed = client_round(client, random, rounds++, true);
  });
  struct Joined {
    std::atomic<bool>& stop;
    std::thread& thread;
    ~Joined() {
      stop = true;
      if (thread.joinable()) thread.join();
    }
  } joined{stop, working};
  json shown;
  for (const auto deadline = Clock::now() + 120s; Clock::now() < deadline;) {
    shown = tide_json(3, {"get", "-D", kPath});
    if (shown["moving"].is_object() && shown["moving"]["copied_bytes"] >= kSize / 4) break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(shown["moving"].is_object()) << shown.dump();
  ASSERT_GE(shown["moving"]["copied_bytes"], kSize / 4) << shown.dump();
  EXPECT_EQ(shown["moving"]["pool"], "h500");
  EXPECT_EQ(shown["layout"]["pool"], "f800") << "read where it was until the switch";
  for (const json& run : shown["moving"]["stripe_units"]) {
    for (const json& node : run["nodes"]) EXPECT_TRUE(node == 3 || node == 4) << run.dump();
  }
  ASSERT_TRUE(home == 1 || home == 2) << "an f800 node: " << shown.dump();
  EXPECT_EQ(shown["shard"]["home"], home) << shown.dump();
  // Should the lead have moved again meanwhile, the job's coordinator outlives the home: its run
  // stops at the node lost mid-move and is taken up again, the move from its watermark.
  cluster_->node(home).kill();

  const json done = wait_for(3, id, has_ended, 300s);
  const int rounds_by_the_end = rounds;
  // A few more rounds on the file in its new place (bounded: a client that stopped fails below).
  for (const auto until = Clock::now() + 30s;
       rounds < rounds_by_the_end + 3 && Clock::now() < until;) {
    std::this_thread::sleep_for(10ms);
  }
  stop = true;
  working.join();
  EXPECT_EQ(failed, "");
  EXPECT_GT(rounds, rounds_by_the_end) << "the client went on after the move";
  EXPECT_EQ(done["state"], "succeeded") << done.dump();
  EXPECT_GE(done["runs"], 2) << "taken up by another node";
  EXPECT_EQ(done["progress"]["files_moved"], 1) << done.dump();
  EXPECT_EQ(done["progress"]["files_resumed"], 1) << "went on from the watermark: " << done.dump();
  EXPECT_NE(tide_json(3, {"get", "-D", kPath})["shard"]["home"], home) << "a new home";
  EXPECT_LE(done["progress"]["bytes_moved"], kSize - kSize / 4) << "did not start over";
  const json after = tide_json(4, {"get", "-D", kPath});
  EXPECT_EQ(after["layout"]["pool"], "h500") << after.dump();
  EXPECT_TRUE(after["moving"].is_null()) << after.dump();
  expect_intact(4, file);
}

}  // namespace
}  // namespace tidepool::test
