#include "cli/render.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iterator>
#include <optional>
#include <string_view>
#include <utility>

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

// "Key: value" lines with the values aligned; keys right-aligned or left-aligned.
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

// Unix seconds as a UTC time, "2024-05-01T22:00:05Z"; "-" for null or anything not a time.
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

// A list of numbers or names, comma-separated; "-" when empty.
std::string joined(const Json& list) {
  return list.is_array() && list.empty() ? "-" : display(list);
}

// A count of bytes, whichever JSON number type carries it.
std::optional<std::uint64_t> byte_count(const Json& value) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (!value.is_number()) return std::nullopt;
  const double bytes = value.get<double>();
  if (!(bytes >= 0 && bytes < 1.8e19)) return std::nullopt;
  return static_cast<std::uint64_t>(bytes);
}

std::string used_of_size(const Json& stats) {
  const std::optional<std::uint64_t> used = byte_count(field(stats, "used_bytes"));
  const std::optional<std::uint64_t> size = byte_count(field(stats, "size_bytes"));
  if (!used || !size) return "-";
  const std::uint64_t used_bytes = *used;
  const std::uint64_t size_bytes = *size;
  std::string text = human_bytes(used_bytes) + " / " + human_bytes(size_bytes);
  if (size_bytes > 0) {
    text += " (" +
            std::to_string(std::llround(100.0 * static_cast<double>(used_bytes) /
                                        static_cast<double>(size_bytes))) +
            "%)";
  }
  return text;
}

std::string rate(const Json& stats, std::string_view key) {
  const Json& value = field(stats, key);
  return value.is_number() ? human_rate(value.get<double>()) : "-";
}

Table node_table(const Json& nodes) {
  Table table({{"ID", Align::right},
               {"Name"},
               {"Pool"},
               {"State"},
               {"Throughput In", Align::right},
               {"Throughput Out", Align::right},
               {"Used / Size"}});
  for (const Json& node : as_list(nodes)) {
    const Json& stats = field(node, "stats");
    table.add_row({display(field(node, "id")), display(field(node, "name")),
                   display(field(node, "pool")), display(field(node, "state")),
                   rate(stats, "in_bytes_per_second"), rate(stats, "out_bytes_per_second"),
                   used_of_size(stats)});
  }
  return table;
}

Table nodepool_table(const Json& nodepools) {
  Table table({{"Name"}, {"Nodes"}, {"Tier"}});
  for (const Json& pool : as_list(nodepools)) {
    table.add_row(
        {display(field(pool, "name")), joined(field(pool, "nodes")), display(field(pool, "tier"))});
  }
  return table;
}

Table tier_table(const Json& tiers) {
  Table table({{"Name"}, {"Children"}});
  for (const Json& tier : as_list(tiers)) {
    table.add_row({display(field(tier, "name")), joined(field(tier, "children"))});
  }
  return table;
}

// The phase a job is in; "-" before it starts (the API sends "").
std::string phase_of(const Json& job) {
  const std::string phase = display(field(job, "phase"));
  return phase.empty() ? "-" : phase;
}

// The columns a job has in every table of jobs, and its cells there.
std::vector<Column> job_columns() {
  return {{"ID", Align::right}, {"Type"}, {"State"}, {"Impact"}, {"Pri", Align::right}, {"Phase"}};
}

std::vector<std::string> job_cells(const Json& job) {
  return {display(field(job, "id")),       display(field(job, "type")),
          display(field(job, "state")),    display(field(job, "policy")),
          display(field(job, "priority")), phase_of(job)};
}

// From the job's start to its end, or to `now` while it has not ended; "-" before it starts.
std::string running_time(const Json& job, std::time_t now) {
  const Json& started = field(job, "started");
  const Json& ended = field(job, "ended");
  if (!started.is_number_integer()) return "-";
  const std::time_t end = ended.is_number_integer() ? ended.get<std::time_t>() : now;
  const std::time_t start = started.get<std::time_t>();
  // A clock behind the coordinator's would make the time negative.
  return human_duration(end > start ? static_cast<std::uint64_t>(end - start) : 0);
}

// The jobs not ended, as `tide job jobs list` and `tide status` show them: running times are
// counted up to `now` (Unix seconds).
Table jobs_table(const Json& jobs, std::time_t now) {
  std::vector<Column> columns = job_columns();
  columns.push_back({"Running Time", Align::right});
  Table table(std::move(columns));
  for (const Json& job : as_list(jobs)) {
    std::vector<std::string> cells = job_cells(job);
    cells.push_back(running_time(job, now));
    table.add_row(std::move(cells));
  }
  return table;
}

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
  render_fields(out, fields, Align::right);
}

