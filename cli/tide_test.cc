#include "cli/tide.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <deque>
#include <map>
#include <sstream>
#include <tuple>

#include "cli/credentials.h"
#include "cli/test_util.h"
#include "common/clock.h"

namespace tidepool::cli {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

struct SentRequest {
  Method method;
  std::string target;
  std::string body;
  ConnectionSettings settings;
};

// Stands in for the cluster: records what is sent and answers with the replies queued.
class FakeCluster {
 public:
  void reply(unsigned status, std::string body, std::string reason = "") {
    replies_.push_back(HttpReply{status, std::move(reason), std::move(body)});
  }
  const std::vector<SentRequest>& requests() const { return requests_; }

  Result<std::unique_ptr<Transport>> connect(ConnectionSettings settings) {
    return std::unique_ptr<Transport>(std::make_unique<FakeTransport>(*this, std::move(settings)));
  }

 private:
  class FakeTransport final : public Transport {
   public:
    FakeTransport(FakeCluster& cluster, ConnectionSettings settings)
        : cluster_(cluster), settings_(std::move(settings)) {}
    Result<HttpReply> send(Method method, const std::string& target,
                           const std::string& body) override {
      cluster_.requests_.push_back({method, target, body, settings_});
      if (cluster_.replies_.empty()) return HttpReply{500, "Internal Server Error", ""};
      HttpReply reply = std::move(cluster_.replies_.front());
      cluster_.replies_.pop_front();
      return reply;
    }

   private:
    FakeCluster& cluster_;
    const ConnectionSettings settings_;
  };

  std::deque<HttpReply> replies_;
  std::vector<SentRequest> requests_;
};

class TideTest : public ::testing::Test {
 protected:
  TideTest() {
    environment_.variable = [this](const std::string& name) -> std::optional<std::string> {
      auto found = variables_.find(name);
      if (found == variables_.end()) return std::nullopt;
      return found->second;
    };
    environment_.current_directory = root_.path();
    environment_.connect = [this](ConnectionSettings settings) {
      return cluster_.connect(std::move(settings));
    };
    environment_.clock = &clock_;
    environment_.sleep = [this](std::chrono::milliseconds duration) { clock_.advance(duration); };
  }

  int tide(std::vector<std::string> args) {
    out_.str("");
    err_.str("");
    return run_tide(std::move(args), out_, err_, environment_);
  }

  // tide.json of a cluster in `directory`/.tidepool.
  fs::path write_credentials_in(const fs::path& directory,
                                const std::string& cluster = "tidepool") {
    const fs::path file = directory / ".tidepool" / "tide.json";
    EXPECT_TRUE(write_credentials(file, Credentials{.cluster = cluster,
                                                    .id = "c0ffee",
                                                    .token = "secret",
                                                    .ca_certificate = "CA PEM",
                                                    .nodes = {"127.0.0.1:8080", "127.0.0.2"}})
                    .ok());
    return file;
  }

  const SentRequest& only_request() {
    EXPECT_EQ(cluster_.requests().size(), 1u);
    static const SentRequest none{};
    return cluster_.requests().empty() ? none : cluster_.requests().front();
  }

  TemporaryDirectory root_;
  FakeClock clock_{std::chrono::system_clock::time_point()};
  std::map<std::string, std::string> variables_;
  Environment environment_;
  FakeCluster cluster_;
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(TideTest, AnUnknownCommandExits2NamingTheCommandsExpected) {
  EXPECT_EQ(tide({"frobnicate"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "tide: unknown command 'tide frobnicate'; expected one of: cluster, status, get, set, "
            "storagepool, sysctl, nfs, locks, statistics, flush, filepool, job "
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
            "storagepool, sysctl, nfs, locks, statistics, flush, filepool, job "
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
  EXPECT_EQ(err_.str(), "");
}

TEST_F(TideTest, WithoutCredentialsItSaysHowToGetThem) {
  EXPECT_EQ(tide({"--workdir", (root_.path() / "empty").string(), "status"}), kExitFailure);
  EXPECT_EQ(err_.str(),
            "tide: no cluster credentials: run 'tide cluster create' or pass "
            "--workdir/--cluster and --token\n");
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

TEST_F(TideTest, TiersCreateSendsChildrenRepeatedOrCommaSeparated) {
  write_credentials_in(root_.path());
  cluster_.reply(201, R"({"name": "hot-tier", "children": ["f800", "h500", "a200"]})");
  EXPECT_EQ(tide({"storagepool", "tiers", "create", "hot-tier", "--children", "f800,h500",
                  "--children", "a200"}),
            kExitSuccess);
  EXPECT_EQ(only_request().method, Method::post);
  EXPECT_EQ(only_request().target, "/v1/storagepool/tiers");
  EXPECT_EQ(only_request().body, R"({"name":"hot-tier","children":["f800","h500","a200"]})");
  EXPECT_EQ(out_.str(), "Created tier hot-tier.\n");
}

TEST_F(TideTest, TiersModifyGetsTheChildrenThenPutsTheWholeNewList) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"name": "hot", "children": ["f800", "h500"]})");
  cluster_.reply(200, R"({"name": "hot", "children": ["h500"]})");
  EXPECT_EQ(tide({"storagepool", "tiers", "modify", "hot", "--remove-children", "f800"}),
            kExitSuccess)
      << err_.str();
  ASSERT_EQ(cluster_.requests().size(), 2u);
  EXPECT_EQ(cluster_.requests()[0].method, Method::get);
  EXPECT_EQ(cluster_.requests()[0].target, "/v1/storagepool/tiers/hot");
  EXPECT_EQ(cluster_.requests()[1].method, Method::put);
  EXPECT_EQ(cluster_.requests()[1].target, "/v1/storagepool/tiers/hot");
  EXPECT_EQ(cluster_.requests()[1].body, R"({"children":["h500"]})");
  EXPECT_EQ(out_.str(), "Modified tier hot.\n");
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

TEST_F(TideTest, StatisticsCacheGetsEveryNodesAndTheTotal) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"statistics": [], "total": {}, "unreachable": []})");
  EXPECT_EQ(tide({"statistics", "cache", "--format", "json"}), kExitSuccess) << err_.str();
  EXPECT_EQ(only_request().method, Method::get);
  EXPECT_EQ(only_request().target, "/v1/statistics/cache");
  EXPECT_NE(out_.str().find("\"total\""), std::string::npos) << out_.str();
}

constexpr const char* kSystemStatistics = R"({
    "statistics": [{"node": 1, "cpu_percent": 10.0, "nfs": {"ops_per_second": 5,
                    "procedures": {"getattr": 5, "read": 0}}},
                   {"node": 2, "cpu_percent": 30.0, "nfs": {"ops_per_second": 7,
                    "procedures": {"getattr": 3, "read": 4}}}],
    "total": {"cpu_percent": 40.0, "nfs": {"ops_per_second": 12,
              "procedures": {"getattr": 8, "read": 4}}},
    "unreachable": []})";

