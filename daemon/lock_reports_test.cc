#include "daemon/lock_reports.h"

#include <gtest/gtest.h>

namespace tidepool::daemon {
namespace {

using nlohmann::json;

lockmgr::HeldLock held(lockmgr::ResourceKind kind, std::uint64_t file, lockmgr::LockState state,
                       lockmgr::Range range = lockmgr::kWholeResource) {
  lockmgr::HeldLock lock;
  lock.record.id = {1, file};
  lock.record.resource = {kind, file};
  lock.record.range = range;
  lock.record.state = state;
  lock.record.granted = lockmgr::Mode::protected_read;
  lock.record.requested = lockmgr::Mode::exclusive;
  lock.holder = "nfs client a";
  lock.since_ms = 1000;
  return lock;
}

TEST(LocksFilter, TravelsAsJsonAndRefusesWhatItDoesNotKnow) {
  LocksFilter filter;
  filter.kind = lockmgr::ResourceKind::share;
  filter.file = 42;
  filter.waiters_only = true;
  const Result<LocksFilter> back = LocksFilter::from_json(filter.to_json());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->kind, lockmgr::ResourceKind::share);
  EXPECT_EQ(back->file, 42u);
  EXPECT_TRUE(back->waiters_only);
  EXPECT_TRUE(LocksFilter::from_json(json::object()).ok());
  EXPECT_FALSE(LocksFilter::from_json(json{{"kind", "exclusive"}}).ok());
  EXPECT_FALSE(LocksFilter::from_json(json{{"kind", 3}}).ok());
  EXPECT_FALSE(LocksFilter::from_json(json{{"file", "/ifs/a"}}).ok());
  EXPECT_FALSE(LocksFilter::from_json(json::array()).ok());
}

TEST(LocksReport, ListsWhatTheFilterLetsThroughWithAgeAndOpenEnd) {
  using lockmgr::LockState;
  using lockmgr::ResourceKind;
  const std::vector<lockmgr::HeldLock> locks{
      held(ResourceKind::advisory, 7, LockState::granted, {0, 100}),
      held(ResourceKind::advisory, 7, LockState::waiting),
      held(ResourceKind::advisory, 8, LockState::converting),
      held(ResourceKind::data, 7, LockState::granted),
  };
  LocksFilter filter;
  filter.kind = ResourceKind::advisory;
  filter.file = 7;
  const json report = locks_report(3, locks, 2500, filter);
  ASSERT_EQ(report["locks"].size(), 2u) << report.dump();
  const json& granted = report["locks"][0];
  EXPECT_EQ(granted["node"], 3);
  EXPECT_EQ(granted["kind"], "advisory");
  EXPECT_EQ(granted["end"], 100);
  EXPECT_EQ(granted["mode"], "PR");
  EXPECT_EQ(granted["age_ms"], 1500);
  const json& waiting = report["locks"][1];
  EXPECT_TRUE(waiting["end"].is_null());
  EXPECT_TRUE(waiting["mode"].is_null());
  EXPECT_EQ(waiting["requested"], "EX");

  LocksFilter waiters;
  waiters.waiters_only = true;
  EXPECT_EQ(locks_report(3, locks, 2500, waiters)["locks"].size(), 2u);
}

TEST(LocksReport, CountsWhatItCannotList) {
  const std::vector<lockmgr::HeldLock> locks(
      kMaxReportedLocks + 5, held(lockmgr::ResourceKind::data, 1, lockmgr::LockState::granted));
  const json report = locks_report(1, locks, 0, LocksFilter{});
  EXPECT_EQ(report["locks"].size(), kMaxReportedLocks);
  EXPECT_EQ(report["unlisted"], 5);
}

TEST(LockStatisticsReport, RoundTripsAsMeanAndP99) {
  lockmgr::LockStatistics statistics;
  statistics.grants = 4;
  statistics.fenced = 1;
  statistics.locks_lost = 3;
  for (int i = 0; i < 99; ++i) statistics.round_trips.record(100);
  statistics.round_trips.record(5000);
  const json report = lock_statistics_report(2, statistics)["statistics"];
  EXPECT_EQ(report["node"], 2);
  EXPECT_EQ(report["grants"], 4);
  EXPECT_EQ(report["fenced"], 1);
  EXPECT_EQ(report["locks_lost"], 3);
  EXPECT_EQ(report["round_trips"], 100);
  EXPECT_DOUBLE_EQ(report["round_trip_mean_us"].get<double>(), 149.0);
  EXPECT_LE(report["round_trip_p99_us"].get<std::uint64_t>(), 112u);
}

TEST(NlmSessionsReport, AClientNeverSeenHasNoTimes) {
  nfsd::NlmSession seen{"a",
                        "127.0.0.1",
                        std::chrono::system_clock::from_time_t(10),
                        std::chrono::system_clock::from_time_t(20),
                        1,
                        0,
                        0};
  nfsd::NlmSession unseen{"b", "", {}, {}, 2, 1, 0};
  const json report = nlm_sessions_report(4, {seen, unseen})["sessions"];
  ASSERT_EQ(report.size(), 2u);
  EXPECT_EQ(report[0]["first_seen"], 10);
  EXPECT_EQ(report[0]["last_seen"], 20);
  EXPECT_TRUE(report[1]["last_seen"].is_null());
  EXPECT_EQ(report[1]["waiting"], 1);
}

}  // namespace
}  // namespace tidepool::daemon
