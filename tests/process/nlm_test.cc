// NLM through real tided nodes: libnfs's NLM calls lock a file through one node and another,
// and the client's own lock manager (nlm_client.h) receives the GRANTED callbacks and SM_NOTIFY.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/process/nlm_client.h"
#include "tests/process/raw_rpc.h"
#include "tests/process/tide_cluster.h"

// After libnfs.h, which the headers above bring and this needs.
#include <nfsc/libnfs-raw-nsm.h>

namespace tidepool::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class NlmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (tide_path().empty()) GTEST_SKIP() << "no tide binary in this build";
    ASSERT_TRUE(lockd_.listening()) << "no free loopback address for the client's lock manager";
    cluster_ = std::make_unique<TideCluster>(
        "nlm", std::vector<std::string>(3, "default"), "nlm",
        "[nfs]\nnlm_grace_period = \"" + std::to_string(grace_seconds()) + "s\"\n");
    std::string error;
    ASSERT_TRUE(cluster_->start(&error)) << error;
    cluster_->form();
    MountClient mount(cluster_->node(1).endpoint());
    MountResult root = mount.mnt("/ifs");
    ASSERT_EQ(root.status, MNT3_OK);
    NfsClient nfs(cluster_->node(1).endpoint());
    file_ = nfs.make_file(root.fh, "locked");
    ASSERT_FALSE(file_.empty());
  }

  // Client a through node 1, client b (whose callbacks reach lockd_) through node 3, once both
  // nodes are past their grace period (bounded).
  void connect_clients() {
    a_ = std::make_unique<NlmClient>(cluster_->node(1).endpoint(), "client-a");
    b_ = std::make_unique<NlmClient>(cluster_->node(3).endpoint(), "client-b", lockd_.address());
    ASSERT_TRUE(a_->connected() && b_->connected());
    for (NlmClient* client : {a_.get(), b_.get()}) {
      const auto deadline = Clock::now() + 20s;
      while (client->test(file_, 99, false) == NLM4_DENIED_GRACE_PERIOD &&
             Clock::now() < deadline) {
        std::this_thread::sleep_for(200ms);
      }
    }
  }

  void TearDown() override {
    // A node left stopped would keep its test from ending.
    if (paused_ != 0) ::kill(paused_, SIGCONT);
  }

  // Short, so that connect_clients() waits little for the grace period of the start.
  virtual int grace_seconds() const { return 2; }

  // A host that is neither client: the loopback address the forged calls come from.
  static std::string forger() { return "127.203." + std::to_string(::getpid() % 250 + 1) + ".9"; }

  // `procedure` of `program` with `args`, from the forger over TCP to node `id`: whether it was
  // answered SUCCESS.
  bool forge(std::size_t id, uint32_t program, uint32_t version, uint32_t procedure,
             const Bytes& args) {
    RawRpcConnection connection;
    const Endpoint& node = cluster_->node(id).endpoint();
    if (!connection.connect(node.address, node.nfs_port, 10s, forger())) {
      ADD_FAILURE() << connection.error();
      return false;
    }
    const auto reply = connection.call(
        RpcCall{.xid = 7, .program = program, .version = version, .procedure = procedure,
                .args = args});
    return reply && reply->accept_stat == AcceptStat::kSuccess;
  }

  // SM_NOTIFY to node 1 from client a's address, naming client a, with NSM state `state`.
  void notify_as_client_a(int state) {
    RpcConnection nsm;
    ASSERT_TRUE(nsm.connect(cluster_->node(1).endpoint().address,
                            cluster_->node(1).endpoint().nfs_port, NSM_PROGRAM, NSM_V1, {}));
    std::string name = "client-a";
    NSM1_NOTIFYargs notify{name.data(), state};
    EXPECT_TRUE(nsm.call(
        "SM_NOTIFY",
        [&](rpc_cb cb, void* priv) { return rpc_nsm1_notify_async(nsm.get(), cb, &notify, priv); },
        [](void*) {}))
        << nsm.error();
  }

  static Bytes notify_args(const std::string& mon_name, uint32_t state) {
    XdrWriter args;
    args.string(mon_name).u32(state);
    return args.bytes();
  }

  ClientLockd lockd_;
  pid_t paused_ = 0;
  std::unique_ptr<TideCluster> cluster_;
  FileHandle file_;
  std::unique_ptr<NlmClient> a_;
  std::unique_ptr<NlmClient> b_;
};

