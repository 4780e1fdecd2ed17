#include "store/internal/pack.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <vector>

#include "store/internal/test_util.h"

namespace tidepool::store::internal {
namespace {

class PackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fresh_test_directory("tidepool-pack-test");
    reopen();
  }
  void TearDown() override {
    pack_.reset();
    std::filesystem::remove_all(root_);
  }

  // A pack on the same directory, as after a restart (or a crash: nothing is synced here).
  void reopen(std::uint64_t segment_bytes = kSegmentBytes) {
    pack_.reset();
    pack_ = std::make_unique<Pack>(root_.string(), segment_bytes);
    const Status opened = pack_->open();
    ASSERT_TRUE(opened.ok()) << opened.to_string();
  }

  // `blocks` whole blocks of bytes from `seed`, with their checksums.
  static PackedData data_of(std::uint64_t blocks, std::uint64_t seed) {
    PackedData d;
    d.blocks.resize(blocks * kPackBlock);
    std::mt19937_64 random(seed);
    for (auto& b : d.blocks) b = static_cast<std::uint8_t>(random());
    for (std::uint64_t i = 0; i < blocks; ++i) {
      d.sums.push_back(stored_sum(std::span(d.blocks).subspan(i * kPackBlock, kPackBlock)));
    }
    return d;
  }

  void put(std::uint64_t inode, const PackedData& d) {
    const Status s = pack_->put(inode, d.blocks, d.sums);
    ASSERT_TRUE(s.ok()) << s.to_string();
  }

  // The inode's packed bytes, empty if it is not packed.
  std::vector<std::uint8_t> bytes_of(std::uint64_t inode) {
    Result<std::optional<PackedData>> loaded = pack_->load(inode);
    EXPECT_TRUE(loaded.ok()) << loaded.status().to_string();
    if (!loaded.ok() || !*loaded) return {};
    return (*loaded)->blocks;
  }

  std::uint64_t segment_file_bytes() {
    std::uint64_t bytes = 0;
    for (const auto& f : std::filesystem::directory_iterator(root_)) bytes += f.file_size();
    return bytes;
  }

  std::filesystem::path root_;
  std::unique_ptr<Pack> pack_;
};

TEST_F(PackTest, RecordsReadBackAndTheNewestOfEachInodeSurvivesAReopen) {
  const PackedData a = data_of(3, 1), b = data_of(1, 2), a2 = data_of(5, 3);
  put(10, a);
  put(11, b);
  put(10, a2);
  EXPECT_EQ(bytes_of(10), a2.blocks);
  EXPECT_EQ(bytes_of(11), b.blocks);
  ASSERT_TRUE(pack_->sync().ok());
  reopen();
  EXPECT_EQ(bytes_of(10), a2.blocks);
  EXPECT_EQ(bytes_of(11), b.blocks);
  EXPECT_FALSE(pack_->contains(12));
  // Numbers go on from the newest found: a record written now still wins after a reopen.
  put(11, a);
  reopen();
  EXPECT_EQ(bytes_of(11), a.blocks);
  EXPECT_EQ(pack_->inodes().size(), 2u);
}

TEST_F(PackTest, AReadOfPartOfARecordGivesItsBlocksAndHolesPastIt) {
  const PackedData d = data_of(4, 4);
  put(20, d);
  std::vector<std::uint8_t> blocks(3 * kPackBlock, 0xee);
  std::vector<std::uint32_t> sums(3, 7);
  auto read = pack_->read(20, 2, blocks, sums, false);
  ASSERT_TRUE(read.ok());
  ASSERT_EQ(*read, Pack::ReadOutcome::read);
  EXPECT_TRUE(std::equal(blocks.begin(), blocks.begin() + 2 * kPackBlock,
                         d.blocks.begin() + 2 * kPackBlock));
  EXPECT_TRUE(
      std::all_of(blocks.begin() + 2 * kPackBlock, blocks.end(), [](auto b) { return b == 0; }));
  EXPECT_EQ(sums, (std::vector<std::uint32_t>{d.sums[2], d.sums[3], 0}));
  auto missing = pack_->read(21, 0, blocks, sums, false);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(*missing, Pack::ReadOutcome::not_packed);
}

