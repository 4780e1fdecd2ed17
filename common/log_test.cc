#include "common/log.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>
#include <sstream>

namespace tidepool {
namespace {

class LogTest : public ::testing::Test {
 protected:
  void TearDown() override {
    ASSERT_TRUE(init_logging("info", "").ok());
    std::filesystem::remove(path_);
  }

  std::string read_log() {
    spdlog::default_logger()->flush();
    std::ifstream in(path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  // ctest runs tests as parallel processes, so each needs a file of its own.
  const std::string path_ =
      testing::TempDir() + "tidepool_log_test." + std::to_string(::getpid()) + ".log";
};

TEST_F(LogTest, WritesMessagesAtOrAboveTheLevelToTheFile) {
  ASSERT_TRUE(init_logging("warn", path_).ok());
  spdlog::info("quiet {}", 1);
  spdlog::warn("loud {}", 2);
  spdlog::error("louder {}", 3);
  const std::string text = read_log();
  EXPECT_EQ(text.find("quiet"), std::string::npos);
  EXPECT_NE(text.find("loud 2"), std::string::npos);
  EXPECT_NE(text.find("louder 3"), std::string::npos);
}

TEST_F(LogTest, UnknownLevelIsAnErrorNamingIt) {
  Status status = init_logging("verbose", "");
  EXPECT_EQ(status.code(), Errc::invalid_argument);
  EXPECT_NE(status.message().find("'verbose'"), std::string::npos) << status.message();
}

TEST_F(LogTest, UnopenableFileIsAnErrorNamingIt) {
  const std::string directory = testing::TempDir();
  Status status = init_logging("info", directory);
  EXPECT_EQ(status.code(), Errc::io_error);
  EXPECT_NE(status.message().find(directory), std::string::npos) << status.message();
}

TEST(LogLevel, AcceptsExactlyTheDocumentedNames) {
  for (auto name : {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    EXPECT_TRUE(is_log_level(name)) << name;
  }
  for (auto name : {"", "INFO", "warning", "err", "verbose"})
    EXPECT_FALSE(is_log_level(name)) << name;
}

}  // namespace
}  // namespace tidepool
