// The process tests' harness judged by itself: a node that does not end well — a leak the
// sanitizers find at its exit, a report of theirs in its log, a stop it does not obey — fails
// the test that ran it. Without that, a multi-node test would pass over a use-after-free in
// any node's way down.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "tests/process/cluster.h"
#include "tests/process/tide_cluster.h"
#include "tests/seeds/seeds.h"

namespace tidepool::test {
namespace {

using namespace std::chrono_literals;

// The directory a failed node left for a person to read: this test's own to remove.
std::string kept_directory;

TEST(SanitizerReport, IsFoundFromItsFirstLineWhicheverSanitizerWroteIt) {
  const std::string served = "[info] node 1 serving NFSv3\n[info] signal 15: stopping\n";
  EXPECT_EQ(sanitizer_report(served), "");
  struct Report {
    std::string text;
    std::string first_line;
  };
  const Report reports[] = {
      {"=================================================================\n==4242==ERROR: "
       "AddressSanitizer: heap-use-after-free on address 0x602000000010\n    #0 0x4f in f\n",
       "==4242==ERROR: AddressSanitizer: heap-use-after-free"},
      {"==4242==ERROR: LeakSanitizer: detected memory leaks\n\nDirect leak of 4096 byte(s)\n",
       "==4242==ERROR: LeakSanitizer: detected memory leaks"},
      {"store/store.cc:12:7: runtime error: signed integer overflow: 2147483647 + 1\n",
       "store/store.cc:12:7: runtime error: signed integer overflow"}};
  for (const auto& [text, first_line] : reports) {
    const std::string found = sanitizer_report(served + text + "[info] after\n");
    EXPECT_EQ(found.rfind(first_line, 0), 0u) << found;
    EXPECT_NE(found.find("[info] after"), std::string::npos) << "the report is cut: " << found;
  }
  EXPECT_EQ(sanitizer_report(served + reports[2].text, 20), reports[2].text.substr(0, 20));
}

void node_that_ignores_its_stop() {
  NodeOptions options;
  options.exports = {ExportSpec{.path = "/ifs"}};
  options.stop_timeout = 1s;
  TidedNode node(options);
  std::string error;
  ASSERT_TRUE(node.start(&error)) << error;
  kept_directory = node.root_dir();
  // Stopped, it cannot take the SIGTERM: as a node hung on its way down.
  ASSERT_EQ(::kill(node.pid(), SIGSTOP), 0);
}

TEST(Harness, FailsATestWhoseNodeDoesNotExitWhenStopped) {
  EXPECT_NONFATAL_FAILURE(node_that_ignores_its_stop(), "did not exit within 1000 ms of SIGTERM");
  ASSERT_FALSE(kept_directory.empty());
  EXPECT_TRUE(std::filesystem::exists(kept_directory + "/tided.log")) << "the log was not kept";
  std::filesystem::remove_all(kept_directory);
}

void cluster_whose_node_leaks() {
  TideCluster cluster("harness", {"p1"}, "harness");
  ASSERT_NO_FATAL_FAILURE(cluster.start_serving());
  kept_directory = cluster.node(1).root_dir();
  ASSERT_EQ(cluster.tide(1, {"sysctl", "debug.fail_point.leak_at_exit=true"}).exit_code, 0);
  // The node leaks only once its view holds the switch, which comes a moment after the answer.
  for (int tries = 0; tries < 100; ++tries) {
    if (cluster.tide(1, {"sysctl", "debug.fail_point.leak_at_exit"}).output.find("true") !=
        std::string::npos) {
      return;
    }
    std::this_thread::sleep_for(100ms);
  }
  ADD_FAILURE() << "the fail point never showed as set";
}

TEST(Harness, FailsATestWhoseNodeTheSanitizersFoundLeaking) {
  if (!sanitized_build()) {
    GTEST_SKIP() << "only a sanitizer build finds leaks: the ASan+UBSan pass runs this";
  }
  if (tide_path().empty()) GTEST_SKIP() << "no tide binary in this build";
  EXPECT_NONFATAL_FAILURE(cluster_whose_node_leaks(), "ERROR: LeakSanitizer");
  ASSERT_FALSE(kept_directory.empty());
  std::filesystem::remove_all(kept_directory);
}

}  // namespace
}  // namespace tidepool::test
