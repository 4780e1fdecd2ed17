#include "cli/tide.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/credentials.h"
#include "cli/internal/tide_fixture.h"
#include "cli/test_util.h"

namespace tidepool::cli {
namespace {

namespace fs = std::filesystem;

using internal::SentRequest;
using internal::TideTest;

constexpr std::string_view kSetupSecret = "0123456789abcdef-node-secret";

// A node's setup secret copied to `dir`/setup-secret, as a node writes it.
void write_setup_secret(const fs::path& dir) {
  std::ofstream(dir / "setup-secret") << kSetupSecret << "\n";
}

TEST_F(TideTest, AnUnknownCommandExits2NamingTheCommandsExpected) {
  EXPECT_EQ(tide({"frobnicate"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "tide: unknown command 'tide frobnicate'; expected one of: cluster, status, get, set, "
            "storagepool, network, sysctl, nfs, locks, statistics, flush, filepool, job "
            "(see 'tide --help')\n");
  EXPECT_EQ(tide({"storagepool", "pools", "list"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "tide: unknown command 'tide storagepool pools'; expected one of: nodepools, tiers "
            "(see 'tide storagepool --help')\n");
  EXPECT_TRUE(cluster_.requests().empty());
}

TEST_F(TideTest, SetTakesOneOfTheThreeAccessPatternsAndAPathUnderIfs) {
  EXPECT_EQ(tide({"set", "-a", "sequential", "/ifs/f"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "tide: --access-pattern: sequential not in {random,concurrency,streaming} (see 'tide "
            "set --help')\n");
  EXPECT_EQ(tide({"set", "/ifs/f"}), kExitUsage);
  EXPECT_EQ(err_.str(), "tide: --access-pattern is required (see 'tide set --help')\n");
  EXPECT_EQ(tide({"set", "-a", "streaming", "data/f"}), kExitUsage);
}

TEST_F(TideTest, AMissingCommandExits2NamingTheCommandsExpected) {
  EXPECT_EQ(tide({}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "tide: missing command after 'tide'; expected one of: cluster, status, get, set, "
            "storagepool, network, sysctl, nfs, locks, statistics, flush, filepool, job "
            "(see 'tide --help')\n");
  EXPECT_EQ(tide({"nfs"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "tide: missing command after 'tide nfs'; expected one of: exports, nlm "
            "(see 'tide nfs --help')\n");
}

TEST_F(TideTest, MissingArgumentsAndBadFlagsExit2WithOneLine) {
  EXPECT_EQ(tide({"storagepool", "tiers", "create"}), kExitUsage);
  EXPECT_EQ(err_.str(), "tide: NAME is required (see 'tide storagepool tiers create --help')\n");
  EXPECT_EQ(tide({"status", "--bogus"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "tide: unexpected argument '--bogus' for 'tide status' (see 'tide status --help')\n");
  EXPECT_EQ(tide({"status", "--format", "yaml"}), kExitUsage);
  EXPECT_EQ(err_.str(), "tide: --format: yaml not in {table,json} (see 'tide status --help')\n");
  EXPECT_EQ(tide({"storagepool", "tiers", "modify", "hot"}), kExitUsage);
  EXPECT_NE(err_.str().find("Exactly 1 option from [--set-children,--add-children,"
                            "--remove-children]"),
            std::string::npos)
      << err_.str();
  EXPECT_EQ(tide({"--cluster", "somewhere", "status"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "tide: --cluster: 'somewhere' is not an admin address: expected HOST[:PORT], HOST an "
            "IPv4 address (see 'tide --help')\n");
  EXPECT_TRUE(cluster_.requests().empty());
}

TEST_F(TideTest, BadOptionValuesExit2AndSendNothing) {
  write_credentials_in(root_.path());
  EXPECT_EQ(tide({"nfs", "exports", "create", "/ifs/a", "--map-all", "abc"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "tide: --map-all: expected UID or UID:GID (numbers from 0 to 4294967295), got 'abc' "
            "(see 'tide nfs exports create --help')\n");
  EXPECT_EQ(tide({"nfs", "exports", "modify", "3", "--root-squash", "maybe"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "tide: --root-squash: expected true or false, got 'maybe' "
            "(see 'tide nfs exports modify --help')\n");
  EXPECT_EQ(tide({"nfs", "exports", "delete", "first"}), kExitUsage);
  EXPECT_EQ(tide({"storagepool", "tiers", "create", "hot tier"}), kExitUsage);
  EXPECT_EQ(tide({"sysctl"}), kExitUsage);
  EXPECT_EQ(err_.str(), "tide: expected NAME, NAME=VALUE or -a (see 'tide sysctl --help')\n");
  EXPECT_TRUE(cluster_.requests().empty());
}

TEST_F(TideTest, HelpGoesToStandardOutputAndExits0) {
  EXPECT_EQ(tide({"--help"}), kExitSuccess);
  EXPECT_NE(out_.str().find("storagepool"), std::string::npos);
  EXPECT_EQ(tide({"nfs", "exports", "create", "--help"}), kExitSuccess);
  EXPECT_NE(out_.str().find("--map-all UID[:GID]"), std::string::npos) << out_.str();
  EXPECT_EQ(tide({"sysctl", "--help"}), kExitSuccess);
  EXPECT_NE(out_.str().find("milliseconds for efs.bam.atime_grace_period"), std::string::npos)
      << out_.str();
  EXPECT_EQ(err_.str(), "");
}

TEST_F(TideTest, WithoutCredentialsItSaysHowToGetThem) {
  EXPECT_EQ(tide({"--workdir", (root_.path() / "empty").string(), "status"}), kExitFailure);
  EXPECT_EQ(err_.str(),
            "tide: no cluster credentials: run 'tide cluster create' or pass "
            "--workdir/--cluster and --token\n");
}

TEST_F(TideTest, ATokenGoesUnverifiedOnlyWhenInsecureIsGiven) {
  const std::string empty = (root_.path() / "empty").string();
  EXPECT_EQ(tide({"--workdir", empty, "--cluster", "127.0.0.7", "--token", "t", "status"}),
            kExitFailure);
  EXPECT_NE(err_.str().find("no CA certificate to check the nodes' identity with: give "
                            "--workdir (the directory of the cluster's tide.json), or "
                            "--insecure"),
            std::string::npos)
      << err_.str();
  EXPECT_TRUE(cluster_.requests().empty());
  cluster_.reply(200, R"({"tiers": []})");
  ASSERT_EQ(tide({"--workdir", empty, "--cluster", "127.0.0.7", "--token", "t", "--insecure",
                  "storagepool", "tiers", "list"}),
            kExitSuccess)
      << err_.str();
  ASSERT_EQ(cluster_.requests().size(), 1u);
  EXPECT_FALSE(cluster_.requests()[0].settings.ca_certificate);
}

TEST_F(TideTest, CredentialsComeFromTheNearestTidepool) {
  write_credentials_in(root_.path());
  environment_.current_directory = root_.path() / "projects" / "x";
  cluster_.reply(200, R"({"tiers": []})");
  EXPECT_EQ(tide({"storagepool", "tiers", "list"}), kExitSuccess) << err_.str();
  const SentRequest& request = only_request();
  EXPECT_EQ(request.method, Method::get);
  EXPECT_EQ(request.target, "/v1/storagepool/tiers");
  EXPECT_EQ(request.settings.token, "secret");
  EXPECT_EQ(request.settings.ca_certificate, "CA PEM");
  EXPECT_EQ(request.settings.addresses,
            (std::vector<AdminAddress>{{"127.0.0.1", 8080}, {"127.0.0.2", 8080}}));
  EXPECT_EQ(out_.str(), "Name  Children\n--------------\n--------------\nTotal: 0\n");
}

TEST_F(TideTest, FlagsAndVariablesReplaceAddressesAndToken) {
  write_credentials_in(root_.path());
  variables_["TIDE_CLUSTER"] = "127.0.0.9:9000";
  variables_["TIDE_TOKEN"] = "from-variable";
  cluster_.reply(200, R"({"tiers": []})");
  cluster_.reply(200, R"({"tiers": []})");
  ASSERT_EQ(tide({"storagepool", "tiers", "list"}), kExitSuccess) << err_.str();
  ASSERT_EQ(tide({"storagepool", "tiers", "list", "--cluster", "127.0.0.7", "--token", "flag"}),
            kExitSuccess);
  ASSERT_EQ(cluster_.requests().size(), 2u);
  EXPECT_EQ(cluster_.requests()[0].settings.addresses,
            (std::vector<AdminAddress>{{"127.0.0.9", 9000}}));
  EXPECT_EQ(cluster_.requests()[0].settings.token, "from-variable");
  EXPECT_EQ(cluster_.requests()[1].settings.addresses,
            (std::vector<AdminAddress>{{"127.0.0.7", 8080}}));
  EXPECT_EQ(cluster_.requests()[1].settings.token, "flag");
  // The CA still comes from the credentials file.
  EXPECT_EQ(cluster_.requests()[1].settings.ca_certificate, "CA PEM");
}

TEST_F(TideTest, AnErrorReplyPrintsTheServersErrorAndExits1) {
  write_credentials_in(root_.path());
  cluster_.reply(409, R"({"error": "tier 'hot' exists already"})", "Conflict");
  EXPECT_EQ(tide({"storagepool", "tiers", "create", "hot"}), kExitFailure);
  EXPECT_EQ(err_.str(), "tide: tier 'hot' exists already\n");
  EXPECT_EQ(out_.str(), "");
  cluster_.reply(502, "<html>bad gateway</html>", "Bad Gateway");
  EXPECT_EQ(tide({"status"}), kExitFailure);
  EXPECT_EQ(err_.str(), "tide: Bad Gateway\n");
}

TEST_F(TideTest, FlushNamesItsLevelsAndNodeAndSaysWhichNodesFlushed) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"flushed": [{"node": 2, "l1": true, "l2": false}], "unreachable": []})");
  EXPECT_EQ(tide({"flush", "--l1", "--node", "2"}), kExitSuccess) << err_.str();
  EXPECT_EQ(only_request().method, Method::post);
  EXPECT_EQ(only_request().target, "/v1/cache/flush");
  EXPECT_EQ(only_request().body, R"({"l1":true,"l2":false,"node":2})");
  EXPECT_EQ(out_.str(), "Flushed L1 on node 2.\n");
}

TEST_F(TideTest, FlushOfEveryNodeFailsWhenOneDidNotAnswer) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"flushed": [{"node": 1}, {"node": 3}], "unreachable": [2]})");
  EXPECT_EQ(tide({"flush", "--all"}), kExitFailure);
  EXPECT_EQ(only_request().body, R"({"l1":false,"l2":false})");
  EXPECT_EQ(out_.str(), "Flushed L1 and L2 on nodes 1, 3.\n");
  EXPECT_NE(err_.str().find("not flushed: 2"), std::string::npos) << err_.str();
}

TEST_F(TideTest, FlushRefusesANodeAndAllTogetherAndANodeThatIsNoNumber) {
  write_credentials_in(root_.path());
  EXPECT_EQ(tide({"flush", "--node", "2", "--all"}), kExitUsage);
  EXPECT_EQ(err_.str(), "tide: give --node or --all, not both (see 'tide flush --help')\n");
  EXPECT_EQ(tide({"flush", "--node", "two"}), kExitUsage);
  EXPECT_TRUE(cluster_.requests().empty());
}

TEST_F(TideTest, StatusAsJsonIsTheServersJsonPrettyInItsOrder) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"name":"tidepool","id":"c0ffee","jobs":[]})");
  EXPECT_EQ(tide({"status", "--format", "json"}), kExitSuccess);
  EXPECT_EQ(only_request().target, "/v1/cluster");
  EXPECT_EQ(out_.str(), "{\n  \"name\": \"tidepool\",\n  \"id\": \"c0ffee\",\n  \"jobs\": []\n}\n");
}

TEST_F(TideTest, GetShowsTheFilesPolicyAndWithDetailsItsLayout) {
  write_credentials_in(root_.path());
  const std::string file = R"({"path": "/ifs/data set/a.bin", "inode": 7, "type": "file",
      "size": 300000, "mode": "0644", "uid": 0, "gid": 0, "nlink": 1,
      "shard": {"id": 0, "home": 1, "state": "serving", "mirror": 2, "mirror_state": "in step"},
      "layout": {"pool": "default", "stripe_unit": 131072, "protection": "2x",
                 "access_pattern": "concurrency"},
      "policy": {"name": "default", "storage_target": "hot-tier"},
      "stripe_units": [{"first": 0, "count": 3, "nodes": [1, 2]}]})";
  cluster_.reply(200, file);
  EXPECT_EQ(tide({"get", "/ifs/data set/a.bin"}), kExitSuccess) << err_.str();
  EXPECT_EQ(only_request().target, "/v1/namespace/ifs/data%20set/a.bin");
  EXPECT_EQ(out_.str(),
            "Policy   Level  Performance  File\n"
            "----------------------------------\n"
            "default  2x     concurrency  a.bin\n");

  cluster_.reply(200, file);
  EXPECT_EQ(tide({"get", "-D", "/ifs/data set/a.bin"}), kExitSuccess) << err_.str();
  const std::string details = out_.str();
  for (const char* expected :
       {"Inode:            7 (shard 0)", "Shard Home:       node 1 (serving)",
        "Shard Mirror:     node 2 (in step)", "Protection:       2x",
        "Access Pattern:   concurrency", "0-2    0-393215  1,2",
        // As `isi get -D` prints them: where the policy wants the data and where it is, and
        // each element starting with a node holding the data.
        "Disk Pools:       policy hot-tier (default) -> data target default",
        "IFS inode:        [ 1,0,0:300000, 2,1,0:300000 ]"}) {
    EXPECT_NE(details.find(expected), std::string::npos) << expected << " in\n" << details;
  }

  // Mid-move: where each unit is being copied to, and how far the copy is.
  std::string moving = file;
  moving.replace(moving.rfind('}'), 1, R"(, "moving": {"pool": "h500", "protection": "2x",
      "copied_bytes": 131072, "stripe_units": [{"first": 0, "count": 2, "nodes": [3, 4]},
      {"first": 2, "count": 1, "nodes": [4, 3]}]}})");
  cluster_.reply(200, moving);
  out_.str("");
  EXPECT_EQ(tide({"get", "-D", "/ifs/data set/a.bin"}), kExitSuccess) << err_.str();
  const std::string mid_move = out_.str();
  for (const char* expected : {"0-2    0-393215  1,2", "Moving To: h500 (2x), 131072 of 300000 bytes copied",
                               "0-1    0-262143       3,4", "2-2    262144-393215  4,3"}) {
    EXPECT_NE(mid_move.find(expected), std::string::npos) << expected << " in\n" << mid_move;
  }

  EXPECT_EQ(tide({"get", "relative/path"}), kExitUsage);
  EXPECT_EQ(tide({"get", "/etc/passwd"}), kExitUsage);
  EXPECT_EQ(cluster_.requests().size(), 3u);
}

TEST_F(TideTest, SysctlReadsWritesAndLists) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"name": "efs.bam.atime_enabled", "value": "true", "default": "true",
                          "description": "Update atime on read"})");
  EXPECT_EQ(tide({"sysctl", "efs.bam.atime_enabled"}), kExitSuccess);
  EXPECT_EQ(cluster_.requests().back().method, Method::get);
  EXPECT_EQ(cluster_.requests().back().target, "/v1/sysctl/efs.bam.atime_enabled");
  EXPECT_EQ(out_.str(), "efs.bam.atime_enabled = true\n");

  cluster_.reply(200, R"({"name": "efs.bam.atime_grace_period", "value": "7D", "unit": "ms",
                          "value_in_unit": "604800000"})");
  EXPECT_EQ(tide({"sysctl", "efs.bam.atime_grace_period=7D"}), kExitSuccess);
  EXPECT_EQ(cluster_.requests().back().method, Method::put);
  EXPECT_EQ(cluster_.requests().back().target, "/v1/sysctl/efs.bam.atime_grace_period");
  EXPECT_EQ(cluster_.requests().back().body, R"({"value":"7D"})");
  EXPECT_EQ(out_.str(), "efs.bam.atime_grace_period = 7D (604800000 ms)\n");

  cluster_.reply(200, R"({"sysctls": []})");
  EXPECT_EQ(tide({"sysctl", "-a", "--format", "json"}), kExitSuccess);
  EXPECT_EQ(cluster_.requests().back().target, "/v1/sysctl");
  EXPECT_EQ(out_.str(), "{\n  \"sysctls\": []\n}\n");
}

TEST_F(TideTest, NetworkInterfacesListShowsEachNodesAddressesAsIsiDoes) {
  write_credentials_in(root_.path());
  const std::string status = R"({"nodes": [
      {"id": 1, "state": "returning", "frontend_address": "127.0.0.1",
       "backend_address": "127.0.0.1:7100", "admin_address": "127.0.0.1:8080"},
      {"id": 2, "state": "down", "frontend_address": "127.0.0.2",
       "backend_address": "127.0.0.2:7100", "admin_address": "127.0.0.2:8080"}]})";
  cluster_.reply(200, status);
  EXPECT_EQ(tide({"network", "interfaces", "list"}), kExitSuccess) << err_.str();
  EXPECT_EQ(cluster_.requests().back().target, "/v1/cluster");
  const std::string listed = out_.str();
  for (const char* expected :
       {"LNN  Name      Status  Owners", "IP Addresses",
        "  1  frontend  Up      nfs, mount, nlm, nsm, portmap", "127.0.0.1\n",
        "  2  backend   Down    cluster: group, locks, shards, stripe units", "127.0.0.2\n",
        "  2  admin     Down    admin api, metrics", "Total: 6"}) {
    EXPECT_NE(listed.find(expected), std::string::npos) << expected << " in\n" << listed;
  }
  cluster_.reply(200, status);
  EXPECT_EQ(tide({"network", "interfaces", "list", "--format", "json"}), kExitSuccess);
  const Json shown = Json::parse(out_.str());
  EXPECT_EQ(shown["interfaces"].size(), 6u);
  EXPECT_EQ(shown["interfaces"][1]["ip_addresses"], Json::array({"127.0.0.1"}));
}

