#include "daemon/jobs.h"

#include <gtest/gtest.h>

#include "daemon/config_objects.h"

namespace tidepool::daemon {
namespace {

using nlohmann::json;

constexpr std::int64_t kThursdayNoon = 1'795'694'400;  // 2026-11-26 12:00 UTC

tiering::Job job_with(std::uint64_t id, tiering::JobState state) {
  tiering::Job job;
  job.id = id;
  job.type = "SmartPools";
  job.state = state;
  job.priority = 6;
  job.created = kThursdayNoon;
  job.checkpoint.roots_left = {"/ifs"};
  return job;
}

cluster::GroupView view_of(const std::vector<tiering::Job>& jobs) {
  cluster::GroupView view;
  for (const tiering::Job& job : jobs) {
    view.objects.push_back({std::string(kJobKind), job_object_name(job.id), tiering::encode_job(job),
                            static_cast<cluster::Epoch>(job.id + 100)});
  }
  return view;
}

TEST(Jobs, TheViewListsJobsByIdAndTheNextIdFollowsTheLast) {
  const cluster::GroupView view =
      view_of({job_with(12, tiering::JobState::running), job_with(3, tiering::JobState::succeeded)});
  const std::vector<StoredJob> jobs = jobs_of(view);
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].job.id, 3u);
  EXPECT_EQ(jobs[1].job.id, 12u);
  EXPECT_EQ(jobs[1].changed, 112u);
  EXPECT_EQ(next_job_id(jobs), 13u);
  EXPECT_EQ(next_job_id({}), 1u);
  EXPECT_EQ(job_object_name(12), "00000000000000000012");
  ASSERT_TRUE(job_of(view, 12).has_value());
  EXPECT_FALSE(job_of(view, 4).has_value());
}

TEST(Jobs, AnUpdateIsConditionalOnTheJobAsItWasRead) {
  const cluster::GroupView view = view_of({job_with(7, tiering::JobState::running)});
  const StoredJob stored = *job_of(view, 7);
  tiering::Job paused = stored.job;
  paused.state = tiering::JobState::paused;
  const cluster::Change change = job_update(stored, paused);
  EXPECT_EQ(change.kind, cluster::Change::Kind::update_object);
  EXPECT_EQ(change.object.changed, 107u);
  EXPECT_EQ(tiering::decode_job(change.object.body)->state, tiering::JobState::paused);
}

TEST(Jobs, TheHistoryKeepsTheNewestEndedJobs) {
  std::vector<tiering::Job> jobs;
  for (std::uint64_t id = 1; id <= kJobHistory + 3; ++id) {
    jobs.push_back(job_with(id, tiering::JobState::succeeded));
  }
  jobs.push_back(job_with(kJobHistory + 4, tiering::JobState::waiting));
  EXPECT_EQ(jobs_past_history(jobs_of(view_of(jobs))), (std::vector<std::uint64_t>{1, 2, 3}));
}

TEST(Jobs, TheApiShowsAJobWithoutItsCheckpointAndUnsetTimesAsNull) {
  tiering::Job job = job_with(5, tiering::JobState::waiting);
  job.checkpoint.progress.files_scanned = 40;
  const json shown = job_to_json(job);
  EXPECT_EQ(shown["state"], "waiting");
  EXPECT_EQ(shown["policy"], "LOW");
  EXPECT_TRUE(shown["started"].is_null());
  EXPECT_TRUE(shown["coordinator"].is_null());
  EXPECT_TRUE(shown["reason"].is_null());
  EXPECT_EQ(shown["progress"]["files_scanned"], 40);
  EXPECT_FALSE(shown.contains("checkpoint"));
}

TEST(Jobs, StartRequestsAreReadAndCheckedByField) {
  auto request = start_request_from_json(
      json{{"type", "SmartPoolsTree"}, {"priority", 2}, {"policy", "HIGH"}, {"paths", {"/ifs/a"}},
           {"dry_run", true}});
  ASSERT_TRUE(request.ok()) << request.status().message();
  EXPECT_EQ(request->priority, 2u);
  EXPECT_EQ(request->impact, tiering::Impact::high);
  EXPECT_TRUE(request->dry_run);
  auto message = [](const json& body) { return start_request_from_json(body).status().message(); };
  EXPECT_EQ(message(json{{"type", "Defrag"}}),
            "unknown job type 'Defrag': expected SmartPools or SmartPoolsTree");
  EXPECT_EQ(message(json{{"type", "SmartPools"}, {"priority", 0}}),
            "expected a priority from 1 (first) to 10, found 0");
  EXPECT_EQ(message(json{{"type", "SmartPools"}, {"priority", -3}}),
            "'priority' must be a number from 1 to 10");
  EXPECT_EQ(message(json{{"type", "SmartPools"}, {"policy", "SLOW"}}),
            "'policy': expected an impact policy: LOW, MEDIUM, HIGH or OFF_HOURS, found 'SLOW'");
  EXPECT_EQ(message(json{{"type", "SmartPools"}, {"paths", "/ifs"}}),
            "'paths' must be a list of paths");
  EXPECT_EQ(message(json{{"type", "SmartPools"}, {"force", true}}), "unknown field 'force'");
}

