// Data integrity, several clients at once, and restarts of a real server.
//
// Randomized tests run a seed of the commit, or a fixed one (tests/seeds/seeds.h), and print
// it; TIDEPOOL_TEST_SEED=N replays one.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/process/conformance_fixture.h"
#include "tests/seeds/seeds.h"

namespace tidepool::test {
namespace {

// The seeds test `test` runs: TIDEPOOL_TEST_SEED when set (a replay), else one derived from the
// commit under test, else a fixed one (tests/seeds/seeds.h). One a run: each test's cases are
// many already, and the simulations and the coherence checker take the fixed seeds besides.
std::vector<uint64_t> test_seeds(std::string_view test) {
  if (const char* s = std::getenv("TIDEPOOL_TEST_SEED")) {
    return {std::strtoull(s, nullptr, 10)};
  }
  std::vector<uint64_t> seeds = commit_seeds(test, 1);
  if (seeds.empty()) seeds.push_back(first_fixed_seed());
  return seeds;
}

// Writes random data in odd-sized pieces at odd offsets (some overlapping,
// some leaving holes) into `fh` and into `model`, with a random stable_how.
void scribble(NfsClient& c, const FileHandle& fh, std::string& model,
              std::mt19937_64& rng, int pieces, size_t span, uint32_t wtmax) {
  std::uniform_int_distribution<int> stable_dist(0, 2);
  for (int i = 0; i < pieces; ++i) {
    size_t max_len = (i % 7 == 0) ? wtmax : 70000;
    size_t len = (rng() % max_len) | 1;  // odd, >= 1
    if (len > wtmax) len = wtmax - 1;
    size_t off = (rng() % span) | 1;  // odd
    std::string data = random_bytes(len, rng());
    auto stable = static_cast<stable_how>(stable_dist(rng));
    auto w = c.write(fh, off, data, stable);
    ASSERT_EQ(w.status, NFS3_OK) << "piece " << i << " at " << off;
    ASSERT_EQ(w.count, len) << "short write: piece " << i;
    if (model.size() < off + len) model.resize(off + len, '\0');
    model.replace(off, len, data);
  }
}

// Reads the file back in odd-sized chunks and compares it with `model`: "" if it holds the
// model, else where it first differs.
std::string difference(NfsClient& c, const FileHandle& fh, const std::string& model,
                       uint32_t chunk) {
  auto a = c.getattr(fh);
  if (a.status != NFS3_OK) return "GETATTR answered " + std::to_string(a.status);
  if (a.attr.size != model.size()) {
    return "size " + std::to_string(a.attr.size) + ", not " + std::to_string(model.size());
  }
  std::string back = c.read_all(fh, chunk);
  if (back.size() != model.size()) {
    return "read " + std::to_string(back.size()) + " bytes of " + std::to_string(model.size());
  }
  if (back == model) return "";
  auto mismatch = std::mismatch(back.begin(), back.end(), model.begin());
  return "contents differ first at offset " + std::to_string(mismatch.first - back.begin()) +
         " of " + std::to_string(model.size());
}

void expect_contents(NfsClient& c, const FileHandle& fh, const std::string& model, uint32_t chunk) {
  EXPECT_EQ(difference(c, fh, model, chunk), "");
}

// --- Data integrity ----------------------------------------------------------

using DataIntegrity = ConformanceTest;

TEST_F(DataIntegrity, RandomPiecesAtOddOffsetsReadBackIdentical) {
  for (const uint64_t seed :
       test_seeds("DataIntegrity.RandomPiecesAtOddOffsetsReadBackIdentical")) {
    SCOPED_TRACE("TIDEPOOL_TEST_SEED=" + std::to_string(seed));
    std::mt19937_64 rng(seed);
    auto info = nfs().fsinfo(root());
    ASSERT_EQ(info.status, NFS3_OK);
    FileHandle dir = make_test_dir();
    FileHandle f = nfs().make_file(dir, "data");
    std::string model;
    uint32_t wtmax = std::min(info.wtmax, kLibnfsMaxTransfer);
    uint32_t rtmax = std::min(info.rtmax, kLibnfsMaxTransfer);
    scribble(nfs(), f, model, rng, 60, 3 << 20, wtmax);
    ASSERT_EQ(nfs().commit(f).status, NFS3_OK);
    expect_contents(nfs(), f, model, 77777);
    // Another connection sees the same bytes, read in other pieces.
    NfsClient other(endpoint());
    expect_contents(other, f, model, rtmax);
    expect_contents(other, f, model, 4093);
  }
}

// The checker is shown to fire: a file that lost a byte of what was written to it, or its tail,
// is reported where it first differs from the model.
TEST_F(DataIntegrity, TheCheckerReportsAFileThatDoesNotHoldWhatWasWritten) {
  std::mt19937_64 rng(first_fixed_seed());
  FileHandle f = nfs().make_file(make_test_dir(), "data");
  ASSERT_FALSE(f.empty());
  std::string model;
  ASSERT_NO_FATAL_FAILURE(scribble(nfs(), f, model, rng, 20, 200000, 65536));
  ASSERT_EQ(difference(nfs(), f, model, 77777), "");
  // As a write lost, or one applied at the wrong place, would leave it.
  const std::size_t damaged = model.size() / 3;
  const std::string other(1, static_cast<char>(model[damaged] ^ 0x5a));
  ASSERT_EQ(nfs().write(f, damaged, other, FILE_SYNC).status, NFS3_OK);
  EXPECT_EQ(difference(nfs(), f, model, 77777), "contents differ first at offset " +
                                                    std::to_string(damaged) + " of " +
                                                    std::to_string(model.size()));
  Sattr shorter;
  shorter.size = model.size() - 1;
  ASSERT_EQ(nfs().setattr(f, shorter).status, NFS3_OK);
  EXPECT_EQ(difference(nfs(), f, model, 77777),
            "size " + std::to_string(model.size() - 1) + ", not " + std::to_string(model.size()));
}

TEST_F(DataIntegrity, WritesOfExactlyWtmaxAreWholeAndCorrect) {
  auto info = nfs().fsinfo(root());
  ASSERT_EQ(info.status, NFS3_OK);
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "big");
  uint32_t wtmax = std::min(info.wtmax, kLibnfsMaxTransfer);
  std::string model = random_bytes(2 * size_t{wtmax} + 3, 99);
  for (size_t off = 0; off < model.size(); off += wtmax) {
    auto piece = std::string_view(model).substr(off, wtmax);
    auto w = nfs().write(f, off, piece, UNSTABLE);
    ASSERT_EQ(w.status, NFS3_OK);
    EXPECT_EQ(w.count, piece.size());
  }
  ASSERT_EQ(nfs().commit(f).status, NFS3_OK);
  expect_contents(nfs(), f, model, std::min(info.rtmax, kLibnfsMaxTransfer));
}

TEST_F(DataIntegrity, HighLevelClientRoundTripsOddPieces) {
  for (const uint64_t seed : test_seeds("DataIntegrity.HighLevelClientRoundTripsOddPieces")) {
    SCOPED_TRACE("TIDEPOOL_TEST_SEED=" + std::to_string(seed));
    std::mt19937_64 rng(seed);
    std::string name = unique_name("hl");
    nfs_context* nfs_ctx = nfs_init_context();
    ASSERT_NE(nfs_ctx, nullptr);
    nfs_set_timeout(nfs_ctx, 10000);
    // Nested exports are not crossed here: that is Mount.PlainLibnfsUrl...'s
    // business; this test is about the data.
    std::string url = libnfs_url(endpoint(), server().export_path) + "&auto-traverse-mounts=0";
    nfs_url* parsed = nfs_parse_url_dir(nfs_ctx, url.c_str());
    ASSERT_NE(parsed, nullptr) << nfs_get_error(nfs_ctx);
    ASSERT_EQ(nfs_mount(nfs_ctx, parsed->server, parsed->path), 0) << nfs_get_error(nfs_ctx);
    nfs_destroy_url(parsed);

    std::string path = "/" + name;
    nfsfh* fh = nullptr;
    ASSERT_EQ(nfs_creat(nfs_ctx, path.c_str(), 0644, &fh), 0) << nfs_get_error(nfs_ctx);
    std::string model;
    for (int i = 0; i < 40; ++i) {
      // Up to 3 MiB: libnfs splits these into several WRITEs in flight.
      size_t len = (rng() % (3 << 20)) | 1;
      size_t off = (rng() % (4 << 20)) | 1;
      std::string data = random_bytes(len, rng());
      ASSERT_EQ(nfs_pwrite(nfs_ctx, fh, off, len, data.data()), static_cast<int>(len))
          << nfs_get_error(nfs_ctx);
      if (model.size() < off + len) model.resize(off + len, '\0');
      model.replace(off, len, data);
    }
    ASSERT_EQ(nfs_fsync(nfs_ctx, fh), 0) << nfs_get_error(nfs_ctx);
    ASSERT_EQ(nfs_close(nfs_ctx, fh), 0);

    ASSERT_EQ(nfs_open(nfs_ctx, path.c_str(), O_RDONLY, &fh), 0) << nfs_get_error(nfs_ctx);
    std::string back(model.size(), '\0');
    size_t got = 0;
    for (int rounds = 0; rounds < 100000 && got < back.size(); ++rounds) {
      size_t want = std::min<size_t>(back.size() - got, 3333333);
      int n = nfs_pread(nfs_ctx, fh, got, want, back.data() + got);
      ASSERT_GE(n, 0) << "at " << got << ": " << nfs_get_error(nfs_ctx);
      ASSERT_GT(n, 0) << "end of file at " << got << " of " << back.size();
      got += static_cast<size_t>(n);
    }
    nfs_close(nfs_ctx, fh);
    nfs_destroy_context(nfs_ctx);
    ASSERT_EQ(got, model.size());
    EXPECT_TRUE(back == model) << "high-level read differs from what was written";
    // And the raw client agrees.
    auto l = nfs().lookup(root(), name);
    ASSERT_EQ(l.status, NFS3_OK);
    expect_contents(nfs(), l.fh, model, 1 << 20);
  }
}

// --- Several clients at once -------------------------------------------------

using MultiClient = ConformanceTest;

TEST_F(MultiClient, ConcurrentClientsWritingTheirOwnFilesAllSucceed) {
  for (const uint64_t seed :
       test_seeds("MultiClient.ConcurrentClientsWritingTheirOwnFilesAllSucceed")) {
    SCOPED_TRACE("TIDEPOOL_TEST_SEED=" + std::to_string(seed));
    FileHandle dir = make_test_dir(0777);
    constexpr int kClients = 4;
    constexpr int kFiles = 3;
    std::vector<std::vector<std::string>> models(kClients);
    std::vector<std::thread> threads;
    for (int c = 0; c < kClients; ++c) {
      threads.emplace_back([&, c] {
        NfsClient client(endpoint(), {uint32_t(1000 + c), 1000, {}});
        ASSERT_TRUE(client.connected()) << client.error();
        std::mt19937_64 rng(seed + c);
        for (int f = 0; f < kFiles; ++f) {
          std::string name = "c" + std::to_string(c) + "f" + std::to_string(f);
          FileHandle fh = client.make_file(dir, name, 0644);
          std::string model;
          scribble(client, fh, model, rng, 12, 300000, 1 << 20);
          ASSERT_EQ(client.commit(fh).status, NFS3_OK);
          models[c].push_back(model);
        }
      });
    }
    for (auto& t : threads) t.join();
    // Each file read by a client that did not write it.
    for (int c = 0; c < kClients; ++c) {
      for (int f = 0; f < kFiles && f < int(models[c].size()); ++f) {
        std::string name = "c" + std::to_string(c) + "f" + std::to_string(f);
        auto l = nfs().lookup(dir, name);
        ASSERT_EQ(l.status, NFS3_OK) << name;
        EXPECT_EQ(nfs().getattr(l.fh).attr.uid, uint32_t(1000 + c));
        expect_contents(nfs(), l.fh, models[c][f], 65521);
      }
    }
  }
}

TEST_F(MultiClient, ConcurrentWritersOfDisjointRangesOfOneFile) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "shared", 0666);
  constexpr int kClients = 4;
  constexpr size_t kStripe = 65537;  // odd, so stripes straddle blocks
  constexpr int kRounds = 8;
  std::string model(kStripe * kClients * kRounds, '\0');
  for (int r = 0; r < kRounds; ++r) {
    for (int c = 0; c < kClients; ++c) {
      size_t off = (size_t(r) * kClients + c) * kStripe;
      model.replace(off, kStripe, random_bytes(kStripe, off));
    }
  }
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      NfsClient client(endpoint());
      ASSERT_TRUE(client.connected()) << client.error();
      for (int r = 0; r < kRounds; ++r) {
        size_t off = (size_t(r) * kClients + c) * kStripe;
        auto w = client.write(f, off, std::string_view(model).substr(off, kStripe),
                              r % 2 ? UNSTABLE : FILE_SYNC);
        ASSERT_EQ(w.status, NFS3_OK);
        ASSERT_EQ(w.count, kStripe);
      }
      ASSERT_EQ(client.commit(f).status, NFS3_OK);
    });
  }
  for (auto& t : threads) t.join();
  expect_contents(nfs(), f, model, 100003);
}

