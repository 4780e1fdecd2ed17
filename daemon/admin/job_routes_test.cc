// Job types, jobs and their reports through the admin API of a one-node cluster. No job
// engine runs here: a job started stays waiting until an administrator changes its state.
#include <gtest/gtest.h>

#include "daemon/admin/test_node.h"
#include "tiering/jobs.h"

namespace tidepool::daemon::admin::testing {
namespace {

class JobRoutesTest : public OneNodeClusterTest {
 protected:
  HttpResponse set_state(const std::string& id, const std::string& state) {
    return node_.call("PUT", "/v1/job/jobs/" + id, json{{"state", state}});
  }
};

TEST_F(JobRoutesTest, EveryJobTypeIsListedWithItsSettings) {
  const json types = json_of(node_.call("GET", "/v1/job/types"))["types"];
  ASSERT_EQ(types.size(), tiering::job_types().size());
  for (std::size_t i = 0; i < types.size(); ++i) {
    EXPECT_EQ(types[i]["name"], tiering::job_types()[i].name);
  }
  const json smartpools = json_of(node_.call("GET", "/v1/job/types/SmartPools"));
  EXPECT_EQ(smartpools["schedule"], "every day at 22:00");
  EXPECT_EQ(smartpools["priority"], 6);
  EXPECT_EQ(smartpools["policy"], "LOW");
  EXPECT_TRUE(smartpools["next_run"].is_number());
  const HttpResponse missing = node_.call("GET", "/v1/job/types/Defrag");
  EXPECT_EQ(missing.status, 404u);
  EXPECT_EQ(error_of(missing), "no job type 'Defrag'");
}

TEST_F(JobRoutesTest, AJobTypesSettingsChangeAndAreKept) {
  const HttpResponse changed =
      node_.call("PUT", "/v1/job/types/SmartPools",
                 json{{"priority", 3}, {"schedule", ""}, {"policy", "HIGH"}});
  EXPECT_EQ(changed.status, 200u) << changed.body;
  const json now = json_of(node_.call("GET", "/v1/job/types/SmartPools"));
  EXPECT_EQ(now, json_of(changed));
  EXPECT_EQ(now["priority"], 3);
  EXPECT_TRUE(now["schedule"].is_null());
  EXPECT_TRUE(now["next_run"].is_null());
  EXPECT_EQ(now["policy"], "HIGH");
  EXPECT_EQ(node_.call("PUT", "/v1/job/types/SmartPools", json{{"priority", 11}}).status, 400u);
  EXPECT_EQ(node_.call("PUT", "/v1/job/types/SmartPools", json{{"schedule", "sometimes"}}).status,
            400u);
  EXPECT_EQ(node_.call("PUT", "/v1/job/types/Defrag", json{{"priority", 3}}).status, 404u);
  EXPECT_EQ(json_of(node_.call("GET", "/v1/job/types/SmartPools"))["priority"], 3);
}

TEST_F(JobRoutesTest, AJobStartsWaitsIsPausedResumedAndCancelledIntoTheReports) {
  const HttpResponse started =
      node_.call("POST", "/v1/job/jobs", json{{"type", "SmartPoolsTree"}, {"paths", {"/ifs"}}});
  ASSERT_EQ(started.status, 201u) << started.body;
  const json job = json_of(started);
  EXPECT_EQ(job["id"], 1);
  EXPECT_EQ(job["state"], "waiting");
  EXPECT_EQ(job["priority"], 5);
  EXPECT_EQ(json_of(node_.call("GET", "/v1/job/jobs")), (json{{"jobs", json::array({job})}}));
  EXPECT_EQ(json_of(node_.call("GET", "/v1/job/jobs/1")), job);
  const HttpResponse again =
      node_.call("POST", "/v1/job/jobs", json{{"type", "SmartPoolsTree"}, {"paths", {"/ifs"}}});
  EXPECT_EQ(again.status, 409u);

  EXPECT_EQ(json_of(set_state("1", "paused"))["state"], "paused");
  EXPECT_EQ(set_state("1", "paused").status, 409u);
  EXPECT_EQ(json_of(set_state("1", "running"))["state"], "waiting");
  EXPECT_EQ(node_.call("GET", "/v1/job/reports/1").status, 404u);
  const HttpResponse cancelled = set_state("1", "cancelled");
  EXPECT_EQ(json_of(cancelled)["state"], "cancelled");
  EXPECT_EQ(set_state("1", "running").status, 409u);

  EXPECT_EQ(json_of(node_.call("GET", "/v1/job/jobs")), (json{{"jobs", json::array()}}));
  EXPECT_EQ(json_of(node_.call("GET", "/v1/job/reports")),
            (json{{"reports", json::array({json_of(cancelled)})}}));
  EXPECT_EQ(json_of(node_.call("GET", "/v1/job/reports/1")), json_of(cancelled));
  EXPECT_EQ(json_of(node_.call("GET", "/v1/job/jobs/1")), json_of(cancelled));
  EXPECT_EQ(json_of(node_.call("GET", "/v1/job/status")),
            (json{{"coordinator", kNodeId},
                  {"active", json::array()},
                  {"recent", json::array({json_of(cancelled)})}}));
}

TEST_F(JobRoutesTest, AJobIsRefusedWhatItCannotBe) {
  const HttpResponse pathless =
      node_.call("POST", "/v1/job/jobs", json{{"type", "SmartPoolsTree"}});
  EXPECT_EQ(pathless.status, 400u);
  EXPECT_EQ(node_.call("POST", "/v1/job/jobs", json{{"type", "Defrag"}}).status, 400u);
  EXPECT_EQ(node_.call("POST", "/v1/job/jobs", json{{"kind", "SmartPools"}}).status, 400u);
  const HttpResponse missing = set_state("9", "paused");
  EXPECT_EQ(missing.status, 404u);
  EXPECT_EQ(error_of(missing), "no job 9");
  EXPECT_EQ(error_of(node_.call("GET", "/v1/job/reports/9")), "no report of job 9");
  EXPECT_EQ(node_.call("GET", "/v1/job/jobs/x").status, 404u);
  EXPECT_EQ(json_of(node_.call("GET", "/v1/job/jobs")), (json{{"jobs", json::array()}}));
}

}  // namespace
}  // namespace tidepool::daemon::admin::testing
