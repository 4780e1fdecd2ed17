// The reference papers' automatic storage tiering walk-through, run as printed
// (tiering_walkthrough.txt): `tide` on the host against a cluster of an F800
// (hot) and an H500 (cold) node, `ls`, `touch` and the training read in a
// Linux guest that mounted /ifs with the kernel's own NFS client (guest_vm.h,
// guest_init.sh's command mode, GNU coreutils' touch and ls).
//
// What the papers tell the reader to look at is checked as they say: each
// `tide get -D` names in its `IFS inode:` line, first in each element, the
// nodes holding the file's blocks — the hot pool's after the first SmartPools
// run, the cold pool's after the files' atime went back to 2018, the hot
// pool's again after the guest read them (which only a READ that reached the
// server can do: the guest never had them in its page cache). `ls -lu` shows
// today, then 1 January 2018. Every command must succeed.
//
// Skips itself only when qemu, a kernel with its modules or busybox-static is
// not installed, as kernel_client_test does.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/kernel_client/guest_vm.h"
#include "tests/process/conformance_fixture.h"
#include "tests/process/tide_cluster.h"

namespace tidepool::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// Boot to power-off, the host's commands included: about a minute on an idle
// machine, the rest for a busy one and the ASan build.
constexpr std::chrono::seconds kGuestDeadline{300};
constexpr const char* kGuestServerAddress = "10.0.2.100";
constexpr const char* kDataSet = "data/imagenet-scratch/tfrecords";
constexpr int kFiles = 4;
constexpr std::size_t kFileSize = 256 * 1024;
constexpr std::size_t kHotNode = 1;   // pool f800
constexpr std::size_t kColdNode = 2;  // pool h500

std::vector<std::string> walkthrough_lines() {
  std::ifstream in(std::string(TP_GUEST_SOURCE_DIR) + "/tiering_walkthrough.txt");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.front() != '#') lines.push_back(line);
  }
  return lines;
}

// The words of a host command; the walk-through's host commands quote nothing.
std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> out;
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

// The first number of each element of `tide get -D`'s "IFS inode: [ N,C,O:B, ... ]" line.
std::set<std::size_t> nodes_in_ifs_inode_line(const std::string& output) {
  std::set<std::size_t> nodes;
  const std::size_t at = output.find("IFS inode:");
  if (at == std::string::npos) return nodes;
  const std::string line = output.substr(at, output.find('\n', at) - at);
  static const std::regex element(R"((\d+),\d+,\d+:\d+)");
  for (auto it = std::sregex_iterator(line.begin(), line.end(), element);
       it != std::sregex_iterator(); ++it) {
    nodes.insert(std::stoul((*it)[1].str()));
  }
  return nodes;
}

// How `ls -l` shows a date of this year: "Dec  6".
std::string month_and_day_today() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char text[16];
  std::strftime(text, sizeof text, "%b %e", &utc);
  return text;
}

class TieringWalkthroughTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    const InitramfsResult guest = prepare_guest(&spec_, &why);
    if (guest == InitramfsResult::kMissing) GTEST_SKIP() << why;
    ASSERT_EQ(guest, InitramfsResult::kReady) << why;
    lines_ = walkthrough_lines();
    ASSERT_FALSE(lines_.empty()) << "no tiering_walkthrough.txt in " << TP_GUEST_SOURCE_DIR;
    cluster_ = std::make_unique<TideCluster>("papers", std::vector<std::string>{"f800", "h500"},
                                             "walkthrough");
    ASSERT_NO_FATAL_FAILURE(cluster_->start_serving());
    // Data kept with its shard, on both nodes, until the papers' step 5 names a target: the
    // first SmartPools run then has something to move.
    ASSERT_NO_FATAL_FAILURE(cluster_->keep_new_files_with_their_shard());
    ASSERT_NO_FATAL_FAILURE(write_data_set());
    const Ran before = cluster_->tide(
        kHotNode, {"get", "-D", std::string("/ifs/") + kDataSet + "/train-00000-of-01024"});
    ASSERT_EQ(nodes_in_ifs_inode_line(before.output), (std::set<std::size_t>{kHotNode, kColdNode}))
        << "the first SmartPools run would have nothing to move:\n"
        << before.output;
  }

  // The training files, written by the host through libnfs: the guest never caches them.
  void write_data_set() {
    const Endpoint& ep = cluster_->node(kHotNode).endpoint();
    NfsClient nfs(ep);
    ASSERT_TRUE(nfs.connected()) << nfs.error();
    FileHandle dir = cluster_->root_via(kHotNode);
    ASSERT_FALSE(dir.empty());
    std::istringstream path(kDataSet);
    for (std::string part; std::getline(path, part, '/');) {
      dir = nfs.make_dir(dir, part, 0755);
      ASSERT_FALSE(dir.empty()) << part;
    }
    for (int i = 0; i < kFiles; ++i) {
      char name[64];
      std::snprintf(name, sizeof name, "train-%05d-of-01024", i);
      const FileHandle file = nfs.make_file(dir, name, 0644);
      ASSERT_FALSE(file.empty()) << name;
      const std::string data = random_bytes(kFileSize, 0x7472616eull + static_cast<unsigned>(i));
      for (std::size_t off = 0; off < data.size(); off += kLibnfsMaxTransfer) {
        const auto written = nfs.write(file, off, data.substr(off, kLibnfsMaxTransfer), FILE_SYNC);
        ASSERT_EQ(written.status, NFS3_OK) << name << " at " << off;
      }
    }
  }

  // Runs the host's lines from next_ on; the first guest line met is returned for the guest
  // to run ("TP EXIT" at the end, or once a check failed).
  std::string next_guest_command() {
    while (next_ < lines_.size() && !failed()) {
      const std::string& line = lines_[next_++];
      std::cout << "$ " << line << std::endl;
      if (line == "@wait-for-jobs") {
        wait_for_jobs();
      } else if (line.rfind("tide ", 0) == 0) {
        run_host(line);
      } else {
        guest_line_ = line;
        return line + "\n";
      }
    }
    return "TP EXIT\n";
  }

  void run_host(const std::string& line) {
    std::vector<std::string> args = words(line);
    args.erase(args.begin());
    const Ran ran = cluster_->tide(kHotNode, args);
    std::cout << ran.output << std::flush;
    ASSERT_EQ(ran.exit_code, 0) << line << "\n" << ran.output;
    std::smatch started;
    if (std::regex_search(ran.output, started, std::regex(R"(Started job \[(\d+)\])"))) {
      started_jobs_.push_back(started[1].str());
    }
    if (args.size() >= 2 && args[0] == "get" && args[1] == "-D") check_blocks(line, ran.output);
  }

  // The k-th `tide get -D` of the walk-through finds the blocks where the papers say, and the
  // policy that put them there.
  void check_blocks(const std::string& line, const std::string& output) {
    struct Where {
      std::size_t node;
      const char* disk_pools;
    };
    static const Where hot{kHotNode, "policy hot-tier (default) -> data target f800"};
    static const Where cold{kColdNode, "policy cold-tier (cold) -> data target h500"};
    static const Where expected[] = {hot, cold, hot};
    ASSERT_LT(blocks_checked_, std::size(expected)) << "more `get -D` lines than the papers'";
    const Where& want = expected[blocks_checked_++];
    EXPECT_EQ(nodes_in_ifs_inode_line(output), std::set<std::size_t>{want.node})
        << line << " (check " << blocks_checked_ << "): the IFS inode line should name node "
        << want.node << " alone\n"
        << output;
    EXPECT_NE(output.find(want.disk_pools), std::string::npos)
        << line << " (check " << blocks_checked_ << "): expected '" << want.disk_pools << "'\n"
        << output;
  }

  // Until `tide job jobs list` shows no job; every job started since has succeeded.
  void wait_for_jobs() {
    const auto deadline = std::chrono::steady_clock::now() + 90s;
    for (;;) {
      const json running = cluster_->tide_json(kHotNode, {"job", "jobs", "list"});
      if (running.value("jobs", json::array()).empty()) break;
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "jobs still running: "
                                                            << running.dump();
      std::this_thread::sleep_for(200ms);
    }
    for (const std::string& id : started_jobs_) {
      const json job = cluster_->tide_json(kHotNode, {"job", "jobs", "view", id});
      EXPECT_EQ(job.value("state", ""), "succeeded") << job.dump();
    }
    started_jobs_.clear();
  }

  // The guest ran guest_line_: it said `output` and exited with `status`.
  void guest_command_ended(const std::string& output, int status) {
    std::cout << output << std::flush;
    EXPECT_EQ(status, 0) << guest_line_ << "\n" << output;
    if (guest_line_.rfind("ls -lu ", 0) != 0) return;
    // Step 3 shows today; step 4, after the touch, the papers' date.
    const std::string want = listings_checked_++ == 0 ? month_and_day_today() : "Jan  1  2018";
    EXPECT_NE(output.find(want), std::string::npos)
        << guest_line_ << ": expected '" << want << "' in\n"
        << output;
  }

  bool failed() const { return ::testing::Test::HasFailure(); }

  GuestSpec spec_;
  std::vector<std::string> lines_;
  std::unique_ptr<TideCluster> cluster_;
  std::size_t next_ = 0;
  std::string guest_line_;
  std::vector<std::string> started_jobs_;
  std::size_t blocks_checked_ = 0;
  std::size_t listings_checked_ = 0;
};

