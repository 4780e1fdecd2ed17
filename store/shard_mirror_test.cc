#include "store/shard_mirror.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <numeric>
#include <vector>

#include "store/internal/data_files.h"
#include "store/internal/mirror_messages.h"
#include "store/internal/schema.h"
#include "store/internal/test_util.h"

namespace tidepool::store {
namespace {

using internal::run_to_completion;

const Caller kRoot{0, 0, {}};

// Hands each message to a ShardCopy in this process, through a copy of its bytes as a network
// would; `refuse` makes it answer as a mirror that went away.
class LoopbackTarget final : public MirrorTarget {
 public:
  explicit LoopbackTarget(ShardCopy& copy) : copy_(copy) {}
  Status call(MirrorMethod method, std::span<const std::uint8_t> request) override {
    std::lock_guard lock(mutex_);
    ++calls_[static_cast<std::size_t>(method)];
    if (refuse_) return error(Errc::unavailable, "the mirror went away");
    const std::vector<std::uint8_t> arrived(request.begin(), request.end());
    return copy_.apply(static_cast<std::uint32_t>(method), arrived);
  }
  Result<xdr::Buffer> fetch(MirrorMethod method, std::span<const std::uint8_t> request) override {
    std::lock_guard lock(mutex_);
    ++calls_[static_cast<std::size_t>(method)];
    if (refuse_) return error(Errc::unavailable, "the mirror went away");
    return copy_.read(request);
  }
  void refuse(bool refusing = true) {
    std::lock_guard lock(mutex_);
    refuse_ = refusing;
  }
  int calls(MirrorMethod method) {
    std::lock_guard lock(mutex_);
    return calls_[static_cast<std::size_t>(method)];
  }

 private:
  ShardCopy& copy_;
  std::mutex mutex_;
  bool refuse_ = false;
  int calls_[kLastMirrorMethod + 1] = {};
};

std::vector<std::uint8_t> pattern(std::size_t size, std::uint8_t seed) {
  std::vector<std::uint8_t> bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::uint8_t>(seed + i * 7 + i / 4096);
  return bytes;
}

class ShardMirrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = internal::fresh_test_directory("tidepool-mirror-test");
    home_ = open_store("home");
    auto copy = ShardCopy::open((root_ / "mirror").string());
    ASSERT_TRUE(copy.ok()) << copy.status().to_string();
    copy_ = std::move(copy).value();
    target_ = std::make_shared<LoopbackTarget>(*copy_);
  }
  void TearDown() override {
    home_.reset();
    copy_.reset();
    std::filesystem::remove_all(root_);
  }

  std::unique_ptr<LocalStore> open_store(const std::string& name) {
    StoreOptions options = options_;
    options.data_dir = (root_ / name).string();
    auto opened = Store::open(options);
    EXPECT_TRUE(opened.ok()) << opened.status().to_string();
    return opened.ok() ? std::move(opened).value() : nullptr;
  }

  // The mirror's copy opened as the store its node serves once it takes the home's place.
  std::unique_ptr<LocalStore> promote() {
    home_->close();
    copy_->close();
    return open_store("mirror");
  }

  InodeId create(Store& store, InodeId directory, const std::string& name) {
    auto made = run_to_completion(
        store.create(directory, name, CreateMode::unchecked, {}, {}, kRoot));
    EXPECT_TRUE(made.ok()) << name << ": " << made.status().to_string();
    return made.ok() ? made->attributes.inode : 0;
  }

  Status write(Store& store, InodeId inode, std::uint64_t offset,
               const std::vector<std::uint8_t>& data, Stability stability) {
    return run_to_completion(store.write(inode, offset, data, stability, kRoot)).status();
  }

  std::vector<std::uint8_t> read_all(Store& store, InodeId inode) {
    auto attributes = run_to_completion(store.getattr(inode));
    EXPECT_TRUE(attributes.ok()) << attributes.status().to_string();
    if (!attributes.ok()) return {};
    std::vector<std::uint8_t> bytes(attributes->size);
    auto read = run_to_completion(store.read(inode, 0, bytes, kRoot));
    EXPECT_TRUE(read.ok()) << read.status().to_string();
    return bytes;
  }

  std::vector<std::string> names(Store& store, InodeId directory) {
    auto page = run_to_completion(store.readdir(directory, 0, 0, 1000, false, kRoot));
    EXPECT_TRUE(page.ok()) << page.status().to_string();
    std::vector<std::string> found;
    if (page.ok()) {
      for (const auto& entry : page->entries) {
        if (entry.name != "." && entry.name != "..") found.push_back(entry.name);
      }
    }
    std::sort(found.begin(), found.end());
    return found;
  }

