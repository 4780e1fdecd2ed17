// Network partitions with real processes: three tided nodes, each in a network namespace of its
// own (netns.h), and a client in each node's namespace that locks a file through its node with
// NLM, writes a tagged word, reads, and unlocks, while a nemesis cuts and heals links on a seeded
// random schedule: a minority node isolated, the leader isolated, a shard's home cut from its
// mirror, the node of a client that holds a lock (and has the file cached) isolated, and one-way
// cuts. Checkers read the history the clients wrote, by one clock:
// - no read returns a word older than a write acknowledged before the read began, nor a word
//   nobody wrote; the reads after the last heal find every acknowledged write;
// - no two clients act under conflicting locks at once: each one's calls under a lock, from its
//   grant to the last call it sent that succeeded, never overlap another's on the same file (a
//   call sent before another's grant but carried out after it is not seen: the spans end at a
//   call's sending, the only time the client knows);
// - a client whose lock was given to another while it still relied on it was told so (an
//   SM_NOTIFY from its node).
// TIDEPOOL_PARTITION_SEED and TIDEPOOL_PARTITION_SCHEDULES replay a seed or run a long
// campaign (`./dev partitions`); TIDEPOOL_PARTITION_HISTORY=FILE writes the schedules and every
// call there, to read beside the nodes' logs (TIDEPOOL_KEEP_TEST_DIRS=1 keeps those). The last
// test switches the lease check off (a fail point) and shows the checker reporting the stale
// read that follows. Another test bounds how long a node cut off serves what it cached.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/process/netns.h"
#include "tests/process/nlm_client.h"
#include "tests/process/tide_cluster.h"

namespace tidepool::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Time = Clock::time_point;

constexpr std::size_t kNodes = 3;
constexpr int kFiles = 2;
constexpr std::size_t kWordBytes = 16;
constexpr int kDefaultSchedules = 20;
// A client retries a call under its lock that was refused or unanswered this long, then gives
// the lock up: a lock holder does not wait forever, nor at the first refusal.
constexpr auto kRetryUnderLock = 12s;
constexpr auto kCallTimeout = 8s;
const std::string kInitialWord(kWordBytes, '-');

std::uint64_t env_number(const char* name, std::uint64_t otherwise) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::strtoull(value, nullptr, 10) : otherwise;
}

std::string word_of(int client, int sequence) {
  std::string word = "c" + std::to_string(client) + "-" + std::to_string(sequence);
  word.resize(kWordBytes, '.');
  return word;
}

double seconds(Time t, Time origin) { return std::chrono::duration<double>(t - origin).count(); }

// One call a client made, by the test's clock.
struct Call {
  enum class Kind { write, read };
  Kind kind = Kind::read;
  int client = 0;
  int file = 0;
  int session = -1;  // the lock it was made under, or -1
  Time sent;
  Time answered;
  bool ok = false;
  std::string word;  // written, or read
  std::string refusal;  // the status, when not ok
};

// One lock a client was granted.
struct Session {
  int client = 0;
  int file = 0;
  Time granted;                  // when the grant reached the client
  std::optional<Time> released;  // when it sent its UNLOCK
  bool told = false;             // it ended when its client was told the lock was gone
};

struct Notice {
  int client = 0;
  Time at;
};

// Makes the call `c` describes (a WRITE of its word, or a READ) at offset 0 of `fh`, and says
// how it went.
Call made(NfsClient& nfs, const FileHandle& fh, Call c) {
  nfsstat3 status = kNoReply;
  if (c.kind == Call::Kind::write) {
    const WriteResult w = nfs.write(fh, 0, c.word, FILE_SYNC);
    status = w.status;
    c.ok = w.status == NFS3_OK && w.count == kWordBytes;
  } else {
    const ReadResult r = nfs.read(fh, 0, kWordBytes);
    status = r.status;
    c.ok = r.status == NFS3_OK;
    c.word = r.data;
  }
  if (!c.ok) c.refusal = nfsstat3_name(status);
  c.answered = Clock::now();
  return c;
}

