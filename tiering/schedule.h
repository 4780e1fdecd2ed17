// When a job type starts by itself (issue 7): OneFS's schedule phrases, read and written back,
// and the next start after a moment. Pure; times are the cluster's, in UTC.
//
//   every day at 22:00            every 2 days at 01:30 (days counted from 1970-01-01)
//   every Sunday at 23:00         every Saturday, Sunday at 04:00 (also "and" between days)
//   every 6 hours                 every hour (starts on the hour; every N counted from 00:00 UTC
//   every 30 minutes              every minute       of 1970-01-01, so they line up over days)
//
// Words may be in any case; "days", "hours", "minutes" take an optional plural.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tidepool::tiering {

struct Schedule {
  enum class Unit : std::uint8_t { days, weekdays, hours, minutes };
  Unit unit = Unit::days;
  std::uint32_t every = 1;     // days, hours or minutes between starts; 1 for weekdays
  std::uint8_t weekdays = 0;   // bit d for day d, Sunday = 0; only with Unit::weekdays
  std::uint32_t minute_of_day = 0;  // the time of day of days and weekdays
  bool operator==(const Schedule&) const = default;
};

// A mistake is invalid_argument naming the column (from 1), what was expected and what was found.
Result<Schedule> parse_schedule(std::string_view text);
// The canonical phrase, which parse_schedule reads back to the same schedule.
std::string to_text(const Schedule& schedule);
// The first start strictly after `after` (Unix seconds).
std::int64_t next_start(const Schedule& schedule, std::int64_t after);

}  // namespace tidepool::tiering