TEST_F(NlmTest, ALockThroughOneNodeBlocksAnotherThroughAnotherNodeUntilUnlocked) {
  ASSERT_NO_FATAL_FAILURE(connect_clients());
  NlmClient& a = *a_;
  NlmClient& b = *b_;
  ASSERT_EQ(a.lock(file_, 1, true, false), NLM4_GRANTED);
  // TEST through another node names the holder: client a's process 1, the whole file.
  nlm4_holder holder{};
  EXPECT_EQ(b.test(file_, 2, false, &holder), NLM4_DENIED);
  EXPECT_EQ(holder.svid, 1u);
  EXPECT_TRUE(holder.exclusive);
  EXPECT_EQ(holder.l_offset, 0u);
  EXPECT_EQ(holder.l_len, 0u);
  EXPECT_EQ(b.lock(file_, 2, true, false), NLM4_DENIED);
  EXPECT_EQ(b.lock(file_, 2, true, true), NLM4_BLOCKED);
  // After the grace period a reclaim is refused.
  EXPECT_EQ(b.lock(file_, 3, false, false, true), NLM4_DENIED_GRACE_PERIOD);
  EXPECT_EQ(a.unlock(file_, 1), NLM4_GRANTED);
  EXPECT_TRUE(lockd_.wait_granted(2, 15s))
      << "no GRANTED callback reached the waiting client; node 3 said:\n"
      << cluster_->node(3).log_tail();
  EXPECT_EQ(a.test(file_, 1, false), NLM4_DENIED);
  // UNLOCK is answered once the lock's coordinator let it go.
  EXPECT_EQ(b.unlock(file_, 2), NLM4_GRANTED);
  EXPECT_EQ(a.test(file_, 1, true), NLM4_GRANTED);

  FileHandle forged = file_;
  forged.back() ^= 1;
  EXPECT_EQ(a.lock(forged, 1, true, false), NLM4_STALE_FH);
}

TEST_F(NlmTest, KillingTheHoldersNodeReleasesItsLocksAndTheWaiterProceeds) {
  ASSERT_NO_FATAL_FAILURE(connect_clients());
  NlmClient& a = *a_;
  NlmClient& b = *b_;
  ASSERT_EQ(a.lock(file_, 1, true, false), NLM4_GRANTED);
  ASSERT_EQ(b.lock(file_, 2, true, true), NLM4_BLOCKED);
  cluster_->node(1).kill();
  EXPECT_TRUE(lockd_.wait_granted(2, 40s))
      << "the waiter was not granted after the holder's node died";
}

// The entries of a gathered report whose `key` is `value`.
std::vector<nlohmann::json> where(const nlohmann::json& list, const std::string& key,
                                  const nlohmann::json& value) {
  std::vector<nlohmann::json> found;
  for (const nlohmann::json& entry : list) {
    if (entry.value(key, nlohmann::json()) == value) found.push_back(entry);
  }
  return found;
}

