#include "tiering/schedule.h"

#include <array>
#include <cctype>
#include <charconv>
#include <optional>
#include <vector>

namespace tidepool::tiering {
namespace {

constexpr std::int64_t kMinute = 60;
constexpr std::int64_t kDay = 24 * 60 * kMinute;
constexpr std::int64_t kWeek = 7 * kDay;
// 1970-01-01 was a Thursday: weekday 4 with Sunday = 0.
constexpr std::int64_t kEpochWeekday = 4;
// Bounds that keep every start within a few centuries and every product within 64 bits.
constexpr std::uint32_t kMaxDays = 3660;
constexpr std::uint32_t kMaxHours = 24 * kMaxDays;
constexpr std::uint32_t kMaxMinutes = 60 * kMaxHours;

constexpr std::array<std::string_view, 7> kWeekdayNames = {
    "Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};

struct Word {
  std::string text;  // lowercased, without a trailing comma
  std::size_t column = 0;
  bool comma = false;  // a comma followed it
};

std::vector<Word> words_of(std::string_view text) {
  std::vector<Word> words;
  std::size_t i = 0;
  while (i < text.size()) {
    if (std::isspace(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    Word word{.column = i + 1};
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i])) && text[i] != ',') {
      word.text += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
      ++i;
    }
    if (i < text.size() && text[i] == ',') {
      word.comma = true;
      ++i;
    }
    words.push_back(std::move(word));
  }
  return words;
}

Status mistake(std::size_t column, std::string_view expected, std::string_view found) {
  return error(Errc::invalid_argument, "column " + std::to_string(column) + ": expected " +
                                           std::string(expected) + ", found " +
                                           (found.empty() ? "the end" : "'" + std::string(found) + "'"));
}

class Reader {
 public:
  explicit Reader(std::string_view text) : words_(words_of(text)), end_column_(text.size() + 1) {}

  bool done() const { return next_ >= words_.size(); }
  const Word* peek() const { return done() ? nullptr : &words_[next_]; }
  std::size_t column() const { return done() ? end_column_ : words_[next_].column; }
  std::string_view found() const { return done() ? std::string_view() : words_[next_].text; }
  const Word& take() { return words_[next_++]; }

  Status expect(std::string_view word) {
    if (done() || words_[next_].text != word) return fail("'" + std::string(word) + "'");
    ++next_;
    return {};
  }
  Status fail(std::string_view expected) const { return mistake(column(), expected, found()); }

 private:
  std::vector<Word> words_;
  std::size_t next_ = 0;
  std::size_t end_column_;
};

std::optional<std::uint32_t> number_of(std::string_view text, std::uint32_t max) {
  std::uint32_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1 || value > max) {
    return std::nullopt;
  }
  return value;
}

std::optional<int> weekday_of(std::string_view word) {
  for (std::size_t d = 0; d < kWeekdayNames.size(); ++d) {
    std::string name(kWeekdayNames[d]);
    name[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(name[0])));
    if (word == name) return static_cast<int>(d);
  }
  return std::nullopt;
}

// "22:00" → minutes after midnight.
std::optional<std::uint32_t> time_of_day(std::string_view text) {
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon > 2 || text.size() != colon + 3) {
    return std::nullopt;
  }
  std::uint32_t hours = 0;
  std::uint32_t minutes = 0;
  auto h = std::from_chars(text.data(), text.data() + colon, hours);
  auto m = std::from_chars(text.data() + colon + 1, text.data() + text.size(), minutes);
  if (h.ec != std::errc() || h.ptr != text.data() + colon || m.ec != std::errc() ||
      m.ptr != text.data() + text.size() || hours > 23 || minutes > 59) {
    return std::nullopt;
  }
  return hours * 60 + minutes;
}

Status read_time_of_day(Reader& reader, Schedule& schedule) {
  TP_RETURN_IF_ERROR(reader.expect("at"));
  if (reader.done()) return reader.fail("a time of day such as 22:00");
  const std::optional<std::uint32_t> minute = time_of_day(reader.peek()->text);
  if (!minute || reader.peek()->comma) return reader.fail("a time of day such as 22:00");
  reader.take();
  schedule.minute_of_day = *minute;
  return {};
}

// After "every": "Sunday[,] [and] Monday ... at HH:MM".
Status read_weekdays(Reader& reader, Schedule& schedule) {
  schedule.unit = Schedule::Unit::weekdays;
  for (;;) {
    const std::optional<int> day = reader.done() ? std::nullopt : weekday_of(reader.peek()->text);
    if (!day) return reader.fail("a day of the week such as Sunday");
    if (schedule.weekdays & (1u << *day)) return reader.fail("each day of the week once");
    schedule.weekdays |= static_cast<std::uint8_t>(1u << *day);
    const bool comma = reader.take().comma;
    if (!reader.done() && reader.peek()->text == "and") {
      reader.take();
      continue;
    }
    if (comma) continue;
    return read_time_of_day(reader, schedule);
  }
}

