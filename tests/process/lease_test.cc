// Leases with real processes (issue 40): a node paused past its lease — as a long stall, a VM
// freeze or a starved CPU would — while another node acknowledges a write must not answer,
// once it resumes, with what it had cached before: it answers the new data, or "retry later"
// until it holds a lease again.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/process/nfs_client.h"
#include "tests/process/raw_rpc.h"
#include "tests/process/tide_cluster.h"

namespace tidepool::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kFileBytes = 256 * 1024;  // two stripe units
// Past the lease (1.5 s) and past the time after which the others record a node down (2 s).
constexpr auto kPause = 5s;

std::string which(const std::string& data, const std::string& old_data,
                  const std::string& new_data) {
  return data == old_data ? "old" : data == new_data ? "new" : "mixed";
}

class LeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (tide_path().empty()) GTEST_SKIP() << "no tide binary in this build";
    cluster_ = std::make_unique<TideCluster>("lease", std::vector<std::string>(3, "f800"),
                                             "lease");
    ASSERT_NO_FATAL_FAILURE(cluster_->start_serving());
  }

  void TearDown() override {
    // A node left stopped would keep its test from ending.
    if (paused_ != 0) ::kill(paused_, SIGCONT);
  }

  std::unique_ptr<TideCluster> cluster_;
  pid_t paused_ = 0;
};

TEST_F(LeaseTest, ANodePausedPastItsLeaseNeverAnswersWithWhatItCachedBefore) {
  const std::string old_data(kFileBytes, 'o');
  const std::string new_data(kFileBytes, 'n');
  NfsClient writer(cluster_->node(1).endpoint());
  const FileHandle file = writer.make_file(cluster_->root_via(1), "paused", 0644, old_data);
  ASSERT_FALSE(file.empty());

  // NULL answers nothing but success, lease or not: clients ping with it.
  {
    RawRpcConnection ping;
    const Endpoint& node = cluster_->node(3).endpoint();
    ASSERT_TRUE(ping.connect(node.address, node.nfs_port)) << ping.error();
    const auto reply = ping.call(RpcCall{.xid = 1, .procedure = 0});
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->accept_stat, AcceptStat::kSuccess);
    EXPECT_TRUE(reply->results.empty()) << reply->results.size() << " bytes of results";
  }

  // Node 3 reads the file, so that its cache holds the old data under a shared lock.
  NfsClient reader(cluster_->node(3).endpoint());
  for (int i = 0; i < 2; ++i) {
    const ReadResult read = reader.read(file, 0, kFileBytes);
    ASSERT_EQ(read.status, NFS3_OK);
    ASSERT_EQ(read.data, old_data);
  }

  paused_ = cluster_->node(3).pid();
  ASSERT_EQ(::kill(paused_, SIGSTOP), 0);
  const auto paused_at = Clock::now();
  // The write waits for node 3's lock until the others record it down, then goes on.
  const WriteResult written = writer.write(file, 0, new_data, FILE_SYNC);
  ASSERT_EQ(written.status, NFS3_OK);
  ASSERT_EQ(written.count, kFileBytes);
  const auto acknowledged_at = Clock::now();
  // A read that reaches node 3 while it is stopped, answered once it resumes.
  auto answered = std::async(std::launch::async, [&] {
    NfsClient late(cluster_->node(3).endpoint());
    return late.read(file, 0, kFileBytes);
  });
  std::this_thread::sleep_until(std::max(paused_at + kPause, acknowledged_at + 1s));
  ASSERT_EQ(::kill(paused_, SIGCONT), 0);
  paused_ = 0;

  const ReadResult first = answered.get();
  ASSERT_TRUE(first.status == NFS3_OK || first.status == NFS3ERR_JUKEBOX) << first.status;
  if (first.status == NFS3_OK) {
    EXPECT_EQ(which(first.data, old_data, new_data), "new")
        << "node 3 answered from what it cached before the write";
  }
  // Without a restart, node 3 serves again, the new data.
  ReadResult again;
  const auto deadline = Clock::now() + 30s;
  do {
    again = reader.read(file, 0, kFileBytes);
    if (again.status == NFS3ERR_JUKEBOX) std::this_thread::sleep_for(200ms);
  } while (again.status == NFS3ERR_JUKEBOX && Clock::now() < deadline);
  ASSERT_EQ(again.status, NFS3_OK);
  EXPECT_EQ(which(again.data, old_data, new_data), "new");
}

}  // namespace
}  // namespace tidepool::test