TEST(Jobs, TypeSettingsTakeAScheduleThatReadsAndAnEmptyOneRemovesIt) {
  auto settings = job_type_settings_from_json(
      json{{"schedule", "every Sunday at 23:00"}, {"priority", 3}, {"enabled", false}}, {});
  ASSERT_TRUE(settings.ok()) << settings.status().message();
  EXPECT_EQ(settings->schedule, "every Sunday at 23:00");
  EXPECT_EQ(settings->priority, 3u);
  EXPECT_EQ(settings->enabled, false);
  EXPECT_EQ(job_type_settings_from_json(json{{"schedule", "every Sunday at 25:00"}}, {})
                .status()
                .message(),
            "'schedule': column 17: expected a time of day such as 22:00, found '25:00'");
  auto cleared = job_type_settings_from_json(json{{"schedule", ""}}, *settings);
  ASSERT_TRUE(cleared.ok());
  StoredJobType type{.spec = tiering::find_job_type("SmartPools"), .settings = *cleared};
  const json shown = job_type_to_json(type, kThursdayNoon);
  EXPECT_TRUE(shown["schedule"].is_null());
  EXPECT_TRUE(shown["next_run"].is_null());
  EXPECT_EQ(shown["priority"], 3);

  StoredJobType daily{.spec = tiering::find_job_type("SmartPools")};
  EXPECT_EQ(job_type_to_json(daily, kThursdayNoon)["next_run"], kThursdayNoon + 10 * 3600);
  EXPECT_EQ(job_type_update(daily, {}).kind, cluster::Change::Kind::create_object);
}

TEST(Jobs, WantedStatesArePausedRunningOrCancelled) {
  EXPECT_EQ(*wanted_state_from_json(json{{"state", "paused"}}), tiering::JobState::paused);
  EXPECT_EQ(wanted_state_from_json(json{{"state", "succeeded"}}).status().message(),
            "'state' must be \"paused\", \"running\" or \"cancelled\"");
}

TEST(Jobs, APoolAtNinetyPercentOfItsDisksIsPastItsTransferLimit) {
  const std::map<std::string, PoolUsage> usage = {{"f800", {50, 100}},
                                                  {"h500", {90, 100}},
                                                  {"x100", {99, 0}}};
  EXPECT_EQ(pools_past_limit(usage, kDefaultTransferLimitPercent), (std::set<std::string>{"h500"}));
  EXPECT_EQ(pools_past_limit(usage, 50), (std::set<std::string>{"f800", "h500"}));
  EXPECT_EQ(pools_past_limit(usage, 100), (std::set<std::string>{}));
}

TEST(Jobs, DataGoesToThePoolItsTargetNamesOrTheFirstOfItsTierWithNodes) {
  cluster::GroupView view;
  cluster::NodeInfo hot;
  hot.id = 1;
  hot.pool = "f800";
  cluster::NodeInfo cold;
  cold.id = 2;
  cold.pool = "h500";
  view.nodes = {hot, cold};
  view.objects.push_back(
      {std::string(kTierKind), "cold-tier", R"({"children":["h400","h500"]})", 3});
  view.objects.push_back({std::string(kTierKind), "empty-tier", R"({"children":["x1"]})", 3});
  EXPECT_EQ(pool_for(view, "anywhere", "default"), "default");
  EXPECT_EQ(pool_for(view, "anywhere", "f800"), "f800");
  EXPECT_EQ(pool_for(view, "h500", "f800"), "h500");
  EXPECT_EQ(pool_for(view, "cold-tier", "f800"), "h500") << "h400 has no nodes";
  EXPECT_EQ(pool_for(view, "cold-tier", "h400"), "h400") << "already in the tier";
  EXPECT_EQ(pool_for(view, "f800", "default"), "f800");
  EXPECT_EQ(pool_for(view, "empty-tier", "f800"), std::nullopt);
  EXPECT_EQ(pool_for(view, "gone", "f800"), std::nullopt);
}

}  // namespace
}  // namespace tidepool::daemon