// The node proves it knows the setup secret for the certificate it presents before it is sent
// the secret, and only over a connection presenting that certificate.
TEST_F(TideTest, ClusterCreateTrustsTheNodeThatProvesItsSecretAndWritesTheCredentials) {
  cluster_.reply_as_node_outside_a_cluster(kSetupSecret);
  cluster_.reply(201, R"({"cluster": {"name": "tidepool", "id": "c0ffee"}, "token": "secret",
                          "ca_certificate": "CA PEM"})");
  write_setup_secret(root_.path());
  EXPECT_EQ(tide({"cluster", "create", "tidepool", "--node", "127.0.0.1", "--setup-secret-file",
                  "setup-secret"}),
            kExitSuccess)
      << err_.str();
  ASSERT_EQ(cluster_.requests().size(), 2u);
  const SentRequest& asked = cluster_.requests()[0];
  EXPECT_EQ(asked.method, Method::get);
  EXPECT_EQ(asked.target, "/v1/node");
  EXPECT_EQ(asked.settings.token, "") << "the secret goes only to the node that proved it knows it";
  const SentRequest& request = cluster_.requests()[1];
  EXPECT_EQ(request.method, Method::post);
  EXPECT_EQ(request.target, "/v1/cluster/create");
  EXPECT_EQ(request.body, R"({"name":"tidepool"})");
  EXPECT_EQ(request.settings.addresses, (std::vector<AdminAddress>{{"127.0.0.1", 8080}}));
  EXPECT_EQ(request.settings.token, kSetupSecret);
  EXPECT_EQ(request.settings.pinned_fingerprint, internal::FakeCluster::kNodeFingerprint);
  EXPECT_FALSE(request.settings.ca_certificate.has_value());

  const fs::path file = root_.path() / ".tidepool" / "tide.json";
  EXPECT_EQ(out_.str(),
            "Created cluster tidepool (id c0ffee); credentials in " + file.string() + ".\n");
  Result<Credentials> written = read_credentials(file);
  ASSERT_TRUE(written.ok()) << written.status().to_string();
  EXPECT_EQ(written->cluster, "tidepool");
  EXPECT_EQ(written->id, Json("c0ffee"));
  EXPECT_EQ(written->token, "secret");
  EXPECT_EQ(written->ca_certificate, "CA PEM");
  EXPECT_EQ(written->nodes, std::vector<std::string>{"127.0.0.1:8080"});
  struct stat status {};
  ASSERT_EQ(::stat(file.c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 0777, 0600u);
}