TEST_F(NlmTest, TheCliShowsLocksClientsAndCountersAndARestartedClientLosesItsLocks) {
  ASSERT_NO_FATAL_FAILURE(connect_clients());
  ASSERT_EQ(a_->lock(file_, 1, true, false), NLM4_GRANTED);
  ASSERT_EQ(b_->lock(file_, 2, true, true), NLM4_BLOCKED);

  // Asked through node 2, which neither client uses: every node reports its part.
  const nlohmann::json locks = cluster_->tide_json(2, {"locks", "list", "--path", "/ifs/locked"});
  // Besides the caches' own locks on the file (its attributes').
  const auto held =
      where(nlohmann::json(where(locks["locks"], "kind", "advisory")), "state", "granted");
  ASSERT_EQ(held.size(), 1u) << locks.dump();
  EXPECT_EQ(held[0]["node"], 1);
  EXPECT_EQ(held[0]["kind"], "advisory");
  EXPECT_EQ(held[0]["mode"], "EX");
  EXPECT_NE(held[0]["holder"].get<std::string>().find("client-a"), std::string::npos);
  const auto waiting = where(locks["locks"], "state", "waiting");
  ASSERT_EQ(waiting.size(), 1u) << locks.dump();
  EXPECT_EQ(waiting[0]["node"], 3);
  EXPECT_EQ(waiting[0]["requested"], "EX");
  const nlohmann::json waiters = cluster_->tide_json(1, {"locks", "list", "--waiters"});
  EXPECT_EQ(waiters["locks"].size(), 1u) << waiters.dump();
  EXPECT_TRUE(cluster_->tide_json(1, {"locks", "list", "--kind", "share"})["locks"].empty());
  const Ran table = cluster_->tide(1, {"locks", "list"});
  EXPECT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.output.find("client-a"), std::string::npos) << table.output;
  EXPECT_EQ(cluster_->tide(1, {"locks", "list", "--kind", "bogus"}).exit_code, 2);
  EXPECT_EQ(cluster_->tide(1, {"locks", "list", "--path", "/etc/passwd"}).exit_code, 2);
  EXPECT_EQ(cluster_->tide(1, {"locks", "list", "--path", "/ifs/nothing"}).exit_code, 1);

  const nlohmann::json sessions = cluster_->tide_json(2, {"nfs", "nlm", "sessions", "list"});
  const auto alpha = where(sessions["sessions"], "client", "client-a");
  ASSERT_EQ(alpha.size(), 1u) << sessions.dump();
  EXPECT_EQ(alpha[0]["node"], 1);
  EXPECT_EQ(alpha[0]["locks"], 1);
  const auto beta = where(sessions["sessions"], "client", "client-b");
  ASSERT_EQ(beta.size(), 1u) << sessions.dump();
  EXPECT_EQ(beta[0]["node"], 3);
  EXPECT_EQ(beta[0]["waiting"], 1);

  const nlohmann::json statistics = cluster_->tide_json(3, {"statistics", "locks"});
  ASSERT_EQ(statistics["statistics"].size(), 3u) << statistics.dump();
  const auto first = where(statistics["statistics"], "node", 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_GE(first[0]["grants"].get<int>(), 1);
  EXPECT_GE(first[0]["round_trips"].get<int>(), 1);
  EXPECT_GT(first[0]["round_trip_p99_us"].get<double>(), 0.0);

  // Client a's status monitor says it restarted: node 1 frees its lock, and b's turn comes.
  ASSERT_NO_FATAL_FAILURE(notify_as_client_a(3));
  EXPECT_TRUE(lockd_.wait_granted(2, 15s)) << "the waiter was not granted after SM_NOTIFY";
  const nlohmann::json after = cluster_->tide_json(2, {"nfs", "nlm", "sessions", "list"});
  EXPECT_TRUE(where(after["sessions"], "client", "client-a").empty()) << after.dump();
}

TEST_F(NlmTest, ARestartedNodeTellsItsLockHoldersAndTheyReclaimTheirLocks) {
  ASSERT_NO_FATAL_FAILURE(connect_clients());
  ASSERT_EQ(b_->lock(file_, 2, true, false), NLM4_GRANTED);

  // Node 3 dies and comes back, with a grace period long enough for the reclaim.
  TidedNode& node = cluster_->node(3);
  node.kill();
  {
    std::ifstream in(node.config_path());
    std::stringstream text;
    text << in.rdbuf();
    std::string config = text.str();
    const std::string short_grace = "nlm_grace_period = \"2s\"";
    const auto at = config.find(short_grace);
    ASSERT_NE(at, std::string::npos) << config;
    config.replace(at, short_grace.size(), "nlm_grace_period = \"60s\"");
    std::ofstream(node.config_path(), std::ios::trunc) << config;
  }
  std::string error;
  ASSERT_TRUE(node.start(&error)) << error;

  // Its status monitor tells the client's that it restarted, by the name the client knows it.
  const auto notice = lockd_.wait_notified(30s);
  ASSERT_TRUE(notice.has_value()) << "no SM_NOTIFY reached the client; node 3 said:\n"
                                  << node.log_tail();
  EXPECT_EQ(notice->mon_name, node.endpoint().address);
  EXPECT_EQ(notice->state % 2, 1);

  // The client reclaims its lock through node 3, and it conflicts through node 1 again.
  NlmClient reclaiming(node.endpoint(), "client-b", lockd_.address());
  ASSERT_TRUE(reclaiming.connected());
  uint32_t status = NLM4_DENIED_NOLOCKS;
  const auto deadline = Clock::now() + 20s;
  while (status == NLM4_DENIED_NOLOCKS && Clock::now() < deadline) {
    status = reclaiming.lock(file_, 2, true, false, true);
    if (status == NLM4_DENIED_NOLOCKS) std::this_thread::sleep_for(200ms);
  }
  EXPECT_EQ(status, NLM4_GRANTED) << node.log_tail();
  EXPECT_EQ(a_->test(file_, 1, false), NLM4_DENIED);
}