TEST_F(TideTest, StatisticsSystemShowsTheNodesAskedForAndTopRedrawsAsManyTimesAsAsked) {
  write_credentials_in(root_.path());
  cluster_.reply(200, kSystemStatistics);
  EXPECT_EQ(tide({"statistics", "system", "--nodes", "2", "--format", "json"}), kExitSuccess)
      << err_.str();
  EXPECT_EQ(only_request().target, "/v1/statistics/system");
  const Json shown = Json::parse(out_.str());
  ASSERT_EQ(shown["statistics"].size(), 1u) << out_.str();
  EXPECT_EQ(shown["statistics"][0]["node"], 2);
  EXPECT_FALSE(shown.contains("total")) << "a total of all nodes is not theirs";

  out_.str("");
  cluster_.reply(200, kSystemStatistics);
  cluster_.reply(200, kSystemStatistics);
  EXPECT_EQ(tide({"statistics", "system", "--format", "top", "--iterations", "2"}), kExitSuccess)
      << err_.str();
  EXPECT_EQ(cluster_.requests().size(), 3u);
  const std::string text = out_.str();
  const std::size_t first = text.find("\x1b[H\x1b[2J");
  ASSERT_NE(first, std::string::npos) << text;
  EXPECT_NE(text.find("\x1b[H\x1b[2J", first + 1), std::string::npos) << text;
  EXPECT_NE(text.find("Total  40.0%"), std::string::npos) << text;
}

TEST_F(TideTest, StatisticsSystemRefusesNodesThatAreNoNumbersAndAnUnknownFormat) {
  write_credentials_in(root_.path());
  EXPECT_EQ(tide({"statistics", "system", "--nodes", "1,x"}), kExitUsage);
  EXPECT_NE(err_.str().find("got 'x'"), std::string::npos) << err_.str();
  EXPECT_EQ(tide({"statistics", "system", "--format", "csv"}), kExitUsage);
  EXPECT_TRUE(cluster_.requests().empty());
}

TEST_F(TideTest, StatisticsPstatShowsTheClusterOrOneNodeAndNamesANodeThatIsNotThere) {
  write_credentials_in(root_.path());
  cluster_.reply(200, kSystemStatistics);
  EXPECT_EQ(tide({"statistics", "pstat"}), kExitSuccess) << err_.str();
  EXPECT_NE(out_.str().find("all nodes"), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("getattr              8/s"), std::string::npos) << out_.str();

  out_.str("");
  cluster_.reply(200, kSystemStatistics);
  EXPECT_EQ(tide({"statistics", "pstat", "--node", "2", "--format", "json"}), kExitSuccess);
  EXPECT_EQ(Json::parse(out_.str())["nfs"]["procedures"]["read"], 4) << out_.str();

  cluster_.reply(200, kSystemStatistics);
  EXPECT_EQ(tide({"statistics", "pstat", "--node", "9"}), kExitFailure);
  EXPECT_NE(err_.str().find("node 9"), std::string::npos) << err_.str();
}

TEST_F(TideTest, StatisticsClientAsksForEveryNodesClients) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"clients": [], "unreachable": []})");
  EXPECT_EQ(tide({"statistics", "client"}), kExitSuccess) << err_.str();
  EXPECT_EQ(only_request().target, "/v1/statistics/clients");
  EXPECT_NE(out_.str().find("Avg Latency"), std::string::npos) << out_.str();
}