TEST_F(TideTest, ClusterCreateSendsNothingToANodeThatDoesNotProveItKnowsTheSecret) {
  write_setup_secret(root_.path());
  cluster_.reply_as_node_outside_a_cluster("another node's secret");
  EXPECT_EQ(tide({"cluster", "create", "tidepool", "--node", "127.0.0.1", "--setup-secret-file",
                  "setup-secret"}),
            kExitFailure);
  EXPECT_EQ(err_.str(),
            "tide: 127.0.0.1:8080 did not prove it knows the setup secret given: the secret is "
            "not that node's, or another machine answered at its address\n");
  cluster_.reply(200, R"({"id": 1, "cluster": {"name": "lab", "id": "c0ffee"}})");
  EXPECT_EQ(tide({"cluster", "create", "tidepool", "--node", "127.0.0.1", "--setup-secret-file",
                  "setup-secret"}),
            kExitFailure);
  EXPECT_EQ(err_.str(), "tide: 127.0.0.1:8080 is already in cluster 'lab'\n");
  ASSERT_EQ(cluster_.requests().size(), 2u) << "nothing but the two questions";
  EXPECT_EQ(cluster_.requests()[1].target, "/v1/node");
  EXPECT_FALSE(fs::exists(root_.path() / ".tidepool" / "tide.json"));
}

