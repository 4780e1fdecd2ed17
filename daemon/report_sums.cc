#include "daemon/report_sums.h"

#include <cstdint>

namespace tidepool::daemon {

void add_counters(nlohmann::json& into, const nlohmann::json& from) {
  for (const auto& [key, value] : from.items()) {
    // A key that is a section in one node's report and a counter in another's (a node of
    // another release) keeps the first shape seen.
    if (value.is_object()) {
      nlohmann::json& section = into[key];
      if (section.is_null()) section = nlohmann::json::object();
      if (section.is_object()) add_counters(section, value);
    } else if (value.is_number_unsigned() && key != "node") {
      nlohmann::json& sum = into[key];
      if (sum.is_null()) sum = std::uint64_t{0};
      if (sum.is_number_unsigned()) sum = sum.get<std::uint64_t>() + value.get<std::uint64_t>();
    }
  }
}

}  // namespace tidepool::daemon