TEST_F(PackTest, ARemovalSurvivesAReopen) {
  put(30, data_of(2, 5));
  put(31, data_of(2, 6));
  ASSERT_TRUE(pack_->remove(30).ok());
  ASSERT_TRUE(pack_->sync(30).ok());
  EXPECT_FALSE(pack_->contains(30));
  reopen();
  EXPECT_FALSE(pack_->contains(30));
  EXPECT_TRUE(pack_->contains(31));
  // Packed again after its removal, it is back.
  put(30, data_of(1, 7));
  reopen();
  EXPECT_EQ(bytes_of(30), data_of(1, 7).blocks);
}

TEST_F(PackTest, ATornRecordEndsTheNewestSegmentForGood) {
  const PackedData kept = data_of(2, 8), torn = data_of(3, 9), later = data_of(1, 10);
  put(40, kept);
  put(41, torn);
  ASSERT_TRUE(pack_->sync().ok());
  // The last record's data did not all reach the disk before a crash.
  const std::optional<ByteOnDisk> where = pack_->locate(41, kPackBlock + 5);
  ASSERT_TRUE(where);
  pack_.reset();
  const int fd = ::open(where->path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  std::uint8_t byte = 0;
  ASSERT_EQ(::pread(fd, &byte, 1, static_cast<off_t>(where->position)), 1);
  byte ^= 0x40;
  ASSERT_EQ(::pwrite(fd, &byte, 1, static_cast<off_t>(where->position)), 1);
  ::close(fd);
  const std::uint64_t before = segment_file_bytes();

  reopen();
  EXPECT_EQ(bytes_of(40), kept.blocks);
  EXPECT_FALSE(pack_->contains(41));
  EXPECT_LT(segment_file_bytes(), before);
  // Appending goes on in a new segment; the torn record never comes back.
  put(42, later);
  reopen();
  EXPECT_FALSE(pack_->contains(41));
  EXPECT_EQ(bytes_of(42), later.blocks);
  EXPECT_EQ(bytes_of(40), kept.blocks);
}

TEST_F(PackTest, GarbageInADirectoryOfSegmentsIsNeverTakenForRecords) {
  pack_.reset();
  std::vector<std::uint8_t> noise(100'000);
  std::mt19937_64 random(11);
  for (auto& b : noise) b = static_cast<std::uint8_t>(random());
  const std::string path = (root_ / "0000000000000003").string();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, noise.data(), noise.size()), static_cast<ssize_t>(noise.size()));
  ::close(fd);
  // Names that only look like a segment's, and one that would leave no number after it.
  for (const char* name : {"000000000000000A", "+000000000000003", "ffffffffffffffff"}) {
    std::FILE* f = std::fopen((root_ / name).c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  std::filesystem::create_directory(root_ / "0000000000000004");
  reopen();
  EXPECT_TRUE(pack_->inodes().empty());
  put(50, data_of(1, 12));
  reopen();
  EXPECT_EQ(pack_->inodes(), std::vector<std::uint64_t>{50});
  EXPECT_EQ(bytes_of(50), data_of(1, 12).blocks);
}

TEST_F(PackTest, PutRefusesWhatIsNotWholeBlocksWithASumEach) {
  const PackedData d = data_of(2, 13);
  EXPECT_EQ(pack_->put(1, d.blocks, std::span(d.sums).first(1)).code(), Errc::invalid_argument);
  EXPECT_EQ(pack_->put(1, std::span(d.blocks).first(kPackBlock), d.sums).code(),
            Errc::invalid_argument);
  const PackedData big = data_of(kMaxPackedBlocks + 1, 14);
  EXPECT_EQ(pack_->put(1, big.blocks, big.sums).code(), Errc::invalid_argument);
  // A short last block is padded with zeros.
  ASSERT_TRUE(pack_->put(1, std::span(d.blocks).first(kPackBlock + 10), d.sums).ok());
  std::vector<std::uint8_t> expected(d.blocks.begin(), d.blocks.begin() + kPackBlock + 10);
  expected.resize(2 * kPackBlock, 0);
  EXPECT_EQ(bytes_of(1), expected);
}

// Segments of 64 KiB: a record of 2 blocks is 8448 bytes, 7 to a segment.
constexpr std::uint64_t kSmallSegment = 64u << 10;

TEST_F(PackTest, MostlyDeadSegmentsAreCompactedAndWhatLivesStays) {
  reopen(kSmallSegment);
  for (std::uint64_t i = 0; i < 70; ++i) put(100 + i, data_of(2, i));
  for (std::uint64_t i = 0; i < 70; ++i) {
    if (i % 5 != 0) {
      ASSERT_TRUE(pack_->remove(100 + i).ok());
    }
  }
  ASSERT_TRUE(pack_->sync().ok());
  pack_->wait_for_compaction();
  const Pack::Usage usage = pack_->usage();
  EXPECT_GE(usage.live_bytes * 2, usage.bytes - kSmallSegment) << "all but the active segment";
  EXPECT_EQ(usage.bytes, segment_file_bytes());
  EXPECT_LT(usage.segments, 5u);
  for (std::uint64_t i = 0; i < 70; i += 5) EXPECT_EQ(bytes_of(100 + i), data_of(2, i).blocks);
  reopen(kSmallSegment);
  EXPECT_EQ(pack_->inodes().size(), 14u);
  for (std::uint64_t i = 0; i < 70; ++i) {
    if (i % 5 == 0) {
      EXPECT_EQ(bytes_of(100 + i), data_of(2, i).blocks) << i;
    } else {
      EXPECT_FALSE(pack_->contains(100 + i)) << i;
    }
  }
}

TEST_F(PackTest, ARemovalOutlivesItsSegmentWhileTheRecordItKillsIsLeftElsewhere) {
  // Segments of exactly seven records of 2 blocks (a 256-byte header each).
  reopen(7 * (256 + 2 * kPackBlock));
  // Segment 0: the doomed record and six that live on, so it is never compacted.
  put(200, data_of(2, 20));
  for (std::uint64_t i = 1; i < 7; ++i) put(200 + i, data_of(2, 20 + i));
  // Segment 1: the removal, among records that all die, so it is compacted.
  ASSERT_TRUE(pack_->remove(200).ok());
  for (std::uint64_t i = 0; i < 6; ++i) put(300 + i, data_of(2, 30 + i));
  for (std::uint64_t i = 0; i < 6; ++i) ASSERT_TRUE(pack_->remove(300 + i).ok());
  // Segment 2 onwards, so that segment 1 is sealed.
  for (std::uint64_t i = 0; i < 8; ++i) put(400 + i, data_of(2, 40 + i));
  ASSERT_TRUE(pack_->sync().ok());
  pack_->wait_for_compaction();
  EXPECT_FALSE(std::filesystem::exists(root_ / "0000000000000001"));
  EXPECT_TRUE(std::filesystem::exists(root_ / "0000000000000000"));
  reopen(kSmallSegment);
  EXPECT_FALSE(pack_->contains(200));
  for (std::uint64_t i = 1; i < 7; ++i) EXPECT_TRUE(pack_->contains(200 + i));
  for (std::uint64_t i = 0; i < 6; ++i) EXPECT_FALSE(pack_->contains(300 + i));
}

TEST_F(PackTest, ReadersAndWritersAtOnceAlwaysSeeAWholeRecord) {
  reopen(kSmallSegment);
  constexpr int kRounds = 300;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int i = 0; i < kRounds; ++i) {
      put(500, data_of(1 + i % 3, static_cast<std::uint64_t>(i)));
      if (i % 7 == 0) {
        ASSERT_TRUE(pack_->remove(500).ok());
      }
    }
    done = true;
  });
  int reads = 0;
  while (!done && reads < 100'000) {
    Result<std::optional<PackedData>> got = pack_->load(500);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    if (*got) {
      for (std::size_t b = 0; b < (*got)->sums.size(); ++b) {
        EXPECT_EQ((*got)->sums[b],
                  stored_sum(std::span((*got)->blocks).subspan(b * kPackBlock, kPackBlock)));
      }
    }
    ++reads;
  }
  writer.join();
}

}  // namespace
}  // namespace tidepool::store::internal
