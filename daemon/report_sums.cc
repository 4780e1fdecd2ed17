#include "daemon/report_sums.h"

#include <cstdint>

namespace tidepool::daemon {

void add_counters(nlohmann::json& into, const nlohmann::json& from) {
  for (const auto& [key, value] : from.items()) {
    if (value.is_object()) {
      if (!into[key].is_object()) into[key] = nlohmann::json::object();
      add_counters(into[key], value);
    } else if (value.is_number_unsigned() && key != "node") {
      into[key] = into.value(key, std::uint64_t{0}) + value.get<std::uint64_t>();
    }
  }
}

}  // namespace tidepool::daemon