// "node 2 (serving)", or "- (unknown)" when there is no such node.
std::string node_and_state(const Json& node, const Json& state) {
  if (node.is_null()) return "- (" + display(state) + ")";
  return "node " + display(node) + " (" + display(state) + ")";
}

void render_status(std::ostream& out, const Json& status, std::time_t now) {
  render_fields(out,
                {{"Cluster Name", display(field(status, "name"))},
                 {"Cluster Health", display(field(status, "health"))},
                 {"Cluster ID", display(field(status, "id"))},
                 {"Epoch", display(field(status, "epoch"))},
                 {"Leader", display(field(status, "leader"))},
                 {"Namespace Home", node_and_state(field(field(status, "namespace"), "home"),
                                                   field(field(status, "namespace"), "state"))},
                 {"Namespace Mirror",
                  node_and_state(field(field(status, "namespace"), "mirror"),
                                 field(field(status, "namespace"), "mirror_state"))}},
                Align::left);
  out << "\nNodes:\n";
  node_table(field(status, "nodes")).render(out);
  // One shard is the namespace's home and mirror above.
  const Json& shards = field(field(status, "namespace"), "shards");
  if (as_list(shards).size() > 1) {
    out << "\nShards:\n";
    Table table({{"Shard", Align::right}, {"Home"}, {"Mirror"}});
    for (const Json& shard : as_list(shards)) {
      table.add_row({display(field(shard, "id")),
                     node_and_state(field(shard, "home"), field(shard, "state")),
                     node_and_state(field(shard, "mirror"), field(shard, "mirror_state"))});
    }
    table.render(out);
  }
  out << "\nNode Pools:\n";
  nodepool_table(field(status, "nodepools")).render(out);
  out << "\nTiers:\n";
  tier_table(field(status, "tiers")).render(out);
  out << "\nJobs:\n";
  const Json& jobs = field(status, "jobs");
  if (as_list(jobs).empty()) {
    out << "No running jobs.\n";
  } else {
    jobs_table(jobs, now).render(out);
  }
}

void render_nodepools(std::ostream& out, const Json& nodepools) {
  render_listing(out, nodepool_table(nodepools));
}

void render_tiers(std::ostream& out, const Json& tiers) { render_listing(out, tier_table(tiers)); }

void render_sysctls(std::ostream& out, const Json& sysctls) {
  Table table({{"Name"}, {"Value"}, {"Default"}, {"Description"}});
  for (const Json& sysctl : as_list(sysctls)) {
    table.add_row({display(field(sysctl, "name")), display(field(sysctl, "value")),
                   display(field(sysctl, "default")), display(field(sysctl, "description"))});
  }
  render_listing(out, table);
}

void render_exports(std::ostream& out, const Json& exports) {
  Table table(
      {{"ID", Align::right}, {"Path"}, {"Clients"}, {"Read Only"}, {"Root Squash"}, {"Map All"}});
  for (const Json& entry : as_list(exports)) {
    const Json& uid = field(entry, "map_all_uid");
    const Json& gid = field(entry, "map_all_gid");
    const std::string map_all = uid.is_null() ? "-" : display(uid) + ":" + display(gid);
    table.add_row({display(field(entry, "id")), display(field(entry, "path")),
                   joined(field(entry, "clients")), display(field(entry, "read_only")),
                   display(field(entry, "root_squash")), map_all});
  }
  render_listing(out, table);
}

namespace {

// Runs of stripe units (`tide get -D`): which units, their byte offsets, the nodes holding them.
void render_unit_runs(std::ostream& out, const Json& runs, const Json& unit_bytes) {
  Table units({{"Units"}, {"Offsets"}, {"Nodes"}});
  for (const Json& run : as_list(runs)) {
    const Json& first = field(run, "first");
    const Json& count = field(run, "count");
    if (!first.is_number_unsigned() || !count.is_number_unsigned() ||
        !unit_bytes.is_number_unsigned() || count.get<std::uint64_t>() == 0) {
      continue;
    }
    const std::uint64_t from = first.get<std::uint64_t>();
    const std::uint64_t to = from + count.get<std::uint64_t>() - 1;
    const std::uint64_t bytes = unit_bytes.get<std::uint64_t>();
    units.add_row({std::to_string(from) + "-" + std::to_string(to),
                   std::to_string(from * bytes) + "-" + std::to_string((to + 1) * bytes - 1),
                   joined(field(run, "nodes"))});
  }
  units.render(out);
}

}  // namespace

