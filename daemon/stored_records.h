// What the group view's objects stored in a versioned form of their own share (file pool
// policies, exports): their version, and their fields read as values, never as exceptions.
// Such a form changes only with the module that owns it, never with the admin API, which
// converts at its edge (daemon/admin/).
//
// Errors are `corrupt`, naming the field: a record that does not read was damaged, or written
// by a newer release.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tidepool::daemon {

// The version of `record`, a JSON object: its "version", or 0 for a record written before there
// was one. corrupt for a version above `newest`.
Result<std::uint32_t> record_version(const nlohmann::json& record, std::uint32_t newest);

// corrupt naming the first key of `record` that is not among `known`.
Status only_known_fields(const nlohmann::json& record,
                         std::initializer_list<std::string_view> known);

// `record`'s `key`, which must be there with a value of the type asked for.
Result<std::string> stored_text(const nlohmann::json& record, std::string_view key);
Result<bool> stored_flag(const nlohmann::json& record, std::string_view key);
Result<std::uint32_t> stored_number(const nlohmann::json& record, std::string_view key);
// The same where null stands for none.
Result<std::optional<std::string>> stored_optional_text(const nlohmann::json& record,
                                                        std::string_view key);
Result<std::optional<std::uint32_t>> stored_optional_number(const nlohmann::json& record,
                                                            std::string_view key);

}  // namespace tidepool::daemon