TEST_F(TideTest, FormingAClusterNeedsTheNodesSetupSecretFromAFile) {
  EXPECT_EQ(tide({"cluster", "create", "tidepool", "--node", "127.0.0.1"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "tide: --setup-secret-file is required (see 'tide cluster create --help')\n");
  EXPECT_EQ(tide({"cluster", "add-node", "127.0.0.2"}), kExitUsage);
  write_credentials_in(root_.path());
  EXPECT_EQ(tide({"cluster", "add-node", "127.0.0.2", "--setup-secret-file", "nowhere"}),
            kExitFailure);
  EXPECT_EQ(err_.str(), "tide: cannot read the setup secret file " +
                            (root_.path() / "nowhere").string() + "\n");
  std::ofstream(root_.path() / "blank") << "\n";
  EXPECT_EQ(tide({"cluster", "create", "t", "--node", "127.0.0.1", "--setup-secret-file",
                  (root_.path() / "blank").string()}),
            kExitFailure);
  EXPECT_EQ(err_.str(), "tide: the setup secret file " + (root_.path() / "blank").string() +
                            " is empty\n");
  EXPECT_TRUE(cluster_.requests().empty());
}

TEST_F(TideTest, ClusterCreateWritesWhereTheWorkdirSays) {
  variables_["TIDE_WORKDIR"] = "from-variable";
  cluster_.reply_as_node_outside_a_cluster(kSetupSecret);
  cluster_.reply(201,
                 R"({"cluster": {"name": "a", "id": 1}, "token": "t", "ca_certificate": "c"})");
  cluster_.reply_as_node_outside_a_cluster(kSetupSecret);
  cluster_.reply(201,
                 R"({"cluster": {"name": "b", "id": 2}, "token": "t", "ca_certificate": "c"})");
  write_setup_secret(root_.path());
  ASSERT_EQ(tide({"cluster", "create", "a", "--node", "127.0.0.1", "--setup-secret-file",
                  "setup-secret"}),
            kExitSuccess);
  EXPECT_TRUE(fs::exists(root_.path() / "from-variable" / "tide.json"));
  ASSERT_EQ(tide({"cluster", "create", "b", "--node", "127.0.0.1", "--workdir", "flag",
                  "--setup-secret-file", "setup-secret"}),
            kExitSuccess);
  EXPECT_EQ(read_credentials(root_.path() / "flag" / "tide.json")->cluster, "b");
}

TEST_F(TideTest, ClusterCreateNeverReplacesAnotherClustersCredentials) {
  const fs::path file = write_credentials_in(root_.path(), "production");
  write_setup_secret(root_.path());
  EXPECT_EQ(tide({"cluster", "create", "scratch", "--node", "127.0.0.1", "--setup-secret-file",
                  "setup-secret"}),
            kExitFailure);
  EXPECT_EQ(err_.str(), "tide: " + file.string() +
                            " holds the credentials of cluster 'production': give another "
                            "--workdir\n");
  EXPECT_TRUE(cluster_.requests().empty());
  EXPECT_EQ(read_credentials(file)->cluster, "production");

  // The same cluster made again (its nodes were wiped) replaces them.
  cluster_.reply_as_node_outside_a_cluster(kSetupSecret);
  cluster_.reply(201, R"({"cluster": {"name": "production", "id": "new"}, "token": "t2",
                          "ca_certificate": "c2"})");
  EXPECT_EQ(tide({"cluster", "create", "production", "--node", "127.0.0.1", "--setup-secret-file",
                  "setup-secret"}),
            kExitSuccess);
  EXPECT_EQ(read_credentials(file)->token, "t2");
}

TEST_F(TideTest, ClusterAddNodeRemembersItsAddress) {
  const fs::path file = write_credentials_in(root_.path());
  write_setup_secret(root_.path());
  cluster_.reply(201, R"({"id": 3, "name": "node3", "admin_address": "127.0.0.3:8080"})");
  EXPECT_EQ(tide({"cluster", "add-node", "127.0.0.3", "--setup-secret-file", "setup-secret"}),
            kExitSuccess)
      << err_.str();
  EXPECT_EQ(only_request().target, "/v1/cluster/nodes");
  EXPECT_EQ(only_request().body,
            R"({"address":"127.0.0.3:8080","setup_secret":")" + std::string(kSetupSecret) + "\"}");
  EXPECT_EQ(out_.str(), "Added node 3 (127.0.0.3:8080).\n");
  EXPECT_EQ(read_credentials(file)->nodes,
            (std::vector<std::string>{"127.0.0.1:8080", "127.0.0.2", "127.0.0.3:8080"}));

  // A node it knows already is not listed twice ("127.0.0.2" is "127.0.0.2:8080").
  cluster_.reply(201, R"({"id": 2})");
  EXPECT_EQ(
      tide({"cluster", "add-node", "127.0.0.2:8080", "--setup-secret-file", "setup-secret"}),
      kExitSuccess);
  EXPECT_EQ(read_credentials(file)->nodes.size(), 3u);
}