void render_file(std::ostream& out, const Json& file, bool details) {
  const Json& layout = field(file, "layout");
  const std::string path = display(field(file, "path"));
  Table table({{"Policy"}, {"Level"}, {"Performance"}, {"File"}});
  table.add_row(
      {display(field(layout, "pool")), display(field(layout, "protection")),
       display(field(layout, "access_pattern")),
       path.substr(path.find_last_of('/') + 1) + (field(file, "type") == "directory" ? "/" : "")});
  table.render(out);
  if (!details) return;
  const Json& shard = field(file, "shard");
  std::vector<std::pair<std::string, std::string>> fields{
      {"Path", path},
      {"Inode", display(field(file, "inode")) + " (shard " + display(field(shard, "id")) + ")"},
      {"Type", display(field(file, "type"))},
      {"Size", display(field(file, "size")) + " bytes"},
      {"Mode", display(field(file, "mode"))},
      {"Owner", "uid " + display(field(file, "uid")) + ", gid " + display(field(file, "gid"))},
      {"Links", display(field(file, "nlink"))},
      {"Shard Home", node_and_state(field(shard, "home"), field(shard, "state"))},
      {"Shard Mirror", node_and_state(field(shard, "mirror"), field(shard, "mirror_state"))}};
  if (layout.is_object()) {
    fields.insert(fields.end(),
                  {{"Disk Pool Policy", display(field(layout, "pool"))},
                   {"Protection", display(field(layout, "protection"))},
                   {"Access Pattern", display(field(layout, "access_pattern"))},
                   {"Stripe Unit", display(field(layout, "stripe_unit")) + " bytes"}});
  }
  out << '\n';
  render_fields(out, fields, Align::left);
  if (!layout.is_object()) return;
  const Json& unit_bytes = field(layout, "stripe_unit");
  out << "\nStripe Units:\n";
  render_unit_runs(out, field(file, "stripe_units"), unit_bytes);
  const Json& moving = field(file, "moving");
  if (!moving.is_object()) return;
  out << "\nMoving To: " << display(field(moving, "pool")) << " ("
      << display(field(moving, "protection")) << "), " << display(field(moving, "copied_bytes"))
      << " of " << display(field(file, "size")) << " bytes copied\n";
  render_unit_runs(out, field(moving, "stripe_units"), unit_bytes);
}

