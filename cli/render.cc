#include "cli/render.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iterator>
#include <string_view>
#include <utility>

#include "cli/internal/render_parts.h"

namespace tidepool::cli {
namespace {

constexpr const char* kColumnGap = "  ";

// Characters, not bytes: a UTF-8 continuation byte does not start one.
std::size_t display_width(std::string_view text) {
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

void pad(std::ostream& out, std::size_t count) { out << std::string(count, ' '); }

}  // namespace

Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

void Table::add_row(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

std::vector<std::size_t> Table::column_widths() const {
  std::vector<std::size_t> widths;
  for (const Column& column : columns_) widths.push_back(display_width(column.title));
  for (const auto& row : rows_) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      widths[i] = std::max(widths[i], display_width(row[i]));
    }
  }
  return widths;
}

std::size_t Table::width() const {
  std::vector<std::size_t> widths = column_widths();
  if (widths.empty()) return 0;
  std::size_t width = (widths.size() - 1) * std::char_traits<char>::length(kColumnGap);
  for (std::size_t column_width : widths) width += column_width;
  return width;
}

void Table::render(std::ostream& out) const {
  const std::vector<std::size_t> widths = column_widths();
  auto render_line = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (std::size_t i = 0; i < columns_.size(); ++i) {
      const std::string padding(widths[i] - display_width(cells[i]), ' ');
      if (i > 0) line += kColumnGap;
      line += columns_[i].align == Align::right ? padding + cells[i] : cells[i] + padding;
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out << line << '\n';
  };
  std::vector<std::string> titles;
  for (const Column& column : columns_) titles.push_back(column.title);
  render_line(titles);
  out << std::string(width(), '-') << '\n';
  for (const auto& row : rows_) render_line(row);
}

void render_listing(std::ostream& out, const Table& table) {
  table.render(out);
  out << std::string(table.width(), '-') << '\n' << "Total: " << table.size() << '\n';
}

std::string human_bytes(std::uint64_t bytes) {
  if (bytes < 1000) return std::to_string(bytes) + " B";
  static constexpr const char* kUnits[] = {"kB", "MB", "GB", "TB", "PB", "EB"};
  double value = static_cast<double>(bytes) / 1000;
  std::size_t unit = 0;
  // 999.96 kB would print as "1000.0 kB": it is 1.0 MB.
  while (value >= 999.95 && unit + 1 < std::size(kUnits)) {
    value /= 1000;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", value, kUnits[unit]);
  return text;
}

std::string human_rate(double bytes_per_second) {
  if (!std::isfinite(bytes_per_second) || bytes_per_second < 0) return "-";
  return human_bytes(static_cast<std::uint64_t>(std::llround(bytes_per_second))) + "/s";
}

std::string human_duration(std::uint64_t seconds) {
  constexpr std::uint64_t kMinute = 60;
  constexpr std::uint64_t kHour = 60 * kMinute;
  constexpr std::uint64_t kDay = 24 * kHour;
  auto two_units = [](std::uint64_t count, std::uint64_t unit, const char* name,
                      std::uint64_t sub_unit, const char* sub_name) {
    return std::to_string(count / unit) + name + " " + std::to_string(count % unit / sub_unit) +
           sub_name;
  };
  if (seconds < kMinute) return std::to_string(seconds) + "s";
  if (seconds < kHour) return two_units(seconds, kMinute, "m", 1, "s");
  if (seconds < kDay) return two_units(seconds, kHour, "h", kMinute, "m");
  return two_units(seconds, kDay, "d", kHour, "h");
}

std::string display(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
    case Json::value_t::discarded:
      return "-";
    case Json::value_t::string:
      return value.get<std::string>();
    case Json::value_t::boolean:
      return value.get<bool>() ? "Yes" : "No";
    case Json::value_t::array: {
      std::string text;
      for (const Json& item : value) {
        if (!text.empty()) text += ",";
        text += display(item);
      }
      return text;
    }
    default:
      return value.dump(-1, ' ', false, Json::error_handler_t::replace);
  }
}

std::string field_title(const std::string& key) {
  std::string title;
  std::size_t start = 0;
  while (start <= key.size()) {
    std::size_t end = std::min(key.find('_', start), key.size());
    std::string word = key.substr(start, end - start);
    if (word == "id" || word == "uid" || word == "gid") {
      for (char& c : word) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    } else if (!word.empty()) {
      word[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(word[0])));
    }
    if (!word.empty()) {
      if (!title.empty()) title += ' ';
      title += word;
    }
    start = end + 1;
  }
  return title;
}

void render_view(std::ostream& out, const Json& object) {
  std::vector<std::pair<std::string, std::string>> fields;
  if (object.is_object()) {
    for (const auto& [key, value] : object.items()) {
      fields.emplace_back(field_title(key), display(value));
    }
  }
  internal::render_fields(out, fields, Align::right);
}

namespace internal {

void render_fields(std::ostream& out,
                   const std::vector<std::pair<std::string, std::string>>& fields, Align keys) {
  std::size_t width = 0;
  for (const auto& [key, value] : fields) width = std::max(width, display_width(key));
  for (const auto& [key, value] : fields) {
    std::size_t padding = width - display_width(key);
    if (keys == Align::right) pad(out, padding);
    out << key << ':';
    if (keys == Align::left) pad(out, padding);
    out << ' ' << value << '\n';
  }
}

std::string utc_time(const Json& unix_seconds) {
  if (!unix_seconds.is_number_integer()) return "-";
  const std::time_t when = unix_seconds.get<std::time_t>();
  std::tm utc{};
  char text[32];
  if (gmtime_r(&when, &utc) == nullptr ||
      std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc) == 0) {
    return "-";
  }
  return text;
}

std::string joined(const Json& list) {
  return list.is_array() && list.empty() ? "-" : display(list);
}

std::string bytes_of(const Json& value) {
  return value.is_number_unsigned() ? human_bytes(value.get<std::uint64_t>()) : "-";
}

std::string rate_of(const Json& value) {
  return value.is_number() ? human_rate(value.get<double>()) : "-";
}

std::string node_and_state(const Json& node, const Json& state) {
  if (node.is_null()) return "- (" + display(state) + ")";
  return "node " + display(node) + " (" + display(state) + ")";
}

void render_unanswered(std::ostream& out, const Json& reply) {
  const Json& missing = field(reply, "unreachable");
  if (!as_list(missing).empty())
    out << "Not answering, left out: nodes " << joined(missing) << "\n";
}

}  // namespace internal
}  // namespace tidepool::cli
