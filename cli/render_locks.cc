#include "cli/render.h"

#include <cstdint>
#include <cstdio>
#include <string>

#include "cli/internal/render_parts.h"

namespace tidepool::cli {

using internal::render_unanswered;
using internal::utc_time;

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

}  // namespace tidepool::cli
