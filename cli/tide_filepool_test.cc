#include "cli/tide.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "cli/internal/tide_fixture.h"

namespace tidepool::cli {
namespace {

using namespace std::chrono_literals;
using internal::TideTest;

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
  EXPECT_EQ(tide({"filepool", "policies", "delete", "cold", "-f"}), kExitSuccess);
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

}  // namespace
}  // namespace tidepool::cli