// The cluster's status with node 2 in `state` (pool f800) and, when `new_pool` is not empty,
// node 5 at 127.0.0.5 in that pool.
std::string status_for_replace(const std::string& state, const std::string& new_pool) {
  Json nodes = Json::array();
  nodes.push_back({{"id", 1}, {"admin_address", "127.0.0.1:8080"}, {"pool", "f800"}});
  nodes.push_back(
      {{"id", 2}, {"admin_address", "127.0.0.2:8080"}, {"pool", "f800"}, {"state", state}});
  if (!new_pool.empty()) {
    nodes.push_back({{"id", 5}, {"admin_address", "127.0.0.5:8080"}, {"pool", new_pool}});
  }
  return Json{{"nodes", nodes}}.dump();
}

TEST_F(TideTest, ClusterReplaceNodeAddsTheNewOneThenSmartFailsTheOldOrRemovesItIfDown) {
  write_credentials_in(root_.path());
  write_setup_secret(root_.path());
  const std::vector<std::string> replace{"cluster",   "replace-node",        "2",
                                         "127.0.0.5", "--setup-secret-file", "setup-secret"};
  for (const std::string state : {"up", "down"}) {
    const std::size_t sent = cluster_.requests().size();
    cluster_.reply(200, status_for_replace(state, ""));
    cluster_.reply(201, R"({"id": 5})");
    cluster_.reply(200, status_for_replace(state, "f800"));
    cluster_.reply(200, status_for_replace(state, "f800"));
    cluster_.reply(state == "up" ? 202 : 204, "{}");
    EXPECT_EQ(tide(replace), kExitSuccess) << err_.str();
    ASSERT_EQ(cluster_.requests().size(), sent + 5) << state;
    EXPECT_EQ(cluster_.requests()[sent + 1].target, "/v1/cluster/nodes") << state;
    const SentRequest& removal = cluster_.requests()[sent + 4];
    if (state == "up") {
      EXPECT_EQ(removal.method, Method::post);
      EXPECT_EQ(removal.target, "/v1/cluster/nodes/2/smartfail");
    } else {
      EXPECT_EQ(removal.method, Method::delete_);
      EXPECT_EQ(removal.target, "/v1/cluster/nodes/2");
      EXPECT_NE(out_.str().find("Node 2 is down"), std::string::npos) << out_.str();
    }
    EXPECT_NE(out_.str().find("Added node 5"), std::string::npos) << out_.str();
  }

  // Added in another pool: the old node is left as it is.
  std::size_t sent = cluster_.requests().size();
  cluster_.reply(200, status_for_replace("up", ""));
  cluster_.reply(201, R"({"id": 5})");
  cluster_.reply(200, status_for_replace("up", "h500"));
  EXPECT_NE(tide(replace), kExitSuccess);
  EXPECT_NE(err_.str().find("not in node 2's f800"), std::string::npos) << err_.str();
  EXPECT_EQ(cluster_.requests().size(), sent + 3) << "nothing asked of node 2";

  sent = cluster_.requests().size();
  cluster_.reply(200, R"({"nodes": [{"id": 1, "admin_address": "127.0.0.1:8080"}]})");
  EXPECT_NE(
      tide({"cluster", "replace-node", "7", "127.0.0.5", "--setup-secret-file", "setup-secret"}),
      kExitSuccess);
  EXPECT_NE(err_.str().find("no node 7"), std::string::npos) << err_.str();
  EXPECT_EQ(cluster_.requests().size(), sent + 1) << "nothing added for a node not there";
  EXPECT_EQ(tide({"cluster", "replace-node", "2"}), kExitUsage);
}