class History {
 public:
  void add(Call call) {
    std::lock_guard lock(mutex_);
    calls_.push_back(std::move(call));
  }
  int open_session(int client, int file, Time granted) {
    std::lock_guard lock(mutex_);
    sessions_.push_back({client, file, granted, std::nullopt});
    return static_cast<int>(sessions_.size()) - 1;
  }
  void release(int session, Time at) {
    std::lock_guard lock(mutex_);
    sessions_.at(static_cast<std::size_t>(session)).released = at;
  }
  void told(int session) {
    std::lock_guard lock(mutex_);
    sessions_.at(static_cast<std::size_t>(session)).told = true;
  }
  void notified(int client, Time at) {
    std::lock_guard lock(mutex_);
    notices_.push_back({client, at});
  }
  // A client holding a lock now, if any.
  std::optional<int> holder() {
    std::lock_guard lock(mutex_);
    for (auto s = sessions_.rbegin(); s != sessions_.rend(); ++s) {
      if (!s->released && !s->told) return s->client;
    }
    return std::nullopt;
  }
  // How many writes client `k` made under a lock that succeeded.
  std::size_t locked_writes(int k) {
    std::lock_guard lock(mutex_);
    return static_cast<std::size_t>(std::ranges::count_if(calls_, [k](const Call& c) {
      return c.client == k && c.kind == Call::Kind::write && c.session >= 0 && c.ok;
    }));
  }
  // What the history holds and the last check found, for the test's output.
  std::string summary() {
    std::lock_guard lock(mutex_);
    const auto refused = std::ranges::count_if(calls_, [](const Call& c) { return !c.ok; });
    return std::to_string(calls_.size()) + " calls (" + std::to_string(refused) +
           " refused or unanswered), " + std::to_string(sessions_.size()) + " locks granted, " +
           std::to_string(lost_locks_) + " of them given to another client while relied on, " +
           std::to_string(notices_.size()) + " SM_NOTIFY received";
  }

  // Every call, lock and notice by time, one a line: to read beside the nodes' logs when a
  // checker fails.
  std::string dump(Time origin) {
    std::lock_guard lock(mutex_);
    std::vector<std::pair<Time, std::string>> lines;
    for (const Call& c : calls_) {
      std::ostringstream line;
      line << seconds(c.sent, origin) << "-" << seconds(c.answered, origin) << " client "
           << c.client << (c.kind == Call::Kind::write ? " write " : " read ") << "file "
           << c.file << " '" << c.word << "'" << (c.ok ? "" : " refused: " + c.refusal)
           << (c.session >= 0 ? " under lock " + std::to_string(c.session) : "");
      lines.emplace_back(c.sent, line.str());
    }
    for (std::size_t i = 0; i < sessions_.size(); ++i) {
      const Session& s = sessions_[i];
      lines.emplace_back(s.granted, std::to_string(seconds(s.granted, origin)) + " client " +
                                        std::to_string(s.client) + " granted lock " +
                                        std::to_string(i) + " of file " + std::to_string(s.file));
      if (s.released) {
        lines.emplace_back(*s.released, std::to_string(seconds(*s.released, origin)) +
                                            " client " + std::to_string(s.client) +
                                            " unlocks lock " + std::to_string(i));
      }
    }
    for (const Notice& n : notices_) {
      lines.emplace_back(n.at, std::to_string(seconds(n.at, origin)) + " client " +
                                   std::to_string(n.client) + " told its locks are gone");
    }
    std::ranges::stable_sort(lines, {}, &std::pair<Time, std::string>::first);
    std::string out;
    for (const auto& [at, line] : lines) out += line + "\n";
    return out;
  }

  // Every violation the checkers find, one a line; "" if none.
  std::string check(Time origin) {
    std::lock_guard lock(mutex_);
    std::ostringstream out;
    check_reads(origin, out);
    check_locks(origin, out);
    return out.str();
  }

