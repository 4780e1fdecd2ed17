#include "daemon/admin/view_json.h"

#include <algorithm>
#include <map>
#include <string>

namespace tidepool::daemon::admin {

using nlohmann::json;

std::vector<json> nodepools_json(const cluster::GroupView& view) {
  std::map<std::string, std::vector<cluster::NodeId>> pools;
  for (const cluster::NodeInfo& node : view.nodes) pools[node.pool].push_back(node.id);
  std::map<std::string, std::string> tier_of;
  for (const cluster::ConfigObject& tier : view.objects_of(kTierKind)) {
    for (const std::string& child : tier_children(tier)) tier_of[child] = tier.name;
  }
  std::vector<json> out;
  for (const auto& [name, nodes] : pools) {
    const auto tier = tier_of.find(name);
    out.push_back(json{{"name", name},
                       {"nodes", nodes},
                       {"tier", tier == tier_of.end() ? json(nullptr) : json(tier->second)}});
  }
  return out;
}

json tier_json(const cluster::ConfigObject& tier) {
  return json{{"name", tier.name}, {"children", tier_children(tier)}};
}

std::vector<json> tiers_json(const cluster::GroupView& view) {
  std::vector<json> out;
  for (const cluster::ConfigObject& tier : view.objects_of(kTierKind))
    out.push_back(tier_json(tier));
  return out;
}

json jobs_json(const std::vector<StoredJob>& jobs, bool ended, bool newest_first) {
  json list = json::array();
  for (const StoredJob& stored : jobs) {
    if (tiering::ended(stored.job.state) == ended) list.push_back(job_to_json(stored.job));
  }
  if (newest_first) std::reverse(list.begin(), list.end());
  return list;
}

json shard_json(const cluster::GroupView& view, const std::optional<store::NamespaceRecord>& record,
                store::ShardId shard) {
  const store::ShardPlace* place = record && shard < record->shards() ? &record->places[shard] : nullptr;
  const cluster::NodeInfo* home = place ? view.node(place->home) : nullptr;
  if (home == nullptr) {
    return json{{"id", shard},
                {"home", nullptr},
                {"state", "unknown"},
                {"mirror", nullptr},
                {"mirror_state", "none"}};
  }
  json where{{"id", shard},
             {"home", home->id},
             {"state", !home->up             ? "home down"
                       : place->handing_over ? "handing over"
                                             : "serving"}};
  const cluster::NodeInfo* mirror = view.node(place->mirror);
  if (mirror == nullptr) {
    where["mirror"] = nullptr;
    where["mirror_state"] = "none";
  } else {
    where["mirror"] = mirror->id;
    where["mirror_state"] = !mirror->up ? "down" : place->mirror_in_step ? "in step" : "copying";
  }
  return where;
}

}  // namespace tidepool::daemon::admin
