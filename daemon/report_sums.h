// Sums of the JSON reports nodes send (daemon/cache_reports.h, daemon/activity.h).
#pragma once

#include <nlohmann/json.hpp>

namespace tidepool::daemon {

// Adds every unsigned number of `from` into `into`, recursively, "node" aside; anything worked
// out from sums (percentages) is left to the caller.
void add_counters(nlohmann::json& into, const nlohmann::json& from);

}  // namespace tidepool::daemon