 private:
  void check_reads(Time origin, std::ostringstream& out) const {
    // A write refused or unanswered is tried again with the same word, and any try may have
    // landed: a word is written from its first try's start, acknowledged at its first success.
    struct Written {
      int file = 0;
      int client = 0;
      Time first_sent = Time::max();
      Time acknowledged = Time::max();
    };
    std::map<std::string, Written> writes;
    for (const Call& c : calls_) {
      if (c.kind != Call::Kind::write) continue;
      Written& w = writes[c.word];
      w.file = c.file;
      w.client = c.client;
      w.first_sent = std::min(w.first_sent, c.sent);
      if (c.ok) w.acknowledged = std::min(w.acknowledged, c.answered);
    }
    for (const Call& read : calls_) {
      if (read.kind != Call::Kind::read || !read.ok) continue;
      Time written_by = Time::min();  // when the write of the word read was acknowledged
      if (read.word != kInitialWord) {
        const auto found = writes.find(read.word);
        if (found == writes.end() || found->second.file != read.file) {
          out << "client " << read.client << " read '" << read.word << "' from file "
              << read.file << " at " << seconds(read.sent, origin) << " s: nobody wrote it\n";
          continue;
        }
        if (found->second.first_sent > read.answered) {
          out << "client " << read.client << " read '" << read.word << "' before it was written\n";
          continue;
        }
        written_by = found->second.acknowledged;
      }
      if (written_by == Time::max()) continue;
      for (const auto& [word, newer] : writes) {
        if (newer.file == read.file && newer.acknowledged < read.sent &&
            newer.first_sent > written_by) {
          out << "stale read: client " << read.client << " read '" << read.word << "' from file "
              << read.file << " at " << seconds(read.sent, origin) << "-"
              << seconds(read.answered, origin) << " s, but client " << newer.client << "'s '"
              << word << "' was written at " << seconds(newer.first_sent, origin) << "-"
              << seconds(newer.acknowledged, origin) << " s\n";
          break;
        }
      }
    }
  }

  void check_locks(Time origin, std::ostringstream& out) {
    lost_locks_ = 0;
    // Each session's acting span: from its grant to the last call under it that succeeded.
    std::vector<std::optional<Time>> last_ok(sessions_.size());
    for (const Call& c : calls_) {
      if (c.session < 0 || !c.ok) continue;
      auto& last = last_ok[static_cast<std::size_t>(c.session)];
      last = std::max(last.value_or(c.sent), c.sent);
    }
    for (std::size_t a = 0; a < sessions_.size(); ++a) {
      const Session& mine = sessions_[a];
      bool lost = false;
      for (std::size_t b = 0; b < sessions_.size(); ++b) {
        const Session& other = sessions_[b];
        if (a == b || other.client == mine.client || other.file != mine.file) continue;
        if (last_ok[a] && last_ok[b] && mine.granted < *last_ok[b] &&
            other.granted < *last_ok[a] && a < b) {
          out << "clients " << mine.client << " and " << other.client
              << " both acted under a lock of file " << mine.file << ": granted at "
              << seconds(mine.granted, origin) << " s and " << seconds(other.granted, origin)
              << " s, calls until " << seconds(*last_ok[a], origin) << " s and "
              << seconds(*last_ok[b], origin) << " s\n";
        }
        lost = lost || (other.granted > mine.granted &&
                        (!mine.released || other.granted < *mine.released));
      }
      if (!lost) continue;
      lost_locks_++;
      // Told before its next grant: a node in its grace period after the fence grants nothing
      // new, so a later fence's notice cannot stand in for this one's.
      Time next_grant = Time::max();
      for (const Session& later : sessions_) {
        if (later.client == mine.client && later.granted > mine.granted) {
          next_grant = std::min(next_grant, later.granted);
        }
      }
      const bool told = std::ranges::any_of(notices_, [&](const Notice& n) {
        return n.client == mine.client && n.at > mine.granted && n.at <= next_grant;
      });
      if (!told) {
        out << "client " << mine.client << " was never told that its lock of file " << mine.file
            << " (granted at " << seconds(mine.granted, origin)
            << " s) went to another client while it relied on it\n";
      }
    }
  }

  std::mutex mutex_;
  std::size_t lost_locks_ = 0;     // guarded by mutex_; found by the last check
  std::vector<Call> calls_;        // guarded by mutex_
  std::vector<Session> sessions_;  // guarded by mutex_
  std::vector<Notice> notices_;    // guarded by mutex_
};

// The cluster and its network, made once for every test here.
struct World {
  std::unique_ptr<TestNetwork> network;
  std::unique_ptr<InsideNamespace> hub;
  std::unique_ptr<TideCluster> cluster;
  std::vector<FileHandle> files;
};

class PartitionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    world_ = new World;
    world_->network = std::make_unique<TestNetwork>(kNodes);
    if (!world_->network->error().empty()) return;
    world_->hub = std::make_unique<InsideNamespace>(world_->network->hub_namespace());
    if (!world_->hub->ok()) return;
    const auto place = [](std::size_t id, NodeOptions& options) {
      options.address = TestNetwork::node_address(id);
      options.network_namespace = world_->network->node_namespace(id);
      options.exports = {ExportSpec{.path = "/ifs",
                                    .clients = {TestNetwork::kClients},
                                    .root_squash = false}};
    };
    world_->cluster = std::make_unique<TideCluster>(
        "partition", std::vector<std::string>(kNodes, "default"), "partition",
        "[nfs]\nnlm_grace_period = \"3s\"\n", "", place);
  }
  static void TearDownTestSuite() {
    delete world_;
    world_ = nullptr;
  }

  void SetUp() override {
    if (tide_path().empty()) GTEST_SKIP() << "no tide binary in this build";
    if (!world_->network->error().empty()) {
      GTEST_SKIP() << "cannot make network namespaces here (the partition tests need root and "
                      "iproute2): "
                   << world_->network->error();
    }
    ASSERT_TRUE(world_->hub->ok()) << "cannot enter the hub namespace";
    if (world_->files.empty()) {
      ASSERT_NO_FATAL_FAILURE(world_->cluster->start_serving());
      const FileHandle root = world_->cluster->root_via(1);
      NfsClient nfs(world_->cluster->node(1).endpoint());
      for (int f = 0; f < kFiles; ++f) {
        world_->files.push_back(nfs.make_file(root, "word" + std::to_string(f), 0644));
        ASSERT_FALSE(world_->files.back().empty());
      }
    }
    // Every test starts from words no client of it wrote (bounded: the cluster may still be
    // settling after the last test's cuts).
    ASSERT_TRUE(wait_until_whole(60s));
    for (const FileHandle& fh : world_->files) {
      bool written = false;
      for (const auto deadline = Clock::now() + 30s; !written && Clock::now() < deadline;) {
        NfsClient nfs(cluster().node(1).endpoint());
        nfs.tolerate_no_reply(kCallTimeout);
        written = nfs.write(fh, 0, kInitialWord, FILE_SYNC).status == NFS3_OK;
        if (!written) std::this_thread::sleep_for(200ms);
      }
      ASSERT_TRUE(written) << "cannot write the first words";
    }
  }

  void TearDown() override {
    if (world_ != nullptr && world_->network) world_->network->heal();
  }

  TideCluster& cluster() { return *world_->cluster; }
  TestNetwork& network() { return *world_->network; }

  // Every node up in the view and answering, through the hub (bounded).
  bool wait_until_whole(std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      bool whole = true;
      for (std::size_t id = 1; id <= kNodes && whole; ++id) {
        whole = cluster().state_of(1 + id % kNodes, id) == "up";
      }
      if (whole) return true;
      std::this_thread::sleep_for(250ms);
    }
    return false;
  }

  std::uint64_t leader() {
    for (std::size_t via = 1; via <= kNodes; ++via) {
      const Ran ran = cluster().tide(via, {"status", "--format", "json"});
      const auto status = nlohmann::json::parse(ran.output, nullptr, false);
      if (ran.exit_code == 0 && status.is_object() && status.value("leader", 0) != 0) {
        return status["leader"].get<std::uint64_t>();
      }
    }
    return 0;
  }

  static World* world_;
};

World* PartitionTest::world_ = nullptr;