TEST_F(TideTest, FilepoolPoliciesCreateTakesAnExpressionOrOneFsFlags) {
  write_credentials_in(root_.path());
  cluster_.reply(201, R"({"name": "cold", "apply_order": 1})");
  EXPECT_EQ(
      tide({"filepool", "policies", "create", "cold", "--filter", "accessed > 30d and size >= 1GiB",
            "--data-storage-target", "cold-tier", "--set-requested-protection", "3x"}),
      kExitSuccess)
      << err_.str();
  EXPECT_EQ(only_request().method, Method::post);
  EXPECT_EQ(only_request().target, "/v1/filepool/policies");
  EXPECT_EQ(Json::parse(only_request().body),
            Json::parse(R"({"name": "cold", "filter": "accessed > 30d and size >= 1GiB",
                            "storage_target": "cold-tier", "protection": "3x"})"));
  EXPECT_EQ(out_.str(), "Created file pool policy cold (apply order 1).\n");

  cluster_.reply(201, R"({"name": "old", "apply_order": 2})");
  EXPECT_EQ(tide({"filepool", "policies", "create", "old", "--begin-filter", "--accessed-time=30D",
                  "--operator=gt", "--and", "--size=1GB", "--operator=ge", "--end-filter",
                  "--data-access-pattern", "streaming", "--apply-order", "2"}),
            kExitSuccess)
      << err_.str();
  EXPECT_EQ(Json::parse(cluster_.requests().back().body),
            Json::parse(R"({"name": "old", "filter_flags": ["--begin-filter",
                            "--accessed-time=30D", "--operator=gt", "--and", "--size=1GB",
                            "--operator=ge", "--end-filter"], "access_pattern": "streaming",
                            "apply_order": 2})"));
}

TEST_F(TideTest, FilepoolPolicyMistakesExit2AndSendNothing) {
  write_credentials_in(root_.path());
  EXPECT_EQ(tide({"filepool", "policies", "create", "x"}), kExitUsage);
  EXPECT_NE(err_.str().find("a policy needs a filter"), std::string::npos) << err_.str();
  EXPECT_EQ(tide({"filepool", "policies", "create", "x", "--begin-filter", "--size=1GB"}),
            kExitUsage);
  EXPECT_NE(err_.str().find("--begin-filter without --end-filter"), std::string::npos);
  EXPECT_EQ(tide({"filepool", "policies", "create", "x", "--filter", "size > 1", "--begin-filter",
                  "--size=1GB", "--end-filter"}),
            kExitUsage);
  EXPECT_NE(err_.str().find("not both"), std::string::npos) << err_.str();
  EXPECT_EQ(tide({"filepool", "policies", "modify", "x", "--set-requested-protection", "4x"}),
            kExitUsage);
  EXPECT_EQ(tide({"filepool", "explain", "relative/path"}), kExitUsage);
  EXPECT_EQ(tide({"filepool", "apply", "--recurse", "/etc"}), kExitUsage);
  EXPECT_EQ(
      err_.str(),
      "tide: PATH must be absolute and under /ifs: /etc (see 'tide filepool apply --help')\n");
  EXPECT_TRUE(cluster_.requests().empty());
}

TEST_F(TideTest, FilepoolListViewModifyDeleteAndExplainUseTheirTargets) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"policies": [{"name": "cold", "apply_order": 1,
      "filter": "accessed > 30d", "storage_target": "cold-tier", "protection": null,
      "access_pattern": null}], "default": {"name": "default", "storage_target": "anywhere",
      "protection": "2x", "access_pattern": "concurrency"}})");
  EXPECT_EQ(tide({"filepool", "policies", "list"}), kExitSuccess) << err_.str();
  EXPECT_NE(out_.str().find("1  cold     accessed > 30d    cold-tier       (default)"),
            std::string::npos)
      << out_.str();
  EXPECT_NE(out_.str().find("default  every other file  anywhere        2x"), std::string::npos)
      << out_.str();
  cluster_.reply(200, "{}");
  EXPECT_EQ(tide({"filepool", "default-policy", "modify", "--data-storage-target", "hot"}),
            kExitSuccess);
  EXPECT_EQ(cluster_.requests().back().target, "/v1/filepool/policies/default");
  EXPECT_EQ(cluster_.requests().back().body, R"({"storage_target":"hot"})");
  cluster_.reply(200, "{}");
  EXPECT_EQ(tide({"filepool", "policies", "modify", "cold", "--clear-data-storage-target",
                  "--set-requested-protection", "3x"}),
            kExitSuccess)
      << err_.str();
  EXPECT_EQ(Json::parse(cluster_.requests().back().body),
            Json::parse(R"({"storage_target": null, "protection": "3x"})"));
  const std::size_t sent = cluster_.requests().size();
  EXPECT_EQ(tide({"filepool", "policies", "modify", "cold", "--clear-data-access-pattern",
                  "--data-access-pattern", "random"}),
            kExitUsage);
  EXPECT_NE(err_.str().find("give --data-access-pattern or --clear-data-access-pattern, not both"),
            std::string::npos)
      << err_.str();
  EXPECT_EQ(cluster_.requests().size(), sent);
  cluster_.reply(204, "");
  EXPECT_EQ(tide({"filepool", "policies", "delete", "cold"}), kExitSuccess);
  EXPECT_EQ(cluster_.requests().back().method, Method::delete_);
  EXPECT_EQ(cluster_.requests().back().target, "/v1/filepool/policies/cold");
  out_.str("");
  cluster_.reply(200, R"({"path": "/ifs/a b", "policy": "default", "filter": null,
      "storage_target": {"value": "anywhere", "from": "default"},
      "protection": {"value": "2x", "from": "default"},
      "access_pattern": {"value": "random", "from": "default"}})");
  EXPECT_EQ(tide({"filepool", "explain", "/ifs/a b"}), kExitSuccess) << err_.str();
  EXPECT_EQ(cluster_.requests().back().target, "/v1/filepool/explain/ifs/a%20b");
  EXPECT_NE(out_.str().find("Storage Target: anywhere (from default)"), std::string::npos)
      << out_.str();
}

