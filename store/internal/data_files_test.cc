#include "store/internal/data_files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include "store/internal/test_util.h"

namespace tidepool::store::internal {
namespace {

class DataFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fresh_test_directory("tidepool-data-files-test");
    files_ = std::make_unique<DataFiles>(root_.string());
    ASSERT_TRUE(files_->prepare().ok());
  }
  void TearDown() override {
    files_.reset();
    std::filesystem::remove_all(root_);
  }

  std::vector<std::uint8_t> random_bytes(std::size_t n) {
    std::vector<std::uint8_t> v(n);
    for (auto& b : v) b = static_cast<std::uint8_t>(random_());
    return v;
  }

  std::vector<std::uint8_t> read(std::uint64_t inode, std::uint64_t offset, std::size_t n) {
    std::vector<std::uint8_t> v(n, 0xee);
    Status s = files_->read(inode, offset, v);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return v;
  }

  void flip_byte(std::uint64_t inode, std::uint64_t offset) {
    flip_data_byte(root_, inode, offset);
  }

  std::filesystem::path root_;
  std::unique_ptr<DataFiles> files_;
  std::mt19937_64 random_{42};
};

TEST_F(DataFilesTest, OddPiecesAtOddOffsetsReadBackAsAModel) {
  std::vector<std::uint8_t> model(300'000, 0);
  for (int i = 0; i < 200; ++i) {
    std::size_t offset = random_() % (model.size() - 1);
    std::size_t length = 1 + random_() % std::min<std::size_t>(20'000, model.size() - offset);
    auto piece = random_bytes(length);
    ASSERT_TRUE(files_->write(7, offset, piece).ok());
    std::copy(piece.begin(), piece.end(), model.begin() + static_cast<long>(offset));
  }
  EXPECT_EQ(read(7, 0, model.size()), model);
  for (int i = 0; i < 50; ++i) {
    std::size_t offset = random_() % model.size();
    std::size_t length = 1 + random_() % (model.size() - offset);
    std::vector<std::uint8_t> expected(model.begin() + static_cast<long>(offset),
                                       model.begin() + static_cast<long>(offset + length));
    EXPECT_EQ(read(7, offset, length), expected) << offset << "+" << length;
  }
  EXPECT_EQ(files_->checksum_failures(), 0u);
}

TEST_F(DataFilesTest, NeverWrittenDataReadsAsZeros) {
  EXPECT_EQ(read(8, 0, 10'000), std::vector<std::uint8_t>(10'000, 0));
  ASSERT_TRUE(files_->write(8, 1'000'000, random_bytes(10)).ok());
  EXPECT_EQ(read(8, 4096, 8192), std::vector<std::uint8_t>(8192, 0));
}

TEST_F(DataFilesTest, AFlippedByteFailsTheReadOfItsBlockOnly) {
  auto data = random_bytes(5 * kChecksumBlock);
  ASSERT_TRUE(files_->write(9, 0, data).ok());
  flip_byte(9, 2 * kChecksumBlock + 100);

  std::vector<std::uint8_t> into(data.size());
  Status s = files_->read(9, 0, into);
  EXPECT_EQ(s.code(), Errc::corrupt);
  EXPECT_NE(s.message().find("inode 9 at offset 8192"), std::string::npos) << s.message();
  std::vector<std::uint8_t> one(10);
  EXPECT_EQ(files_->read(9, 2 * kChecksumBlock + 4000, one).code(), Errc::corrupt);
  EXPECT_EQ(files_->checksum_failures(), 2u);

  // The blocks around it still read, and so does a read served from the page cache.
  std::vector<std::uint8_t> head(2 * kChecksumBlock);
  ASSERT_TRUE(files_->read(9, 0, head).ok());
  EXPECT_TRUE(std::equal(head.begin(), head.end(), data.begin()));
  auto cached = files_->read_cached(9, 3 * kChecksumBlock, head);
  ASSERT_TRUE(cached.ok());
  if (*cached) {
    EXPECT_TRUE(std::equal(head.begin(), head.end(), data.begin() + 3 * kChecksumBlock));
  }
  EXPECT_EQ(files_->read_cached(9, 2 * kChecksumBlock, one).code(), Errc::corrupt);
}

TEST_F(DataFilesTest, APartialWriteDoesNotLaunderACorruptBlockButAWholeOneReplacesIt) {
  ASSERT_TRUE(files_->write(10, 0, random_bytes(kChecksumBlock)).ok());
  flip_byte(10, 17);
  EXPECT_EQ(files_->write(10, 100, random_bytes(10)).code(), Errc::corrupt);
  auto whole = random_bytes(kChecksumBlock);
  ASSERT_TRUE(files_->write(10, 0, whole).ok());
  EXPECT_EQ(read(10, 0, kChecksumBlock), whole);
}

TEST_F(DataFilesTest, RepairPutsBackOnlyTheBlocksThatFailTheirChecksums) {
  auto data = random_bytes(4 * kChecksumBlock);
  ASSERT_TRUE(files_->write(12, 0, data).ok());
  flip_byte(12, kChecksumBlock + 7);
  flip_byte(12, 3 * kChecksumBlock);
  // The good copy differs in block 0 (as a writer racing the repair would have it): a block
  // that still matches its checksum is not touched.
  auto good = data;
  good[0] ^= 0xff;

  auto repaired = files_->repair(12, 0, good);
  ASSERT_TRUE(repaired.ok()) << repaired.status().to_string();
  EXPECT_EQ(*repaired, 2u);
  EXPECT_EQ(read(12, 0, data.size()), data);

  auto again = files_->repair(12, 0, good);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 0u);
  EXPECT_EQ(files_->repair(12, 100, std::span(good).first(kChecksumBlock)).status().code(),
            Errc::invalid_argument);
  auto missing = files_->repair(99, 0, good);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(*missing, 0u);
}

TEST_F(DataFilesTest, TruncationZeroesTheTailAndKeepsChecksumsRight) {
  auto data = random_bytes(40'000);
  ASSERT_TRUE(files_->write(11, 0, data).ok());
  ASSERT_TRUE(files_->truncate(11, 5'000).ok());
  auto after = read(11, 0, 40'000);
  EXPECT_TRUE(std::equal(after.begin(), after.begin() + 5'000, data.begin()));
  EXPECT_TRUE(std::all_of(after.begin() + 5'000, after.end(), [](auto b) { return b == 0; }));

  // The block the cut fell in is still checked: a flip there is caught.
  flip_byte(11, 4'500);
  std::vector<std::uint8_t> into(100);
  EXPECT_EQ(files_->read(11, 4'400, into).code(), Errc::corrupt);

  // Extending again reads zeros up to the new data.
  auto more = random_bytes(1'000);
  ASSERT_TRUE(files_->write(11, 30'000, more).ok());
  auto extended = read(11, 8'192, 30'000 - 8'192);
  EXPECT_TRUE(std::all_of(extended.begin(), extended.end(), [](auto b) { return b == 0; }));
  EXPECT_EQ(read(11, 30'000, 1'000), more);
}

TEST_F(DataFilesTest, ConcurrentWritersOfOneBlockLeaveItVerifiable) {
  constexpr int kThreads = 4;
  constexpr int kWrites = 300;
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([this, t] {
      std::vector<std::uint8_t> piece(16, static_cast<std::uint8_t>(t + 1));
      for (int i = 0; i < kWrites; ++i) {
        // Each writer owns its own bytes of the same two blocks.
        EXPECT_TRUE(files_->write(12, 4000 + 16 * static_cast<unsigned>(t), piece).ok());
      }
    });
  }
  std::vector<std::uint8_t> into(kChecksumBlock * 2);
  for (int i = 0; i < kWrites; ++i) EXPECT_TRUE(files_->read(12, 0, into).ok());
  for (auto& w : writers) w.join();
  auto final_bytes = read(12, 4000, 16 * kThreads);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(final_bytes[16 * static_cast<unsigned>(t)], t + 1);
  }
  EXPECT_EQ(files_->checksum_failures(), 0u);
}

TEST_F(DataFilesTest, RemovedFileReadsAsZeros) {
  ASSERT_TRUE(files_->write(13, 0, random_bytes(100)).ok());
  ASSERT_TRUE(files_->sync(13).ok());
  files_->remove(13);
  EXPECT_EQ(read(13, 0, 100), std::vector<std::uint8_t>(100, 0));
}

TEST(FileSyncCoversNewEntryTest, OnlyForFileSystemsKnownToSyncTheEntryWithTheFile) {
  EXPECT_TRUE(file_sync_covers_new_entry(0xEF53));      // ext2/3/4
  EXPECT_TRUE(file_sync_covers_new_entry(0x58465342));  // XFS
  EXPECT_TRUE(file_sync_covers_new_entry(0x9123683E));  // btrfs
  EXPECT_FALSE(file_sync_covers_new_entry(0x01021994));  // tmpfs
  EXPECT_FALSE(file_sync_covers_new_entry(0x6969));      // NFS
  EXPECT_FALSE(file_sync_covers_new_entry(0));
}

}  // namespace
}  // namespace tidepool::store::internal
