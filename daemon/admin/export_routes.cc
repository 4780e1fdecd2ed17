// NFS exports: the paths clients may mount, and how.
#include <nlohmann/json.hpp>

#include "daemon/admin/config_change.h"
#include "daemon/admin/export_json.h"
#include "daemon/admin/handlers.h"
#include "daemon/admin/replies.h"
#include "daemon/config_objects.h"

namespace tidepool::daemon::admin {
namespace {

using cluster::GroupView;
using nlohmann::json;

HttpResponse no_export(std::string_view id_text) {
  return error_response(404, "no export " + std::string(id_text));
}

// POST /v1/nfs/exports (`existing` none) or PUT /v1/nfs/exports/ID.
Plan write_export(const GroupView& view, const std::string& request_body,
                  std::optional<std::string_view> existing) {
  auto body = parse_body(request_body);
  if (!body.ok()) return refuse(body.status());
  const std::map<std::uint32_t, ExportConfig> exports = exports_of(view);
  std::uint32_t id = exports.empty() ? 1 : exports.rbegin()->first + 1;
  ExportConfig base;
  if (existing) {
    const auto parsed = parse_id(*existing);
    if (!parsed || !exports.contains(*parsed)) return refuse(no_export(*existing));
    id = *parsed;
    base = exports.at(id);
  } else if (!body->contains("path")) {
    return refuse(error_response(400, "'path' is required"));
  }
  auto entry = export_from_json(*body, base);
  if (!entry.ok()) return refuse(entry.status());
  for (const auto& [other_id, other] : exports) {
    if (other_id != id && other.path == entry->path) {
      return refuse(error_response(
          409, entry->path + " is already exported (export " + std::to_string(other_id) + ")"));
    }
  }
  const json shown = export_to_json(id, *entry);
  const std::string kind(kExportKind);
  const std::string name = std::to_string(id);
  const std::string stored = encode_export(*entry);
  return existing
             ? change_then(cluster::Change::update_object(kind, name, stored), reply(200, shown))
             : change_then(cluster::Change::create_object(kind, name, stored), reply(201, shown));
}

}  // namespace

Reply list_exports(Context& context, Request) {
  json list = json::array();
  for (const auto& [id, entry] : exports_of(context.view())) {
    list.push_back(export_to_json(id, entry));
  }
  co_return reply(200, json{{"exports", list}});
}

Reply create_export(Context& context, Request request) {
  return carry_out(context.membership, write_export(context.view(), request.body, std::nullopt));
}

Reply get_export(Context& context, Request request) {
  const std::string& id_text = request.param("id");
  const auto exports = exports_of(context.view());
  const auto id = parse_id(id_text);
  if (!id || !exports.contains(*id)) co_return no_export(id_text);
  co_return reply(200, export_to_json(*id, exports.at(*id)));
}

Reply modify_export(Context& context, Request request) {
  return carry_out(context.membership,
                   write_export(context.view(), request.body, request.param("id")));
}

Reply delete_export(Context& context, Request request) {
  const std::string& id = request.param("id");
  return carry_out(context.membership,
                   delete_object(context.view(), kExportKind, id, "export " + id));
}

}  // namespace tidepool::daemon::admin