namespace {

// "1.2s", "3m04s", "2h05m": how long a lock has been held or a client seen.
std::string human_age(const Json& millis) {
  if (!millis.is_number_unsigned()) return "-";
  const std::uint64_t ms = millis.get<std::uint64_t>();
  char text[32];
  if (ms < 60'000) {
    std::snprintf(text, sizeof text, "%.1fs", static_cast<double>(ms) / 1000.0);
  } else if (ms < 3'600'000) {
    std::snprintf(text, sizeof text, "%llum%02llus", static_cast<unsigned long long>(ms / 60'000),
                  static_cast<unsigned long long>(ms / 1000 % 60));
  } else {
    std::snprintf(text, sizeof text, "%lluh%02llum",
                  static_cast<unsigned long long>(ms / 3'600'000),
                  static_cast<unsigned long long>(ms / 60'000 % 60));
  }
  return text;
}

// "[0, 100)", "[4096, EOF)".
std::string byte_range(const Json& lock) {
  const Json& end = field(lock, "end");
  return "[" + display(field(lock, "start")) + ", " + (end.is_null() ? "EOF" : display(end)) + ")";
}

void render_unanswered(std::ostream& out, const Json& reply) {
  const Json& missing = field(reply, "unreachable");
  if (!as_list(missing).empty())
    out << "Not answering, left out: nodes " << joined(missing) << "\n";
}

}  // namespace

void render_locks(std::ostream& out, const Json& reply) {
  Table table({{"Node", Align::right},
               {"Kind"},
               {"File", Align::right},
               {"Range"},
               {"Mode"},
               {"State"},
               {"Age", Align::right},
               {"Holder"}});
  for (const Json& lock : as_list(field(reply, "locks"))) {
    const std::string state = display(field(lock, "state"));
    const std::string mode = state == "granted"   ? display(field(lock, "mode"))
                             : state == "waiting" ? "(" + display(field(lock, "requested")) + ")"
                                                  : display(field(lock, "mode")) + "->" +
                                                        display(field(lock, "requested"));
    table.add_row({display(field(lock, "node")), display(field(lock, "kind")),
                   display(field(lock, "file")), byte_range(lock), mode, state,
                   human_age(field(lock, "age_ms")), display(field(lock, "holder"))});
  }
  render_listing(out, table);
  const Json& unlisted = field(reply, "unlisted");
  if (unlisted.is_number_unsigned() && unlisted.get<std::uint64_t>() > 0) {
    out << "Not listed (too many): " << unlisted.get<std::uint64_t>() << "\n";
  }
  render_unanswered(out, reply);
}

void render_nlm_sessions(std::ostream& out, const Json& reply) {
  Table table({{"Node", Align::right},
               {"Client"},
               {"Address"},
               {"Locks", Align::right},
               {"Waiting", Align::right},
               {"Shares", Align::right},
               {"Last Seen"}});
  for (const Json& session : as_list(field(reply, "sessions"))) {
    table.add_row({display(field(session, "node")), display(field(session, "client")),
                   display(field(session, "address")), display(field(session, "locks")),
                   display(field(session, "waiting")), display(field(session, "shares")),
                   utc_time(field(session, "last_seen"))});
  }
  render_listing(out, table);
  render_unanswered(out, reply);
}

void render_lock_statistics(std::ostream& out, const Json& reply) {
  Table table({{"Node", Align::right},
               {"Requests", Align::right},
               {"Grants", Align::right},
               {"Conversions", Align::right},
               {"Refusals", Align::right},
               {"Callbacks Sent", Align::right},
               {"RTT Mean", Align::right},
               {"RTT p99", Align::right},
               {"Coordinated", Align::right}});
  auto micros = [](const Json& value) -> std::string {
    if (!value.is_number()) return "-";
    char text[32];
    std::snprintf(text, sizeof text, "%.0f us", value.get<double>());
    return text;
  };
  for (const Json& node : as_list(field(reply, "statistics"))) {
    table.add_row({display(field(node, "node")), display(field(node, "requests")),
                   display(field(node, "grants")), display(field(node, "conversions")),
                   display(field(node, "refusals")), display(field(node, "callbacks_sent")),
                   micros(field(node, "round_trip_mean_us")),
                   micros(field(node, "round_trip_p99_us")),
                   display(field(node, "coordinated_locks"))});
  }
  table.render(out);
  render_unanswered(out, reply);
}

namespace {

std::string bytes_of(const Json& value) {
  return value.is_number_unsigned() ? human_bytes(value.get<std::uint64_t>()) : "-";
}

std::string rate_of(const Json& value) {
  return value.is_number() ? human_rate(value.get<double>()) : "-";
}

std::string percent_of(const Json& value) {
  if (!value.is_number()) return "-";
  char text[16];
  std::snprintf(text, sizeof text, "%.1f%%", value.get<double>());
  return text;
}

std::string microseconds_of(const Json& value) {
  if (!value.is_number()) return "-";
  const double us = value.get<double>();
  char text[24];
  if (us < 1000) {
    std::snprintf(text, sizeof text, "%.0f us", us);
  } else if (us < 1'000'000) {
    std::snprintf(text, sizeof text, "%.1f ms", us / 1000);
  } else {
    std::snprintf(text, sizeof text, "%.2f s", us / 1'000'000);
  }
  return text;
}

}  // namespace

void render_cache_statistics(std::ostream& out, const Json& reply) {
  Table table({{"Node", Align::right},
               {"L1 Cached", Align::right},
               {"L1 Read", Align::right},
               {"L1 Hit", Align::right},
               {"Prefetched", Align::right},
               {"Used", Align::right},
               {"Wasted", Align::right},
               {"L1 Meta Hit", Align::right},
               {"Invalidations", Align::right},
               {"L2 Cached", Align::right},
               {"L2 Read", Align::right},
               {"L2 Hit", Align::right},
               {"L2 Meta Hit", Align::right}});
  auto add = [&](const std::string& node, const Json& statistics) {
    const Json& l1 = field(statistics, "l1");
    const Json& l1_data = field(l1, "data");
    const Json& l2 = field(statistics, "l2");
    table.add_row(
        {node, bytes_of(field(l1, "cached_bytes")) + " / " + bytes_of(field(l1, "budget_bytes")),
         bytes_of(field(l1_data, "accessed_bytes")), percent_of(field(l1_data, "hit_percent")),
         bytes_of(field(l1_data, "prefetched_bytes")),
         bytes_of(field(l1_data, "prefetch_used_bytes")),
         bytes_of(field(l1_data, "prefetch_wasted_bytes")),
         percent_of(field(field(l1, "metadata"), "hit_percent")),
         display(field(l1, "coherence_invalidations")),
         bytes_of(field(l2, "cached_bytes")) + " / " + bytes_of(field(l2, "budget_bytes")),
         bytes_of(field(field(l2, "data"), "read_bytes")),
         percent_of(field(field(l2, "data"), "hit_percent")),
         percent_of(field(field(l2, "metadata"), "hit_percent"))});
  };
  for (const Json& node : as_list(field(reply, "statistics"))) {
    add(display(field(node, "node")), node);
  }
  if (field(reply, "total").is_object()) add("Total", field(reply, "total"));
  table.render(out);
  render_unanswered(out, reply);
}

void render_system_statistics(std::ostream& out, const Json& reply) {
  Table table({{"Node", Align::right},
               {"CPU", Align::right},
               {"NFS Ops/s", Align::right},
               {"NFS In", Align::right},
               {"NFS Out", Align::right},
               {"Net In", Align::right},
               {"Net Out", Align::right},
               {"Disk Read", Align::right},
               {"Disk Write", Align::right}});
  auto add = [&](const std::string& node, const Json& statistics) {
    const Json& nfs = field(statistics, "nfs");
    const Json& network = field(statistics, "network");
    const Json& disk = field(statistics, "disk");
    table.add_row(
        {node, percent_of(field(statistics, "cpu_percent")), display(field(nfs, "ops_per_second")),
         rate_of(field(nfs, "in_bytes_per_second")), rate_of(field(nfs, "out_bytes_per_second")),
         rate_of(field(network, "in_bytes_per_second")),
         rate_of(field(network, "out_bytes_per_second")),
         rate_of(field(disk, "read_bytes_per_second")),
         rate_of(field(disk, "write_bytes_per_second"))});
  };
  for (const Json& node : as_list(field(reply, "statistics"))) {
    add(display(field(node, "node")), node);
  }
  if (field(reply, "total").is_object()) add("Total", field(reply, "total"));
  table.render(out);
  render_unanswered(out, reply);
}

void render_protocol_statistics(std::ostream& out, const Json& figures,
                                std::optional<std::uint64_t> node) {
  out << "NFSv3 operations per second, "
      << (node ? "node " + std::to_string(*node) : std::string("all nodes")) << ":\n";
  // Three procedures a line, by name.
  const Json& procedures = field(field(figures, "nfs"), "procedures");
  constexpr std::size_t kPerLine = 3;
  std::size_t column = 0;
  for (const auto& [name, value] : as_object(procedures).items()) {
    char cell[48];
    std::snprintf(cell, sizeof cell, "%-12s%10s/s", name.c_str(), display(value).c_str());
    out << (column == 0 ? "  " : "    ") << cell;
    if (++column == kPerLine) {
      out << '\n';
      column = 0;
    }
  }
  if (column != 0) out << '\n';
  const Json& network = field(figures, "network");
  const Json& disk = field(figures, "disk");
  render_fields(out,
                {{"CPU", percent_of(field(figures, "cpu_percent"))},
                 {"Network In", rate_of(field(network, "in_bytes_per_second"))},
                 {"Network Out", rate_of(field(network, "out_bytes_per_second"))},
                 {"Disk Read", rate_of(field(disk, "read_bytes_per_second"))},
                 {"Disk Write", rate_of(field(disk, "write_bytes_per_second"))}},
                Align::left);
}

void render_policies(std::ostream& out, const Json& reply) {
  Table table({{"Order", Align::right},
               {"Name", Align::left},
               {"Filter", Align::left},
               {"Storage Target", Align::left},
               {"Protection", Align::left},
               {"Access Pattern", Align::left}});
  // An action a policy leaves unset comes from the default policy.
  auto action = [](const Json& value) { return value.is_null() ? "(default)" : display(value); };
  for (const Json& p : as_list(field(reply, "policies"))) {
    table.add_row({display(field(p, "apply_order")), display(field(p, "name")),
                   display(field(p, "filter")), action(field(p, "storage_target")),
                   action(field(p, "protection")), action(field(p, "access_pattern"))});
  }
  const Json& d = field(reply, "default");
  table.add_row({"-", "default", "every other file", display(field(d, "storage_target")),
                 display(field(d, "protection")), display(field(d, "access_pattern"))});
  table.render(out);
}

void render_explanation(std::ostream& out, const Json& reply) {
  auto from = [&](const char* action) {
    const Json& a = field(reply, action);
    return display(field(a, "value")) + " (from " + display(field(a, "from")) + ")";
  };
  const Json& filter = field(reply, "filter");
  render_fields(out,
                {{"Path", display(field(reply, "path"))},
                 {"Policy", display(field(reply, "policy"))},
                 {"Filter", filter.is_string() ? filter.get<std::string>() : "every file"},
                 {"Storage Target", from("storage_target")},
                 {"Protection", from("protection")},
                 {"Access Pattern", from("access_pattern")}},
                Align::left);
}

void render_client_statistics(std::ostream& out, const Json& reply) {
  Table table({{"Node", Align::right},
               {"Client", Align::left},
               {"Calls", Align::right},
               {"In", Align::right},
               {"Out", Align::right},
               {"Avg Latency", Align::right},
               {"Max Latency", Align::right}});
  for (const Json& client : as_list(field(reply, "clients"))) {
    table.add_row({display(field(client, "node")), display(field(client, "client")),
                   display(field(client, "calls")), bytes_of(field(client, "in_bytes")),
                   bytes_of(field(client, "out_bytes")),
                   microseconds_of(field(client, "latency_average_us")),
                   microseconds_of(field(client, "latency_max_us"))});
  }
  table.render(out);
  render_unanswered(out, reply);
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

namespace {

std::vector<std::pair<std::string, std::string>> job_fields(const Json& job) {
  const Json& progress = field(job, "progress");
  return {{"ID", display(field(job, "id"))},
          {"Type", display(field(job, "type"))},
          {"State", display(field(job, "state"))},
          {"Policy", display(field(job, "policy"))},
          {"Priority", display(field(job, "priority"))},
          {"Paths", joined(field(job, "paths"))},
          {"Dry Run", display(field(job, "dry_run"))},
          {"Created", utc_time(field(job, "created"))},
          {"Started", utc_time(field(job, "started"))},
          {"Ended", utc_time(field(job, "ended"))},
          {"Coordinator", display(field(job, "coordinator"))},
          {"Runs", display(field(job, "runs"))},
          {"Phase", phase_of(job)},
          {"Files Scanned", display(field(progress, "files_scanned"))},
          {"Directories Scanned", display(field(progress, "directories_scanned"))},
          {"Files Matched", display(field(progress, "files_matched"))},
          {"Patterns Set", display(field(progress, "patterns_set"))},
          {"Files Moved", display(field(progress, "files_moved"))},
          {"Bytes Moved", bytes_of(field(progress, "bytes_moved"))},
          {"Files Resumed", display(field(progress, "files_resumed"))},
          {"Files Misplaced", display(field(progress, "files_misplaced"))},
          {"Errors", display(field(progress, "errors"))},
          {"Reason", display(field(job, "reason"))}};
}

// The messages the job kept (its first errors), one a line under `heading`, when there are any.
void render_job_errors(std::ostream& out, const Json& job, std::string_view heading) {
  const Json& errors = as_list(field(job, "errors"));
  if (errors.empty()) return;
  out << heading << '\n';
  for (const Json& message : errors) out << "  " << display(message) << '\n';
}

// "1 file", "120 files"; a count that is no number shows as "-".
std::string counted(const Json& count, const std::string& noun) {
  return display(count) + " " + noun + (count == Json(1) ? "" : "s");
}

// Seconds a phase took: whole as sent, fractions to a tenth.
std::string phase_seconds(const Json& seconds) {
  if (!seconds.is_number_float()) return display(seconds);
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", seconds.get<double>());
  return text;
}

}  // namespace

void render_jobs(std::ostream& out, const Json& jobs, std::time_t now) {
  render_listing(out, jobs_table(jobs, now));
}

void render_job(std::ostream& out, const Json& job) {
  render_fields(out, job_fields(job), Align::right);
  render_job_errors(out, job, "\nFirst errors:");
}

void render_job_reports(std::ostream& out, const Json& reports) {
  Table table({{"ID", Align::right},
               {"Type"},
               {"State"},
               {"Ended"},
               {"Files Scanned", Align::right},
               {"Matched", Align::right},
               {"Moved", Align::right},
               {"Misplaced", Align::right},
               {"Errors", Align::right}});
  for (const Json& job : as_list(reports)) {
    const Json& progress = field(job, "progress");
    table.add_row(
        {display(field(job, "id")), display(field(job, "type")), display(field(job, "state")),
         utc_time(field(job, "ended")), display(field(progress, "files_scanned")),
         display(field(progress, "files_matched")), display(field(progress, "files_moved")),
         display(field(progress, "files_misplaced")), display(field(progress, "errors"))});
  }
  render_listing(out, table);
}

void render_job_report(std::ostream& out, const Json& job) {
  render_fields(out, job_fields(job), Align::right);
  out << "\nPhases:\n";
  Table phases({{"Phase"}, {"Seconds", Align::right}});
  for (const Json& phase : as_list(field(job, "phases"))) {
    phases.add_row({display(field(phase, "name")), phase_seconds(field(phase, "seconds"))});
  }
  phases.render(out);
  render_job_errors(out, job, "\nFirst errors:");
}

void render_job_types(std::ostream& out, const Json& types) {
  Table table({{"ID"}, {"Pri", Align::right}, {"Policy"}, {"Enabled"}, {"Schedule"}, {"Next Run"}});
  for (const Json& type : as_list(types)) {
    table.add_row({display(field(type, "name")), display(field(type, "priority")),
                   display(field(type, "policy")), display(field(type, "enabled")),
                   display(field(type, "schedule")), utc_time(field(type, "next_run"))});
  }
  render_listing(out, table);
}

void render_job_type(std::ostream& out, const Json& type) {
  render_fields(out,
                {{"ID", display(field(type, "name"))},
                 {"Description", display(field(type, "description"))},
                 {"Enabled", display(field(type, "enabled"))},
                 {"Policy", display(field(type, "policy"))},
                 {"Schedule", display(field(type, "schedule"))},
                 {"Priority", display(field(type, "priority"))},
                 {"Next Run", utc_time(field(type, "next_run"))}},
                Align::right);
}

void render_job_status(std::ostream& out, const Json& status) {
  const Json& coordinator = field(status, "coordinator");
  if (coordinator.is_null()) {
    out << "No node is running jobs (no leader).\n";
  } else {
    out << "The job engine is running on node " << display(coordinator) << ".\n";
  }
  out << '\n';
  const Json& active = as_list(field(status, "active"));
  if (active.empty()) {
    out << "No running or queued jobs.\n";
  } else {
    Table jobs(job_columns());
    for (const Json& job : active) jobs.add_row(job_cells(job));
    jobs.render(out);
  }
  const Json& recent = as_list(field(status, "recent"));
  if (recent.empty()) {
    out << "\nNo recent job results.\n";
    return;
  }
  out << "\nRecent job results:\n";
  Table results({{"Time"}, {"Job"}, {"Event"}});
  for (const Json& job : recent) {
    results.add_row({utc_time(field(job, "ended")),
                     display(field(job, "type")) + "[" + display(field(job, "id")) + "]",
                     display(field(job, "state"))});
  }
  results.render(out);
}

void render_policy_application(std::ostream& out, const Json& job) {
  const Json& progress = field(job, "progress");
  const std::string files =
      counted(field(progress, "files_scanned"), "file") + " under " + joined(field(job, "paths"));
  const std::string matched = display(field(progress, "files_matched"));
  const std::string patterns = counted(field(progress, "patterns_set"), "access pattern");
  const std::string misplaced = display(field(progress, "files_misplaced"));
  if (field(job, "dry_run") == Json(true)) {
    // A dry run moves nothing: every file it would move counts as misplaced.
    out << "Dry run over " << files << ": " << matched << " match a policy, " << patterns
        << " would be set, " << misplaced << " would move or stay misplaced.\n";
  } else {
    const std::string moved = counted(field(progress, "files_moved"), "file") + " moved (" +
                              bytes_of(field(progress, "bytes_moved")) + ")";
    out << "Applied the file pool policies to " << files << ": " << matched << " matched a policy, "
        << patterns << " set, " << moved << ", " << misplaced << " misplaced.\n";
  }
  render_job_errors(out, job, "Errors:");
}

}  // namespace tidepool::cli
