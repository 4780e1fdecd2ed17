#include "daemon/stored_records.h"

#include <algorithm>
#include <limits>

namespace tidepool::daemon {
namespace {

using nlohmann::json;

Status corrupt(std::string_view key, std::string_view expected) {
  return error(Errc::corrupt, std::string("'").append(key).append("' is not ").append(expected));
}

// `record`'s `key`, or corrupt when it has none.
Result<const json*> field(const json& record, std::string_view key) {
  const auto found = record.find(std::string(key));
  if (found == record.end()) {
    return error(Errc::corrupt, std::string("no '").append(key).append("'"));
  }
  return &*found;
}

bool is_number(const json& value) {
  return value.is_number_unsigned() &&
         value.get<std::uint64_t>() <= std::numeric_limits<std::uint32_t>::max();
}

}  // namespace

Result<std::uint32_t> record_version(const json& record, std::uint32_t newest) {
  if (!record.contains("version")) return 0u;
  TP_ASSIGN_OR_RETURN(const std::uint32_t version, stored_number(record, "version"));
  if (version > newest) {
    return error(Errc::corrupt, "version " + std::to_string(version) +
                                    ", newer than this release reads (" + std::to_string(newest) +
                                    ")");
  }
  return version;
}

Status only_known_fields(const json& record, std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : record.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return error(Errc::corrupt, "an unknown field '" + key + "'");
    }
  }
  return {};
}

Result<std::string> stored_text(const json& record, std::string_view key) {
  TP_ASSIGN_OR_RETURN(const json* value, field(record, key));
  if (!value->is_string()) return corrupt(key, "text");
  return value->get<std::string>();
}

Result<bool> stored_flag(const json& record, std::string_view key) {
  TP_ASSIGN_OR_RETURN(const json* value, field(record, key));
  if (!value->is_boolean()) return corrupt(key, "true or false");
  return value->get<bool>();
}

Result<std::uint32_t> stored_number(const json& record, std::string_view key) {
  TP_ASSIGN_OR_RETURN(const json* value, field(record, key));
  if (!is_number(*value)) return corrupt(key, "a number of 32 bits");
  return value->get<std::uint32_t>();
}

Result<std::optional<std::string>> stored_optional_text(const json& record, std::string_view key) {
  TP_ASSIGN_OR_RETURN(const json* value, field(record, key));
  if (value->is_null()) return std::optional<std::string>();
  if (!value->is_string()) return corrupt(key, "text or null");
  return std::optional<std::string>(value->get<std::string>());
}

Result<std::optional<std::uint32_t>> stored_optional_number(const json& record,
                                                            std::string_view key) {
  TP_ASSIGN_OR_RETURN(const json* value, field(record, key));
  if (value->is_null()) return std::optional<std::uint32_t>();
  if (!is_number(*value)) return corrupt(key, "a number of 32 bits or null");
  return std::optional<std::uint32_t>(value->get<std::uint32_t>());
}

}  // namespace tidepool::daemon