// Job 7, the SmartPoolsTree job of `tide filepool apply PATH`, as GET /v1/job/jobs/7 finds it in
// `state`, having scanned 120 files and moved 5 of them (none in a dry run).
std::string application_job(const std::string& path, const std::string& state,
                            bool dry_run = false) {
  return Json{{"id", 7},
              {"type", "SmartPoolsTree"},
              {"state", state},
              {"paths", Json::array({path})},
              {"dry_run", dry_run},
              {"progress",
               {{"files_scanned", 120},
                {"files_matched", 30},
                {"patterns_set", 12},
                {"files_moved", dry_run ? 0 : 5},
                {"bytes_moved", dry_run ? 0 : 1'200'000'000},
                {"files_misplaced", 18},
                {"errors", 0}}},
              {"errors", Json::array()},
              {"reason", nullptr}}
      .dump();
}

TEST_F(TideTest, FilepoolApplyRefusesADirectoryWithoutRecurseAndStartsNothing) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"path": "/ifs/data", "type": "directory"})");
  EXPECT_EQ(tide({"filepool", "apply", "/ifs/data"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "tide: /ifs/data is a directory: --recurse applies the policies to every file under "
            "it\n");
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(only_request().method, Method::get);
  EXPECT_EQ(only_request().target, "/v1/namespace/ifs/data");
}

TEST_F(TideTest, FilepoolApplyToAFileStartsASmartPoolsTreeJobAndPollsItUntilItSucceeds) {
  write_credentials_in(root_.path());
  const std::string path = "/ifs/data/a.bin";
  Json succeeded = Json::parse(application_job(path, "succeeded"));
  succeeded["progress"] = Json::parse(R"({"files_scanned": 1, "files_matched": 1,
      "patterns_set": 1, "files_moved": 0, "bytes_moved": 0, "files_misplaced": 0,
      "errors": 0})");
  cluster_.reply(200, R"({"path": "/ifs/data/a.bin", "type": "file"})");
  cluster_.reply(201, application_job(path, "waiting"));
  cluster_.reply(200, application_job(path, "running"));
  cluster_.reply(200, succeeded.dump());
  const auto started = clock_.steady_now();
  EXPECT_EQ(tide({"filepool", "apply", path}), kExitSuccess) << err_.str();
  ASSERT_EQ(cluster_.requests().size(), 4u);
  EXPECT_EQ(cluster_.requests()[0].target, "/v1/namespace/ifs/data/a.bin");
  EXPECT_EQ(cluster_.requests()[1].method, Method::post);
  EXPECT_EQ(cluster_.requests()[1].target, "/v1/job/jobs");
  EXPECT_EQ(Json::parse(cluster_.requests()[1].body),
            Json::parse(R"({"type": "SmartPoolsTree", "policy": "HIGH",
                            "paths": ["/ifs/data/a.bin"]})"));
  for (std::size_t poll : {2u, 3u}) {
    EXPECT_EQ(cluster_.requests()[poll].method, Method::get);
    EXPECT_EQ(cluster_.requests()[poll].target, "/v1/job/jobs/7");
  }
  EXPECT_EQ(clock_.steady_now() - started, 400ms) << "one poll every 200 ms";
  EXPECT_EQ(out_.str(),
            "Applied the file pool policies to 1 file under /ifs/data/a.bin: 1 matched a policy, "
            "1 access pattern set, 0 files moved (0 B), 0 misplaced.\n");
}

TEST_F(TideTest, FilepoolApplyWithRecurseStartsAtOnceAndADryRunSaysWhatItWouldDo) {
  write_credentials_in(root_.path());
  cluster_.reply(201, application_job("/ifs/data", "waiting", true));
  cluster_.reply(200, application_job("/ifs/data", "succeeded", true));
  EXPECT_EQ(tide({"filepool", "apply", "--recurse", "--dry-run", "/ifs/data"}), kExitSuccess)
      << err_.str();
  ASSERT_EQ(cluster_.requests().size(), 2u);
  EXPECT_EQ(cluster_.requests()[0].method, Method::post);
  EXPECT_EQ(Json::parse(cluster_.requests()[0].body),
            Json::parse(R"({"type": "SmartPoolsTree", "policy": "HIGH", "paths": ["/ifs/data"],
                            "dry_run": true})"));
  EXPECT_EQ(out_.str(),
            "Dry run over 120 files under /ifs/data: 30 match a policy, 12 access patterns would "
            "be set, 18 would move or stay misplaced.\n");
}

TEST_F(TideTest, FilepoolApplyListsTheJobsErrorsAndExits1) {
  write_credentials_in(root_.path());
  Json succeeded = Json::parse(application_job("/ifs/data", "succeeded"));
  succeeded["progress"]["errors"] = 2;
  succeeded["errors"] = {"/ifs/data/a: permission denied", "/ifs/data/b: no space"};
  cluster_.reply(201, application_job("/ifs/data", "running"));
  cluster_.reply(200, succeeded.dump());
  EXPECT_EQ(tide({"filepool", "apply", "--recurse", "/ifs/data"}), kExitFailure);
  EXPECT_EQ(out_.str(),
            "Applied the file pool policies to 120 files under /ifs/data: 30 matched a policy, "
            "12 access patterns set, 5 files moved (1.2 GB), 18 misplaced.\n"
            "Errors:\n"
            "  /ifs/data/a: permission denied\n"
            "  /ifs/data/b: no space\n");
  EXPECT_EQ(err_.str(), "tide: job [7] ended with 2 errors\n");
}

