// What `tide statistics cache` shows, as each node reports its part in JSON, and the cluster's
// total of those parts.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "cache/coherent_store.h"
#include "cluster/types.h"
#include "store/store.h"

namespace tidepool::daemon {

// {"statistics": {"node": N, "l1": {...}, "l2": {...}}}: L1 (blocks of other nodes' files, and
// the attributes fetched with them) from the node's cache; L2 (its own copy of the namespace:
// data from its block cache of its own units, attributes from the store's cache) from its
// store's counters and usage.
nlohmann::json cache_statistics_report(cluster::NodeId self, const cache::CacheStatistics& l1,
                                       std::size_t l1_budget_bytes, const store::ReadCounters& l2,
                                       const store::L2Usage& l2_usage);

// The sum of the nodes' reports' "statistics" objects, with every hit percentage worked out
// again from the sums; "node" is left out.
nlohmann::json cache_statistics_total(const nlohmann::json& nodes);

}  // namespace tidepool::daemon