  StoreOptions options_{.threads = 2};
  std::filesystem::path root_;
  std::unique_ptr<LocalStore> home_;
  std::unique_ptr<ShardCopy> copy_;
  std::shared_ptr<LoopbackTarget> target_;
};

TEST_F(ShardMirrorTest, WhatTheHomeAcknowledgedBeforeAndAfterTheCopyIsOnThePromotedMirror) {
  // Before the mirror: a file with data, a sparse one, and one removed.
  const InodeId early = create(*home_, kRootInode, "early");
  const auto early_data = pattern(300'000, 1);
  ASSERT_TRUE(write(*home_, early, 0, early_data, Stability::file_sync).ok());
  const InodeId sparse = create(*home_, kRootInode, "sparse");
  const auto far_data = pattern(5000, 2);
  ASSERT_TRUE(write(*home_, sparse, 10 << 20, far_data, Stability::file_sync).ok());
  const InodeId gone = create(*home_, kRootInode, "gone");
  ASSERT_TRUE(write(*home_, gone, 0, pattern(100, 3), Stability::file_sync).ok());

  ASSERT_TRUE(run_to_completion(home_->mirror_to(target_)).ok());
  EXPECT_EQ(target_->calls(MirrorMethod::copy_begin), 1);
  EXPECT_EQ(target_->calls(MirrorMethod::copy_end), 1);

  // After: every kind of change goes to the mirror as it is made.
  ASSERT_TRUE(run_to_completion(home_->remove(kRootInode, "gone", kRoot)).ok());
  const InodeId late = create(*home_, kRootInode, "late");
  const auto late_data = pattern(200'000, 4);
  ASSERT_TRUE(write(*home_, late, 0, late_data, Stability::unstable).ok());
  ASSERT_TRUE(run_to_completion(home_->commit(late, {})).ok());
  auto directory = run_to_completion(home_->mkdir(kRootInode, "dir", {}, kRoot));
  ASSERT_TRUE(directory.ok());
  ASSERT_TRUE(run_to_completion(home_->rename(kRootInode, "early", directory->attributes.inode,
                                              "moved", kRoot))
                  .ok());
  AttributeChanges cut;
  cut.size = 70'000;
  ASSERT_TRUE(run_to_completion(home_->setattr(early, cut, kRoot, std::nullopt)).ok());
  EXPECT_GT(target_->calls(MirrorMethod::changes), 0);
  EXPECT_GT(target_->calls(MirrorMethod::write), 0);
  EXPECT_EQ(target_->calls(MirrorMethod::truncate), 1);
  EXPECT_EQ(target_->calls(MirrorMethod::remove), 1);

  auto promoted = promote();
  ASSERT_NE(promoted, nullptr);
  EXPECT_EQ(names(*promoted, kRootInode), (std::vector<std::string>{"dir", "late", "sparse"}));
  EXPECT_EQ(names(*promoted, directory->attributes.inode), std::vector<std::string>{"moved"});
  EXPECT_EQ(read_all(*promoted, early),
            std::vector<std::uint8_t>(early_data.begin(), early_data.begin() + 70'000));
  EXPECT_EQ(read_all(*promoted, late), late_data);
  auto sparse_bytes = read_all(*promoted, sparse);
  ASSERT_EQ(sparse_bytes.size(), (10u << 20) + far_data.size());
  EXPECT_TRUE(std::equal(far_data.begin(), far_data.end(), sparse_bytes.begin() + (10 << 20)));
  EXPECT_TRUE(std::all_of(sparse_bytes.begin(), sparse_bytes.begin() + (10 << 20),
                          [](std::uint8_t b) { return b == 0; }));
  // New inodes on the promoted copy do not reuse the home's numbers.
  const InodeId after = create(*promoted, kRootInode, "after-promotion");
  EXPECT_GT(after, late);
  EXPECT_NE(after, directory->attributes.inode);
}

TEST_F(ShardMirrorTest, AMirroredStoreDeletesItsChangeRecordingBeforeItsDatabaseCloses) {
  ASSERT_TRUE(run_to_completion(home_->mirror_to(target_)).ok());
  create(*home_, kRootInode, "recorded");
  // Deleting the recording (a SQLite session) locks and writes the connection: done after the
  // connection closed, it wrote freed memory (a node crashed handing a shard back). A database
  // closed with a session left aborts the process.
  home_.reset();
}

TEST_F(ShardMirrorTest, AChangeTheMirrorDidNotTakeFailsTheOperation) {
  ASSERT_TRUE(run_to_completion(home_->mirror_to(target_)).ok());
  target_->refuse();
  auto made = run_to_completion(home_->create(kRootInode, "f", CreateMode::unchecked, {}, {}, kRoot));
  EXPECT_EQ(made.code(), Errc::unavailable) << made.status().to_string();
  // The mirror missed a change: later ones fail too, even when it would take them, and none
  // is sent to it.
  target_->refuse(false);
  const int calls = target_->calls(MirrorMethod::changes);
  auto later = run_to_completion(home_->create(kRootInode, "h", CreateMode::unchecked, {}, {}, kRoot));
  EXPECT_EQ(later.code(), Errc::unavailable) << later.status().to_string();
  EXPECT_EQ(target_->calls(MirrorMethod::changes), calls);
  // Without a mirror the home serves alone again.
  ASSERT_TRUE(run_to_completion(home_->mirror_to(nullptr)).ok());
  EXPECT_NE(create(*home_, kRootInode, "g"), 0u);
}

TEST_F(ShardMirrorTest, AWholeCopyThatFailsLeavesTheHomeServingUnmirrored) {
  target_->refuse();
  EXPECT_EQ(run_to_completion(home_->mirror_to(target_)).code(), Errc::unavailable);
  const int calls = target_->calls(MirrorMethod::changes);
  EXPECT_NE(create(*home_, kRootInode, "f"), 0u);
  EXPECT_EQ(target_->calls(MirrorMethod::changes), calls);
}

TEST_F(ShardMirrorTest, ACopyReopenedAfterACrashTakesNoChangesUntilCopiedAnew) {
  ASSERT_TRUE(run_to_completion(home_->mirror_to(target_)).ok());
  copy_->close();
  auto reopened = ShardCopy::open((root_ / "mirror").string());
  ASSERT_TRUE(reopened.ok());
  copy_ = std::move(reopened).value();
  auto fresh = std::make_shared<LoopbackTarget>(*copy_);
  EXPECT_EQ(fresh->call(MirrorMethod::write,
                        internal::encode_mirror_extent({5, 0, true, pattern(10, 1)}))
                .code(),
            Errc::unavailable);
  EXPECT_EQ(fresh->call(MirrorMethod::remove, internal::encode_mirror_inode({5})).code(),
            Errc::unavailable);
  ASSERT_TRUE(run_to_completion(home_->mirror_to(fresh)).ok());
  EXPECT_NE(create(*home_, kRootInode, "f"), 0u);
}

TEST_F(ShardMirrorTest, ABadBlockAtTheHomeIsPutBackFromTheMirrorsCopy) {
  ASSERT_TRUE(run_to_completion(home_->mirror_to(target_)).ok());
  const InodeId file = create(*home_, kRootInode, "f");
  const auto data = pattern(3 * internal::kChecksumBlock, 5);
  ASSERT_TRUE(write(*home_, file, 0, data, Stability::file_sync).ok());
  internal::flip_data_byte(root_ / "home/data", file, 100);
  internal::flip_data_byte(root_ / "home/data", file, 2 * internal::kChecksumBlock + 9);

  EXPECT_EQ(read_all(*home_, file), data);
  EXPECT_EQ(target_->calls(MirrorMethod::read), 1);
  EXPECT_EQ(options_.integrity->checksum_repairs.load(), 2u);
  EXPECT_EQ(options_.integrity->checksum_failures.load(), 1u);
  // Put back on disk: the next read needs no repair.
  EXPECT_EQ(read_all(*home_, file), data);
  EXPECT_EQ(target_->calls(MirrorMethod::read), 1);

  // A write into part of a bad block repairs the block first.
  internal::flip_data_byte(root_ / "home/data", file, internal::kChecksumBlock + 1);
  auto patched = data;
  std::fill_n(patched.begin() + internal::kChecksumBlock + 10, 20, 0xab);
  ASSERT_TRUE(write(*home_, file, internal::kChecksumBlock + 10,
                    std::vector<std::uint8_t>(20, 0xab), Stability::file_sync)
                  .ok());
  EXPECT_EQ(read_all(*home_, file), patched);
  EXPECT_EQ(options_.integrity->checksum_repairs.load(), 3u);
}

TEST_F(ShardMirrorTest, ABlockBadInEveryCopyFailsTheReadAndNamesTheOffset) {
  ASSERT_TRUE(run_to_completion(home_->mirror_to(target_)).ok());
  const InodeId file = create(*home_, kRootInode, "f");
  ASSERT_TRUE(
      write(*home_, file, 0, pattern(2 * internal::kChecksumBlock, 6), Stability::file_sync).ok());
  internal::flip_data_byte(root_ / "home/data", file, internal::kChecksumBlock + 3);
  internal::flip_data_byte(root_ / "mirror/data", file, internal::kChecksumBlock + 3);

  std::vector<std::uint8_t> into(2 * internal::kChecksumBlock);
  auto read = run_to_completion(home_->read(file, 0, into, kRoot));
  EXPECT_EQ(read.code(), Errc::corrupt);
  EXPECT_NE(read.status().message().find("at offset 4096"), std::string::npos)
      << read.status().to_string();
  EXPECT_EQ(options_.integrity->checksum_repairs.load(), 0u);
  // Without a mirror there is nothing to repair from either.
  ASSERT_TRUE(run_to_completion(home_->mirror_to(nullptr)).ok());
  EXPECT_EQ(run_to_completion(home_->read(file, 0, into, kRoot)).code(), Errc::corrupt);
}

TEST_F(ShardMirrorTest, DataForAWholeCopyThatCouldNotStartIsRefused) {
  // The old database's write-ahead log cannot be removed (a directory that is not empty stands
  // in its place), so the copy stops after letting its old data files go.
  const auto wal = root_ / "mirror" / (std::string(internal::kShardDatabasePath).substr(1) + "-wal");
  std::filesystem::remove(wal);
  std::filesystem::create_directories(wal / "in-the-way");
  EXPECT_EQ(copy_->apply(static_cast<std::uint32_t>(MirrorMethod::copy_begin), {}).code(),
            Errc::io_error);
  EXPECT_EQ(copy_->apply(static_cast<std::uint32_t>(MirrorMethod::copy_data),
                         internal::encode_mirror_extent({5, 0, true, pattern(10, 1)}))
                .code(),
            Errc::unavailable);
  std::filesystem::remove_all(wal);
}

TEST_F(ShardMirrorTest, MalformedMessagesAreRefusedAndChangeNothing) {
  ASSERT_TRUE(run_to_completion(home_->mirror_to(target_)).ok());
  auto write = internal::encode_mirror_extent({7, 0, false, pattern(64, 1)});
  for (std::size_t cut = 0; cut < write.size(); cut += 3) {
    std::span<const std::uint8_t> shortened(write.data(), cut);
    EXPECT_EQ(copy_->apply(static_cast<std::uint32_t>(MirrorMethod::write), shortened).code(),
              Errc::invalid_argument);
  }
  auto beyond = internal::encode_mirror_extent({7, kMaxFileSize, false, pattern(1, 1)});
  EXPECT_EQ(copy_->apply(static_cast<std::uint32_t>(MirrorMethod::copy_data), beyond).code(),
            Errc::invalid_argument);
  auto range = internal::encode_mirror_range({7, 0, 64});
  EXPECT_EQ(copy_->read(std::span(range).first(range.size() - 1)).status().code(),
            Errc::invalid_argument);
  EXPECT_EQ(copy_->read(internal::encode_mirror_range({7, 0, (4u << 20) + 1})).status().code(),
            Errc::invalid_argument);
  EXPECT_EQ(copy_->apply(static_cast<std::uint32_t>(MirrorMethod::read), range).code(),
            Errc::invalid_argument);
  EXPECT_EQ(copy_->apply(0, {}).code(), Errc::not_supported);
  EXPECT_EQ(copy_->apply(kLastMirrorMethod + 1, {}).code(), Errc::not_supported);
  std::vector<std::uint8_t> torn = {1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(copy_->apply(static_cast<std::uint32_t>(MirrorMethod::changes), torn).code(),
            Errc::corrupt);
  EXPECT_EQ(copy_->apply(static_cast<std::uint32_t>(MirrorMethod::copy_database),
                         internal::encode_mirror_extent({0, 0, false, pattern(8, 1)}))
                .code(),
            Errc::unavailable)
      << "no copy under way";
}

}  // namespace
}  // namespace tidepool::store
