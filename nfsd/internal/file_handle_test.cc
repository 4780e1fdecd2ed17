#include "nfsd/internal/file_handle.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace tidepool::nfsd {
namespace {

class FileHandleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tp-fh-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(FileHandleTest, SealedHandleUnsealsToTheSameContents) {
  auto sealer = HandleSealer::load_or_create(dir_.string());
  ASSERT_TRUE(sealer.ok());
  auto h = sealer->seal({7, 0x0001000000000042ull, 99});
  auto c = sealer->unseal(h);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->export_id, 7u);
  EXPECT_EQ(c->inode, 0x0001000000000042ull);
  EXPECT_EQ(c->generation, 99u);
}

TEST_F(FileHandleTest, ForgedOrResizedHandlesAreBadHandles) {
  auto sealer = HandleSealer::load_or_create(dir_.string());
  ASSERT_TRUE(sealer.ok());
  auto h = sealer->seal({7, 1, 1});
  h[10] ^= 1;  // another inode, same seal
  EXPECT_EQ(sealer->unseal(h).code(), Errc::bad_handle);
  EXPECT_EQ(sealer->unseal(std::span(h).first(20)).code(), Errc::bad_handle);
}

TEST_F(FileHandleTest, AHandleWithTheRightContentsButAnotherSealIsBad) {
  auto sealer = HandleSealer::load_or_create(dir_.string());
  ASSERT_TRUE(sealer.ok());
  auto h = sealer->seal({7, 1, 1});  // now remembered by the sealer
  ASSERT_TRUE(sealer->unseal(h).ok());
  h[kFileHandleBytes - 1] ^= 0x80;
  EXPECT_EQ(sealer->unseal(h).code(), Errc::bad_handle);
}

TEST_F(FileHandleTest, FilesWhoseInodeAndGenerationShareBitsGetHandlesOfTheirOwn) {
  auto sealer = HandleSealer::load_or_create(dir_.string());
  ASSERT_TRUE(sealer.ok());
  // inode ^ (generation << 32) is the same for both, and so is inode modulo a power of two.
  const HandleContents first{7, 0x0000000100000005ull, 0};
  const HandleContents second{7, 0x0000000000000005ull, 1};
  auto first_handle = sealer->seal(first);
  auto second_handle = sealer->seal(second);
  EXPECT_NE(first_handle, second_handle);
  auto c = sealer->unseal(second_handle);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, second);
  c = sealer->unseal(first_handle);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, first);
}

TEST_F(FileHandleTest, TheKeySurvivesARestart) {
  auto first = HandleSealer::load_or_create(dir_.string());
  ASSERT_TRUE(first.ok());
  auto h = first->seal({1, 2, 3});
  auto second = HandleSealer::load_or_create(dir_.string());
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->unseal(h).ok());
}

}  // namespace
}  // namespace tidepool::nfsd