// --- calls only from whom they concern -----------------------------------------------------

constexpr uint32_t kNlmFreeAll = 23;
constexpr uint32_t kSmNotify = 6;

TEST_F(NlmTest, AnUnlockOrACancelForgedFromAnotherAddressMatchesNothing) {
  ASSERT_NO_FATAL_FAILURE(connect_clients());
  ASSERT_EQ(a_->lock(file_, 1, true, false), NLM4_GRANTED);
  ASSERT_EQ(b_->lock(file_, 2, true, true), NLM4_BLOCKED);

  // Same names, processes and owner handles as the clients', from another host.
  NlmClient forged_b(cluster_->node(3).endpoint(), "client-b", forger());
  NlmClient forged_a(cluster_->node(1).endpoint(), "client-a", forger());
  ASSERT_TRUE(forged_a.connected() && forged_b.connected());
  forged_b.cancel(file_, 2, true);
  EXPECT_EQ(forged_a.unlock(file_, 1), NLM4_GRANTED);  // as UNLOCK of nothing answers

  // Client a still holds its lock; client b still waits, and gets it when a lets go.
  EXPECT_EQ(NlmClient(cluster_->node(2).endpoint(), "client-c").test(file_, 3, false),
            NLM4_DENIED) << "the forged UNLOCK freed client a's lock";
  EXPECT_FALSE(lockd_.wait_granted(2, 1s)) << "the forged UNLOCK let client b in";
  ASSERT_EQ(a_->unlock(file_, 1), NLM4_GRANTED);
  EXPECT_TRUE(lockd_.wait_granted(2, 15s)) << "the forged CANCEL withdrew client b's request";
}

TEST_F(NlmTest, FreeAllAndSmNotifyForgedFromAnotherAddressFreeNothingAndAreCounted) {
  ASSERT_NO_FATAL_FAILURE(connect_clients());
  ASSERT_EQ(a_->lock(file_, 1, true, false), NLM4_GRANTED);
  // After each forged call client a must still hold its lock; where it does not, the lock is
  // taken again so that the next call is judged on its own.
  NlmClient other(cluster_->node(2).endpoint(), "client-c");
  auto still_held = [&](const std::string& what) {
    std::this_thread::sleep_for(300ms);  // SM_NOTIFY frees in the background, after its answer
    if (other.test(file_, 3, false) == NLM4_DENIED) return;
    ADD_FAILURE() << what << " freed client a's lock";
    EXPECT_EQ(a_->lock(file_, 1, true, false), NLM4_GRANTED);
  };

  XdrWriter free_all;
  free_all.string("client-a").u32(5);
  EXPECT_TRUE(forge(1, NLM_PROGRAM, NLM_V4, kNlmFreeAll, free_all.bytes()));
  still_held("a FREE_ALL from another address");
  EXPECT_TRUE(forge(1, NSM_PROGRAM, NSM_V1, kSmNotify, notify_args("client-a", 5)));
  still_held("an SM_NOTIFY over TCP from another address");
  const Bytes notify_over_udp = encode_call(RpcCall{.xid = 8, .program = NSM_PROGRAM,
                                                    .version = NSM_V1, .procedure = kSmNotify,
                                                    .args = notify_args("client-a", 7)});
  EXPECT_TRUE(send_datagram(notify_over_udp, forger(), cluster_->node(1).endpoint().address,
                            cluster_->node(1).endpoint().mount_port));
  still_held("an SM_NOTIFY over UDP from another address");
  // From client a's own address, but telling the state its LOCK told (libnfs sends 0): no
  // restart happened.
  ASSERT_NO_FATAL_FAILURE(notify_as_client_a(0));
  still_held("an SM_NOTIFY of an unchanged state");

  // Client a restarted, and its first LOCK, telling its new state, comes before its status
  // monitor's notice: the lock of its process before the restart is gone, so a lock of one of
  // its new processes is granted.
  EXPECT_EQ(a_->lock(file_, 5, true, false, false, 3), NLM4_GRANTED);

  EXPECT_EQ(cluster_->metric(1, "tidepool_rpc_refused_total{reason=\"foreign_free_all\"}"), 1);
  EXPECT_EQ(cluster_->metric(1, "tidepool_rpc_refused_total{reason=\"foreign_notify\"}"), 2);
  const nlohmann::json sessions = cluster_->tide_json(1, {"nfs", "nlm", "sessions", "list"});
  const auto alpha = where(sessions["sessions"], "client", "client-a");
  ASSERT_EQ(alpha.size(), 1u) << sessions.dump();
  EXPECT_EQ(alpha[0]["locks"], 1);
}

