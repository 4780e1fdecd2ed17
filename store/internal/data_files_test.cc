#include "store/internal/data_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include "store/internal/test_util.h"

namespace tidepool::store::internal {
namespace {

// Each test runs without an L2 and with one: what a read returns must not depend on it.
class DataFilesTest : public ::testing::TestWithParam<std::size_t> {
 protected:
  void SetUp() override {
    root_ = fresh_test_directory("tidepool-data-files-test");
    if (GetParam() > 0) l2_ = L2::make(GetParam());
    files_ = std::make_unique<DataFiles>(root_.string(), l2_);
    ASSERT_TRUE(files_->prepare().ok());
  }
  void TearDown() override {
    files_.reset();
    l2_.reset();
    std::filesystem::remove_all(root_);
  }

  std::vector<std::uint8_t> random_bytes(std::size_t n) {
    std::vector<std::uint8_t> v(n);
    for (auto& b : v) b = static_cast<std::uint8_t>(random_());
    return v;
  }

  // As the store reads: from the L2, else from the page cache (keeping units), else the disk.
  std::vector<std::uint8_t> read(std::uint64_t inode, std::uint64_t offset, std::size_t n) {
    std::vector<std::uint8_t> v(n, 0xee);
    if (files_->read_from_l2(inode, offset, v)) return v;
    const Result<bool> cached = files_->read_cached(inode, offset, v);
    if (cached.ok() && *cached) return v;
    Status s = files_->read(inode, offset, v);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return v;
  }

  void flip_byte(std::uint64_t inode, std::uint64_t offset) {
    flip_data_byte(root_, inode, offset);
  }