TEST_F(MultiClient, WriteOnOneClientIsSeenByReadOnAnother) {
  FileHandle dir = make_test_dir();
  FileHandle f = nfs().make_file(dir, "f", 0666);
  NfsClient reader(endpoint());
  for (int i = 0; i < 20; ++i) {
    std::string data = "version " + std::to_string(i);
    ASSERT_EQ(nfs().write(f, 0, data, i % 2 ? UNSTABLE : FILE_SYNC).status,
              NFS3_OK);
    auto r = reader.read(f, 0, 100);
    ASSERT_EQ(r.status, NFS3_OK);
    EXPECT_EQ(r.data.substr(0, data.size()), data);
  }
}

TEST_F(MultiClient, ConcurrentGuardedCreatesOfOneNameHaveExactlyOneWinner) {
  FileHandle dir = make_test_dir(0777);
  constexpr int kClients = 5;
  constexpr int kNames = 20;
  std::vector<std::atomic<int>> winners(kNames);
  std::vector<std::atomic<int>> exists(kNames);
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      NfsClient client(endpoint(), {uint32_t(2000 + c), 2000, {}});
      ASSERT_TRUE(client.connected()) << client.error();
      for (int n = 0; n < kNames; ++n) {
        auto r = client.create(dir, "name" + std::to_string(n), GUARDED,
                               Sattr::with_mode(0644));
        if (r.status == NFS3_OK) {
          ++winners[n];
        } else if (r.status == NFS3ERR_EXIST) {
          ++exists[n];
        } else {
          ADD_FAILURE() << "CREATE name" << n << ": "
                        << nfsstat3_name(r.status);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int n = 0; n < kNames; ++n) {
    EXPECT_EQ(winners[n].load(), 1) << "name" << n;
    EXPECT_EQ(exists[n].load(), kClients - 1) << "name" << n;
  }
  size_t names = 0;
  for (const auto& e : nfs().list(dir)) {
    if (e.name != "." && e.name != "..") ++names;
  }
  EXPECT_EQ(names, size_t{kNames});
}

TEST_F(MultiClient, ConcurrentRenamesAndLookupsStayConsistent) {
  FileHandle dir = make_test_dir(0777);
  FileHandle f = nfs().make_file(dir, "a", 0644, "payload");
  uint64_t fileid = nfs().getattr(f).attr.fileid;
  std::atomic<bool> stop{false};
  std::thread renamer([&] {
    NfsClient client(endpoint());
    for (int i = 0; i < 200; ++i) {
      bool even = i % 2 == 0;
      auto r = client.rename(dir, even ? "a" : "b", dir, even ? "b" : "a");
      EXPECT_EQ(r.status, NFS3_OK) << "rename " << i;
    }
    stop = true;
  });
  NfsClient looker(endpoint());
  int found = 0;
  for (int i = 0; i < 100000 && !stop; ++i) {
    for (const char* name : {"a", "b"}) {
      auto l = looker.lookup(dir, name);
      if (l.status == NFS3_OK) {
        ++found;
        EXPECT_EQ(l.attr ? l.attr->fileid : fileid, fileid);
      } else {
        EXPECT_EQ(l.status, NFS3ERR_NOENT);
      }
    }
  }
  renamer.join();
  EXPECT_EQ(nfs().read_all(nfs().lookup(dir, "a").fh), "payload");
  EXPECT_GT(found, 0);
}

// --- Restarts ------------------------------------------------------------------

// Each test has a node of its own, which it kills.
class Restart : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("TIDEPOOL_TEST_SERVER") != nullptr) {
      GTEST_SKIP() << "restart tests need a tided this process controls";
    }
    NodeOptions opts;
    ExportSpec ifs{.path = "/ifs"};
    ifs.root_squash = false;
    opts.exports = {ifs};
    node_ = std::make_unique<TidedNode>(opts);
    std::string error;
    ASSERT_TRUE(node_->start(&error)) << error;
    root_ = mount_root(node_->endpoint(), "/ifs");
    ASSERT_FALSE(root_.empty());
  }

  void TearDown() override {
    if (node_ && HasFailure()) {
      std::cout << "--- tided log tail ---\n" << node_->log_tail(1500) << "\n";
    }
  }

  // SIGKILL, then start again on the same data directory and address.
  void kill_and_restart() {
    node_->kill();
    std::string error;
    ASSERT_TRUE(node_->start(&error)) << error;
  }

  std::unique_ptr<TidedNode> node_;
  FileHandle root_;
};