TEST_F(TideTest, TokenRotateKeepsTheNewTokenInTheCredentialsFile) {
  const fs::path file = write_credentials_in(root_.path());
  cluster_.reply(200, R"({"token": "fresh"})");
  EXPECT_EQ(tide({"cluster", "token", "rotate"}), kExitSuccess) << err_.str();
  EXPECT_EQ(only_request().method, Method::post);
  EXPECT_EQ(only_request().target, "/v1/cluster/token");
  EXPECT_EQ(out_.str(), "Rotated the cluster's token; the new one is in " + file.string() +
                            ", the old one is refused from now on.\n");
  EXPECT_EQ(read_credentials(file)->token, "fresh");
}

TEST_F(TideTest, TokenRotateWithoutACredentialsFilePrintsTheNewToken) {
  cluster_.reply(200, R"({"token": "fresh"})");
  EXPECT_EQ(tide({"--cluster", "127.0.0.1", "--token", "old", "--insecure", "cluster", "token",
                  "rotate"}),
            kExitSuccess)
      << err_.str();
  EXPECT_EQ(out_.str(),
            "New token: fresh\nRotated the cluster's token; the old one is refused from now on.\n");
}

TEST_F(TideTest, TransferLeadershipNamesTheNodeOrLeavesTheChoiceToTheCluster) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"leader": 3})");
  EXPECT_EQ(tide({"cluster", "transfer-leadership", "3"}), kExitSuccess) << err_.str();
  EXPECT_EQ(out_.str(), "Node 3 leads the cluster.\n");
  cluster_.reply(200, R"({"leader": 2})");
  EXPECT_EQ(tide({"cluster", "transfer-leadership"}), kExitSuccess) << err_.str();
  EXPECT_EQ(out_.str(), "Node 2 leads the cluster.\n");
  ASSERT_EQ(cluster_.requests().size(), 2u);
  EXPECT_EQ(cluster_.requests()[0].method, Method::post);
  EXPECT_EQ(cluster_.requests()[0].target, "/v1/cluster/leader");
  EXPECT_EQ(cluster_.requests()[0].body, R"({"node":3})");
  EXPECT_EQ(cluster_.requests()[1].body, "{}");
  EXPECT_EQ(tide({"cluster", "transfer-leadership", "three"}), kExitUsage);
}

