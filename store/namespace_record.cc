#include "store/namespace_record.h"

#include <charconv>
#include <nlohmann/json.hpp>
#include <string>

#include "cluster/ring.h"
#include "common/hex.h"
#include "store/store.h"

namespace tidepool::store {
namespace {

using json = nlohmann::json;

// The group view's object that holds the record.
constexpr std::string_view kObjectKind = "cluster";
constexpr std::string_view kObjectName = "namespace";

json namespace_to_json(const NamespaceRecord& record) {
  json places = json::array();
  for (const ShardPlace& place : record.places) {
    json written{
        {"home", place.home}, {"mirror", place.mirror}, {"mirror_in_step", place.mirror_in_step}};
    if (place.handing_over) written["handing_over"] = true;
    places.push_back(std::move(written));
  }
  json body;
  body["places"] = std::move(places);
  body["handle_key"] = to_hex(record.handle_key);
  body["shards"] = record.shards();
  return body;
}

}  // namespace

NamespaceRecord new_namespace(cluster::NodeId home, std::uint32_t shards) {
  NamespaceRecord record;
  record.places.assign(shards, ShardPlace{home, 0, false});
  return record;
}

cluster::Change namespace_creation(const NamespaceRecord& record) {
  return cluster::Change::create_object(std::string(kObjectKind), std::string(kObjectName),
                                        namespace_to_json(record).dump());
}

cluster::Change namespace_update(const NamespaceRecord& next) {
  return cluster::Change::update_object(std::string(kObjectKind), std::string(kObjectName),
                                        namespace_to_json(next).dump(), next.changed);
}

namespace {

// The next place of one shard, by plan_namespace's rules; `nodes`: the up nodes not leaving,
// in the order the ring prefers them for the shard.
ShardPlace plan_shard(const ShardPlace& place, const std::vector<cluster::NodeId>& nodes,
                      const cluster::GroupView& view, const std::set<cluster::NodeId>& leaving,
                      bool spread) {
  ShardPlace next = place;
  if (!view.is_up(place.home)) {
    if (place.mirror != 0 && place.mirror_in_step && view.is_up(place.mirror)) {
      next = ShardPlace{place.mirror, 0, false, false};
    }
    return next;
  }
  const bool mirror_stays = place.mirror != 0 && place.mirror != place.home &&
                            view.is_up(place.mirror) && !leaving.contains(place.mirror);
  // The home leaving hands the shard to a mirror that stays, once that one is in step.
  if (leaving.contains(place.home) && !nodes.empty()) {
    if (!mirror_stays) return ShardPlace{place.home, nodes.front(), false, false};
    next.handing_over = place.mirror_in_step;
    return next;
  }
  if (spread && !nodes.empty() && nodes.front() != place.home) {
    if (place.mirror != nodes.front()) return ShardPlace{place.home, nodes.front(), false, false};
    // Once in step, the home is asked to hand over; it finishes that itself. A mirror no
    // longer in step (its home restarted) is copied anew first.
    next.handing_over = place.mirror_in_step;
    return next;
  }
  next.handing_over = false;  // the ring changed its mind while the home was handing over
  if (mirror_stays) return next;
  for (cluster::NodeId candidate : nodes) {
    if (candidate == place.home || candidate == place.mirror) continue;
    return ShardPlace{place.home, candidate, false, false};
  }
  return next;
}

// Where the ring puts a shard: a namespace of one shard where it put the namespace before
// shards.
std::uint64_t shard_ring_key(const NamespaceRecord& record, ShardId shard) {
  const std::uint64_t key = cluster::Ring::key_of(kObjectName);
  return record.shards() == 1 ? key : cluster::Ring::key_of(key, shard);
}

// The ring of the nodes a shard may live on: those up and not `leaving`.
cluster::Ring placeable(const cluster::GroupView& view, const std::set<cluster::NodeId>& leaving) {
  std::vector<cluster::NodeId> nodes = view.up_nodes();
  std::erase_if(nodes, [&leaving](cluster::NodeId node) { return leaving.contains(node); });
  return cluster::Ring(std::move(nodes));
}

// The nodes of `ring` in the order it prefers them for shard `shard`.
std::vector<cluster::NodeId> ring_order(const cluster::Ring& ring, const NamespaceRecord& record,
                                        std::uint32_t shard) {
  return ring.owners(shard_ring_key(record, shard), ring.nodes().size());
}

// {"home", "mirror", "mirror_in_step", "handing_over"}; records written before mirrors existed
// have only the home.
std::optional<ShardPlace> shard_place_of(const json& body) {
  if (!body.is_object() || !body.value("home", json()).is_number_unsigned()) return std::nullopt;
  const json mirror = body.value("mirror", json(0u));
  const json in_step = body.value("mirror_in_step", json(false));
  const json handing_over = body.value("handing_over", json(false));
  if (!mirror.is_number_unsigned() || !in_step.is_boolean() || !handing_over.is_boolean()) {
    return std::nullopt;
  }
  return ShardPlace{body["home"].get<cluster::NodeId>(), mirror.get<cluster::NodeId>(),
                    in_step.get<bool>(), handing_over.get<bool>()};
}

}  // namespace

std::optional<NamespaceRecord> plan_namespace(const NamespaceRecord& record,
                                              const cluster::GroupView& view,
                                              const std::set<cluster::NodeId>& leaving) {
  const bool spread = record.shards() > 1;
  const cluster::Ring ring = placeable(view, leaving);
  NamespaceRecord next = record;
  for (ShardId shard = 0; shard < record.shards(); ++shard) {
    next.places[shard] =
        plan_shard(record.places[shard], ring_order(ring, record, shard), view, leaving, spread);
  }
  if (next == record) return std::nullopt;
  return next;
}

NamespaceRecord handed_over(const NamespaceRecord& record, std::uint32_t shard,
                            const cluster::GroupView& view,
                            const std::set<cluster::NodeId>& leaving) {
  NamespaceRecord next = record;
  ShardPlace& place = next.places.at(shard);
  const cluster::NodeId home = place.mirror;
  place = ShardPlace{home, 0, false, false};
  for (cluster::NodeId candidate : ring_order(placeable(view, leaving), record, shard)) {
    if (candidate == home) continue;
    place.mirror = candidate;
    break;
  }
  return next;
}

std::optional<NamespaceRecord> namespace_of(const cluster::GroupView& view) {
  const cluster::ConfigObject* object = view.object(kObjectKind, kObjectName);
  if (object == nullptr) return std::nullopt;
  const json body = json::parse(object->body, nullptr, false);
  if (!body.is_object() || !body.value("handle_key", json()).is_string()) return std::nullopt;
  const json shards = body.value("shards", json(1u));
  if (!shards.is_number_unsigned() || shards.get<std::uint64_t>() == 0 ||
      shards.get<std::uint64_t>() > kMaxShards) {
    return std::nullopt;
  }
  NamespaceRecord record;
  if (body.contains("places")) {
    const json& places = body["places"];
    if (!places.is_array() || places.size() != shards.get<std::uint64_t>()) return std::nullopt;
    record.places.clear();
    for (const json& place : places) {
      std::optional<ShardPlace> parsed = shard_place_of(place);
      if (!parsed) return std::nullopt;
      record.places.push_back(*parsed);
    }
  } else {
    std::optional<ShardPlace> every = shard_place_of(body);
    if (!every) return std::nullopt;
    record.places.assign(shards.get<std::uint32_t>(), *every);
  }
  record.changed = object->changed;
  const std::string key = body["handle_key"];
  if (key.size() != 2 * record.handle_key.size()) return std::nullopt;
  for (std::size_t i = 0; i < record.handle_key.size(); ++i) {
    auto [end, ec] =
        std::from_chars(key.data() + 2 * i, key.data() + 2 * i + 2, record.handle_key[i], 16);
    if (ec != std::errc() || end != key.data() + 2 * i + 2) return std::nullopt;
  }
  return record;
}

}  // namespace tidepool::store