TEST_F(Restart, CommittedDataSurvivesSigkillAndTheVerifierChanges) {
  for (const uint64_t seed :
       test_seeds("Restart.CommittedDataSurvivesSigkillAndTheVerifierChanges")) {
    SCOPED_TRACE("TIDEPOOL_TEST_SEED=" + std::to_string(seed));
    std::mt19937_64 rng(seed);
    FileHandle f;
    std::string model;
    uint64_t verf_before = 0;
    {
      NfsClient c(node_->endpoint());
      FileHandle dir = c.make_dir(root_, "d-" + std::to_string(seed));
      f = c.make_file(dir, "committed");
      for (int i = 0; i < 30; ++i) {
        size_t len = (rng() % 200000) | 1;
        size_t off = (rng() % (2 << 20)) | 1;
        std::string data = random_bytes(len, rng());
        auto w = c.write(f, off, data, UNSTABLE);
        ASSERT_EQ(w.status, NFS3_OK);
        if (model.size() < off + len) model.resize(off + len, '\0');
        model.replace(off, len, data);
        verf_before = w.verf;
      }
      auto commit = c.commit(f);
      ASSERT_EQ(commit.status, NFS3_OK);
      EXPECT_EQ(commit.verf, verf_before);
    }
    kill_and_restart();
    NfsClient c(node_->endpoint());
    ASSERT_TRUE(c.connected()) << c.error();
    // The old handle still names the file, and every committed byte is there.
    auto a = c.getattr(f);
    ASSERT_EQ(a.status, NFS3_OK);
    EXPECT_EQ(a.attr.size, model.size());
    std::string back = c.read_all(f, 1 << 20);
    EXPECT_TRUE(back == model) << "committed data differs after restart";
    // A new incarnation hands out a new verifier.
    auto w = c.write(f, 0, "after", UNSTABLE);
    ASSERT_EQ(w.status, NFS3_OK);
    EXPECT_NE(w.verf, verf_before);
    auto commit = c.commit(f);
    ASSERT_EQ(commit.status, NFS3_OK);
    EXPECT_EQ(commit.verf, w.verf);
  }
}

