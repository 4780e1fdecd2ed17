#include "cli/render.h"

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "cli/internal/render_parts.h"

namespace tidepool::cli {

using internal::bytes_of;
using internal::rate_of;
using internal::render_fields;
using internal::render_unanswered;

namespace {

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

// Bytes per second as isi's top prints them: "0.0", "512.0", "2.9K", "125.3M", "2.9G".
std::string top_rate(const Json& value) {
  if (!value.is_number()) return "-";
  double rate = value.get<double>();
  const char* unit = "";
  for (const char* bigger : {"K", "M", "G", "T"}) {
    if (rate < 999.95) break;  // what would print as 1000.0 is 1.0 of the next unit
    rate /= 1000;
    unit = bigger;
  }
  char text[24];
  std::snprintf(text, sizeof text, "%.1f%s", rate, unit);
  return text;
}

double number_or_zero(const Json& value) { return value.is_number() ? value.get<double>() : 0; }

// Three procedures a line, by name: "getattr      8/s".
void render_procedures(std::ostream& out, const Json& procedures) {
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
  render_procedures(out, field(field(figures, "nfs"), "procedures"));
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

void render_system_top(std::ostream& out, const Json& reply) {
  Table table({{"Node"},
               {"CPU", Align::right},
               {"SMB", Align::right},
               {"FTP", Align::right},
               {"HTTP", Align::right},
               {"NFS", Align::right},
               {"HDFS", Align::right},
               {"Total", Align::right},
               {"NetIn", Align::right},
               {"NetOut", Align::right},
               {"DiskIn", Align::right},
               {"DiskOut", Align::right}});
  // NFS is the only protocol served: the others carry nothing.
  const std::string none = top_rate(Json(0));
  auto add = [&](const std::string& node, const Json& statistics) {
    const Json& nfs = field(statistics, "nfs");
    const Json& network = field(statistics, "network");
    const Json& disk = field(statistics, "disk");
    const Json nfs_bytes = number_or_zero(field(nfs, "in_bytes_per_second")) +
                           number_or_zero(field(nfs, "out_bytes_per_second"));
    table.add_row({node, percent_of(field(statistics, "cpu_percent")), none, none, none,
                   top_rate(nfs_bytes), none, top_rate(nfs_bytes),
                   top_rate(field(network, "in_bytes_per_second")),
                   top_rate(field(network, "out_bytes_per_second")),
                   top_rate(field(disk, "read_bytes_per_second")),
                   top_rate(field(disk, "write_bytes_per_second"))});
  };
  if (field(reply, "total").is_object()) add("All", field(reply, "total"));
  for (const Json& node : as_list(field(reply, "statistics"))) {
    add(display(field(node, "node")), node);
  }
  table.render(out);
  render_unanswered(out, reply);
}

void render_protocol_top(std::ostream& out, const Json& figures,
                         std::optional<std::uint64_t> node) {
  out << "NFS3 Operations Per Second"
      << (node ? " (node " + std::to_string(*node) + ")" : std::string(" (all nodes)")) << "\n";
  render_procedures(out, field(field(figures, "nfs"), "procedures"));
  const Json& network = field(figures, "network");
  const Json& disk = field(figures, "disk");
  out << "\nCPU Utilization\n  busy " << percent_of(field(figures, "cpu_percent")) << "\n";
  out << "\nNetwork Input / Output\n  in " << top_rate(field(network, "in_bytes_per_second"))
      << "/s   out " << top_rate(field(network, "out_bytes_per_second")) << "/s\n";
  out << "\nDisk IO\n  read " << top_rate(field(disk, "read_bytes_per_second"))
      << "/s   write " << top_rate(field(disk, "write_bytes_per_second")) << "/s\n";
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

}  // namespace tidepool::cli
