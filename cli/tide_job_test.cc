#include "cli/tide.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "cli/internal/tide_fixture.h"

namespace tidepool::cli {
namespace {

using internal::TideTest;

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

}  // namespace
}  // namespace tidepool::cli