// Small files share the pack's segments: each committed one comes back whole, and the removed
// ones stay gone, whatever else was appended around them.
TEST_F(Restart, CommittedSmallFilesSurviveSigkillAndRemovedOnesStayGone) {
  for (const uint64_t seed :
       test_seeds("Restart.CommittedSmallFilesSurviveSigkillAndRemovedOnesStayGone")) {
    SCOPED_TRACE("TIDEPOOL_TEST_SEED=" + std::to_string(seed));
    std::mt19937_64 rng(seed);
    constexpr int kFiles = 40;
    std::vector<std::string> contents(kFiles);
    FileHandle dir;
    {
      NfsClient c(node_->endpoint());
      dir = c.make_dir(root_, "small-" + std::to_string(seed));
      for (int i = 0; i < kFiles; ++i) {
        contents[i] = random_bytes(1 + rng() % 130'000, rng());
        FileHandle f = c.make_file(dir, "f" + std::to_string(i));
        ASSERT_FALSE(f.empty());
        ASSERT_EQ(c.write(f, 0, contents[i], UNSTABLE).status, NFS3_OK);
        ASSERT_EQ(c.commit(f).status, NFS3_OK);
      }
      for (int i = 0; i < kFiles; i += 4) {
        ASSERT_EQ(c.remove(dir, "f" + std::to_string(i)).status, NFS3_OK);
      }
    }
    kill_and_restart();
    NfsClient c(node_->endpoint());
    ASSERT_TRUE(c.connected()) << c.error();
    for (int i = 0; i < kFiles; ++i) {
      auto found = c.lookup(dir, "f" + std::to_string(i));
      if (i % 4 == 0) {
        EXPECT_EQ(found.status, NFS3ERR_NOENT) << i;
        continue;
      }
      ASSERT_EQ(found.status, NFS3_OK) << i;
      EXPECT_TRUE(c.read_all(found.fh) == contents[i]) << "file " << i << " differs after restart";
    }
  }
}

TEST_F(Restart, StableWritesAndMetadataSurviveSigkill) {
  FileHandle dir;
  {
    NfsClient c(node_->endpoint());
    dir = c.make_dir(root_, "d");
    c.make_file(dir, "stable", 0640, "file-sync data");
    c.make_file(dir, "renamed-from", 0644, "x");
    ASSERT_EQ(c.rename(dir, "renamed-from", dir, "renamed-to").status,
              NFS3_OK);
    c.make_file(dir, "removed");
    ASSERT_EQ(c.remove(dir, "removed").status, NFS3_OK);
    ASSERT_EQ(c.symlink(dir, "link", "stable").status, NFS3_OK);
    ASSERT_EQ(c.mkdir(dir, "sub").status, NFS3_OK);
  }
  kill_and_restart();
  NfsClient c(node_->endpoint());
  ASSERT_TRUE(c.connected()) << c.error();
  auto s = c.lookup(dir, "stable");
  ASSERT_EQ(s.status, NFS3_OK);
  EXPECT_EQ(c.read_all(s.fh), "file-sync data");
  EXPECT_EQ(c.getattr(s.fh).attr.mode & 07777, 0640u);
  EXPECT_EQ(c.lookup(dir, "renamed-from").status, NFS3ERR_NOENT);
  EXPECT_EQ(c.lookup(dir, "renamed-to").status, NFS3_OK);
  EXPECT_EQ(c.lookup(dir, "removed").status, NFS3ERR_NOENT);
  EXPECT_EQ(c.readlink(c.lookup(dir, "link").fh).target, "stable");
  EXPECT_EQ(c.lookup(dir, "sub").status, NFS3_OK);
}

// The soft limit on open files of process `pid`, from /proc; 0 if it cannot be read.
rlim_t soft_open_file_limit(pid_t pid) {
  std::ifstream limits("/proc/" + std::to_string(pid) + "/limits");
  for (std::string line; std::getline(limits, line);) {
    if (line.rfind("Max open files", 0) == 0) {
      return std::strtoull(line.c_str() + std::strlen("Max open files"), nullptr, 10);
    }
  }
  return 0;
}

TEST_F(Restart, ANodeStartedUnderALowOpenFileLimitRaisesItToTheHardOne) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  constexpr rlim_t kLow = 512;
  if (saved.rlim_max <= kLow) GTEST_SKIP() << "the hard limit leaves nothing to raise";
  node_->stop();
  rlimit lowered = saved;
  lowered.rlim_cur = kLow;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);
  std::string error;
  const bool started = node_->start(&error);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  ASSERT_TRUE(started) << error;
  EXPECT_EQ(soft_open_file_limit(node_->pid()), saved.rlim_max);
}

TEST_F(Restart, GracefulStopKeepsCommittedDataAndHandles) {
  FileHandle f;
  {
    NfsClient c(node_->endpoint());
    f = c.make_file(root_, "graceful", 0644);
    ASSERT_EQ(c.write(f, 12345, "tail", UNSTABLE).status, NFS3_OK);
    ASSERT_EQ(c.commit(f).status, NFS3_OK);
  }
  node_->stop();
  EXPECT_EQ(node_->exit_description(), "exit 0") << "SIGTERM should exit 0";
  std::string error;
  ASSERT_TRUE(node_->start(&error)) << error;
  NfsClient c(node_->endpoint());
  auto r = c.read(f, 12340, 100);
  ASSERT_EQ(r.status, NFS3_OK);
  EXPECT_EQ(r.data, std::string(5, '\0') + "tail");
}

}  // namespace
}  // namespace tidepool::test