TEST_F(TideTest, FilepoolApplyOfAJobThatFailedOrWasCancelledExits1WithItsStateAndReason) {
  write_credentials_in(root_.path());
  for (const auto& [state, reason] :
       {std::pair<std::string, std::string>{"failed", "too many errors"},
        std::pair<std::string, std::string>{"cancelled", "cancelled by an administrator"}}) {
    Json ended = Json::parse(application_job("/ifs/data", state));
    ended["reason"] = reason;
    cluster_.reply(201, application_job("/ifs/data", "running"));
    cluster_.reply(200, ended.dump());
    EXPECT_EQ(tide({"filepool", "apply", "--recurse", "/ifs/data"}), kExitFailure);
    EXPECT_EQ(err_.str(),
              "tide: job [7] " + state + ": " + reason + " (see 'tide job reports view 7')\n");
    EXPECT_EQ(out_.str(), "");
  }
}

TEST_F(TideTest, FilepoolApplyWhileASmartPoolsTreeJobIsUnderWayPrintsTheServersMessage) {
  write_credentials_in(root_.path());
  cluster_.reply(409, R"({"error": "SmartPoolsTree is already running as job 5"})", "Conflict");
  EXPECT_EQ(tide({"filepool", "apply", "--recurse", "/ifs/data"}), kExitFailure);
  EXPECT_EQ(err_.str(), "tide: SmartPoolsTree is already running as job 5\n");
  EXPECT_EQ(only_request().method, Method::post);
  EXPECT_EQ(out_.str(), "");
}

TEST_F(TideTest, FilepoolApplyThatCannotAskAfterItsJobSaysTheJobStartedAndHowToFollowIt) {
  write_credentials_in(root_.path());
  cluster_.reply(201, application_job("/ifs/data", "running"));
  cluster_.reply(503, R"({"error": "the cluster has no quorum"})", "Service Unavailable");
  EXPECT_EQ(tide({"filepool", "apply", "--recurse", "/ifs/data"}), kExitFailure);
  EXPECT_EQ(err_.str(),
            "tide: job [7] started, but asking how it goes failed: the cluster has no quorum; "
            "follow it with 'tide job jobs view 7'\n");
}

TEST_F(TideTest, FilepoolApplyStopsWaitingAtTheTimeoutAndSaysHowToFollowTheJob) {
  write_credentials_in(root_.path());
  cluster_.reply(201, application_job("/ifs/data", "waiting"));
  // One second: five polls, 200 ms apart.
  for (int poll = 0; poll < 5; ++poll) cluster_.reply(200, application_job("/ifs/data", "running"));
  const auto started = clock_.steady_now();
  EXPECT_EQ(tide({"filepool", "apply", "--recurse", "/ifs/data", "--timeout", "1"}), kExitFailure);
  EXPECT_EQ(err_.str(),
            "tide: job [7] has not ended after 1s (it is running): follow it with 'tide job jobs "
            "view 7'\n");
  EXPECT_EQ(cluster_.requests().size(), 6u);
  EXPECT_EQ(clock_.steady_now() - started, 1s);
  EXPECT_EQ(out_.str(), "");
}

TEST_F(TideTest, TiersModifyAddsOnlyPoolsNotThereYet) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"name": "hot", "children": ["f800"]})");
  cluster_.reply(200, R"({"name": "hot", "children": ["f800", "h500"]})");
  EXPECT_EQ(tide({"storagepool", "tiers", "modify", "hot", "--add-children", "h500,f800"}),
            kExitSuccess);
  ASSERT_EQ(cluster_.requests().size(), 2u);
  EXPECT_EQ(cluster_.requests()[1].body, R"({"children":["f800","h500"]})");
}

TEST_F(TideTest, TiersModifyRemovingAPoolThatIsNotAChildChangesNothing) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"name": "hot", "children": ["f800"]})");
  EXPECT_EQ(tide({"storagepool", "tiers", "modify", "hot", "--remove-children", "h500"}),
            kExitFailure);
  EXPECT_EQ(err_.str(), "tide: tier hot: node pool 'h500' is not a child\n");
  EXPECT_EQ(cluster_.requests().size(), 1u);  // the GET only
}

TEST_F(TideTest, TiersModifySetChildrenToNone) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"name": "hot", "children": ["f800"]})");
  cluster_.reply(200, R"({"name": "hot", "children": []})");
  EXPECT_EQ(tide({"storagepool", "tiers", "modify", "hot", "--set-children", ""}), kExitSuccess);
  ASSERT_EQ(cluster_.requests().size(), 2u);
  EXPECT_EQ(cluster_.requests()[1].body, R"({"children":[]})");
}

TEST_F(TideTest, TiersViewAndDelete) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"name": "hot", "children": ["f800"]})");
  EXPECT_EQ(tide({"storagepool", "tiers", "view", "hot"}), kExitSuccess);
  EXPECT_EQ(out_.str(), "    Name: hot\nChildren: f800\n");
  cluster_.reply(204, "");
  EXPECT_EQ(tide({"storagepool", "tiers", "delete", "hot"}), kExitSuccess);
  EXPECT_EQ(cluster_.requests().back().method, Method::delete_);
  EXPECT_EQ(cluster_.requests().back().target, "/v1/storagepool/tiers/hot");
  EXPECT_EQ(out_.str(), "Deleted tier hot.\n");
}