TEST_F(NlmTest, CallbacksToOneClientAreCappedSoForgedCallsCannotMakeANodeAReflector) {
  ASSERT_NO_FATAL_FAILURE(connect_clients());
  // The "client" the forged calls name as their source: its portmapper takes connections and
  // never answers, so every callback to it stays under way for its whole timeout.
  const int silent = bound_socket(forger(), kPortmapPort);
  ASSERT_GE(silent, 0) << "cannot listen on " << forger();
  constexpr int kCalls = 40;
  constexpr int kPerClient = 16;  // nlm_program.cc's kMaxCallbacksPerClient
  RawRpcConnection connection;
  const Endpoint& node = cluster_->node(1).endpoint();
  ASSERT_TRUE(connection.connect(node.address, node.nfs_port, 10s, forger())) << connection.error();
  for (int i = 0; i < kCalls; ++i) {
    XdrWriter args;
    args.opaque(Bytes{1, 2, 3, 4}).u32(0);  // cookie, shared
    args.string("reflector").opaque(file_.data(), file_.size()).string("oh").u32(100 + i);
    args.u64(0).u64(1);
    const auto reply = connection.call(RpcCall{.xid = static_cast<uint32_t>(100 + i),
                                               .program = NLM_PROGRAM, .version = NLM_V4,
                                               .procedure = NLM4_TEST_MSG, .args = args.bytes()});
    ASSERT_TRUE(reply && reply->accept_stat == AcceptStat::kSuccess) << "TEST_MSG " << i;
  }
  const auto dropped_by = Clock::now() + 3s;
  std::int64_t dropped = 0;
  while ((dropped = cluster_->metric(
              1, "tidepool_rpc_refused_total{reason=\"callback_limit\"}")) < kCalls - kPerClient &&
         Clock::now() < dropped_by) {
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(dropped, kCalls - kPerClient);
  ::close(silent);
}

// --- clients told -------------------------------------------------------------------------

// Long enough for a reclaim after the node that was fenced comes back.
class NlmFenceTest : public NlmTest {
 protected:
  int grace_seconds() const override { return 8; }
};

TEST_F(NlmFenceTest, ANodeFencedWhileItsClientHoldsALockTellsItAndItsReclaimOfWhatWasTakenIsDenied) {
  ASSERT_NO_FATAL_FAILURE(connect_clients());
  ASSERT_EQ(b_->lock(file_, 2, true, false), NLM4_GRANTED);
  ASSERT_EQ(a_->lock(file_, 1, true, false), NLM4_DENIED);

  // Node 3, through which client b holds its lock, stops past its lease; the others record it
  // down and give its locks away: client a gets b's.
  paused_ = cluster_->node(3).pid();
  ASSERT_EQ(::kill(paused_, SIGSTOP), 0);
  std::uint32_t taken = NLM4_DENIED;
  for (const auto deadline = Clock::now() + 20s; taken != NLM4_GRANTED && Clock::now() < deadline;) {
    std::this_thread::sleep_for(250ms);
    taken = a_->lock(file_, 1, true, false);
  }
  ASSERT_EQ(taken, NLM4_GRANTED) << "node 3's locks were never given away";
  ASSERT_EQ(::kill(paused_, SIGCONT), 0);
  paused_ = 0;

  // Back, node 3 tells client b, as a restarted server would, that its locks are gone...
  const auto notice = lockd_.wait_notified(30s);
  ASSERT_TRUE(notice.has_value()) << "no SM_NOTIFY reached client b; node 3 said:\n"
                                  << cluster_->node(3).log_tail();
  EXPECT_EQ(notice->mon_name, cluster_->node(3).endpoint().address);
  EXPECT_EQ(notice->state % 2, 1);
  // ...and client b's reclaim is denied: client a holds the lock now.
  NlmClient reclaiming(cluster_->node(3).endpoint(), "client-b", lockd_.address());
  ASSERT_TRUE(reclaiming.connected());
  std::uint32_t reclaimed = NLM4_DENIED_NOLOCKS;
  for (const auto deadline = Clock::now() + 20s;
       (reclaimed == NLM4_DENIED_NOLOCKS || reclaimed == NLM4_DENIED_GRACE_PERIOD) &&
       Clock::now() < deadline;) {
    reclaimed = reclaiming.lock(file_, 2, true, false, true);
    if (reclaimed != NLM4_DENIED) std::this_thread::sleep_for(200ms);
  }
  EXPECT_EQ(reclaimed, NLM4_DENIED) << cluster_->node(3).log_tail();
  EXPECT_EQ(NlmClient(cluster_->node(2).endpoint(), "client-c").test(file_, 3, false),
            NLM4_DENIED);
}

TEST_F(NlmFenceTest, ALockGrantedAsItsNodeIsFencedIsNotAnsweredGranted) {
  ASSERT_NO_FATAL_FAILURE(connect_clients());
  // Every granted LOCK waits 4 s before its answer; node 3 holds the setting too.
  ASSERT_EQ(cluster_->tide(1, {"sysctl", "debug.fail_point.nlm_grant_reply=4s"}).exit_code, 0);
  for (const auto deadline = Clock::now() + 10s;
       cluster_->tide(3, {"sysctl", "debug.fail_point.nlm_grant_reply"}).output.find("= 4s") ==
           std::string::npos &&
       Clock::now() < deadline;) {
    std::this_thread::sleep_for(100ms);
  }

  // Client b's LOCK through node 3 is granted; before node 3 answers, it stops past its lease,
  // and the others record it down and give the lock to client a.
  b_->tolerate_no_reply(40s);
  std::uint32_t answered = kNlmNoReply;
  std::thread locking([&] { answered = b_->lock(file_, 2, true, false); });
  const std::string paused_line = "nlm: fail point nlm_grant_reply";
  for (const auto deadline = Clock::now() + 10s;
       cluster_->node(3).log_tail(100000).find(paused_line) == std::string::npos &&
       Clock::now() < deadline;) {
    std::this_thread::sleep_for(50ms);
  }
  const bool granted_and_waiting =
      cluster_->node(3).log_tail(100000).find(paused_line) != std::string::npos;
  if (granted_and_waiting) {
    paused_ = cluster_->node(3).pid();
    EXPECT_EQ(::kill(paused_, SIGSTOP), 0);
  }
  std::uint32_t taken = NLM4_DENIED;
  for (const auto deadline = Clock::now() + 30s;
       granted_and_waiting && taken != NLM4_GRANTED && Clock::now() < deadline;) {
    std::this_thread::sleep_for(250ms);
    taken = a_->lock(file_, 1, true, false);
  }
  if (paused_ != 0) {
    EXPECT_EQ(::kill(paused_, SIGCONT), 0);
    paused_ = 0;
  }
  locking.join();
  ASSERT_TRUE(granted_and_waiting) << "node 3 never granted client b's LOCK:\n"
                                   << cluster_->node(3).log_tail();
  ASSERT_EQ(taken, NLM4_GRANTED) << "node 3's locks were never given away";
  // Back, node 3 finds its lease lapsed since the call began: a GRANTED now would tell client
  // b it holds what client a holds, and after the notice that its locks were gone.
  EXPECT_EQ(answered, NLM4_DENIED_GRACE_PERIOD) << cluster_->node(3).log_tail();
}

}  // namespace
}  // namespace tidepool::test