TEST_F(TideTest, ClusterRemoveNodeForgetsItsAddress) {
  const fs::path file = write_credentials_in(root_.path());
  cluster_.reply(200, R"({"nodes": [{"id": 1, "admin_address": "127.0.0.1:8080"},
                                    {"id": 2, "admin_address": "127.0.0.2:8080"}]})");
  cluster_.reply(204, "");
  EXPECT_EQ(tide({"cluster", "remove-node", "--no-smartfail", "1"}), kExitSuccess) << err_.str();
  ASSERT_EQ(cluster_.requests().size(), 2u);
  EXPECT_EQ(cluster_.requests()[1].method, Method::delete_);
  EXPECT_EQ(cluster_.requests()[1].target, "/v1/cluster/nodes/1");
  EXPECT_EQ(out_.str(), "Removed node 1.\n");
  EXPECT_EQ(read_credentials(file)->nodes, std::vector<std::string>{"127.0.0.2"});
}

TEST_F(TideTest, ClusterRemoveNodeOfTheOnlyKnownAddressLearnsTheOthers) {
  const fs::path file = root_.path() / ".tidepool" / "tide.json";
  ASSERT_TRUE(write_credentials(file, Credentials{.cluster = "tidepool",
                                                  .token = "t",
                                                  .ca_certificate = "c",
                                                  .nodes = {"127.0.0.1"}})
                  .ok());
  cluster_.reply(200, R"({"nodes": [{"id": 1, "admin_address": "127.0.0.1:8080"},
                                    {"id": 2, "admin_address": "127.0.0.2:8080"}]})");
  cluster_.reply(204, "");
  EXPECT_EQ(tide({"cluster", "remove-node", "--no-smartfail", "1"}), kExitSuccess) << err_.str();
  EXPECT_EQ(read_credentials(file)->nodes, std::vector<std::string>{"127.0.0.2:8080"});
}

