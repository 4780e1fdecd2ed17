// Files of the namespace: what `tide get` shows of one (its attributes, its shard, where each
// of its stripe units is) and the access pattern `tide set -a` gives it.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "daemon/admin/handlers.h"
#include "daemon/admin/namespace_paths.h"
#include "daemon/admin/policy_json.h"
#include "daemon/admin/replies.h"
#include "store/namespace_record.h"
#include "daemon/admin/view_json.h"
#include "store/pool_data.h"

namespace tidepool::daemon::admin {
namespace {

namespace asio = boost::asio;
using nlohmann::json;

// The most stripe units `tide get -D` lists one by one; the rest are counted.
constexpr std::uint64_t kListedUnits = 4096;

const char* type_name(store::FileType type) {
  switch (type) {
    case store::FileType::regular:
      return "file";
    case store::FileType::directory:
      return "directory";
    case store::FileType::symlink:
      return "symlink";
    case store::FileType::block_device:
      return "block device";
    case store::FileType::char_device:
      return "character device";
    case store::FileType::socket:
      return "socket";
    case store::FileType::fifo:
      return "fifo";
  }
  return "unknown";
}

// The runs of consecutive units, of the first `units` of file `inode`, held by the same nodes
// when placed over `pool_nodes` with `protection` copies: each unit's owners on the ring.
json placed_units_json(store::InodeId inode, std::uint64_t units,
                       const std::vector<std::uint64_t>& pool_nodes, std::uint32_t protection) {
  json runs = json::array();
  for (std::uint64_t unit = 0; unit < std::min(units, kListedUnits); ++unit) {
    const json nodes = store::unit_owners(pool_nodes, inode, unit, protection);
    if (!runs.empty() && runs.back()["nodes"] == nodes) {
      runs.back()["count"] = runs.back()["count"].get<std::uint64_t>() + 1;
    } else {
      runs.push_back(json{{"first", unit}, {"count", 1}, {"nodes", nodes}});
    }
  }
  return runs;
}

std::uint64_t units_of(const store::Attributes& a, const store::Layout& layout) {
  return layout.stripe_unit == 0 ? 0 : (a.size + layout.stripe_unit - 1) / layout.stripe_unit;
}

// The nodes holding each stripe unit of a file, as runs of consecutive units held by the same
// nodes: in a node pool, each unit's owners on the ring over the layout's nodes; kept with the
// shard, every unit on the shard's home and, once in step, its mirror.
json stripe_units_json(const store::Attributes& a, const store::Layout& layout, const json& where) {
  const std::uint64_t units = units_of(a, layout);
  if (layout.pool != store::kWithShard) {
    return placed_units_json(a.inode, units, layout.nodes, layout.protection);
  }
  json runs = json::array();
  if (units == 0 || where["home"].is_null()) return runs;
  json nodes = json::array({where["home"]});
  if (where["mirror_state"] == "in step") nodes.push_back(where["mirror"]);
  runs.push_back(json{{"first", 0}, {"count", units}, {"nodes", nodes}});
  return runs;
}

// What `tide get` shows of the file at `path`; a copy, since the coroutine may outlive the
// caller's.
asio::awaitable<HttpResponse> file_info(Context& context, std::vector<std::string> path) {
  auto resolving = resolve_path(context.store, path);
  const Result<store::Attributes> attributes = co_await std::move(resolving);
  if (!attributes.ok()) co_return failure(attributes.status());
  const store::Attributes& a = *attributes;
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", a.mode);
  const cluster::GroupView& view = context.view();
  json where = shard_json(view, store::namespace_of(view), store::shard_of(a.inode));
  json info{{"path", shown_path(path)},
            {"inode", a.inode},
            {"type", type_name(a.type)},
            {"size", a.size},
            {"mode", mode},
            {"uid", a.uid},
            {"gid", a.gid},
            {"nlink", a.nlink},
            {"mtime_ns", a.mtime_ns},
            {"atime_ns", a.atime_ns},
            {"ctime_ns", a.ctime_ns},
            {"shard", where}};
  if (a.type != store::FileType::regular) co_return reply(200, info);
  auto laying = context.store.layout(a.inode);
  Result<store::Layout> layout = co_await std::move(laying);
  if (!layout.ok()) co_return failure(layout.status());
  info["layout"] = {{"pool", layout->pool},
                    {"stripe_unit", layout->stripe_unit},
                    {"protection", std::to_string(layout->protection) + "x"},
                    {"access_pattern", layout->access_pattern}};
  const policy::Resolution applying = applying_policy(view, a, info["path"].get<std::string>());
  info["policy"] = {{"name", applying.policy}, {"storage_target", applying.storage_target}};
  info["stripe_units"] = stripe_units_json(a, *layout, where);
  const std::uint64_t units = units_of(a, *layout);
  info["unlisted_units"] =
      units > kListedUnits && layout->pool != store::kWithShard ? units - kListedUnits : 0;
  // Mid-move, where every unit is being copied to; the data is read where it was until the
  // move switches it.
  info["moving"] = nullptr;
  if (!layout->moving_to.empty()) {
    info["moving"] = {{"pool", layout->moving_to},
                      {"protection", std::to_string(layout->moving_protection) + "x"},
                      {"copied_bytes", std::min(layout->moved_bytes, a.size)},
                      {"stripe_units", placed_units_json(a.inode, units, layout->moving_nodes,
                                                         layout->moving_protection)}};
  }
  co_return reply(200, info);
}

}  // namespace

Reply get_file(Context& context, Request request) {
  return file_info(context, std::move(request.rest));
}

// {"access_pattern": P}: answers as get_file.
Reply set_file(Context& context, Request request) {
  auto parsed = parse_body(request.body);
  if (!parsed.ok()) co_return failure(parsed.status());
  for (const auto& [key, value] : parsed->items()) {
    if (key != "access_pattern") co_return error_response(400, "unknown field '" + key + "'");
  }
  const json pattern = parsed->value("access_pattern", json());
  if (!pattern.is_string()) {
    co_return error_response(400, "'access_pattern' must be random, concurrency or streaming");
  }
  auto resolving = resolve_path(context.store, request.rest);
  const Result<store::Attributes> file = co_await std::move(resolving);
  if (!file.ok()) co_return failure(file.status());
  if (file->type != store::FileType::regular) {
    co_return error_response(400, "only a regular file has an access pattern");
  }
  auto setting = context.store.set_access_pattern(file->inode, pattern.get<std::string>());
  const Result<store::Layout> layout = co_await std::move(setting);
  if (!layout.ok()) co_return failure(layout.status());
  auto showing = file_info(context, std::move(request.rest));
  co_return co_await std::move(showing);
}

}  // namespace tidepool::daemon::admin
