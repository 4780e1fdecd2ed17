#include "tiering/schedule.h"

#include <gtest/gtest.h>

namespace tidepool::tiering {
namespace {

// 2026-11-26 (a Thursday) 12:00:00 UTC.
constexpr std::int64_t kThursdayNoon = 1'795'694'400;
constexpr std::int64_t kHour = 3600;
constexpr std::int64_t kDay = 24 * kHour;

Schedule parsed(std::string_view text) {
  auto schedule = parse_schedule(text);
  EXPECT_TRUE(schedule.ok()) << text << ": " << schedule.status().to_string();
  return schedule.ok() ? *schedule : Schedule{};
}

std::string mistake(std::string_view text) {
  auto schedule = parse_schedule(text);
  EXPECT_FALSE(schedule.ok()) << text;
  return schedule.ok() ? "" : schedule.status().message();
}

TEST(Schedule, EveryDayAtATimeStartsAtThatTimeEachDay) {
  const Schedule daily = parsed("every day at 22:00");
  EXPECT_EQ(next_start(daily, kThursdayNoon), kThursdayNoon + 10 * kHour);
  EXPECT_EQ(next_start(daily, kThursdayNoon + 10 * kHour), kThursdayNoon + 34 * kHour);
  EXPECT_EQ(to_text(daily), "every day at 22:00");
}

TEST(Schedule, EveryFewDaysCountsDaysFromTheEpoch) {
  const Schedule schedule = parsed("Every 2 Days at 01:30");
  const std::int64_t next = next_start(schedule, kThursdayNoon);
  EXPECT_EQ(next % kDay, 90 * 60);
  EXPECT_EQ((next / kDay) % 2, 0);
  EXPECT_GT(next, kThursdayNoon);
  EXPECT_LE(next, kThursdayNoon + 2 * kDay);
  EXPECT_EQ(next_start(schedule, next), next + 2 * kDay);
  EXPECT_EQ(to_text(schedule), "every 2 days at 01:30");
}

TEST(Schedule, WeekdaysStartOnThoseDaysOnly) {
  const Schedule sunday = parsed("every Sunday at 23:00");
  // Thursday noon → Sunday 23:00 is three days and eleven hours later.
  EXPECT_EQ(next_start(sunday, kThursdayNoon), kThursdayNoon + 3 * kDay + 11 * kHour);
  const Schedule weekend = parsed("every Saturday, Sunday at 04:00");
  EXPECT_EQ(next_start(weekend, kThursdayNoon), kThursdayNoon + 2 * kDay - 8 * kHour);
  EXPECT_EQ(next_start(weekend, kThursdayNoon + 2 * kDay - 8 * kHour),
            kThursdayNoon + 3 * kDay - 8 * kHour);
  EXPECT_EQ(to_text(weekend), "every Saturday, Sunday at 04:00");
  EXPECT_EQ(parsed("every sunday and saturday at 04:00"), weekend);
}

TEST(Schedule, HoursAndMinutesLineUpFromMidnight) {
  EXPECT_EQ(next_start(parsed("every 6 hours"), kThursdayNoon), kThursdayNoon + 6 * kHour);
  EXPECT_EQ(next_start(parsed("every hour"), kThursdayNoon + 1), kThursdayNoon + kHour);
  EXPECT_EQ(next_start(parsed("every 30 minutes"), kThursdayNoon + 60), kThursdayNoon + 1800);
  EXPECT_EQ(to_text(parsed("every 1 minutes")), "every minute");
}

TEST(Schedule, EveryPhraseReadsBackTheSame) {
  for (std::string_view text :
       {"every day at 00:00", "every 7 days at 23:59", "every Monday, Wednesday, Friday at 08:15",
        "every 12 hours", "every 45 minutes", "every hour"}) {
    EXPECT_EQ(parsed(to_text(parsed(text))), parsed(text)) << text;
  }
}

TEST(Schedule, MistakesNameTheColumnAndWhatWasExpected) {
  EXPECT_EQ(mistake(""), "column 1: expected 'every', found the end");
  EXPECT_EQ(mistake("daily at 22:00"), "column 1: expected 'every', found 'daily'");
  EXPECT_EQ(mistake("every day at 25:00"),
            "column 14: expected a time of day such as 22:00, found '25:00'");
  EXPECT_EQ(mistake("every day"), "column 10: expected 'at', found the end");
  EXPECT_EQ(mistake("every 0 hours"), "column 7: expected a whole number from 1, found '0'");
  EXPECT_EQ(mistake("every 3 fortnights"),
            "column 9: expected days, hours or minutes, found 'fortnights'");
  EXPECT_EQ(mistake("every Sunday, at 23:00"),
            "column 15: expected a day of the week such as Sunday, found 'at'");
  EXPECT_EQ(mistake("every Sunday, Sunday at 23:00"),
            "column 15: expected each day of the week once, found 'sunday'");
  EXPECT_EQ(mistake("every 6 hours at 10:00"), "column 15: expected the end, found 'at'");
  EXPECT_EQ(mistake("every 99999 days at 10:00"),
            "column 7: expected at most 3660 days, found '99999'");
}

}  // namespace
}  // namespace tidepool::tiering