// A client in node `k`'s namespace, calling only node k, until told to stop.
class Client {
 public:
  Client(int k, std::uint64_t seed, TestNetwork& network, TideCluster& cluster,
         const std::vector<FileHandle>& files, History& history)
      : k_(k), files_(files), history_(history), endpoint_(cluster.node(k).endpoint()) {
    thread_ = std::thread([this, seed, &network] {
      InsideNamespace inside(network.node_namespace(static_cast<std::size_t>(k_)));
      if (!inside.ok()) {
        trouble_ = "cannot enter the namespace of node " + std::to_string(k_);
        return;
      }
      ClientLockd lockd(TestNetwork::client_address(static_cast<std::size_t>(k_)));
      if (!lockd.listening()) {
        trouble_ = "its lock manager cannot listen on " + lockd.address();
        return;
      }
      lockd_ = &lockd;
      run(seed);
      for (const auto& n : lockd.notices()) history_.notified(k_, n.at);
      lockd_ = nullptr;
    });
  }
  ~Client() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  // Reads every file once more when it stops (bounded retries): after the last heal, what it
  // finds.
  void read_all_at_end() { final_reads_ = true; }
  // What kept it from running at all; "" if nothing did.
  std::string trouble() const { return trouble_; }
  // Which files it could not read then; "" if it read them all.
  std::string unread() const { return unread_; }

 private:
  void connect() {
    nfs_ = std::make_unique<NfsClient>(endpoint_);
    nfs_->tolerate_no_reply(kCallTimeout);
    nlm_ = std::make_unique<NlmClient>(endpoint_, "client-" + std::to_string(k_),
                                       TestNetwork::client_address(static_cast<std::size_t>(k_)));
    nlm_->tolerate_no_reply(kCallTimeout);
  }

  // One WRITE or READ, recorded.
  bool call(Call::Kind kind, int file, int session, const std::string& word = {}) {
    if (!nfs_->connected()) connect();
    Call c = made(*nfs_, files_[static_cast<std::size_t>(file)],
                  {kind, k_, file, session, Clock::now(), {}, false, word, {}});
    const bool ok = c.ok;
    history_.add(std::move(c));
    return ok;
  }

  bool told_since(std::size_t notices) { return lockd_->notices().size() > notices; }

