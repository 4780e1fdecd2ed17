// The node's Prometheus metrics (text exposition format 0.0.4), served at /metrics.
#pragma once

#include <string>

#include "cache/coherent_store.h"
#include "daemon/membership.h"
#include "nfsd/server.h"
#include "store/store.h"

namespace tidepool::daemon {

// Call on the membership's strand.
std::string render_metrics(Membership& membership, const nfsd::NfsServer& server,
                           const NodeStats& stats, const store::IntegrityCounters& integrity,
                           const cache::CacheStatistics& cache, const store::ReadCounters& l2);

}  // namespace tidepool::daemon
