// NFS exports as the admin API shows and takes them (daemon/admin_api.md: EXPORT). The group
// view keeps them in a form of its own (daemon/config_objects.h).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "common/config.h"
#include "common/status.h"

namespace tidepool::daemon::admin {

// Exports are named by a decimal id.
nlohmann::json export_to_json(std::uint32_t id, const ExportConfig& entry);
// `base` with the fields `body` names replaced, validated. Errors: invalid_argument naming the
// field.
Result<ExportConfig> export_from_json(const nlohmann::json& body, ExportConfig base);

}  // namespace tidepool::daemon::admin