  // A call under a lock, retried while refused; false once the client gives the lock up or
  // learns it lost it.
  bool call_under_lock(Call::Kind kind, int file, int session, std::size_t notices,
                       const std::string& word = {}) {
    const auto give_up = Clock::now() + kRetryUnderLock;
    for (int tries = 0; tries < 200 && Clock::now() < give_up && !stop_; ++tries) {
      if (told_since(notices)) return false;
      if (call(kind, file, session, word)) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }

  void locked_session(int file, std::mt19937_64& random) {
    if (!nlm_->connected()) connect();
    const FileHandle& fh = files_[static_cast<std::size_t>(file)];
    const std::uint32_t svid = static_cast<std::uint32_t>(k_);
    if (nlm_->lock(fh, svid, true, false) != NLM4_GRANTED) {
      std::this_thread::sleep_for(30ms);
      return;
    }
    // Notices from now on are about this lock too; one that came while the LOCK was on its
    // way is about locks lost before it was granted, as a kernel's lockd takes it (it reclaims
    // the locks it holds when told), and as the history judges it.
    const std::size_t notices = lockd_->notices().size();
    const int session = history_.open_session(k_, file, Clock::now());
    if (call_under_lock(Call::Kind::read, file, session, notices) &&
        call_under_lock(Call::Kind::write, file, session, notices, word_of(k_, ++sequence_))) {
      std::this_thread::sleep_for(std::chrono::milliseconds(random() % 300));
      call_under_lock(Call::Kind::read, file, session, notices);
    }
    if (told_since(notices)) return history_.told(session);  // it has nothing to unlock
    history_.release(session, Clock::now());
    // Until it is unlocked: the lock would keep everyone else out otherwise.
    for (int tries = 0; tries < 100 && !stop_; ++tries) {
      if (!nlm_->connected()) connect();
      const std::uint32_t status = nlm_->unlock(fh, svid);
      if (status == NLM4_GRANTED || told_since(notices)) break;
      std::this_thread::sleep_for(100ms);
    }
  }

  void run(std::uint64_t seed) {
    std::mt19937_64 random(seed * 1000 + static_cast<std::uint64_t>(k_));
    connect();
    // Bounded: a schedule lasts seconds, a campaign hours.
    for (int round = 0; round < 1'000'000 && !stop_; ++round) {
      const int file = static_cast<int>(random() % kFiles);
      if (random() % 3 != 0) {
        locked_session(file, random);
      } else {
        call(Call::Kind::read, file, -1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(random() % 20));
    }
    if (!final_reads_) return;
    for (int file = 0; file < kFiles; ++file) {
      bool read = false;
      for (int tries = 0; tries < 100 && !(read = call(Call::Kind::read, file, -1)); ++tries) {
        std::this_thread::sleep_for(200ms);
      }
      if (!read) unread_ += " file " + std::to_string(file);
    }
  }

  const int k_;
  const std::vector<FileHandle>& files_;
  History& history_;
  const Endpoint endpoint_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> final_reads_{false};
  std::string unread_;   // the thread's until it is joined
  std::string trouble_;  // likewise
  ClientLockd* lockd_ = nullptr;  // the thread's own
  std::unique_ptr<NfsClient> nfs_;
  std::unique_ptr<NlmClient> nlm_;
  int sequence_ = 0;
  std::thread thread_;
};

enum class Cut { minority, leader, home_from_mirror, lock_holder, one_way };
constexpr Cut kCuts[] = {Cut::minority, Cut::leader, Cut::home_from_mirror, Cut::lock_holder,
                         Cut::one_way};

const char* name_of(Cut cut) {
  switch (cut) {
    case Cut::minority: return "a minority node isolated";
    case Cut::leader: return "the leader isolated";
    case Cut::home_from_mirror: return "the home cut from its mirror";
    case Cut::lock_holder: return "a lock holder's node isolated";
    case Cut::one_way: return "one way cut";
  }
  return "?";
}

TEST_F(PartitionTest, NoStaleReadNoSharedLockNoLostWriteAndEveryLockLoserToldOnRandomCuts) {
  const std::uint64_t seed = env_number("TIDEPOOL_PARTITION_SEED",
                                        static_cast<std::uint64_t>(::getpid()) ^
                                            static_cast<std::uint64_t>(std::time(nullptr)));
  const auto schedules = static_cast<int>(env_number("TIDEPOOL_PARTITION_SCHEDULES",
                                                     kDefaultSchedules));
  SCOPED_TRACE("replay with TIDEPOOL_PARTITION_SEED=" + std::to_string(seed));
  std::mt19937_64 random(seed);
  History history;
  const Time origin = Clock::now();
  std::vector<std::unique_ptr<Client>> clients;
  for (std::size_t k = 1; k <= kNodes; ++k) {
    clients.push_back(std::make_unique<Client>(static_cast<int>(k), seed, network(), cluster(),
                                               world_->files, history));
  }
  std::ostringstream log;
  for (int s = 0; s < schedules; ++s) {
    // Every kind of cut in turn, on a random target, for a random time: below the lease, or past
    // the time after which the others record a node down.
    const Cut cut = kCuts[static_cast<std::size_t>(s) % std::size(kCuts)];
    // A lock holder's node long enough to be fenced, so that its lock goes to another client.
    const auto hold = std::chrono::milliseconds(
        cut == Cut::lock_holder ? 3000 + random() % 1500 : 800 + random() % 3700);
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + random() % 700));
    std::size_t target = 1 + random() % kNodes;
    const std::uint64_t lead = leader();
    switch (cut) {
      case Cut::minority:
        if (target == lead) target = 1 + target % kNodes;
        ASSERT_TRUE(network().isolate(target)) << network().error();
        break;
      case Cut::leader:
        ASSERT_NE(lead, 0u) << "no leader";
        ASSERT_TRUE(network().isolate(lead)) << network().error();
        break;
      case Cut::home_from_mirror: {
        const auto [home, mirror] = cluster().wait_for_full_protection(1, 60s);
        ASSERT_NE(home, 0u);
        ASSERT_TRUE(network().drop(home, mirror) && network().drop(mirror, home))
            << network().error();
        break;
      }
      case Cut::lock_holder: {
        std::optional<int> holder;
        for (int tries = 0; tries < 40 && !(holder = history.holder()); ++tries) {
          std::this_thread::sleep_for(50ms);
        }
        ASSERT_TRUE(network().isolate(holder ? static_cast<std::size_t>(*holder) : target))
            << network().error();
        break;
      }
      case Cut::one_way:
        for (std::size_t other = 1; other <= kNodes; ++other) {
          if (other == target) continue;
          const bool outgoing = random() % 2 == 0;
          ASSERT_TRUE(outgoing ? network().drop(target, other) : network().drop(other, target))
              << network().error();
        }
        break;
    }
    log << "schedule " << s << " at " << seconds(Clock::now(), origin) << " s: " << name_of(cut)
        << " (" << network().describe() << ") for " << hold.count() << " ms\n";
    std::this_thread::sleep_for(hold);
    ASSERT_TRUE(network().heal()) << network().error();
    ASSERT_TRUE(wait_until_whole(60s)) << log.str() << "the cluster never became whole again";
  }
  for (auto& client : clients) client->read_all_at_end();
  for (auto& client : clients) client->stop();
  // What was acknowledged is still there: every file reads through every node, and (the
  // checker) no older than the last acknowledged write.
  for (std::size_t k = 1; k <= kNodes; ++k) {
    EXPECT_EQ(clients[k - 1]->trouble(), "") << "client " << k;
    EXPECT_EQ(clients[k - 1]->unread(), "") << "unreadable through node " << k << " after the "
                                            << "last heal\n" << log.str();
    // Not a run where nothing could be checked.
    EXPECT_GE(history.locked_writes(static_cast<int>(k)), 5u) << "client " << k;
  }
  const std::string violations = history.check(origin);
  EXPECT_EQ(violations, "") << log.str();
  if (const char* path = std::getenv("TIDEPOOL_PARTITION_HISTORY"); path != nullptr) {
    std::ofstream(path) << log.str() << history.dump(origin);
  }
  EXPECT_EQ(cluster().crashed_nodes(), "");
  std::printf("partition schedules: %d, seed %llu: %s\n", schedules,
              static_cast<unsigned long long>(seed), history.summary().c_str());
}