  std::filesystem::path root_;
  std::shared_ptr<L2> l2_;  // null: no L2
  std::unique_ptr<DataFiles> files_;
  std::mt19937_64 random_{42};
};

TEST_P(DataFilesTest, OddPiecesAtOddOffsetsReadBackAsAModel) {
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

TEST_P(DataFilesTest, NeverWrittenDataReadsAsZeros) {
  EXPECT_EQ(read(8, 0, 10'000), std::vector<std::uint8_t>(10'000, 0));
  ASSERT_TRUE(files_->write(8, 1'000'000, random_bytes(10)).ok());
  EXPECT_EQ(read(8, 4096, 8192), std::vector<std::uint8_t>(8192, 0));
}

// How many pages of [offset, offset + length) of the file at `fd` the page cache holds.
// mincore starts no I/O, where a read without waiting that misses starts read-ahead.
std::size_t resident_pages(int fd, std::uint64_t offset, std::uint64_t length) {
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  void* mapped = ::mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(offset));
  EXPECT_NE(mapped, MAP_FAILED) << std::strerror(errno);
  if (mapped == MAP_FAILED) return 0;
  std::vector<unsigned char> resident((length + page - 1) / page);
  EXPECT_EQ(::mincore(mapped, length, resident.data()), 0) << std::strerror(errno);
  ::munmap(mapped, length);
  return static_cast<std::size_t>(
      std::ranges::count_if(resident, [](unsigned char r) { return (r & 1) != 0; }));
}

// Drops [offset, offset + length) of the written-back file at `fd` from the page cache. A page
// still in a CPU's batch of new pages is skipped and goes on a later try.
bool drop_pages(int fd, std::uint64_t offset, std::uint64_t length) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    if (::posix_fadvise(fd, static_cast<off_t>(offset), static_cast<off_t>(length),
                        POSIX_FADV_DONTNEED) != 0) {
      return false;
    }
    if (resident_pages(fd, offset, length) == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// A job's copy leaves the page cache once durable; a client's stays (what sync() leaves).
TEST_P(DataFilesTest, ASyncThatReleasesTheCopyLeavesNoneOfItInThePageCache) {
  constexpr std::uint64_t kFile = 8u << 20;
  const auto data = random_bytes(kFile);
  const auto descriptor_of = [&](std::uint64_t inode) {
    const Result<ByteOnDisk> where = DataFiles::locate_on_disk(root_.string(), inode, 0);
    EXPECT_TRUE(where.ok()) << where.status().to_string();
    return where.ok() ? ::open(where->path.c_str(), O_RDONLY) : -1;
  };
  // Whether this file system lets pages go at all, told from a file of the test's own.
  ASSERT_TRUE(files_->write(15, 0, data).ok());
  ASSERT_TRUE(files_->sync(15).ok());
  const int own = descriptor_of(15);
  ASSERT_GE(own, 0);
  const bool pages_go = resident_pages(own, 0, kFile) > 0 && drop_pages(own, 0, kFile);
  ::close(own);
  if (!pages_go) GTEST_SKIP() << "this file system keeps no written pages, or never lets them go";

  ASSERT_TRUE(files_->write(14, 0, data).ok());
  ASSERT_TRUE(files_->sync(14).ok());
  const int fd = descriptor_of(14);
  ASSERT_GE(fd, 0);
  EXPECT_GT(resident_pages(fd, 0, kFile), 0u) << "sync() keeps the pages";
  // The advice is taken by the next try for a page still in a CPU's batch of new pages.
  std::size_t left = 1;
  for (int attempt = 0; attempt < 20 && left > 0; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_TRUE(files_->sync_and_release(14).ok());
    left = resident_pages(fd, 0, kFile);
  }
  ::close(fd);
  EXPECT_EQ(left, 0u);
  EXPECT_EQ(read(14, 0, kFile), data);
}

// A read without waiting that misses starts read-ahead, and on a fast disk the pages may be in
// before it looks again: read_cached may answer either way, but never with other bytes.
TEST_P(DataFilesTest, AReadOfPagesThePageCacheDroppedGivesTheDataOrLeavesItToTheBlockingRead) {
  constexpr std::uint64_t kFile = 16u << 20;
  constexpr std::uint64_t kTail = kFile / 2;
  const auto data = random_bytes(kFile);
  ASSERT_TRUE(files_->write(12, 0, data).ok());
  const Result<ByteOnDisk> where = DataFiles::locate_on_disk(root_.string(), 12, 0);
  ASSERT_TRUE(where.ok()) << where.status().to_string();
  const int fd = ::open(where->path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << where->path;
  // Written back first: the page cache keeps dirty pages.
  ASSERT_EQ(::fsync(fd), 0);
  if (!drop_pages(fd, 0, kFile)) {
    ::close(fd);
    GTEST_SKIP() << "this file system keeps its pages in memory";
  }
  const auto read_cached_or_blocking = [&](std::uint64_t offset, std::size_t n) {
    std::vector<std::uint8_t> v(n, 0xee);
    const Result<bool> cached = files_->read_cached(12, offset, v);
    EXPECT_TRUE(cached.ok()) << cached.status().to_string();
    if (!cached.ok() || !*cached) {
      std::fill(v.begin(), v.end(), 0xee);
      const Status s = files_->read(12, offset, v);
      EXPECT_TRUE(s.ok()) << s.to_string();
    }
    EXPECT_TRUE(std::equal(v.begin(), v.end(), data.begin() + static_cast<std::ptrdiff_t>(offset)))
        << "at " << offset << ", " << n << " bytes";
  };

  read_cached_or_blocking(0, 4 * kChecksumBlock);
  // The head and what read-ahead added stay; the tail goes.
  const bool tail_dropped = drop_pages(fd, kTail, kFile - kTail);
  ::close(fd);
  ASSERT_TRUE(tail_dropped);
  read_cached_or_blocking(0, kFile);
  read_cached_or_blocking(kTail - 3 * kChecksumBlock, 6 * kChecksumBlock);
  EXPECT_EQ(read(12, 0, kFile), data);
}

TEST_P(DataFilesTest, AFlippedByteFailsTheReadOfItsBlockOnly) {
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

TEST_P(DataFilesTest, APartialWriteDoesNotLaunderACorruptBlockButAWholeOneReplacesIt) {
  ASSERT_TRUE(files_->write(10, 0, random_bytes(kChecksumBlock)).ok());
  flip_byte(10, 17);
  EXPECT_EQ(files_->write(10, 100, random_bytes(10)).code(), Errc::corrupt);
  auto whole = random_bytes(kChecksumBlock);
  ASSERT_TRUE(files_->write(10, 0, whole).ok());
  EXPECT_EQ(read(10, 0, kChecksumBlock), whole);
}

TEST_P(DataFilesTest, RepairPutsBackOnlyTheBlocksThatFailTheirChecksums) {
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

TEST_P(DataFilesTest, TruncationZeroesTheTailAndKeepsChecksumsRight) {
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

TEST_P(DataFilesTest, ConcurrentWritersOfOneBlockLeaveItVerifiable) {
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

TEST_P(DataFilesTest, ADroppedRangeReadsAsZerosAndTheRestStaysVerifiable) {
  const auto bytes = random_bytes(2 * kCachedUnitBytes);
  ASSERT_TRUE(files_->write(14, 0, bytes).ok());
  // Read twice: an L2 keeps the units a second read asks for.
  EXPECT_EQ(read(14, 0, bytes.size()), bytes);
  EXPECT_EQ(read(14, 0, bytes.size()), bytes);
  EXPECT_EQ(files_->drop(14, 100, kChecksumBlock).code(), Errc::invalid_argument);
  ASSERT_TRUE(files_->drop(14, kCachedUnitBytes + kChecksumBlock, 2 * kChecksumBlock).ok());
  auto expected = bytes;
  std::fill(expected.begin() + kCachedUnitBytes + kChecksumBlock,
            expected.begin() + kCachedUnitBytes + 3 * kChecksumBlock, 0);
  EXPECT_EQ(read(14, 0, bytes.size()), expected);
  EXPECT_EQ(files_->checksum_failures(), 0u);
  const std::uint64_t patched = kCachedUnitBytes + kChecksumBlock + 10;
  ASSERT_TRUE(files_->write(14, patched, std::vector<std::uint8_t>(20, 9)).ok());
  std::fill(expected.begin() + patched, expected.begin() + patched + 20, 9);
  EXPECT_EQ(read(14, 0, bytes.size()), expected);
  EXPECT_EQ(files_->checksum_failures(), 0u);
}

TEST_P(DataFilesTest, RemovedFileReadsAsZeros) {
  ASSERT_TRUE(files_->write(13, 0, random_bytes(100)).ok());
  ASSERT_TRUE(files_->sync(13).ok());
  files_->remove(13);
  EXPECT_EQ(read(13, 0, 100), std::vector<std::uint8_t>(100, 0));
}

// Where the inode's data lies: in the pack, or in a file of its own.
bool packed_on_disk(const std::filesystem::path& root, std::uint64_t inode) {
  const Result<ByteOnDisk> where = DataFiles::locate_on_disk(root.string(), inode, 0);
  EXPECT_TRUE(where.ok()) << where.status().to_string();
  return where.ok() && where->path.find("/packs/") != std::string::npos;
}

TEST_P(DataFilesTest, ASmallFileIsPackedUntilAWriteTakesItPastWhatIsPacked) {
  auto model = random_bytes(115'000);
  ASSERT_TRUE(files_->write(20, 0, model).ok());
  EXPECT_TRUE(packed_on_disk(root_, 20));
  EXPECT_FALSE(std::filesystem::exists(root_ / "14" / "0000000000000014"));
  EXPECT_EQ(*files_->holds(20), true);
  EXPECT_EQ(*files_->extents(20),
            (std::vector<std::pair<std::uint64_t, std::uint64_t>>{{0, 29 * kChecksumBlock}}));
  // A write into it, in part of a block: merged, still packed.
  const auto piece = random_bytes(3'000);
  ASSERT_TRUE(files_->write(20, 50'000, piece).ok());
  std::copy(piece.begin(), piece.end(), model.begin() + 50'000);
  EXPECT_TRUE(packed_on_disk(root_, 20));
  EXPECT_EQ(read(20, 0, model.size()), model);
  EXPECT_EQ(read(20, 49'000, 5'000),
            std::vector<std::uint8_t>(model.begin() + 49'000, model.begin() + 54'000));
  // Past 128 KiB: a file of its own, with every byte.
  const auto tail = random_bytes(20'000);
  ASSERT_TRUE(files_->write(20, 130'000, tail).ok());
  model.resize(130'000);
  model.insert(model.end(), tail.begin(), tail.end());
  EXPECT_FALSE(packed_on_disk(root_, 20));
  EXPECT_EQ(read(20, 0, model.size()), model);
  EXPECT_EQ(*files_->list(), std::vector<std::uint64_t>{20});
  EXPECT_EQ(files_->checksum_failures(), 0u);
}

TEST_P(DataFilesTest, PackedFilesAndTheirRemovalsOutliveTheStore) {
  const auto a = random_bytes(10'000), b = random_bytes(70'000), c = random_bytes(1);
  ASSERT_TRUE(files_->write(21, 0, a).ok());
  ASSERT_TRUE(files_->write(22, 4'096, b).ok());
  ASSERT_TRUE(files_->write(23, 0, c).ok());
  ASSERT_TRUE(files_->sync(22).ok());
  files_->remove(23);
  ASSERT_TRUE(files_->sync(23).ok());
  ASSERT_TRUE(files_->truncate(21, 5'000).ok());
  files_.reset();
  files_ = std::make_unique<DataFiles>(root_.string(), l2_);
  ASSERT_TRUE(files_->prepare().ok());
  EXPECT_EQ(*files_->list(), (std::vector<std::uint64_t>{21, 22}));
  auto cut = a;
  std::fill(cut.begin() + 5'000, cut.end(), 0);
  EXPECT_EQ(read(21, 0, a.size()), cut);
  EXPECT_EQ(read(22, 0, 4'096), std::vector<std::uint8_t>(4'096, 0));
  EXPECT_EQ(read(22, 4'096, b.size()), b);
  EXPECT_EQ(read(23, 0, 1), std::vector<std::uint8_t>(1, 0));
  EXPECT_EQ(*files_->holds(23), false);
  // Cut to nothing, it is packed no more.
  ASSERT_TRUE(files_->truncate(21, 0).ok());
  EXPECT_EQ(*files_->holds(21), false);
}

// A crash in the middle of moving a file out of the pack leaves it in both places; the pack's
// copy is the file until the move is done again, and the other copy never comes back.
TEST_P(DataFilesTest, ADataFileLeftByAnUnpackingCutShortNeverComesBack) {
  const auto packed = random_bytes(20'000);
  ASSERT_TRUE(files_->write(24, 0, packed).ok());
  ASSERT_TRUE(files_->sync(24).ok());
  {
    const std::filesystem::path other = root_.string() + "-other";
    DataFiles left(other.string());
    ASSERT_TRUE(left.prepare().ok());
    ASSERT_TRUE(left.write(24, 0, random_bytes(kPackedBelow)).ok());
    // Moved, not copied: a copy writes out the hole below the file's checksum table in full.
    std::filesystem::rename(DataFiles::locate_on_disk(other.string(), 24, 0)->path,
                            root_ / "18" / "0000000000000018");
    std::filesystem::remove_all(other);
  }
  files_.reset();
  files_ = std::make_unique<DataFiles>(root_.string(), l2_);
  ASSERT_TRUE(files_->prepare().ok());
  EXPECT_EQ(read(24, 0, packed.size()), packed);
  ASSERT_TRUE(files_->truncate(24, 0).ok());
  ASSERT_TRUE(files_->write(24, 10'000, random_bytes(100)).ok());
  const auto head = read(24, 0, 10'000);
  EXPECT_TRUE(std::all_of(head.begin(), head.end(), [](auto b) { return b == 0; }));
}

// The inodes whose data files under `root` this process holds open (each through a data and a
// checksum descriptor).
std::vector<std::uint64_t> inodes_open_under(const std::filesystem::path& root) {
  std::vector<std::uint64_t> inodes;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::filesystem::path target = std::filesystem::read_symlink(fd.path(), ec);
    if (ec || !target.string().starts_with(root.string())) continue;
    // Not the fan-out directories, nor the pack's segments.
    if (target.filename().string().size() != 16 || target.parent_path().filename() == "packs") {
      continue;
    }
    inodes.push_back(std::stoull(target.filename().string(), nullptr, 16));
  }
  std::sort(inodes.begin(), inodes.end());
  inodes.erase(std::unique(inodes.begin(), inodes.end()), inodes.end());
  return inodes;
}

// The bytes a lend put in its pipe, taken out.
std::vector<std::uint8_t> bytes_lent(PipedBytes& lent) {
  std::vector<std::uint8_t> out(lent.size());
  Status copied = lent.copy_out(out);
  EXPECT_TRUE(copied.ok()) << copied.to_string();
  return out;
}

TEST_P(DataFilesTest, ALentRangeHoldsTheFilesBytes) {
  const auto data = random_bytes(3u << 20);
  ASSERT_TRUE(files_->write(20, 0, data).ok());
  for (const auto& [offset, length] : {std::pair<std::uint64_t, std::uint64_t>{0, kMaxLentBytes},
                                       {kChecksumBlock, 16 * kChecksumBlock},
                                       {(2u << 20) + 3 * kChecksumBlock, kMaxLentBytes / 2}}) {
    Result<std::unique_ptr<PipedBytes>> lent = files_->lend(20, offset, length);
    ASSERT_TRUE(lent.ok()) << lent.status().to_string();
    ASSERT_NE(*lent, nullptr) << offset;
    ASSERT_EQ((*lent)->size(), length);
    EXPECT_TRUE(std::ranges::equal(bytes_lent(**lent), std::span(data).subspan(offset, length)))
        << offset << "+" << length;
  }
  // Past the data written, below the checksum table: never written, so zeros.
  Result<std::unique_ptr<PipedBytes>> beyond = files_->lend(20, 4u << 20, 64 * kChecksumBlock);
  ASSERT_TRUE(beyond.ok() && *beyond);
  EXPECT_EQ(bytes_lent(**beyond), std::vector<std::uint8_t>(64 * kChecksumBlock, 0));
  EXPECT_EQ(files_->checksum_failures(), 0u);
}

TEST_P(DataFilesTest, ARangeWithABlockThatFailsItsChecksumIsNotLentAndTheReadSaysWhy) {
  const auto data = random_bytes(1u << 20);
  ASSERT_TRUE(files_->write(21, 0, data).ok());
  flip_byte(21, 5 * kChecksumBlock + 7);
  Result<std::unique_ptr<PipedBytes>> lent = files_->lend(21, 0, 1u << 20);
  ASSERT_TRUE(lent.ok()) << lent.status().to_string();
  EXPECT_EQ(*lent, nullptr);
  std::vector<std::uint8_t> into(1u << 20);
  EXPECT_EQ(files_->read(21, 0, into).code(), Errc::corrupt);
  // The blocks before it are still lent.
  lent = files_->lend(21, 0, 5 * kChecksumBlock);
  ASSERT_TRUE(lent.ok() && *lent);
  EXPECT_TRUE(std::ranges::equal(bytes_lent(**lent), std::span(data).first(5 * kChecksumBlock)));
}

TEST_P(DataFilesTest, WhatHasNoDataFileOrIsPackedIsNotLent) {
  Result<std::unique_ptr<PipedBytes>> none = files_->lend(22, 0, 16 * kChecksumBlock);
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_EQ(*none, nullptr);
  ASSERT_TRUE(files_->write(23, 0, random_bytes(kPackedBelow - 1)).ok());
  Result<std::unique_ptr<PipedBytes>> packed = files_->lend(23, 0, 16 * kChecksumBlock);
  ASSERT_TRUE(packed.ok()) << packed.status().to_string();
  EXPECT_EQ(*packed, nullptr);
}

TEST_P(DataFilesTest, ALendOfPartBlocksOrOfMoreThanAPipeHoldsIsRefused) {
  ASSERT_TRUE(files_->write(24, 0, random_bytes(2u << 20)).ok());
  EXPECT_EQ(files_->lend(24, 100, 16 * kChecksumBlock).status().code(), Errc::invalid_argument);
  EXPECT_EQ(files_->lend(24, 0, 16 * kChecksumBlock + 1).status().code(), Errc::invalid_argument);
  EXPECT_EQ(files_->lend(24, 0, 0).status().code(), Errc::invalid_argument);
  EXPECT_EQ(files_->lend(24, 0, kMaxLentBytes + kChecksumBlock).status().code(),
            Errc::invalid_argument);
}

TEST(DataFilesOpenTest, TheLeastRecentlyUsedDescriptorIsTheOneClosed) {
  const std::filesystem::path root = fresh_test_directory("tidepool-data-files-open-test");
  {
    DataFiles files(root.string(), nullptr, /*max_open=*/2);
    ASSERT_TRUE(files.prepare().ok());
    const std::vector<std::uint8_t> bytes(kPackedBelow, 7);  // too big to pack
    ASSERT_TRUE(files.write(1, 0, bytes).ok());
    ASSERT_TRUE(files.write(2, 0, bytes).ok());
    std::vector<std::uint8_t> back(100);
    ASSERT_TRUE(files.read(1, 0, back).ok());
    ASSERT_TRUE(files.write(3, 0, bytes).ok());
    EXPECT_EQ(inodes_open_under(root), (std::vector<std::uint64_t>{1, 3}));
    ASSERT_TRUE(files.sync(3).ok());
    ASSERT_TRUE(files.write(4, 0, bytes).ok());
    EXPECT_EQ(inodes_open_under(root), (std::vector<std::uint64_t>{3, 4}));
    files.remove(3);
    EXPECT_EQ(inodes_open_under(root), (std::vector<std::uint64_t>{4}));
  }
  std::filesystem::remove_all(root);
}

TEST(FileSyncCoversNewEntryTest, OnlyForFileSystemsKnownToSyncTheEntryWithTheFile) {
  EXPECT_TRUE(file_sync_covers_new_entry(0xEF53));      // ext2/3/4
  EXPECT_TRUE(file_sync_covers_new_entry(0x58465342));  // XFS
  EXPECT_TRUE(file_sync_covers_new_entry(0x9123683E));  // btrfs
  EXPECT_FALSE(file_sync_covers_new_entry(0x01021994));  // tmpfs
  EXPECT_FALSE(file_sync_covers_new_entry(0x6969));      // NFS
  EXPECT_FALSE(file_sync_covers_new_entry(0));
}

INSTANTIATE_TEST_SUITE_P(WithoutAndWithL2, DataFilesTest, ::testing::Values(0, 64u << 20),
                         [](const auto& info) { return info.param == 0 ? "NoL2" : "L2"; });

// The L2 on its own: which reads it keeps, what changes drop, and its budget.
class DataFilesL2Test : public DataFilesTest {};

constexpr std::uint64_t kUnit = kCachedUnitBytes;

TEST_P(DataFilesL2Test, WholeUnitsReadAreServedFromMemoryAfterwards) {
  const auto data = random_bytes(3 * kUnit);
  ASSERT_TRUE(files_->write(5, 0, data).ok());
  EXPECT_TRUE(files_->cached_units(5, 0, kUnit).units.empty());  // writes keep nothing
  // [kUnit / 2, 3 kUnit): only unit 1 and 2 are read whole. The first read marks them, the
  // second keeps them.
  const std::vector<std::uint8_t> tail(data.begin() + kUnit / 2, data.end());
  EXPECT_EQ(read(5, kUnit / 2, 5 * kUnit / 2), tail);
  EXPECT_EQ(l2_->statistics().blocks, 0u);
  EXPECT_EQ(read(5, kUnit / 2, 5 * kUnit / 2), tail);
  EXPECT_TRUE(files_->cached_units(5, 0, 1).units.empty());
  auto units = files_->cached_units(5, kUnit + 10, 2 * kUnit - 20);
  ASSERT_EQ(units.units.size(), 2u);
  EXPECT_EQ(units.first_unit, 1u);
  // The disk changed behind the L2's back: the kept units still answer with what was read.
  flip_byte(5, kUnit + 3);
  std::vector<std::uint8_t> out(kUnit + 100);
  ASSERT_TRUE(files_->read_from_l2(5, kUnit, out));
  EXPECT_EQ(out, std::vector<std::uint8_t>(data.begin() + kUnit, data.begin() + 2 * kUnit + 100));
  EXPECT_EQ(std::memcmp(units.units[1].bytes().data(), data.data() + 2 * kUnit, kUnit), 0);
  EXPECT_FALSE(files_->read_from_l2(5, 0, out));
  EXPECT_EQ(l2_->statistics().blocks, 2u);
}

TEST_P(DataFilesL2Test, OnlyAReadThePageCacheAnsweredKeepsAndOnlyWholeUnits) {
  ASSERT_TRUE(files_->write(6, 0, random_bytes(2 * kUnit)).ok());
  std::vector<std::uint8_t> whole(2 * kUnit);
  // A read from the disk (a first read, a scan, a copy) keeps nothing.
  ASSERT_TRUE(files_->read(6, 0, whole).ok());
  EXPECT_TRUE(files_->cached_units(6, 0, 1).units.empty());
  // Parts of units keep nothing either: a 4 KiB random read does not cost a unit.
  std::vector<std::uint8_t> part(kUnit - 4096);
  ASSERT_TRUE(*files_->read_cached(6, 4096, part));
  std::vector<std::uint8_t> small(4096);
  ASSERT_TRUE(*files_->read_cached(6, kUnit, small));
  EXPECT_EQ(l2_->statistics().blocks, 0u);
  // An ImageNet JPEG's worth (115 KB) is less than a unit: such files are not kept.
  ASSERT_TRUE(files_->write(7, 0, random_bytes(115'000)).ok());
  std::vector<std::uint8_t> jpeg(115'000);
  ASSERT_TRUE(*files_->read_cached(7, 0, jpeg));
  EXPECT_EQ(l2_->statistics().blocks, 0u);
  ASSERT_TRUE(*files_->read_cached(6, 0, whole));
  EXPECT_EQ(l2_->statistics().blocks, 0u);  // marked: read once
  ASSERT_TRUE(*files_->read_cached(6, 0, whole));
  EXPECT_EQ(files_->cached_units(6, 0, 2 * kUnit).units.size(), 2u);
}

TEST_P(DataFilesL2Test, UnitsLentWholeAreKeptOnTheirSecondLend) {
  const auto data = random_bytes(4 * kUnit);
  ASSERT_TRUE(files_->write(25, 0, data).ok());
  // [kUnit / 2, 3 kUnit + kUnit / 2): units 1 and 2 whole.
  for (int lend = 0; lend < 2; ++lend) {
    EXPECT_EQ(l2_->statistics().blocks, 0u);
    Result<std::unique_ptr<PipedBytes>> lent = files_->lend(25, kUnit / 2, 3 * kUnit);
    ASSERT_TRUE(lent.ok() && *lent);
  }
  EXPECT_EQ(l2_->statistics().blocks, 2u);
  std::vector<std::uint8_t> out(2 * kUnit);
  ASSERT_TRUE(files_->read_from_l2(25, kUnit, out));
  EXPECT_TRUE(std::ranges::equal(out, std::span(data).subspan(kUnit, 2 * kUnit)));
  EXPECT_FALSE(files_->read_from_l2(25, 0, out));
}

TEST_P(DataFilesL2Test, WritesCutsAndRemovalsDropWhatTheyChange) {
  ASSERT_TRUE(files_->write(8, 0, random_bytes(2 * kUnit)).ok());
  std::vector<std::uint8_t> whole(2 * kUnit);
  ASSERT_TRUE(*files_->read_cached(8, 0, whole));
  ASSERT_TRUE(*files_->read_cached(8, 0, whole));
  ASSERT_EQ(files_->cached_units(8, 0, 2 * kUnit).units.size(), 2u);
  // One byte into unit 1: unit 0 stays, unit 1 goes, and reads see the byte.
  const std::vector<std::uint8_t> byte{0x5a};
  ASSERT_TRUE(files_->write(8, kUnit + 7, byte).ok());
  EXPECT_EQ(files_->cached_units(8, 0, kUnit).units.size(), 1u);
  EXPECT_TRUE(files_->cached_units(8, kUnit, 1).units.empty());
  EXPECT_EQ(read(8, kUnit + 7, 1), byte);
  whole[kUnit + 7] = 0x5a;
  EXPECT_EQ(read(8, 0, 2 * kUnit), whole);
  ASSERT_EQ(files_->cached_units(8, 0, 2 * kUnit).units.size(), 2u);
  // A cut drops every unit of the file; the part that stays is read again.
  ASSERT_TRUE(files_->truncate(8, 100).ok());
  EXPECT_TRUE(files_->cached_units(8, 0, 1).units.empty());
  std::vector<std::uint8_t> cut(whole.begin(), whole.begin() + 100);
  cut.resize(2 * kUnit, 0);
  EXPECT_EQ(read(8, 0, 2 * kUnit), cut);
  ASSERT_EQ(files_->cached_units(8, 0, 2 * kUnit).units.size(), 2u);
  files_->remove(8);
  EXPECT_TRUE(files_->cached_units(8, 0, 1).units.empty());
  EXPECT_EQ(read(8, 0, kUnit), std::vector<std::uint8_t>(kUnit, 0));
  // tide flush --l2
  ASSERT_TRUE(files_->write(9, 0, random_bytes(kUnit)).ok());
  ASSERT_TRUE(*files_->read_cached(9, 0, whole));
  ASSERT_TRUE(*files_->read_cached(9, 0, whole));
  ASSERT_FALSE(files_->cached_units(9, 0, kUnit).units.empty());
  l2_->clear();
  EXPECT_TRUE(files_->cached_units(9, 0, kUnit).units.empty());
  ASSERT_TRUE(*files_->read_cached(9, 0, whole));  // marked again, not kept
  EXPECT_TRUE(files_->cached_units(9, 0, kUnit).units.empty());
}

TEST_P(DataFilesL2Test, ACorruptUnitIsNeverKept) {
  ASSERT_TRUE(files_->write(10, 0, random_bytes(kUnit)).ok());
  flip_byte(10, 5000);
  std::vector<std::uint8_t> out(kUnit);
  EXPECT_EQ(files_->read_cached(10, 0, out).code(), Errc::corrupt);
  EXPECT_TRUE(files_->cached_units(10, 0, kUnit).units.empty());
}

TEST_P(DataFilesL2Test, TheL2StaysWithinItsBudget) {
  constexpr std::uint64_t kUnits = 128;  // 16 MiB read through an 8 MiB L2
  ASSERT_TRUE(files_->write(11, 0, random_bytes(kUnits * kUnit)).ok());
  std::vector<std::uint8_t> out(kUnit);
  for (int pass = 0; pass < 2; ++pass) {
    for (std::uint64_t u = 0; u < kUnits; ++u) {
      ASSERT_TRUE(*files_->read_cached(11, u * kUnit, out));
    }
  }
  const BlockCacheStatistics stats = l2_->statistics();
  EXPECT_LE(stats.bytes, l2_->usage().budget_bytes);
  EXPECT_GT(stats.blocks, 0u);
  EXPECT_GT(stats.evictions, 0u);
}

TEST_P(DataFilesL2Test, NoReadReturnsAUnitOlderThanAWriteThatEndedBeforeItBegan) {
  // Writers put a whole unit of their write's number; readers keep the unit as they read it
  // and take it from the L2. A number below the last one acknowledged before a read began is
  // an old unit kept across a write.
  std::atomic<std::uint64_t> acknowledged{0};
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> stale{0};
  std::atomic<std::uint64_t> from_l2{0};
  auto reader = [&] {
    std::vector<std::uint8_t> unit(kUnit);
    while (!done.load()) {
      const std::uint64_t floor = acknowledged.load();
      const bool cached = files_->read_from_l2(12, 0, unit);
      if (cached) from_l2++;
      if (!cached) {
        const Result<bool> read = files_->read_cached(12, 0, unit);
        if (!read.ok() || !*read) continue;
      }
      std::uint64_t seen = 0;
      std::memcpy(&seen, unit.data() + kUnit - 8, 8);
      if (seen < floor) stale++;
    }
  };
  std::vector<std::thread> readers;
  for (int i = 0; i < 3; ++i) readers.emplace_back(reader);
  std::vector<std::uint8_t> unit(kUnit);
  for (std::uint64_t n = 1; n <= 2000; ++n) {
    for (std::uint64_t w = 0; w < kUnit / 8; ++w) std::memcpy(&unit[w * 8], &n, 8);
    ASSERT_TRUE(files_->write(12, 0, unit).ok());
    acknowledged.store(n);
  }
  done.store(true);
  for (auto& t : readers) t.join();
  EXPECT_EQ(stale.load(), 0u);
  EXPECT_GT(from_l2.load(), 0u);
}

INSTANTIATE_TEST_SUITE_P(L2, DataFilesL2Test, ::testing::Values(8u << 20));

}  // namespace
}  // namespace tidepool::store::internal