TEST_F(TideTest, ClusterRemoveNodeSmartFailsItUnlessToldNotTo) {
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"cluster", "remove-node", "2"},
        std::vector<std::string>{"cluster", "smartfail", "2"}}) {
    const std::size_t sent = cluster_.requests().size();
    const fs::path file = write_credentials_in(root_.path());
    cluster_.reply(200, R"({"nodes": [{"id": 1, "admin_address": "127.0.0.1:8080"},
                                      {"id": 2, "admin_address": "127.0.0.2:8080"}]})");
    cluster_.reply(202, R"({"node": 2, "state": "smartfailing"})");
    EXPECT_EQ(tide(command), kExitSuccess) << err_.str();
    ASSERT_EQ(cluster_.requests().size(), sent + 2) << command[1];
    EXPECT_EQ(cluster_.requests()[sent + 1].method, Method::post) << command[1];
    EXPECT_EQ(cluster_.requests()[sent + 1].target, "/v1/cluster/nodes/2/smartfail") << command[1];
    EXPECT_NE(out_.str().find("Node 2 is being SmartFailed"), std::string::npos) << out_.str();
    EXPECT_EQ(read_credentials(file)->nodes, std::vector<std::string>{"127.0.0.1:8080"})
        << command[1];
  }
  EXPECT_EQ(tide({"cluster", "smartfail"}), kExitUsage);
  EXPECT_EQ(tide({"cluster", "smartfail", "two"}), kExitUsage);
}

TEST_F(TideTest, ClusterStopfailCallsOffTheSmartFailAndTideAsksTheNodeAgain) {
  const fs::path file = root_.path() / ".tidepool" / "tide.json";
  ASSERT_TRUE(write_credentials(file, Credentials{.cluster = "tidepool",
                                                  .token = "t",
                                                  .ca_certificate = "c",
                                                  .nodes = {"127.0.0.1:8080"}})
                  .ok());
  cluster_.reply(200, R"({"node": 2, "smartfailing": false})");
  cluster_.reply(200, R"({"nodes": [{"id": 1, "admin_address": "127.0.0.1:8080"},
                                    {"id": 2, "admin_address": "127.0.0.2:8080"}]})");
  const std::size_t sent = cluster_.requests().size();
  EXPECT_EQ(tide({"cluster", "stopfail", "2"}), kExitSuccess) << err_.str();
  ASSERT_EQ(cluster_.requests().size(), sent + 2);
  EXPECT_EQ(cluster_.requests()[sent].method, Method::post);
  EXPECT_EQ(cluster_.requests()[sent].target, "/v1/cluster/nodes/2/stopfail");
  EXPECT_NE(out_.str().find("Node 2 is SmartFailed no more"), std::string::npos) << out_.str();
  EXPECT_EQ(read_credentials(file)->nodes,
            (std::vector<std::string>{"127.0.0.1:8080", "127.0.0.2:8080"}));

  cluster_.reply(409, R"({"error": "node 3 is not being SmartFailed"})");
  EXPECT_EQ(tide({"cluster", "stopfail", "3"}), kExitFailure);
  EXPECT_NE(err_.str().find("is not being SmartFailed"), std::string::npos) << err_.str();
  EXPECT_EQ(tide({"cluster", "stopfail", "two"}), kExitUsage);
}

// The real HTTPS transport, on an address where nothing listens.
TEST(Tide, AnUnreachableClusterExits1NamingEachAddress) {
  TemporaryDirectory empty;
  std::ostringstream out;
  std::ostringstream err;
  EXPECT_EQ(run_tide({"--cluster", "127.0.0.1:1", "--token", "t", "--insecure", "--workdir",
                      empty.path().string(), "status"},
                     out, err),
            kExitFailure);
  EXPECT_NE(err.str().find("tide: cannot reach the cluster (127.0.0.1:1: connection refused)\n"),
            std::string::npos)
      << err.str();
  EXPECT_EQ(out.str(), "");
}

}  // namespace
}  // namespace tidepool::cli