// A node cut off from the others while its client reads through it serves what it cached only
// while its lease may still run — 1.5 s from a request it sent before the cut — then answers
// "retry later", and serves again, without a restart, once the cut heals.
TEST_F(PartitionTest, AnIsolatedNodeStopsServingItsCacheWithinItsLeaseAndServesAgainAfterTheHeal) {
  constexpr auto kLease = 1500ms;
  // The lease ran from a request sent before the cut, by at most 1.5 s (and the clocks' drift),
  // and a READ is answered only if it held when the answer was ready, after the READ was sent;
  // this covers the clocks' whole milliseconds.
  constexpr auto kSlack = 20ms;
  const FileHandle& fh = world_->files[0];
  const pid_t pid = cluster().node(3).pid();
  const auto read_through_3 = [&] {
    InsideNamespace inside(network().node_namespace(3));
    NfsClient nfs(cluster().node(3).endpoint());
    nfs.tolerate_no_reply(kCallTimeout);
    return nfs.read(fh, 0, kWordBytes).status;
  };
  ASSERT_EQ(read_through_3(), NFS3_OK);  // now in node 3's cache

  ASSERT_TRUE(network().isolate(3)) << network().error();
  const Time cut = Clock::now();
  std::optional<Time> last_served;  // when the latest READ served after the cut was sent
  int refused = 0;
  for (Time sent = cut; sent < cut + kLease + 4s; sent = Clock::now()) {
    const nfsstat3 status = read_through_3();
    if (status == NFS3_OK) last_served = sent;
    if (status == NFS3ERR_JUKEBOX) ++refused;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(network().heal()) << network().error();
  // None served after the cut is within the bound too: the lease may have run out just before.
  if (last_served) {
    EXPECT_LT(*last_served - cut, kLease + kSlack)
        << "node 3 served a READ sent " << seconds(*last_served, cut) << " s after it was cut off";
  }
  EXPECT_GT(refused, 0) << "node 3 never answered \"retry later\" while cut off";
  std::printf("cut off, node 3 served READs sent up to %.3f s after the cut, then refused %d\n",
              last_served ? seconds(*last_served, cut) : -1.0, refused);

  bool served_again = false;
  for (const auto deadline = Clock::now() + 30s; !served_again && Clock::now() < deadline;) {
    served_again = read_through_3() == NFS3_OK;
    if (!served_again) std::this_thread::sleep_for(200ms);
  }
  EXPECT_TRUE(served_again) << "node 3 did not serve again within 30 s of the heal";
  EXPECT_EQ(cluster().node(3).pid(), pid);
  EXPECT_EQ(cluster().crashed_nodes(), "");
}

// With the lease check off, a node cut off from the others serves what it cached: the checker
// must say so. (If it did not, the test above would prove nothing.)
TEST_F(PartitionTest, WithTheLeaseCheckSwitchedOffTheCheckerReportsTheStaleRead) {
  const Ran on = cluster().tide(1, {"sysctl", "debug.fail_point.ignore_leases=true"});
  ASSERT_EQ(on.exit_code, 0) << on.output;
  // Off again however the test ends: the cluster serves the other tests.
  struct SwitchedOff {
    TideCluster& cluster;
    ~SwitchedOff() {
      const Ran off = cluster.tide(1, {"sysctl", "debug.fail_point.ignore_leases=false"});
      EXPECT_EQ(off.exit_code, 0) << off.output;
    }
  } switched_off{cluster()};
  for (std::size_t k = 1; k <= kNodes; ++k) {
    bool applied = false;
    for (const auto deadline = Clock::now() + 10s; !applied && Clock::now() < deadline;) {
      const Ran seen = cluster().tide(k, {"sysctl", "debug.fail_point.ignore_leases"});
      applied = seen.exit_code == 0 && seen.output.find("= true") != std::string::npos;
      if (!applied) std::this_thread::sleep_for(100ms);
    }
    ASSERT_TRUE(applied) << "node " << k << " never applied the fail point";
  }
  History history;
  const Time origin = Clock::now();
  const FileHandle& fh = world_->files[0];
  // A call through node k, tried again while refused (bounded): the cluster may still be
  // settling after the last schedule, and a write waits for a cut-off reader to be fenced.
  // What the refused tries answered, for the message when none succeeds.
  std::map<std::string, int> refusals;
  const auto record = [&](std::size_t k, Call::Kind kind, const std::string& word) {
    InsideNamespace inside(network().node_namespace(k));
    for (const auto deadline = Clock::now() + 30s; Clock::now() < deadline;) {
      NfsClient nfs(cluster().node(k).endpoint());
      nfs.tolerate_no_reply(kCallTimeout);
      const Call c =
          made(nfs, fh, {kind, static_cast<int>(k), 0, -1, Clock::now(), {}, false, word, {}});
      history.add(c);
      if (c.ok) return true;
      ++refusals["node " + std::to_string(k) + ": " + (c.refusal.empty() ? "?" : c.refusal)];
      std::this_thread::sleep_for(200ms);
    }
    return false;
  };
  const auto refused = [&] {
    std::string out;
    for (const auto& [what, count] : refusals)
      out += "\n  " + what + " (" + std::to_string(count) + "x)";
    return out;
  };
  // Node 3 caches the file; cut off, it keeps serving that after node 1 acknowledged a write.
  ASSERT_TRUE(record(3, Call::Kind::write, word_of(3, 1)));
  ASSERT_TRUE(record(3, Call::Kind::read, ""));
  ASSERT_TRUE(network().isolate(3)) << network().error();
  const Time cut = Clock::now();
  const bool written = record(1, Call::Kind::write, word_of(1, 1));
  if (written) {
    // Usually a few seconds: the time it takes to fence node 3. Printed to see it creep.
    std::printf("node 1 took a write %.1f s after node 3 was cut off\n",
                std::chrono::duration<double>(Clock::now() - cut).count());
  }
  // How the cluster looked while the write was refused, before the heal changes it.
  const std::string status_while_cut = written ? "" : cluster().tide(1, {"status"}).output;
  const bool read = record(3, Call::Kind::read, "");
  ASSERT_TRUE(network().heal());
  ASSERT_TRUE(written) << "no write through node 1 within 30 s of node 3's cut; refused with:"
                       << refused() << "\ntide status through node 1:\n"
                       << status_while_cut;
  ASSERT_TRUE(read) << refused();
  const std::string violations = history.check(origin);
  EXPECT_NE(violations.find("stale read: client 3"), std::string::npos) << violations;
}

}  // namespace
}  // namespace tidepool::test