TEST_F(TideTest, NodepoolsListAndView) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"nodepools": [{"name": "f800", "nodes": [1, 2], "tier": null}]})");
  EXPECT_EQ(tide({"storagepool", "nodepools", "list"}), kExitSuccess);
  EXPECT_EQ(out_.str(),
            "Name  Nodes  Tier\n-----------------\nf800  1,2    -\n-----------------\nTotal: 1\n");
  cluster_.reply(200, R"({"name": "f800", "nodes": [1, 2], "tier": "hot"})");
  EXPECT_EQ(tide({"storagepool", "nodepools", "view", "f800", "--format", "json"}), kExitSuccess);
  EXPECT_EQ(cluster_.requests().back().target, "/v1/storagepool/nodepools/f800");
  EXPECT_EQ(out_.str(),
            "{\n  \"name\": \"f800\",\n  \"nodes\": [\n    1,\n    2\n  ],\n"
            "  \"tier\": \"hot\"\n}\n");
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
        "Access Pattern:   concurrency", "0-2    0-393215  1,2"}) {
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

  cluster_.reply(200, R"({"name": "efs.bam.atime_grace_period", "value": "7D"})");
  EXPECT_EQ(tide({"sysctl", "efs.bam.atime_grace_period=7D"}), kExitSuccess);
  EXPECT_EQ(cluster_.requests().back().method, Method::put);
  EXPECT_EQ(cluster_.requests().back().target, "/v1/sysctl/efs.bam.atime_grace_period");
  EXPECT_EQ(cluster_.requests().back().body, R"({"value":"7D"})");
  EXPECT_EQ(out_.str(), "efs.bam.atime_grace_period = 7D\n");

  cluster_.reply(200, R"({"sysctls": []})");
  EXPECT_EQ(tide({"sysctl", "-a", "--format", "json"}), kExitSuccess);
  EXPECT_EQ(cluster_.requests().back().target, "/v1/sysctl");
  EXPECT_EQ(out_.str(), "{\n  \"sysctls\": []\n}\n");
}

TEST_F(TideTest, ExportsCreateModifyViewDelete) {
  write_credentials_in(root_.path());
  cluster_.reply(201, R"({"id": 3, "path": "/ifs/data"})");
  EXPECT_EQ(tide({"nfs", "exports", "create", "/ifs/data", "--clients", "10.0.0.0/8", "--read-only",
                  "--map-all", "1000:100"}),
            kExitSuccess)
      << err_.str();
  EXPECT_EQ(cluster_.requests().back().method, Method::post);
  EXPECT_EQ(cluster_.requests().back().target, "/v1/nfs/exports");
  EXPECT_EQ(cluster_.requests().back().body,
            R"({"path":"/ifs/data","clients":["10.0.0.0/8"],"read_only":true,)"
            R"("map_all_uid":1000,"map_all_gid":100})");
  EXPECT_EQ(out_.str(), "Created export 3 (/ifs/data).\n");

  cluster_.reply(200, R"({"id": 3})");
  EXPECT_EQ(tide({"nfs", "exports", "modify", "3", "--read-only", "false", "--clear-map-all"}),
            kExitSuccess);
  EXPECT_EQ(cluster_.requests().back().method, Method::put);
  EXPECT_EQ(cluster_.requests().back().target, "/v1/nfs/exports/3");
  EXPECT_EQ(cluster_.requests().back().body,
            R"({"read_only":false,"map_all_uid":null,"map_all_gid":null})");
  EXPECT_EQ(out_.str(), "Modified export 3.\n");

  cluster_.reply(200, R"({"id": 3, "path": "/ifs/data", "read_only": false, "map_all_uid": null})");
  EXPECT_EQ(tide({"nfs", "exports", "view", "3"}), kExitSuccess);
  EXPECT_EQ(out_.str(),
            "         ID: 3\n"
            "       Path: /ifs/data\n"
            "  Read Only: No\n"
            "Map All UID: -\n");

  cluster_.reply(204, "");
  EXPECT_EQ(tide({"nfs", "exports", "delete", "3"}), kExitSuccess);
  EXPECT_EQ(cluster_.requests().back().method, Method::delete_);
  EXPECT_EQ(cluster_.requests().back().target, "/v1/nfs/exports/3");
  EXPECT_EQ(out_.str(), "Deleted export 3.\n");
}

TEST_F(TideTest, ClusterCreateTrustsTheNodeOnceAndWritesTheCredentials) {
  cluster_.reply(201, R"({"cluster": {"name": "tidepool", "id": "c0ffee"}, "token": "secret",
                          "ca_certificate": "CA PEM"})");
  EXPECT_EQ(tide({"cluster", "create", "tidepool", "--node", "127.0.0.1"}), kExitSuccess)
      << err_.str();
  const SentRequest& request = only_request();
  EXPECT_EQ(request.method, Method::post);
  EXPECT_EQ(request.target, "/v1/cluster/create");
  EXPECT_EQ(request.body, R"({"name":"tidepool"})");
  EXPECT_EQ(request.settings.addresses, (std::vector<AdminAddress>{{"127.0.0.1", 8080}}));
  EXPECT_EQ(request.settings.token, "");
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

