#include "daemon/cache_reports.h"

#include <string>

#include "daemon/report_sums.h"

namespace tidepool::daemon {
namespace {

using nlohmann::json;

json percent(std::uint64_t part, std::uint64_t whole) {
  if (whole == 0) return nullptr;
  return static_cast<double>(part) * 100.0 / static_cast<double>(whole);
}

// Works out "hit_percent" of each section from its counters: hit bytes of bytes looked at,
// hits of reads.
void set_percentages(json& statistics) {
  for (const char* level : {"l1", "l2"}) {
    if (!statistics.contains(level)) continue;
    json& data = statistics[level]["data"];
    json& metadata = statistics[level]["metadata"];
    const char* whole = std::string(level) == "l1" ? "accessed_bytes" : "read_bytes";
    data["hit_percent"] =
        percent(data.value("hit_bytes", std::uint64_t{0}), data.value(whole, std::uint64_t{0}));
    metadata["hit_percent"] = percent(metadata.value("hits", std::uint64_t{0}),
                                      metadata.value("reads", std::uint64_t{0}));
  }
}

}  // namespace

json cache_statistics_report(cluster::NodeId self, const cache::CacheStatistics& l1,
                             std::size_t l1_budget_bytes, const store::ReadCounters& l2,
                             const store::L2Usage& l2_usage) {
  json statistics{
      {"node", self},
      {"l1",
       {{"budget_bytes", std::uint64_t{l1_budget_bytes}},
        {"cached_bytes", l1.blocks.bytes},
        {"data",
         {{"accessed_bytes", l1.l1_bytes_accessed},
          {"hit_bytes", l1.l1_bytes_hit},
          {"fetched_bytes", l1.l1_bytes_fetched},
          {"prefetched_bytes", l1.l1_bytes_prefetched},
          {"prefetch_used_bytes", l1.l1_prefetch_used},
          {"prefetch_wasted_bytes", l1.l1_prefetch_wasted},
          {"bypassed_bytes", l1.l1_bypassed_bytes}}},
        {"metadata", {{"reads", l1.l1_metadata_reads}, {"hits", l1.l1_metadata_hits}}},
        {"coherence_invalidations", l1.coherence_invalidations},
        {"evictions", l1.blocks.evictions}}},
      {"l2",
       {{"budget_bytes", l2_usage.budget_bytes},
        {"cached_bytes", l2_usage.cached_bytes},
        {"data",
         {{"read_bytes", l2.data_bytes_read.load()},
          {"hit_bytes", l2.data_bytes_hit.load()},
          {"lent_bytes", l2.data_bytes_lent.load()}}},
        {"metadata", {{"reads", l2.metadata_reads.load()}, {"hits", l2.metadata_hits.load()}}}}},
  };
  set_percentages(statistics);
  return json{{"statistics", std::move(statistics)}};
}

json cache_statistics_total(const json& nodes) {
  json total = json::object();
  for (const json& node : nodes) {
    if (node.is_object()) add_counters(total, node);
  }
  set_percentages(total);
  return total;
}

}  // namespace tidepool::daemon
