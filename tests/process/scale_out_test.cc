// Every node serves data (issue 39): a node reads and writes the stripe units of a file placed
// in a node pool at their owners directly, nothing relayed through the file's home, and drops
// the layout it cached when the file moves, so that it never reads or writes the old place.
//
// Four nodes: node 1, the namespace's home, and node 4 in pool h500; nodes 2 and 3 in pool
// f800, where new files go. So a file's units are on nodes 2 and 3 (two copies), its home holds
// none of them, and node 4 holds nothing of it until it moves to h500.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/process/nfs_client.h"
#include "tests/process/tide_cluster.h"

namespace tidepool::test {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kNodes = 4;
constexpr std::size_t kHome = 1;
constexpr std::size_t kReader = 4;  // in h500: neither the home nor an owner of f800's units
constexpr std::uint64_t kFileBytes = 16u << 20;
constexpr std::uint32_t kPiece = 1u << 20;  // READ and WRITE size

// File `seed`'s bytes: each 8-byte word names the file and its place.
std::string contents_of(std::uint64_t seed) {
  std::string bytes(kFileBytes, '\0');
  for (std::uint64_t word = 0; word < kFileBytes / 8; ++word) {
    const std::uint64_t value = (seed << 40) ^ (word * 0x9e3779b97f4a7c15ull);
    std::memcpy(&bytes[word * 8], &value, 8);
  }
  return bytes;
}

class ScaleOutTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (tide_path().empty()) return;
    cluster_ = new TideCluster("scale", {"h500", "f800", "f800", "h500"}, "scale-out", "",
                               "ram_budget = \"1MiB\"\n");
    cluster_->start_serving();
    cluster_->place_new_files_in("f800");
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    if (tide_path().empty()) GTEST_SKIP() << "no tide binary in this build";
    ASSERT_NE(cluster_, nullptr);
    ASSERT_FALSE(HasFatalFailure());
  }

  // Bytes every node sent to the others so far.
  static std::int64_t backend_bytes_sent() {
    std::int64_t sum = 0;
    for (std::size_t id = 1; id <= kNodes; ++id) {
      sum += cluster_->metric(id, "tidepool_backend_sent_bytes_total");
    }
    return sum;
  }

  // A new file /ifs/NAME made through node `via`, its bytes written there FILE_SYNC.
  static FileHandle make_file(std::size_t via, const std::string& name, const std::string& bytes) {
    NfsClient nfs(cluster_->node(via).endpoint());
    const FileHandle file = nfs.make_file(cluster_->root_via(via), name);
    EXPECT_FALSE(file.empty()) << name;
    for (std::size_t at = 0; at < bytes.size() && !file.empty(); at += kPiece) {
      const WriteResult written = nfs.write(file, at, std::string_view(bytes).substr(at, kPiece),
                                            FILE_SYNC);
      EXPECT_EQ(written.status, NFS3_OK) << name << " at " << at;
    }
    return file;
  }

  // The whole file as node `via` reads it, a piece at a time.
  static std::string read_through(std::size_t via, const FileHandle& file) {
    NfsClient nfs(cluster_->node(via).endpoint());
    return nfs.read_all(file, kPiece);
  }

  // /ifs/NAME made as make_file does, checked to be in f800, with the access pattern `random`:
  // no read-ahead, so that every byte read is a byte asked for.
  static FileHandle make_random_file(const std::string& name, const std::string& bytes) {
    const FileHandle file = make_file(2, name, bytes);
    EXPECT_EQ(pool_of("/ifs/" + name), "f800");
    const Ran random = cluster_->tide(kHome, {"set", "-a", "random", "/ifs/" + name});
    EXPECT_EQ(random.exit_code, 0) << random.output;
    return file;
  }

  // Node 4 reads the file whole as written, and every byte crosses the backend once at most
  // (from an owner to node 4), none through the home.
  static void expect_read_by_the_reader_crossing_once(const FileHandle& file,
                                                     const std::string& bytes) {
    const std::int64_t before = backend_bytes_sent();
    EXPECT_TRUE(read_through(kReader, file) == bytes) << "node 4 reads the file as written";
    const std::int64_t crossed = backend_bytes_sent() - before;
    EXPECT_LE(static_cast<double>(crossed), 1.05 * kFileBytes)
        << crossed << " backend bytes for " << kFileBytes << " bytes read";
  }

  static std::string pool_of(const std::string& path) {
    const json shown = cluster_->tide_json(kHome, {"get", "-D", path});
    return shown["layout"]["pool"].get<std::string>();
  }

  static inline TideCluster* cluster_ = nullptr;
};

// A file's units are on nodes 2 and 3; node 4 reads it whole, with no read-ahead: every byte
// crosses the backend once, from an owner to node 4, and none through the home.
TEST_F(ScaleOutTest, ReadsThroughANodeHoldingNoneOfTheFileComeFromItsOwnersAlone) {
  const std::string bytes = contents_of(1);
  const FileHandle file = make_random_file("read.bin", bytes);
  ASSERT_FALSE(file.empty());
  expect_read_by_the_reader_crossing_once(file, bytes);
}