// Reads "day[s] at HH:MM", "hour[s]" or "minute[s]" after a count of `every`.
Status read_unit(Reader& reader, Schedule& schedule, std::size_t count_column) {
  const std::string_view unit = reader.found();
  const bool one = schedule.every == 1;
  auto is = [&](std::string_view singular) {
    return unit == singular || unit == std::string(singular) + "s";
  };
  std::uint32_t max = 0;
  if (is("day")) {
    schedule.unit = Schedule::Unit::days;
    max = kMaxDays;
  } else if (is("hour")) {
    schedule.unit = Schedule::Unit::hours;
    max = kMaxHours;
  } else if (is("minute")) {
    schedule.unit = Schedule::Unit::minutes;
    max = kMaxMinutes;
  } else {
    return reader.fail(one ? "day, hour, minute or a day of the week" : "days, hours or minutes");
  }
  if (schedule.every > max) {
    return mistake(count_column, "at most " + std::to_string(max) + " " + std::string(unit),
                   std::to_string(schedule.every));
  }
  if (reader.take().comma) return reader.fail("no comma");
  if (schedule.unit == Schedule::Unit::days) return read_time_of_day(reader, schedule);
  return {};
}

std::string two_digits(std::uint32_t n) {
  return std::string(1, static_cast<char>('0' + n / 10)) + static_cast<char>('0' + n % 10);
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

// The first multiple of `period` (counted from the epoch, shifted by `offset`) after `after`.
std::int64_t next_multiple(std::int64_t after, std::int64_t period, std::int64_t offset) {
  return (floor_div(after - offset, period) + 1) * period + offset;
}

}  // namespace

Result<Schedule> parse_schedule(std::string_view text) {
  Reader reader(text);
  Schedule schedule;
  TP_RETURN_IF_ERROR(reader.expect("every"));
  if (reader.done()) return reader.fail("a number, day, hour, minute or a day of the week");
  if (weekday_of(reader.peek()->text)) {
    TP_RETURN_IF_ERROR(read_weekdays(reader, schedule));
  } else {
    const std::size_t count_column = reader.column();
    const Word& first = *reader.peek();
    if (std::isdigit(static_cast<unsigned char>(first.text[0]))) {
      const std::optional<std::uint32_t> count = number_of(first.text, kMaxMinutes);
      if (!count || first.comma) return reader.fail("a whole number from 1");
      schedule.every = *count;
      reader.take();
    }
    if (reader.done()) return reader.fail("days, hours or minutes");
    TP_RETURN_IF_ERROR(read_unit(reader, schedule, count_column));
  }
  if (!reader.done()) return reader.fail("the end");
  return schedule;
}

std::string to_text(const Schedule& schedule) {
  const std::string at = " at " + two_digits(schedule.minute_of_day / 60) + ":" +
                         two_digits(schedule.minute_of_day % 60);
  auto counted = [&](std::string_view unit) {
    if (schedule.every == 1) return "every " + std::string(unit);
    return "every " + std::to_string(schedule.every) + " " + std::string(unit) + "s";
  };
  switch (schedule.unit) {
    case Schedule::Unit::days:
      return counted("day") + at;
    case Schedule::Unit::hours:
      return counted("hour");
    case Schedule::Unit::minutes:
      return counted("minute");
    case Schedule::Unit::weekdays: {
      // Monday first, so a weekend reads "Saturday, Sunday".
      std::string days;
      for (std::size_t i = 1; i <= kWeekdayNames.size(); ++i) {
        const std::size_t d = i % kWeekdayNames.size();
        if (!(schedule.weekdays & (1u << d))) continue;
        days += (days.empty() ? "" : ", ") + std::string(kWeekdayNames[d]);
      }
      return "every " + days + at;
    }
  }
  return {};
}

std::int64_t next_start(const Schedule& schedule, std::int64_t after) {
  const std::int64_t time_of_day = std::int64_t{schedule.minute_of_day} * kMinute;
  switch (schedule.unit) {
    case Schedule::Unit::minutes:
      return next_multiple(after, schedule.every * kMinute, 0);
    case Schedule::Unit::hours:
      return next_multiple(after, schedule.every * 60 * kMinute, 0);
    case Schedule::Unit::days:
      return next_multiple(after, schedule.every * kDay, time_of_day);
    case Schedule::Unit::weekdays: {
      std::int64_t best = 0;
      for (std::int64_t d = 0; d < 7; ++d) {
        if (!(schedule.weekdays & (1u << d))) continue;
        // Day d's first moment after the epoch's Thursday, then the time of day.
        const std::int64_t offset = ((d - kEpochWeekday + 7) % 7) * kDay + time_of_day;
        const std::int64_t start = next_multiple(after, kWeek, offset);
        if (best == 0 || start < best) best = start;
      }
      return best;
    }
  }
  return after;
}

}  // namespace tidepool::tiering
