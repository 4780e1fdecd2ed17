#include "cli/tide.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "cli/internal/tide_fixture.h"
#include "cli/render.h"

namespace tidepool::cli {
namespace {

using internal::TideTest;

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
  // isi's columns, the whole cluster first.
  EXPECT_NE(text.find("Node    CPU  SMB  FTP  HTTP  NFS  HDFS  Total  NetIn  NetOut  DiskIn  "
                      "DiskOut"),
            std::string::npos)
      << text;
  EXPECT_LT(text.find("All   40.0%"), text.find("1     10.0%")) << text;
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

  cluster_.reply(200, kSystemStatistics);
  EXPECT_EQ(tide({"statistics", "pstat", "--format", "top", "--iterations", "1"}), kExitSuccess)
      << err_.str();
  const std::string top = out_.str();
  for (const char* expected : {"\x1b[H\x1b[2J", "NFS3 Operations Per Second (all nodes)\n",
                               "getattr              8/s", "CPU Utilization\n  busy 40.0%",
                               "Network Input / Output", "Disk IO"}) {
    EXPECT_NE(top.find(expected), std::string::npos) << expected << " in\n" << top;
  }
}

TEST(TopRates, AreBytesPerSecondWithKMG) {
  // Through the table that shows them: a node moving 2.9 GB/s over the network.
  std::ostringstream out;
  render_system_top(out, Json::parse(R"({"statistics": [{"node": 1, "network":
      {"in_bytes_per_second": 2900000000, "out_bytes_per_second": 125300000},
      "disk": {"read_bytes_per_second": 512, "write_bytes_per_second": 2900}}]})"));
  EXPECT_NE(out.str().find("2.9G  125.3M   512.0     2.9K"), std::string::npos) << out.str();
}

TEST_F(TideTest, StatisticsClientAsksForEveryNodesClients) {
  write_credentials_in(root_.path());
  cluster_.reply(200, R"({"clients": [], "unreachable": []})");
  EXPECT_EQ(tide({"statistics", "client"}), kExitSuccess) << err_.str();
  EXPECT_EQ(only_request().target, "/v1/statistics/clients");
  EXPECT_NE(out_.str().find("Avg Latency"), std::string::npos) << out_.str();
}

}  // namespace
}  // namespace tidepool::cli