TEST_F(TideTest, ClusterCreateWritesWhereTheWorkdirSays) {
  variables_["TIDE_WORKDIR"] = "from-variable";
  cluster_.reply(201,
                 R"({"cluster": {"name": "a", "id": 1}, "token": "t", "ca_certificate": "c"})");
  cluster_.reply(201,
                 R"({"cluster": {"name": "b", "id": 2}, "token": "t", "ca_certificate": "c"})");
  ASSERT_EQ(tide({"cluster", "create", "a", "--node", "127.0.0.1"}), kExitSuccess);
  EXPECT_TRUE(fs::exists(root_.path() / "from-variable" / "tide.json"));
  ASSERT_EQ(tide({"cluster", "create", "b", "--node", "127.0.0.1", "--workdir", "flag"}),
            kExitSuccess);
  EXPECT_EQ(read_credentials(root_.path() / "flag" / "tide.json")->cluster, "b");
}

TEST_F(TideTest, ClusterCreateNeverReplacesAnotherClustersCredentials) {
  const fs::path file = write_credentials_in(root_.path(), "production");
  EXPECT_EQ(tide({"cluster", "create", "scratch", "--node", "127.0.0.1"}), kExitFailure);
  EXPECT_EQ(err_.str(), "tide: " + file.string() +
                            " holds the credentials of cluster 'production': give another "
                            "--workdir\n");
  EXPECT_TRUE(cluster_.requests().empty());
  EXPECT_EQ(read_credentials(file)->cluster, "production");

  // The same cluster made again (its nodes were wiped) replaces them.
  cluster_.reply(201, R"({"cluster": {"name": "production", "id": "new"}, "token": "t2",
                          "ca_certificate": "c2"})");
  EXPECT_EQ(tide({"cluster", "create", "production", "--node", "127.0.0.1"}), kExitSuccess);
  EXPECT_EQ(read_credentials(file)->token, "t2");
}

TEST_F(TideTest, ClusterAddNodeRemembersItsAddress) {
  const fs::path file = write_credentials_in(root_.path());
  cluster_.reply(201, R"({"id": 3, "name": "node3", "admin_address": "127.0.0.3:8080"})");
  EXPECT_EQ(tide({"cluster", "add-node", "127.0.0.3"}), kExitSuccess) << err_.str();
  EXPECT_EQ(only_request().target, "/v1/cluster/nodes");
  EXPECT_EQ(only_request().body, R"({"address":"127.0.0.3:8080"})");
  EXPECT_EQ(out_.str(), "Added node 3 (127.0.0.3:8080).\n");
  EXPECT_EQ(read_credentials(file)->nodes,
            (std::vector<std::string>{"127.0.0.1:8080", "127.0.0.2", "127.0.0.3:8080"}));

  // A node it knows already is not listed twice ("127.0.0.2" is "127.0.0.2:8080").
  cluster_.reply(201, R"({"id": 2})");
  EXPECT_EQ(tide({"cluster", "add-node", "127.0.0.2:8080"}), kExitSuccess);
  EXPECT_EQ(read_credentials(file)->nodes.size(), 3u);
}

TEST_F(TideTest, ClusterRemoveNodeForgetsItsAddress) {
  const fs::path file = write_credentials_in(root_.path());
  cluster_.reply(200, R"({"nodes": [{"id": 1, "admin_address": "127.0.0.1:8080"},
                                    {"id": 2, "admin_address": "127.0.0.2:8080"}]})");
  cluster_.reply(204, "");
  EXPECT_EQ(tide({"cluster", "remove-node", "1"}), kExitSuccess) << err_.str();
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
  EXPECT_EQ(tide({"cluster", "remove-node", "1"}), kExitSuccess) << err_.str();
  EXPECT_EQ(read_credentials(file)->nodes, std::vector<std::string>{"127.0.0.2:8080"});
}

TEST_F(TideTest, JobJobsStartSendsTheTypeAndOptionsAndSaysWhichJobStarted) {
  write_credentials_in(root_.path());
  cluster_.reply(201, R"({"id": 3, "type": "SmartPoolsTree", "state": "waiting"})");
  EXPECT_EQ(tide({"job", "jobs", "start", "SmartPoolsTree", "--priority", "3", "--policy", "medium",
                  "--paths", "/ifs/a", "/ifs/b c", "--dry-run"}),
            kExitSuccess)
      << err_.str();
  EXPECT_EQ(only_request().method, Method::post);
  EXPECT_EQ(only_request().target, "/v1/job/jobs");
  EXPECT_EQ(only_request().body, R"({"type":"SmartPoolsTree","priority":3,"policy":"MEDIUM",)"
                                 R"("paths":["/ifs/a","/ifs/b c"],"dry_run":true})");
  EXPECT_EQ(out_.str(), "Started job [3]\n");
}

