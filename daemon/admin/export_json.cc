#include "daemon/admin/export_json.h"

#include <limits>

namespace tidepool::daemon::admin {
namespace {

using nlohmann::json;

Status field_error(std::string_view field, std::string_view expected) {
  return error(Errc::invalid_argument,
               std::string("'").append(field).append("' must be ").append(expected));
}

Result<std::optional<std::uint32_t>> optional_id(const json& value, std::string_view field) {
  if (value.is_null()) return std::optional<std::uint32_t>();
  if (!value.is_number_unsigned() ||
      value.get<std::uint64_t>() > std::numeric_limits<std::uint32_t>::max()) {
    return field_error(field, "null or an integer in 0..4294967295");
  }
  return std::optional<std::uint32_t>(value.get<std::uint32_t>());
}

}  // namespace

json export_to_json(std::uint32_t id, const ExportConfig& entry) {
  return json{{"id", id},
              {"path", entry.path},
              {"clients", entry.clients},
              {"read_only", entry.read_only},
              {"secure", entry.secure},
              {"root_squash", entry.root_squash},
              {"map_all_uid", entry.map_all_uid ? json(*entry.map_all_uid) : json(nullptr)},
              {"map_all_gid", entry.map_all_gid ? json(*entry.map_all_gid) : json(nullptr)},
              {"anon_uid", entry.anon_uid},
              {"anon_gid", entry.anon_gid}};
}

Result<ExportConfig> export_from_json(const json& body, ExportConfig base) {
  if (!body.is_object()) return error(Errc::invalid_argument, "an export must be a JSON object");
  for (const auto& [key, value] : body.items()) {
    if (key == "id") {
      continue;  // named by the URL, or chosen at creation
    } else if (key == "path") {
      if (!value.is_string()) return field_error(key, "a string");
      base.path = value.get<std::string>();
    } else if (key == "clients") {
      if (!value.is_array()) return field_error(key, "a list of strings");
      base.clients.clear();
      for (const json& client : value) {
        if (!client.is_string()) return field_error(key, "a list of strings");
        base.clients.push_back(client.get<std::string>());
      }
    } else if (key == "read_only" || key == "secure" || key == "root_squash") {
      if (!value.is_boolean()) return field_error(key, "true or false");
      bool& flag = key == "read_only" ? base.read_only
                   : key == "secure"  ? base.secure
                                      : base.root_squash;
      flag = value.get<bool>();
    } else if (key == "map_all_uid" || key == "map_all_gid") {
      TP_ASSIGN_OR_RETURN(auto id, optional_id(value, key));
      (key == "map_all_uid" ? base.map_all_uid : base.map_all_gid) = id;
    } else if (key == "anon_uid" || key == "anon_gid") {
      TP_ASSIGN_OR_RETURN(auto id, optional_id(value, key));
      if (!id) return field_error(key, "an integer in 0..4294967295");
      (key == "anon_uid" ? base.anon_uid : base.anon_gid) = *id;
    } else {
      return error(Errc::invalid_argument, "unknown export field '" + key + "'");
    }
  }
  if (base.map_all_uid && !base.map_all_gid) base.map_all_gid = base.anon_gid;
  if (!base.map_all_uid) base.map_all_gid.reset();
  TP_RETURN_IF_ERROR(validate_export(base));
  return base;
}

}  // namespace tidepool::daemon::admin
