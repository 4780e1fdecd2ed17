#include "cli/credentials.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "cli/test_util.h"

namespace tidepool::cli {
namespace {

namespace fs = std::filesystem;

Credentials sample_credentials() {
  return Credentials{.cluster = "tidepool",
                     .id = "c0ffee",
                     .token = "secret",
                     .ca_certificate = "-----BEGIN CERTIFICATE-----\n...\n",
                     .nodes = {"127.0.0.1:8080", "127.0.0.2:8080"}};
}

unsigned mode_of(const fs::path& file) {
  struct stat status {};
  EXPECT_EQ(::stat(file.c_str(), &status), 0);
  return status.st_mode & 0777;
}

TEST(AdminAddress, PortDefaultsTo8080) {
  Result<AdminAddress> address = parse_admin_address("127.0.0.1");
  ASSERT_TRUE(address.ok());
  EXPECT_EQ(address->to_string(), "127.0.0.1:8080");
  address = parse_admin_address("10.1.2.3:9443");
  ASSERT_TRUE(address.ok());
  EXPECT_EQ(*address, (AdminAddress{"10.1.2.3", 9443}));
}

TEST(AdminAddress, OnlyIpv4LiteralsAndRealPorts) {
  for (const char* text : {"localhost", "localhost:8080", "127.0.0.1:", "127.0.0.1:0",
                           "127.0.0.1:65536", ":8080", "::1", "127.0.0.1:80x", ""}) {
    Result<AdminAddress> address = parse_admin_address(text);
    ASSERT_FALSE(address.ok()) << text;
    EXPECT_EQ(address.status().message(), "'" + std::string(text) +
                                              "' is not an admin address: expected HOST[:PORT], "
                                              "HOST an IPv4 address");
  }
}

TEST(AdminAddress, ListsAreCommaSeparated) {
  Result<std::vector<AdminAddress>> list = parse_admin_address_list("127.0.0.1,127.0.0.2:9000");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (std::vector<AdminAddress>{{"127.0.0.1", 8080}, {"127.0.0.2", 9000}}));
  EXPECT_FALSE(parse_admin_address_list("").ok());
  EXPECT_FALSE(parse_admin_address_list("127.0.0.1,nowhere").ok());
}

TEST(WorkDirectory, TheNearestTidepoolInTheCurrentDirectoryOrAParent) {
  TemporaryDirectory root;
  fs::create_directories(root.path() / ".tidepool");
  fs::create_directories(root.path() / "a" / ".tidepool");
  fs::create_directories(root.path() / "a" / "b" / "c");
  EXPECT_EQ(find_work_directory({}, {}, root.path() / "a" / "b" / "c"),
            root.path() / "a" / ".tidepool");
  EXPECT_EQ(find_work_directory({}, {}, root.path() / "a"), root.path() / "a" / ".tidepool");
  EXPECT_EQ(find_work_directory({}, {}, root.path()), root.path() / ".tidepool");
}

TEST(WorkDirectory, AFileNamedTidepoolIsNotOne) {
  TemporaryDirectory root;
  fs::create_directories(root.path() / ".tidepool");
  write_file(root.path() / "a" / ".tidepool", "not a directory");
  EXPECT_EQ(find_work_directory({}, {}, root.path() / "a"), root.path() / ".tidepool");
}

TEST(WorkDirectory, TheFlagThenTheVariableThenDiscovery) {
  TemporaryDirectory root;
  fs::create_directories(root.path() / ".tidepool");
  EXPECT_EQ(find_work_directory("/flag", "/variable", root.path()), fs::path("/flag"));
  EXPECT_EQ(find_work_directory({}, "/variable", root.path()), fs::path("/variable"));
  EXPECT_EQ(find_work_directory("", "", root.path()), root.path() / ".tidepool");
  // Relative ones are relative to the current directory.
  EXPECT_EQ(find_work_directory("creds", {}, root.path()), root.path() / "creds");
}

TEST(WorkDirectory, OnlyTheFlagAndTheVariableNameOne) {
  EXPECT_EQ(named_work_directory({}, {}, "/work"), std::nullopt);
  EXPECT_EQ(named_work_directory("", "", "/work"), std::nullopt);
  EXPECT_EQ(named_work_directory("a/../b", {}, "/work"), fs::path("/work/b"));
  EXPECT_EQ(named_work_directory({}, "/elsewhere", "/work"), fs::path("/elsewhere"));
}

TEST(CredentialsFile, WrittenOwnerOnlyAndReadBack) {
  TemporaryDirectory root;
  const fs::path file = root.path() / "new" / "tide.json";
  ASSERT_TRUE(write_credentials(file, sample_credentials()).ok());
  EXPECT_EQ(mode_of(file), 0600u);
  EXPECT_FALSE(fs::exists(file.string() + ".tmp"));
  Result<Credentials> read = read_credentials(file);
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  EXPECT_EQ(read->cluster, "tidepool");
  EXPECT_EQ(read->id, Json("c0ffee"));
  EXPECT_EQ(read->token, "secret");
  EXPECT_EQ(read->ca_certificate, sample_credentials().ca_certificate);
  EXPECT_EQ(read->nodes, sample_credentials().nodes);
  EXPECT_EQ(Json::parse(read_file(file)).dump(),
            R"({"cluster":"tidepool","id":"c0ffee","token":"secret",)"
            R"("ca_certificate":"-----BEGIN CERTIFICATE-----\n...\n",)"
            R"("nodes":["127.0.0.1:8080","127.0.0.2:8080"]})");
}

TEST(CredentialsFile, ReplacingAReadableFileLeavesItOwnerOnly) {
  TemporaryDirectory root;
  const fs::path file = root.path() / "tide.json";
  write_file(file, "{}");
  ::chmod(file.c_str(), 0644);
  write_file(file.string() + ".tmp", "left over");
  ::chmod((file.string() + ".tmp").c_str(), 0644);
  ASSERT_TRUE(write_credentials(file, sample_credentials()).ok());
  EXPECT_EQ(mode_of(file), 0600u);
  EXPECT_TRUE(read_credentials(file).ok());
}

TEST(CredentialsFile, MissingIsNotFoundAndGarbageNamesTheFile) {
  TemporaryDirectory root;
  const fs::path file = root.path() / "tide.json";
  EXPECT_EQ(read_credentials(file).code(), Errc::not_found);
  write_file(file, "{\"cluster\": \"x\"");
  EXPECT_EQ(read_credentials(file).status().message(), file.string() + ": not a JSON object");
  write_file(file, R"({"cluster": "x", "token": "t", "ca_certificate": "c"})");
  EXPECT_EQ(read_credentials(file).status().message(),
            file.string() + ": 'nodes' is missing or not a list");
  write_file(file, R"({"cluster": "x", "ca_certificate": "c", "nodes": []})");
  EXPECT_EQ(read_credentials(file).status().message(),
            file.string() + ": 'token' is missing or not a string");
}

}  // namespace
}  // namespace tidepool::cli