TEST_F(TideTest, JobMistakesExit2NamingTheArgumentAndSendNothing) {
  write_credentials_in(root_.path());
  EXPECT_EQ(tide({"job", "jobs", "start", "SmartPools", "--priority", "0"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "tide: --priority: expected a number from 1 to 10, got '0' "
            "(see 'tide job jobs start --help')\n");
  EXPECT_EQ(tide({"job", "jobs", "start", "SmartPools", "--priority", "11"}), kExitUsage);
  EXPECT_NE(err_.str().find("got '11'"), std::string::npos) << err_.str();
  EXPECT_EQ(tide({"job", "jobs", "start", "SmartPools", "--policy", "FAST"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "tide: --policy: expected LOW, MEDIUM, HIGH or OFF_HOURS, got 'FAST' "
            "(see 'tide job jobs start --help')\n");
  EXPECT_EQ(tide({"job", "jobs", "start", "SmartPoolsTree", "--paths", "data/a"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "tide: --paths: expected an absolute path under /ifs, got 'data/a' "
            "(see 'tide job jobs start --help')\n");
  EXPECT_EQ(tide({"job", "types", "modify", "SmartPools"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "tide: nothing to modify: give --schedule, --clear-schedule, --priority, --policy or "
            "--enabled (see 'tide job types modify --help')\n");
  EXPECT_EQ(tide({"job", "types", "modify", "SmartPools", "--priority", "0"}), kExitUsage);
  EXPECT_EQ(tide({"job", "jobs", "pause", "three"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "tide: job id: expected a number from 1 up, got 'three' "
            "(see 'tide job jobs pause --help')\n");
  EXPECT_EQ(tide({"job"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "tide: missing command after 'tide job'; expected one of: jobs, types, reports, "
            "status (see 'tide job --help')\n");
  EXPECT_TRUE(cluster_.requests().empty());
}

TEST_F(TideTest, JobPauseResumeAndCancelPutTheStateAsked) {
  write_credentials_in(root_.path());
  const std::vector<std::tuple<std::string, std::string, std::string>> changes{
      {"pause", R"({"state":"paused"})", "Paused job [3]\n"},
      {"resume", R"({"state":"running"})", "Resumed job [3]\n"},
      {"cancel", R"({"state":"cancelled"})", "Cancelled job [3]\n"}};
  for (const auto& [command, body, said] : changes) {
    cluster_.reply(200, R"({"id": 3})");
    EXPECT_EQ(tide({"job", "jobs", command, "3"}), kExitSuccess) << err_.str();
    EXPECT_EQ(cluster_.requests().back().method, Method::put);
    EXPECT_EQ(cluster_.requests().back().target, "/v1/job/jobs/3");
    EXPECT_EQ(cluster_.requests().back().body, body);
    EXPECT_EQ(out_.str(), said);
  }
}

TEST_F(TideTest, JobChangeTheServerRefusesPrintsItsErrorAndExits1) {
  write_credentials_in(root_.path());
  cluster_.reply(409, R"({"error": "job 3 is running: it cannot be resumed"})", "Conflict");
  EXPECT_EQ(tide({"job", "jobs", "resume", "3"}), kExitFailure);
  EXPECT_EQ(err_.str(), "tide: job 3 is running: it cannot be resumed\n");
  EXPECT_EQ(out_.str(), "");
}

TEST_F(TideTest, JobTypesModifySendsOnlyTheChanges) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"name": "SmartPools"})");
  EXPECT_EQ(
      tide({"job", "types", "modify", "SmartPools", "--clear-schedule", "--enabled", "false"}),
      kExitSuccess)
      << err_.str();
  EXPECT_EQ(only_request().method, Method::put);
  EXPECT_EQ(only_request().target, "/v1/job/types/SmartPools");
  EXPECT_EQ(only_request().body, R"({"schedule":"","enabled":false})");
  EXPECT_EQ(out_.str(), "Modified job type SmartPools.\n");
}

TEST_F(TideTest, JobListsViewsAndStatusUseTheirTargets) {
  write_credentials_in(root_.path());
  const std::vector<std::pair<std::vector<std::string>, std::string>> reads{
      {{"job", "jobs", "list"}, "/v1/job/jobs"},
      {{"job", "jobs", "view", "3"}, "/v1/job/jobs/3"},
      {{"job", "types", "list"}, "/v1/job/types"},
      {{"job", "types", "view", "SmartPools"}, "/v1/job/types/SmartPools"},
      {{"job", "reports", "list"}, "/v1/job/reports"},
      {{"job", "reports", "view", "2"}, "/v1/job/reports/2"},
      {{"job", "status"}, "/v1/job/status"}};
  for (const auto& [command, target] : reads) {
    cluster_.reply(200, R"({"id": 3})");
    std::vector<std::string> as_json = command;
    as_json.insert(as_json.end(), {"--format", "json"});
    EXPECT_EQ(tide(as_json), kExitSuccess) << err_.str();
    EXPECT_EQ(cluster_.requests().back().method, Method::get);
    EXPECT_EQ(cluster_.requests().back().target, target);
    EXPECT_EQ(out_.str(), "{\n  \"id\": 3\n}\n");
  }
}

TEST_F(TideTest, JobJobsListShowsTheJobsNotEnded) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"jobs": [{"id": 4, "type": "SmartPoolsTree", "state": "waiting",
      "priority": 5, "policy": "MEDIUM", "started": null, "ended": null, "phase": ""}]})");
  EXPECT_EQ(tide({"job", "jobs", "list"}), kExitSuccess) << err_.str();
  EXPECT_EQ(out_.str(),
            "ID  Type            State    Impact  Pri  Phase  Running Time\n"
            "-------------------------------------------------------------\n"
            " 4  SmartPoolsTree  waiting  MEDIUM    5  -                 -\n"
            "-------------------------------------------------------------\n"
            "Total: 1\n");
}

// The real HTTPS transport, on an address where nothing listens.
TEST(Tide, AnUnreachableClusterExits1NamingEachAddress) {
  TemporaryDirectory empty;
  std::ostringstream out;
  std::ostringstream err;
  EXPECT_EQ(run_tide({"--cluster", "127.0.0.1:1", "--token", "t", "--workdir",
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
