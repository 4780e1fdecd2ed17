#include "tiering/jobs.h"

#include <gtest/gtest.h>

namespace tidepool::tiering {
namespace {

constexpr std::int64_t kThursdayNoon = 1'795'694'400;  // 2026-11-26 12:00 UTC
constexpr std::int64_t kHour = 3600;

JobTypeView type_named(std::string_view name, const JobTypeSettings& settings = {}) {
  const JobTypeSpec* spec = find_job_type(name);
  EXPECT_NE(spec, nullptr) << name;
  return settle(*spec, settings);
}

Job started(std::uint64_t id, std::string_view type, std::vector<Job> others = {},
            StartRequest request = {}) {
  request.type = std::string(type);
  if (type == "SmartPoolsTree" && request.paths.empty()) request.paths = {"/ifs/data"};
  auto job = start_job(request, type_named(type), others, id, kThursdayNoon);
  EXPECT_TRUE(job.ok()) << job.status().to_string();
  return job.ok() ? *job : Job{};
}

TEST(JobTypes, SmartPoolsRunsDailyAtTenAtPrioritySixWithLowImpact) {
  const JobTypeView smartpools = type_named("SmartPools");
  ASSERT_TRUE(smartpools.schedule.has_value());
  EXPECT_EQ(to_text(*smartpools.schedule), "every day at 22:00");
  EXPECT_EQ(smartpools.priority, 6u);
  EXPECT_EQ(smartpools.impact, Impact::low);
  EXPECT_FALSE(type_named("SmartPoolsTree").schedule.has_value());
  EXPECT_EQ(find_job_type("FSAnalyze"), nullptr);
}

TEST(JobTypes, SettingsOverrideTheDefaultsAndAnEmptyScheduleRemovesIt) {
  JobTypeSettings settings;
  settings.schedule = "";
  settings.priority = 2;
  settings.impact = Impact::high;
  settings.enabled = false;
  const JobTypeView view = type_named("SmartPools", settings);
  EXPECT_FALSE(view.schedule.has_value());
  EXPECT_EQ(view.priority, 2u);
  EXPECT_EQ(view.impact, Impact::high);
  EXPECT_FALSE(view.enabled);
  auto decoded = decode_job_type_settings(encode_job_type_settings(settings));
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, settings);
}

TEST(JobTypes, AScheduledStartIsDueOnceItsTimeHasCome) {
  const JobTypeView daily = type_named("SmartPools");  // every day at 22:00
  EXPECT_FALSE(schedule_due(daily, kThursdayNoon, kThursdayNoon + 9 * kHour));
  EXPECT_TRUE(schedule_due(daily, kThursdayNoon, kThursdayNoon + 10 * kHour));
  EXPECT_FALSE(schedule_due(daily, kThursdayNoon + 10 * kHour, kThursdayNoon + 11 * kHour))
      << "counted from the start just made, the next is tomorrow";
  JobTypeSettings off;
  off.enabled = false;
  EXPECT_FALSE(schedule_due(type_named("SmartPools", off), 0, kThursdayNoon));
  EXPECT_FALSE(schedule_due(type_named("SmartPoolsTree"), 0, kThursdayNoon));
}

TEST(Jobs, AJobOfATypeThatHasNotEndedCannotStartAgain) {
  const Job first = started(1, "SmartPools");
  EXPECT_EQ(first.state, JobState::waiting);
  EXPECT_EQ(first.checkpoint.roots_left, std::vector<std::string>{"/ifs"});
  StartRequest again{.type = "SmartPools"};
  auto refused = start_job(again, type_named("SmartPools"), {first}, 2, kThursdayNoon);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Errc::already_exists);
  EXPECT_EQ(refused.status().message(), "SmartPools is already waiting as job 1");
  Job done = first;
  end_job(done, JobState::succeeded, "", kThursdayNoon);
  EXPECT_TRUE(start_job(again, type_named("SmartPools"), {done}, 2, kThursdayNoon).ok());
}

TEST(Jobs, StartRequestsAreChecked) {
  auto start = [](StartRequest request) {
    return start_job(request, type_named(request.type), {}, 1, kThursdayNoon).status();
  };
  EXPECT_EQ(start({.type = "SmartPoolsTree"}).message(), "SmartPoolsTree needs the paths to work on");
  EXPECT_EQ(start({.type = "FilePolicy", .paths = {"/ifs/a"}}).message(),
            "FilePolicy finds its files in every shard: it takes no paths");
  EXPECT_TRUE(start({.type = "FilePolicy"}).ok());
  EXPECT_EQ(start({.type = "SmartPools", .priority = 11}).message(),
            "expected a priority from 1 (first) to 10, found 11");
  for (std::string bad : {"data", "/ifsdata", "/ifs/", "/ifs/a/../b", "/ifs//a", "/tmp"}) {
    EXPECT_EQ(start({.type = "SmartPools", .paths = {bad}}).message(),
              "paths: expected an absolute path under /ifs, found '" + bad + "'");
  }
  EXPECT_TRUE(start({.type = "SmartPools", .paths = {"/ifs", "/ifs/a b/c"}}).ok());
}

