#include "cli/render.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cli/internal/render_parts.h"

namespace tidepool::cli {

using internal::joined;
using internal::node_and_state;
using internal::render_fields;

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

// OneFS's "Disk pools: policy hot-tier(5) -> data target f800_…": the target of the policy
// that applies now, and the node pool the data is in (they differ until SmartPools runs).
std::string disk_pools(const Json& policy, const Json& pool) {
  return "policy " + display(field(policy, "storage_target")) + " (" +
         display(field(policy, "name")) + ") -> data target " + display(pool);
}

// OneFS's "IFS inode: [ 1,0,1606656:512, 2,2,1372672:512 ]", whose elements start with the
// node holding the file's data: here one element per node holding stripe units, by node, as
// NODE,COPY,OFFSET:BYTES — which copy it is of the first unit it holds, that unit's byte offset,
// and how many of the file's bytes (of the units listed) it holds.
std::string ifs_inode(const Json& runs, const Json& unit_bytes, const Json& size) {
  struct Held {
    std::uint64_t copy = 0;
    std::uint64_t offset = 0;
    std::uint64_t bytes = 0;
  };
  std::map<std::uint64_t, Held> held;
  if (!unit_bytes.is_number_unsigned() || !size.is_number_unsigned()) return "-";
  const std::uint64_t bytes = unit_bytes.get<std::uint64_t>();
  const std::uint64_t file_bytes = size.get<std::uint64_t>();
  for (const Json& run : as_list(runs)) {
    const Json& first = field(run, "first");
    const Json& count = field(run, "count");
    if (!first.is_number_unsigned() || !count.is_number_unsigned()) continue;
    const std::uint64_t from = first.get<std::uint64_t>() * bytes;
    const std::uint64_t to = std::min(from + count.get<std::uint64_t>() * bytes, file_bytes);
    std::uint64_t copy = 0;
    for (const Json& node : as_list(field(run, "nodes"))) {
      if (node.is_number_unsigned()) {
        Held& node_held =
            held.try_emplace(node.get<std::uint64_t>(), Held{copy, from, 0}).first->second;
        node_held.bytes += to > from ? to - from : 0;
      }
      ++copy;
    }
  }
  std::string shown = "[";
  for (const auto& [node, what] : held) {
    shown += (shown.size() > 1 ? ", " : " ") + std::to_string(node) + "," +
             std::to_string(what.copy) + "," + std::to_string(what.offset) + ":" +
             std::to_string(what.bytes);
  }
  return shown + " ]";
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
                   {"Disk Pools", disk_pools(field(file, "policy"), field(layout, "pool"))},
                   {"Protection", display(field(layout, "protection"))},
                   {"Access Pattern", display(field(layout, "access_pattern"))},
                   {"Stripe Unit", display(field(layout, "stripe_unit")) + " bytes"},
                   {"IFS inode", ifs_inode(field(file, "stripe_units"),
                                           field(layout, "stripe_unit"), field(file, "size"))}});
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

}  // namespace tidepool::cli
