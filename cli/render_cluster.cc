#include "cli/render.h"

#include <cmath>
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <utility>

#include "cli/internal/render_parts.h"

namespace tidepool::cli {

using internal::jobs_table;
using internal::joined;
using internal::node_and_state;
using internal::rate_of;
using internal::render_fields;

namespace {

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
    // A node being SmartFailed still serves: its state says whether it is up too.
    const std::string state = display(field(node, "state")) +
                              (field(node, "smartfailing") == Json(true) ? ", smartfailing" : "");
    table.add_row({display(field(node, "id")), display(field(node, "name")),
                   display(field(node, "pool")), state,
                   rate_of(field(stats, "in_bytes_per_second")),
                   rate_of(field(stats, "out_bytes_per_second")), used_of_size(stats)});
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

}  // namespace

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

std::string sysctl_value_shown(const Json& sysctl) {
  std::string shown = display(field(sysctl, "value"));
  if (sysctl.is_object() && sysctl.contains("value_in_unit")) {
    shown += " (" + display(field(sysctl, "value_in_unit")) + " " +
             display(field(sysctl, "unit")) + ")";
  }
  return shown;
}

void render_sysctls(std::ostream& out, const Json& sysctls) {
  Table table({{"Name"}, {"Value"}, {"Default"}, {"Description"}});
  for (const Json& sysctl : as_list(sysctls)) {
    table.add_row({display(field(sysctl, "name")), sysctl_value_shown(sysctl),
                   display(field(sysctl, "default")), display(field(sysctl, "description"))});
  }
  render_listing(out, table);
}

namespace {

// "127.0.0.1:7100" -> "127.0.0.1"; an address without a port as it is.
std::string host_of(const std::string& address) {
  const std::size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

}  // namespace

Json network_interfaces(const Json& nodes) {
  static constexpr std::pair<const char*, const char*> kInterfaces[] = {
      {"frontend", "nfs, mount, nlm, nsm, portmap"},
      {"backend", "cluster: group, locks, shards, stripe units"},
      {"admin", "admin api, metrics"},
  };
  Json interfaces = Json::array();
  for (const Json& node : as_list(nodes)) {
    for (const auto& [name, owners] : kInterfaces) {
      const Json& address = field(node, std::string(name) + "_address");
      interfaces.push_back(
          {{"lnn", field(node, "id")},
           {"name", name},
           // A returning node (recorded lost, up again) answers on its interfaces too.
           {"status",
            field(node, "state") == "up" || field(node, "state") == "returning" ? "Up" : "Down"},
           {"owners", owners},
           {"ip_addresses",
            address.is_string() ? Json::array({host_of(address.get<std::string>())})
                                : Json::array()}});
    }
  }
  return interfaces;
}

void render_network_interfaces(std::ostream& out, const Json& interfaces) {
  Table table({{"LNN", Align::right}, {"Name"}, {"Status"}, {"Owners"}, {"IP Addresses"}});
  for (const Json& interface : as_list(interfaces)) {
    table.add_row({display(field(interface, "lnn")), display(field(interface, "name")),
                   display(field(interface, "status")), display(field(interface, "owners")),
                   joined(field(interface, "ip_addresses"))});
  }
  render_listing(out, table);
}

void render_exports(std::ostream& out, const Json& exports) {
  Table table({{"ID", Align::right},
               {"Path"},
               {"Clients"},
               {"Read Only"},
               {"Secure"},
               {"Root Squash"},
               {"Map All"}});
  for (const Json& entry : as_list(exports)) {
    const Json& uid = field(entry, "map_all_uid");
    const Json& gid = field(entry, "map_all_gid");
    const std::string map_all = uid.is_null() ? "-" : display(uid) + ":" + display(gid);
    table.add_row({display(field(entry, "id")), display(field(entry, "path")),
                   joined(field(entry, "clients")), display(field(entry, "read_only")),
                   display(field(entry, "secure")), display(field(entry, "root_squash")),
                   map_all});
  }
  render_listing(out, table);
}

}  // namespace tidepool::cli