TEST(Jobs, PauseResumeAndCancelFollowTheStates) {
  Job job = started(4, "SmartPools");
  job.state = JobState::running;
  auto paused = change_state(job, JobState::paused, kThursdayNoon);
  ASSERT_TRUE(paused.ok());
  EXPECT_EQ(paused->state, JobState::paused);
  EXPECT_EQ(change_state(*paused, JobState::paused, kThursdayNoon).status().message(),
            "SmartPools[4] is paused already");
  EXPECT_EQ(change_state(job, JobState::running, kThursdayNoon).status().message(),
            "SmartPools[4] is running, not paused: nothing to resume");
  auto resumed = change_state(*paused, JobState::running, kThursdayNoon);
  ASSERT_TRUE(resumed.ok());
  EXPECT_EQ(resumed->state, JobState::waiting);  // it runs when its turn comes
  auto cancelled = change_state(*resumed, JobState::cancelled, kThursdayNoon + 5);
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->state, JobState::cancelled);
  EXPECT_EQ(cancelled->ended, kThursdayNoon + 5);
  EXPECT_EQ(cancelled->reason, "cancelled by an administrator");
  auto again = change_state(*cancelled, JobState::running, kThursdayNoon);
  EXPECT_EQ(again.status().code(), Errc::precondition_failed);
  EXPECT_EQ(again.status().message(), "SmartPools[4] is cancelled: it has ended");
}

TEST(Jobs, TheJobOfHighestPriorityRunsAndTheOthersWait) {
  const Job daily = started(1, "SmartPools");  // priority 6
  const Job tree = started(2, "SmartPoolsTree");  // priority 5: first
  EXPECT_EQ(job_to_run({daily, tree}, kThursdayNoon), 2u);
  Job paused_tree = tree;
  paused_tree.state = JobState::paused;
  EXPECT_EQ(job_to_run({daily, paused_tree}, kThursdayNoon), 1u);
  Job later = started(3, "SmartPools", {}, {.priority = 6});
  EXPECT_EQ(job_to_run({later, daily}, kThursdayNoon), 1u) << "the oldest among equals";
  EXPECT_FALSE(job_to_run({}, kThursdayNoon).has_value());
}

TEST(Jobs, OffHoursJobsWaitThroughBusinessHours) {
  const Job job = started(1, "SmartPools", {}, {.impact = Impact::off_hours});
  EXPECT_FALSE(job_to_run({job}, kThursdayNoon).has_value());
  EXPECT_EQ(job_to_run({job}, kThursdayNoon + 7 * kHour), 1u);       // 19:00
  EXPECT_EQ(job_to_run({job}, kThursdayNoon + 2 * 24 * kHour), 1u);  // Saturday noon
  EXPECT_EQ(budget_of(Impact::off_hours, kThursdayNoon + 7 * kHour), budget_of(Impact::low, 0));
  EXPECT_EQ(budget_of(Impact::high, 0).files_per_second, 0u);
  EXPECT_EQ(budget_of(Impact::high, 0).bytes_per_second, 0u);
  EXPECT_LT(budget_of(Impact::low, 0).bytes_per_second, budget_of(Impact::medium, 0).bytes_per_second);
}

TEST(Jobs, AJobReadsBackFromItsRecord) {
  Job job = started(9, "SmartPoolsTree", {}, {.impact = Impact::medium, .dry_run = true});
  job.state = JobState::running;
  job.started = kThursdayNoon + 1;
  job.coordinator = 3;
  job.runs = 2;
  job.phase = "scan";
  job.phases = {{"scan", 12}};
  job.checkpoint.frames = {{1, "/ifs", 7, 99}, {1ull << 48 | 5, "/ifs/data", 3, 99}};
  job.checkpoint.progress = {10, 2, 4, 3, 1, 1};
  note_error(job, "/ifs/data/x: gone");
  auto decoded = decode_job(encode_job(job));
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(*decoded, job);
  EXPECT_FALSE(decode_job("{\"id\":1}").ok());
  EXPECT_FALSE(decode_job("not json").ok());
}

TEST(Jobs, ImpactPoliciesReadByName) {
  EXPECT_EQ(*parse_impact("OFF_HOURS"), Impact::off_hours);
  EXPECT_EQ(name_of(Impact::medium), "MEDIUM");
  EXPECT_EQ(parse_impact("low").status().message(),
            "expected an impact policy: LOW, MEDIUM, HIGH or OFF_HOURS, found 'low'");
}

}  // namespace
}  // namespace tidepool::tiering