// A reader that asked for the file's attributes first (a LOOKUP or GETATTR: every client does)
// has them cached without the file's layout: its first READ learns the layout before it
// fetches, or those blocks would go the home's way and cross the backend twice.
TEST_F(ScaleOutTest, AFirstReadAfterAGetattrComesFromTheOwnersToo) {
  const std::string bytes = contents_of(5);
  const FileHandle file = make_random_file("stat-then-read.bin", bytes);
  ASSERT_FALSE(file.empty());
  NfsClient nfs(cluster_->node(kReader).endpoint());
  // The first GETATTR has node 4 take the attributes' lock in the background; the later ones
  // are answered from what it then keeps.
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(nfs.getattr(file).status, NFS3_OK);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  expect_read_by_the_reader_crossing_once(file, bytes);
}

// The home holds none of a file placed on nodes 2 and 3 either: it reads it through its L1 from
// the owners, as node 4 does, rather than serving it as data of its own (one unit after another
// on its blocking pool).
TEST_F(ScaleOutTest, TheHomeReadsAFileItHoldsNoneOfAtItsOwnersThroughItsCache) {
  const std::string bytes = contents_of(4);
  const FileHandle file = make_file(2, "home.bin", bytes);
  ASSERT_FALSE(file.empty());
  ASSERT_EQ(pool_of("/ifs/home.bin"), "f800");
  const std::int64_t through_l1 = cluster_->metric(kHome, "tidepool_cache_l1_accessed_bytes_total");
  const std::int64_t as_own = cluster_->metric(kHome, "tidepool_cache_l2_read_bytes_total");
  EXPECT_TRUE(read_through(kHome, file) == bytes) << "the home reads the file as written";
  EXPECT_EQ(cluster_->metric(kHome, "tidepool_cache_l1_accessed_bytes_total") - through_l1,
            static_cast<std::int64_t>(kFileBytes));
  EXPECT_EQ(cluster_->metric(kHome, "tidepool_cache_l2_read_bytes_total"), as_own);
}

// Node 4 writes a file placed on nodes 2 and 3: the bytes go to both owners from node 4, the
// home hears of the size only, and every node reads what was written.
TEST_F(ScaleOutTest, WritesThroughANodeHoldingNoneOfTheFileGoToItsOwnersAlone) {
  const std::string first = contents_of(2);
  NfsClient nfs(cluster_->node(kReader).endpoint());
  const FileHandle file = nfs.make_file(cluster_->root_via(kReader), "write.bin");
  ASSERT_FALSE(file.empty());
  const std::int64_t home_before = cluster_->metric(kHome, "tidepool_backend_received_bytes_total");
  const std::int64_t reader_before =
      cluster_->metric(kReader, "tidepool_backend_sent_bytes_total");
  for (std::size_t at = 0; at < kFileBytes; at += kPiece) {
    const WriteResult written =
        nfs.write(file, at, std::string_view(first).substr(at, kPiece), UNSTABLE);
    ASSERT_EQ(written.status, NFS3_OK) << at;
  }
  ASSERT_EQ(nfs.commit(file).status, NFS3_OK);
  const std::int64_t home_received =
      cluster_->metric(kHome, "tidepool_backend_received_bytes_total") - home_before;
  const std::int64_t reader_sent =
      cluster_->metric(kReader, "tidepool_backend_sent_bytes_total") - reader_before;
  EXPECT_LT(static_cast<double>(home_received), 0.05 * kFileBytes)
      << "the home received " << home_received << " bytes for a write of " << kFileBytes;
  EXPECT_GE(static_cast<double>(reader_sent), 2.0 * kFileBytes) << "a copy to each owner";
  EXPECT_LE(static_cast<double>(reader_sent), 2.1 * kFileBytes);
  for (std::size_t via = 1; via <= kNodes; ++via) {
    EXPECT_TRUE(read_through(via, file) == first) << "read through node " << via;
  }
}

// Node 4 reads a file placed on nodes 2 and 3, keeping its layout; the file then moves to h500
// (nodes 1 and 4), which frees its units on 2 and 3. Node 4's L1 (1 MiB) holds a few of its
// blocks at most: had node 4 kept the old layout, it would read the others from 2 and 3, which
// hold nothing of the file any more, and see zeros. And what node 4 writes next is read on
// node 2, which reads from the new place.
TEST_F(ScaleOutTest, ANodeReadsAndWritesAFileThatMovedWhereItIsNow) {
  std::string bytes = contents_of(3);
  const FileHandle file = make_file(2, "moves.bin", bytes);
  ASSERT_FALSE(file.empty());
  EXPECT_TRUE(read_through(kReader, file) == bytes) << "before the move";

  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"storagepool", "tiers", "create", "cold-tier", "--children",
                                 "h500"},
        {"filepool", "policies", "create", "moves", "--filter", "name =~ moves.bin",
         "--data-storage-target", "cold-tier"},
        {"filepool", "apply", "/ifs/moves.bin"}}) {
    const Ran ran = cluster_->tide(kHome, command);
    ASSERT_EQ(ran.exit_code, 0) << ran.output;
  }
  ASSERT_EQ(pool_of("/ifs/moves.bin"), "h500");

  EXPECT_TRUE(read_through(kReader, file) == bytes) << "after the move, through node 4";
  NfsClient nfs(cluster_->node(kReader).endpoint());
  const std::string piece(kPiece, 'm');
  ASSERT_EQ(nfs.write(file, 3 * kPiece, piece, FILE_SYNC).status, NFS3_OK);
  bytes.replace(3 * kPiece, kPiece, piece);
  EXPECT_TRUE(read_through(2, file) == bytes) << "node 4's write, read through node 2";
  EXPECT_TRUE(read_through(kReader, file) == bytes) << "and through node 4";
}

}  // namespace
}  // namespace tidepool::test
