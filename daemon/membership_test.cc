// A node in no cluster and its setup secret: made at the default place at its first start and
// kept across restarts; a file the administrator names must exist and be hard to guess.
#include "daemon/membership.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <filesystem>
#include <fstream>

namespace tidepool::daemon {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;

class SetupSecretTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::remove_all(dir_);
    config_.data_dir = (dir_ / "node").string();
    asio::ip::tcp::acceptor probe(io_, {asio::ip::make_address_v4("127.0.0.1"), 0});
    config_.backend_address = "127.0.0.1:" + std::to_string(probe.local_endpoint().port());
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result<std::unique_ptr<Membership>> open() {
    return Membership::open(io_.get_executor(), config_, Membership::Hooks{});
  }

  std::string read(const fs::path& path) {
    std::ifstream file(path);
    std::string text;
    std::getline(file, text);
    return text;
  }

  asio::io_context io_;
  fs::path dir_ = fs::temp_directory_path() /
                  ("tidepool-setup-secret-" + std::to_string(::getpid()) + "-" +
                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  NodeConfig config_;
};

TEST_F(SetupSecretTest, ANodeMakesItsSecretAtItsFirstStartAndKeepsIt) {
  ASSERT_TRUE(open().ok());
  const fs::path file = dir_ / "node" / "setup-secret";
  const std::string secret = read(file);
  EXPECT_EQ(secret.size(), 64u);
  struct stat status {};
  ASSERT_EQ(::stat(file.c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 0777, 0600u);

  Result<std::unique_ptr<Membership>> again = open();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(read(file), secret);
  EXPECT_TRUE((*again)->setup_secret_valid(secret));
  EXPECT_FALSE((*again)->setup_secret_valid(secret.substr(0, 63)));
  EXPECT_FALSE((*again)->setup_secret_valid(""));
}

TEST_F(SetupSecretTest, ANamedFileMustExistAndHoldSixteenCharactersAtLeast) {
  fs::create_directories(dir_);
  config_.setup_secret_file = (dir_ / "secret").string();
  Result<std::unique_ptr<Membership>> missing = open();
  EXPECT_EQ(missing.code(), Errc::not_found);
  EXPECT_EQ(missing.status().message(),
            "cluster.setup_secret_file " + config_.setup_secret_file + " does not exist");

  std::ofstream(config_.setup_secret_file) << "short-secret\n";
  Result<std::unique_ptr<Membership>> short_one = open();
  EXPECT_EQ(short_one.code(), Errc::invalid_argument);
  EXPECT_EQ(short_one.status().message(),
            "the setup secret in " + config_.setup_secret_file +
                " has 12 characters: it needs at least 16");

  std::ofstream(config_.setup_secret_file) << "a-longer-secret-the-admin-wrote\n";
  Result<std::unique_ptr<Membership>> named = open();
  ASSERT_TRUE(named.ok()) << named.status().to_string();
  EXPECT_TRUE((*named)->setup_secret_valid("a-longer-secret-the-admin-wrote"));
  EXPECT_FALSE(fs::exists(dir_ / "node" / "setup-secret"));
}

// A node whose removal is noted in its data directory does not start; the note, written by the
// node itself but on a disk that may be damaged, cannot make the start fail any other way.
TEST_F(SetupSecretTest, ANodeTheClusterRemovedDoesNotStartWhateverItsNoteHolds) {
  ASSERT_TRUE(open().ok());
  const fs::path note = dir_ / "node" / "cluster" / "removed.json";
  const std::string advice = ": it serves nothing. To use it again, empty " + config_.data_dir +
                             " and add it to a cluster anew";
  for (const auto& [written, reason] : std::vector<std::pair<std::string, std::string>>{
           {R"({"cluster":"lab","by":1,"reason":"this node was removed from cluster 'lab'"})",
            "this node was removed from cluster 'lab'"},
           {R"({"reason":5})", "this node was removed from its cluster"},
           {R"(["reason"])", "this node was removed from its cluster"},
           {"not json", "this node was removed from its cluster"}}) {
    std::ofstream(note) << written;
    Result<std::unique_ptr<Membership>> refused = open();
    EXPECT_EQ(refused.code(), Errc::not_permitted) << written;
    EXPECT_EQ(refused.status().message(), reason + advice) << written;
  }
}

// A cluster whose creation a crash cut short is undone at the next start: the node is in no
// cluster again. An identity that does not say so plainly is left alone, and, damaged, cannot
// make the start throw.
TEST_F(SetupSecretTest, AClusterHalfMadeIsUndoneAtTheNextStart) {
  ASSERT_TRUE(open().ok());
  const fs::path cluster = dir_ / "node" / "cluster";
  const std::string node = std::to_string(config_.node_id);
  for (const char* file : {"raft.db", "config.db", "node.pem", "ca.pem"}) {
    std::ofstream(cluster / file) << "left by the creation";
  }
  std::ofstream(cluster / "identity.json")
      << R"({"cluster":"lab","id":"c0","node":)" + node + R"(,"creating":true})";
  Result<std::unique_ptr<Membership>> undone = open();
  ASSERT_TRUE(undone.ok()) << undone.status().to_string();
  EXPECT_FALSE((*undone)->identity().has_value());
  for (const char* file : {"raft.db", "config.db", "node.pem", "ca.pem", "identity.json"}) {
    EXPECT_FALSE(fs::exists(cluster / file)) << file;
  }

  std::ofstream(cluster / "identity.json")
      << R"({"cluster":5,"id":"c0","node":)" + node + R"(,"creating":"yes"})";
  Result<std::unique_ptr<Membership>> damaged = open();
  EXPECT_EQ(damaged.code(), Errc::corrupt) << damaged.status().to_string();
  EXPECT_TRUE(fs::exists(cluster / "identity.json")) << "only a plain \"creating\": true undoes";
}

// The CA's key is sealed under the admin token; a rotation seals it under the new one, and only
// the token in force can rotate.
TEST(RotateToken, TheCasKeyIsSealedAnewUnderTheNewToken) {
  const std::string body =
      nlohmann::json{{"name", "lab"},
                     {"id", "cluster-id"},
                     {"token_sha256", "hash of the old token"},
                     {"ca_key_sealed", *cluster::seal("CA KEY", "old", "cluster-id")}}
          .dump();
  EXPECT_EQ(rotate_token(body, "not the token").code(), Errc::access_denied);
  const Result<RotatedToken> rotated = rotate_token(body, "old");
  ASSERT_TRUE(rotated.ok()) << rotated.status().to_string();
  const nlohmann::json now = nlohmann::json::parse(rotated->identity_body);
  EXPECT_EQ(now["name"], "lab");
  EXPECT_NE(now["token_sha256"], "hash of the old token");
  const std::string sealed = now["ca_key_sealed"];
  EXPECT_EQ(cluster::unseal(sealed, rotated->token, "cluster-id").value(), "CA KEY");
  EXPECT_EQ(cluster::unseal(sealed, "old", "cluster-id").code(), Errc::access_denied);
  EXPECT_EQ(rotate_token("{}", "old").code(), Errc::corrupt);
}

}  // namespace
}  // namespace tidepool::daemon
