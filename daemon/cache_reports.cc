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

// Sets section `name` of `level`'s "hit_percent": `hits` of `whole`, when it is a section.
void set_hit_percent(json& level, const char* name, const char* hits, const char* whole) {
  const auto section = level.find(name);
  if (section == level.end() || !section->is_object()) return;
  auto counter = [&section](const char* key) {
    const auto found = section->find(key);
    return found != section->end() && found->is_number_unsigned() ? found->get<std::uint64_t>()
                                                                   : std::uint64_t{0};
  };
  (*section)["hit_percent"] = percent(counter(hits), counter(whole));
}

// Works out "hit_percent" of each section from its counters: hit bytes of bytes looked at,
// hits of reads. What a report lacks (a node of another release) counts as nothing.
void set_percentages(json& statistics) {
  for (const char* level : {"l1", "l2"}) {
    const auto found = statistics.find(level);
    if (found == statistics.end() || !found->is_object()) continue;
    set_hit_percent(*found, "data", "hit_bytes",
                    std::string(level) == "l1" ? "accessed_bytes" : "read_bytes");
    set_hit_percent(*found, "metadata", "hits", "reads");
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