TEST_F(TieringWalkthroughTest, ThePapersTieringStepsMoveTheFilesAsTheySay) {
  const Endpoint& ep = cluster_->node(kHotNode).endpoint();
  spec_.kernel_args = {std::string("tp_server=") + kGuestServerAddress, "tp_export=/ifs",
                       "tp_mode=commands"};
  spec_.forward_address = kGuestServerAddress;
  spec_.forwards = nfs_forwards(ep.address, ep.portmap_port, ep.mount_port, ep.nfs_port);
  spec_.relay_path = TP_GUESTFWD_RELAY;
  spec_.deadline = kGuestDeadline;
  spec_.console_log = std::string(TP_GUEST_CACHE_DIR) + "/walkthrough-console.log";

  std::string output;  // of the guest command running
  bool ready = false;
  bool exited = false;
  spec_.on_line = [&](const std::string& line) -> std::string {
    if (line == "TP READY") {
      ready = true;
      return next_guest_command();
    }
    if (!ready) return "";
    if (line.rfind("OUT ", 0) == 0) {
      output += line.substr(4) + "\n";
    } else if (line.rfind("END ", 0) == 0) {
      guest_command_ended(output, std::atoi(line.c_str() + 4));
      output.clear();
      std::string next = next_guest_command();
      exited = next == "TP EXIT\n";
      return next;
    }
    return "";
  };
  const GuestRun run = run_guest(spec_);
  ASSERT_TRUE(run.started) << run.error;
  EXPECT_TRUE(ready) << "the guest never mounted /ifs:\n" << console_tail(run);
  EXPECT_TRUE(exited) << "the guest stopped before the end of the walk-through:\n"
                      << console_tail(run);
  EXPECT_FALSE(run.timed_out) << console_tail(run);
  EXPECT_EQ(next_, lines_.size()) << "stopped at: " << (next_ > 0 ? lines_[next_ - 1] : "");
  EXPECT_NE(std::find(run.lines.begin(), run.lines.end(), "STEP umount OK"), run.lines.end())
      << console_tail(run);
  EXPECT_EQ(blocks_checked_, 3u);
  EXPECT_EQ(listings_checked_, 2u);
  std::cout << "walk-through: " << run.wall.count() << " s in the guest\n";
}

}  // namespace
}  // namespace tidepool::test
