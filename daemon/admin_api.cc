#include "daemon/admin_api.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <charconv>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/callback_awaitable.h"
#include "daemon/activity.h"
#include "daemon/cache_reports.h"
#include "daemon/config_objects.h"
#include "daemon/filepool.h"
#include "daemon/jobs.h"
#include "store/pool_data.h"
#include "tiering/smartpools.h"

namespace tidepool::daemon {
namespace {

namespace asio = boost::asio;
using nlohmann::json;
using cluster::Change;
using cluster::GroupView;

constexpr std::chrono::milliseconds kChangeDeadline{10'000};
// Adding a node waits for it to catch up with the log before it votes.
constexpr std::chrono::milliseconds kAddNodeDeadline{30'000};
constexpr std::chrono::milliseconds kStatsDeadline{1'000};
constexpr std::chrono::milliseconds kJoinTimeout{10'000};
constexpr std::chrono::milliseconds kCatchUpDeadline{2'000};

HttpResponse reply(unsigned status, const json& body) { return HttpResponse{status, body.dump()}; }
HttpResponse failure(const Status& status) {
  return error_response(http_status_of(status.code()), status.message());
}
HttpResponse no_content() { return HttpResponse{204, ""}; }

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A path segment with its %XX escapes undone; a malformed escape stays as it is.
std::string percent_decoded(std::string_view segment) {
  std::string decoded;
  for (std::size_t i = 0; i < segment.size(); ++i) {
    unsigned value = 0;
    if (segment[i] == '%' && i + 2 < segment.size() &&
        std::from_chars(segment.data() + i + 1, segment.data() + i + 3, value, 16).ptr ==
            segment.data() + i + 3) {
      decoded += static_cast<char>(value);
      i += 2;
    } else {
      decoded += segment[i];
    }
  }
  return decoded;
}

// The non-empty segments of a slash-separated path, each percent-decoded if `decode`.
std::vector<std::string> split_path(std::string_view path, bool decode) {
  std::vector<std::string> parts;
  while (!path.empty()) {
    const std::size_t slash = path.find('/');
    const std::string_view segment = path.substr(0, slash);
    if (!segment.empty()) parts.push_back(decode ? percent_decoded(segment) : std::string(segment));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return parts;
}

std::vector<std::string> split_target(std::string_view target) {
  return split_path(target.substr(0, target.find('?')), true);
}

Result<json> parse_body(const std::string& body) {
  json parsed = json::parse(body, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return error(Errc::invalid_argument, "the request body must be a JSON object");
  }
  return parsed;
}

template <typename Id = std::uint32_t>
std::optional<Id> parse_id(std::string_view text) {
  Id id = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return id;
}

json node_json(const cluster::NodeInfo& node) {
  return json{{"id", node.id},
              {"name", node.name},
              {"pool", node.pool},
              {"state", node.up ? "up" : "down"},
              {"frontend_address", node.frontend_address},
              {"backend_address", node.backend_address},
              {"admin_address", node.admin_address},
              {"stats", nullptr}};
}

json tier_json(const cluster::ConfigObject& tier) {
  return json{{"name", tier.name}, {"children", tier_children(tier)}};
}

std::vector<json> nodepools_json(const GroupView& view) {
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

std::vector<json> tiers_json(const GroupView& view) {
  std::vector<json> out;
  for (const cluster::ConfigObject& tier : view.objects_of(kTierKind)) out.push_back(tier_json(tier));
  return out;
}

json sysctl_json(const SysctlSpec& spec, const GroupView& view, const NodeConfig& config) {
  return json{{"name", spec.name},
              {"value", sysctl_value(spec, view, config)},
              {"default", sysctl_default(spec, config)},
              {"description", spec.description}};
}

// Children of a tier as the request gives them: existing node pools, none in another tier.
Result<std::vector<std::string>> tier_children_from(const json& body, const GroupView& view,
                                                    std::string_view tier) {
  std::vector<std::string> children;
  if (!body.contains("children")) return children;
  if (!body["children"].is_array()) {
    return error(Errc::invalid_argument, "'children' must be a list of node pool names");
  }
  std::set<std::string> pools;
  for (const cluster::NodeInfo& node : view.nodes) pools.insert(node.pool);
  for (const json& child : body["children"]) {
    if (!child.is_string()) {
      return error(Errc::invalid_argument, "'children' must be a list of node pool names");
    }
    const std::string pool = child.get<std::string>();
    if (!pools.contains(pool)) {
      return error(Errc::invalid_argument, "no node pool '" + pool + "' in the cluster");
    }
    if (std::ranges::find(children, pool) != children.end()) {
      return error(Errc::invalid_argument, "node pool '" + pool + "' is named twice");
    }
    for (const cluster::ConfigObject& other : view.objects_of(kTierKind)) {
      const auto others = tier_children(other);
      if (other.name != tier && std::ranges::find(others, pool) != others.end()) {
        return error(Errc::already_exists,
                     "node pool '" + pool + "' already belongs to tier '" + other.name + "'");
      }
    }
    children.push_back(pool);
  }
  return children;
}

// Every path the API serves, to tell a wrong method (405) from a wrong path (404).
const std::vector<std::vector<std::string_view>>& known_paths() {
  static const std::vector<std::vector<std::string_view>> paths{
      {"v1", "cluster"},
      {"v1", "cluster", "nodes"},
      {"v1", "cluster", "nodes", "*"},
      {"v1", "storagepool", "nodepools"},
      {"v1", "storagepool", "nodepools", "*"},
      {"v1", "storagepool", "tiers"},
      {"v1", "storagepool", "tiers", "*"},
      {"v1", "sysctl"},
      {"v1", "sysctl", "*"},
      {"v1", "nfs", "exports"},
      {"v1", "nfs", "exports", "*"},
      {"v1", "filepool", "policies"},
      {"v1", "filepool", "policies", "*"},
      {"v1", "job", "types"},
      {"v1", "job", "types", "*"},
      {"v1", "job", "jobs"},
      {"v1", "job", "jobs", "*"},
      {"v1", "job", "reports"},
      {"v1", "job", "reports", "*"},
      {"v1", "job", "status"},
  };
  return paths;
}

std::string bearer_token(std::string_view authorization) {
  constexpr std::string_view kBearer = "Bearer ";
  if (!authorization.starts_with(kBearer)) return {};
  return std::string(authorization.substr(kBearer.size()));
}

}  // namespace

unsigned http_status_of(Errc code) {
  switch (code) {
    case Errc::ok:
      return 200;
    case Errc::not_found:
    case Errc::stale:
      return 404;
    case Errc::already_exists:
    case Errc::not_empty:
    case Errc::precondition_failed:
      return 409;
    case Errc::access_denied:
    case Errc::not_permitted:
      return 403;
    case Errc::invalid_argument:
    case Errc::name_too_long:
    case Errc::bad_handle:
    case Errc::bad_cookie:
    case Errc::not_a_directory:
    case Errc::is_a_directory:
    case Errc::too_many_links:
    case Errc::cross_device:
    case Errc::file_too_large:
    case Errc::read_only:
      return 400;
    case Errc::not_supported:
      return 405;
    case Errc::unavailable:
    case Errc::behind:
    case Errc::no_space:
      return 503;
    case Errc::timed_out:
      return 504;
    case Errc::io_error:
    case Errc::corrupt:
    case Errc::internal:
      return 500;
  }
  return 500;
}

AdminApi::AdminApi(asio::any_io_executor strand, Membership& membership, store::Store& store,
                   std::function<std::string()> metrics, std::function<void()> joined)
    : strand_(std::move(strand)),
      membership_(membership),
      store_(store),
      metrics_(std::move(metrics)),
      joined_(std::move(joined)) {}

namespace {

// What a request that changes the configuration asks for: the change, and the answer to give
// once it is applied — or an answer at once when the request is refused before any change.
struct Plan {
  std::optional<HttpResponse> now;
  Change change;
  std::chrono::milliseconds deadline = kChangeDeadline;
  HttpResponse applied;
};

Plan refuse(HttpResponse response) {
  Plan plan;
  plan.now = std::move(response);
  return plan;
}

Plan refuse(const Status& status) { return refuse(failure(status)); }

Plan change_then(Change change, HttpResponse applied) {
  Plan plan;
  plan.change = std::move(change);
  plan.applied = std::move(applied);
  return plan;
}

asio::awaitable<HttpResponse> ready(HttpResponse response) { co_return response; }

// Proposes the plan's change; the outcome once it is applied or refused.
asio::awaitable<Status> propose(Membership& m, const Plan& plan) {
  cluster::GroupClient* client = m.client();
  auto proposing = await_callback<Status>(
      [client, change = plan.change, deadline = plan.deadline](auto done) {
        client->propose(change, deadline, done);
      });
  co_return co_await std::move(proposing);
}

asio::awaitable<HttpResponse> carry_out(Membership& m, Plan plan) {
  if (plan.now) co_return std::move(*plan.now);
  auto proposing = propose(m, plan);
  const Status status = co_await std::move(proposing);
  if (!status.ok()) co_return failure(status);
  co_return std::move(plan.applied);
}

// Plans a change of objects written whole over what was read (the file pool policy list, a job,
// a job type's settings) on the node's view and carries it out. A node whose view is behind the
// group's (a change just made through another node) has its change refused; it then plans again
// once its view caught up, a bounded number of times.
asio::awaitable<HttpResponse> change_config(Membership& m,
                                              std::function<Plan(const GroupView&)> plan_for) {
  constexpr int kAttempts = 20;
  constexpr auto kCatchUp = std::chrono::milliseconds(50);
  for (int attempt = 1;; ++attempt) {
    Plan plan = plan_for(m.group()->view());
    if (plan.now) co_return std::move(*plan.now);
    auto proposing = propose(m, plan);
    const Status status = co_await std::move(proposing);
    if (status.ok()) co_return std::move(plan.applied);
    const bool raced =
        status.code() == Errc::precondition_failed || status.code() == Errc::already_exists;
    if (!raced || attempt == kAttempts) co_return failure(status);
    asio::steady_timer pause(co_await asio::this_coro::executor, kCatchUp);
    auto paused = pause.async_wait(asio::use_awaitable);
    co_await std::move(paused);
  }
}

// Parses a route's path: the parts of the target, and which known shape it has.
class Route {
 public:
  Route(std::string method, const std::string& target)
      : method_(std::move(method)), path_(split_target(target)), query_(split_query(target)) {}

  bool is(std::string_view method, std::initializer_list<std::string_view> parts) const {
    return method == method_ && matches(parts);
  }
  template <typename Parts>
  bool matches(const Parts& parts) const {
    return std::ranges::equal(parts, path_, [](std::string_view pattern, const std::string& part) {
      return pattern == "*" || pattern == part;
    });
  }
  bool matches(std::initializer_list<std::string_view> parts) const {
    return matches<std::initializer_list<std::string_view>>(parts);
  }
  std::string_view at(std::size_t i) const {
    return i < path_.size() ? std::string_view(path_[i]) : std::string_view();
  }
  // The segments from `first` on.
  std::vector<std::string> from(std::size_t first) const {
    return first < path_.size()
               ? std::vector<std::string>(path_.begin() + static_cast<long>(first), path_.end())
               : std::vector<std::string>{};
  }
  const std::string& method() const { return method_; }
  // The value of query parameter `name` (`?name=value&...`), decoded.
  std::optional<std::string> query(std::string_view name) const {
    const auto it = query_.find(std::string(name));
    if (it == query_.end()) return std::nullopt;
    return it->second;
  }

 private:
  static std::map<std::string, std::string> split_query(std::string_view target) {
    std::map<std::string, std::string> query;
    const std::size_t mark = target.find('?');
    if (mark == std::string_view::npos) return query;
    std::string_view rest = target.substr(mark + 1);
    while (!rest.empty()) {
      const std::size_t amp = rest.find('&');
      const std::string_view pair = rest.substr(0, amp);
      const std::size_t equals = pair.find('=');
      query[percent_decoded(pair.substr(0, equals))] =
          equals == std::string_view::npos ? "" : percent_decoded(pair.substr(equals + 1));
      if (amp == std::string_view::npos) break;
      rest.remove_prefix(amp + 1);
    }
    return query;
  }

  std::string method_;
  std::vector<std::string> path_;
  std::map<std::string, std::string> query_;
};

HttpResponse health(Membership& m) {
  json body{{"node", m.config().node_id}, {"status", "ok"}, {"cluster", nullptr},
            {"leader", 0},                {"epoch", 0}};
  if (!m.identity()) return reply(200, body);
  body["cluster"] = m.identity()->name;
  body["leader"] = m.group()->leader();
  body["epoch"] = m.group()->epoch();
  if (m.group()->leader() != 0) return reply(200, body);
  body["status"] = "no-quorum";
  return reply(503, body);
}

HttpResponse this_node(Membership& m) {
  json node = node_json(m.self());
  node.erase("state");
  node.erase("stats");
  node["cluster"] = m.identity() ? json{{"name", m.identity()->name}, {"id", m.identity()->id}}
                                 : json(nullptr);
  node["certificate"] = m.self_signed_certificate();
  return reply(200, node);
}

json created_json(const CreatedCluster& created) {
  return json{{"cluster", {{"name", created.identity.name}, {"id", created.identity.id}}},
              {"token", created.token},
              {"ca_certificate", created.ca_certificate}};
}

asio::awaitable<HttpResponse> create_cluster(Membership& m, std::function<void()> joined,
                                             std::string name) {
  auto creating = m.create(std::move(name));
  Result<CreatedCluster> created = co_await std::move(creating);
  if (!created.ok()) co_return failure(created.status());
  joined();
  co_return reply(201, created_json(*created));
}

HttpResponse join_cluster(Membership& m, const std::function<void()>& joined,
                          const std::string& request_body) {
  auto body = parse_body(request_body);
  if (!body.ok()) return failure(body.status());
  const json& b = *body;
  const json cluster_field = b.value("cluster", json());
  if (!cluster_field.is_object() || !cluster_field.value("name", json()).is_string() ||
      !cluster_field.value("id", json()).is_string() ||
      !b.value("ca_certificate", json()).is_string() || !b.value("certificate", json()).is_string()) {
    return error_response(400, "a join needs cluster {name, id}, ca_certificate and certificate");
  }
  const Status status = m.join(
      JoinPackage{{cluster_field["name"], cluster_field["id"]}, b["ca_certificate"], b["certificate"]});
  if (!status.ok()) return failure(status);
  joined();
  return reply(200, json::object());
}

json stats_json(const NodeStats& stats) {
  return json{{"in_bytes_per_second", stats.in_bytes_per_second},
              {"out_bytes_per_second", stats.out_bytes_per_second},
              {"used_bytes", stats.used_bytes},
              {"size_bytes", stats.size_bytes}};
}

// Where a shard lives: its home serves every NFS operation on its inodes, shipped from the
// others; its mirror holds a second copy, ready to take over while it is in step.
json shard_json(const GroupView& view, const std::optional<NamespaceRecord>& record,
                store::ShardId shard) {
  const ShardPlace* place = record && shard < record->shards() ? &record->places[shard] : nullptr;
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

// The namespace as `tide status` shows it: where its root's shard lives, and every shard.
json namespace_json(const GroupView& view) {
  const std::optional<NamespaceRecord> record = namespace_of(view);
  json where = shard_json(view, record, 0);
  where.erase("id");
  json shards = json::array();
  for (store::ShardId shard = 0; record && shard < record->shards(); ++shard) {
    shards.push_back(shard_json(view, record, shard));
  }
  where["shards"] = std::move(shards);
  where["settled"] = record &&
                     std::none_of(record->places.begin(), record->places.end(),
                                  [](const ShardPlace& place) { return place.handing_over; }) &&
                     !plan_namespace(*record, view);
  return where;
}

const char* type_name(store::FileType type) {
  switch (type) {
    case store::FileType::regular:
      return "file";
    case store::FileType::directory:
      return "directory";
    case store::FileType::symlink:
      return "symlink";
    case store::FileType::block_device:
      return "block device";
    case store::FileType::char_device:
      return "character device";
    case store::FileType::socket:
      return "socket";
    case store::FileType::fifo:
      return "fifo";
  }
  return "unknown";
}

// The most stripe units `tide get -D` lists one by one; the rest are counted.
constexpr std::uint64_t kListedUnits = 4096;

// The runs of consecutive units, of the first `units` of file `inode`, held by the same nodes
// when placed over `pool_nodes` with `protection` copies: each unit's owners on the ring.
json placed_units_json(store::InodeId inode, std::uint64_t units,
                       const std::vector<std::uint64_t>& pool_nodes, std::uint32_t protection) {
  json runs = json::array();
  for (std::uint64_t unit = 0; unit < std::min(units, kListedUnits); ++unit) {
    const json nodes = store::unit_owners(pool_nodes, inode, unit, protection);
    if (!runs.empty() && runs.back()["nodes"] == nodes) {
      runs.back()["count"] = runs.back()["count"].get<std::uint64_t>() + 1;
    } else {
      runs.push_back(json{{"first", unit}, {"count", 1}, {"nodes", nodes}});
    }
  }
  return runs;
}

std::uint64_t units_of(const store::Attributes& a, const store::Layout& layout) {
  return layout.stripe_unit == 0 ? 0 : (a.size + layout.stripe_unit - 1) / layout.stripe_unit;
}

// The nodes holding each stripe unit of a file, as runs of consecutive units held by the same
// nodes: in a node pool, each unit's owners on the ring over the layout's nodes; kept with the
// shard, every unit on the shard's home and, once in step, its mirror.
json stripe_units_json(const store::Attributes& a, const store::Layout& layout, const json& where) {
  const std::uint64_t units = units_of(a, layout);
  if (layout.pool != store::kWithShard) {
    return placed_units_json(a.inode, units, layout.nodes, layout.protection);
  }
  json runs = json::array();
  if (units == 0 || where["home"].is_null()) return runs;
  json nodes = json::array({where["home"]});
  if (where["mirror_state"] == "in step") nodes.push_back(where["mirror"]);
  runs.push_back(json{{"first", 0}, {"count", units}, {"nodes", nodes}});
  return runs;
}

// GET /v1/namespace/ifs/PATH: what `tide get` shows of the file or directory at /ifs/PATH.
std::string shown_path(const std::vector<std::string>& path) {
  std::string shown;
  for (const std::string& segment : path) shown += "/" + segment;
  return shown;
}

// The file at `path` (its segments, "ifs" first); a copy, since the coroutine may outlive the
// caller's.
asio::awaitable<Result<store::Attributes>> resolve_path(store::Store& store,
                                                        std::vector<std::string> path) {
  if (path.empty() || path.front() != "ifs") {
    co_return error(Errc::not_found, "paths in the namespace start with /ifs");
  }
  const store::Caller root{0, 0, {}};
  auto getting = store.getattr(store::kRootInode);
  Result<store::Attributes> attributes = co_await std::move(getting);
  for (std::size_t i = 1; i < path.size() && attributes.ok(); ++i) {
    if (path[i] == "." || path[i] == "..") {
      co_return error(Errc::invalid_argument, "the path must not contain '.' or '..'");
    }
    auto looking = store.lookup(attributes->inode, path[i], root);
    Result<store::LookupResult> found = co_await std::move(looking);
    if (!found.ok()) {
      attributes = found.status();
    } else {
      attributes = found->object;
    }
  }
  if (!attributes.ok() && attributes.status().code() == Errc::not_found) {
    co_return error(Errc::not_found, "no such file: " + shown_path(path));
  }
  co_return attributes;
}

asio::awaitable<HttpResponse> file_info(store::Store& store, Membership& m,
                                        std::vector<std::string> path) {
  auto resolving = resolve_path(store, path);
  const Result<store::Attributes> attributes = co_await std::move(resolving);
  if (!attributes.ok()) co_return failure(attributes.status());
  const store::Attributes& a = *attributes;
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", a.mode);
  const GroupView& view = m.group()->view();
  json where = shard_json(view, namespace_of(view), store::shard_of(a.inode));
  json info{{"path", shown_path(path)},
            {"inode", a.inode},
            {"type", type_name(a.type)},
            {"size", a.size},
            {"mode", mode},
            {"uid", a.uid},
            {"gid", a.gid},
            {"nlink", a.nlink},
            {"mtime_ns", a.mtime_ns},
            {"atime_ns", a.atime_ns},
            {"ctime_ns", a.ctime_ns},
            {"shard", where}};
  if (a.type != store::FileType::regular) co_return reply(200, info);
  auto laying = store.layout(a.inode);
  Result<store::Layout> layout = co_await std::move(laying);
  if (!layout.ok()) co_return failure(layout.status());
  info["layout"] = {{"pool", layout->pool},
                    {"stripe_unit", layout->stripe_unit},
                    {"protection", std::to_string(layout->protection) + "x"},
                    {"access_pattern", layout->access_pattern}};
  info["stripe_units"] = stripe_units_json(a, *layout, where);
  const std::uint64_t units = units_of(a, *layout);
  info["unlisted_units"] = units > kListedUnits && layout->pool != store::kWithShard
                               ? units - kListedUnits
                               : 0;
  // Mid-move, where every unit is being copied to; the data is read where it was until the
  // move switches it.
  info["moving"] = nullptr;
  if (!layout->moving_to.empty()) {
    info["moving"] = {
        {"pool", layout->moving_to},
        {"protection", std::to_string(layout->moving_protection) + "x"},
        {"copied_bytes", std::min(layout->moved_bytes, a.size)},
        {"stripe_units", placed_units_json(a.inode, units, layout->moving_nodes,
                                           layout->moving_protection)}};
  }
  co_return reply(200, info);
}

// PUT /v1/namespace/ifs/PATH {"access_pattern": P}: `tide set -a P PATH`; answers as GET.
asio::awaitable<HttpResponse> set_file(store::Store& store, Membership& m,
                                       std::vector<std::string> path, std::string body) {
  auto parsed = parse_body(body);
  if (!parsed.ok()) co_return failure(parsed.status());
  for (const auto& [key, value] : parsed->items()) {
    if (key != "access_pattern") co_return error_response(400, "unknown field '" + key + "'");
  }
  const json pattern = parsed->value("access_pattern", json());
  if (!pattern.is_string()) {
    co_return error_response(400, "'access_pattern' must be random, concurrency or streaming");
  }
  auto resolving = resolve_path(store, path);
  const Result<store::Attributes> file = co_await std::move(resolving);
  if (!file.ok()) co_return failure(file.status());
  if (file->type != store::FileType::regular) {
    co_return error_response(400, "only a regular file has an access pattern");
  }
  auto setting = store.set_access_pattern(file->inode, pattern.get<std::string>());
  const Result<store::Layout> layout = co_await std::move(setting);
  if (!layout.ok()) co_return failure(layout.status());
  auto showing = file_info(store, m, std::move(path));
  co_return co_await std::move(showing);
}

// GET /v1/filepool/explain/ifs/PATH: which policy applies to the file now, and where each of
// its actions comes from.
asio::awaitable<HttpResponse> explain_file(store::Store& store, Membership& m,
                                           std::vector<std::string> path) {
  auto resolving = resolve_path(store, path);
  const Result<store::Attributes> file = co_await std::move(resolving);
  if (!file.ok()) co_return failure(file.status());
  const policy::FileFacts facts = tiering::facts_of(*file, shown_path(path));
  const policy::PolicySet set = policies_of(m.group()->view()).set;
  const policy::Resolution r = policy::resolve(set, facts, unix_now());
  json filter = nullptr;
  for (const policy::Policy& p : set.policies) {
    if (p.name == r.policy) filter = policy::to_expression(p.filter);
  }
  co_return reply(
      200,
      json{{"path", facts.path},
           {"policy", r.policy},
           {"filter", filter},
           {"storage_target", {{"value", r.storage_target}, {"from", r.storage_target_from}}},
           {"protection",
            {{"value", std::to_string(r.protection) + "x"}, {"from", r.protection_from}}},
           {"access_pattern", {{"value", r.access_pattern}, {"from", r.access_pattern_from}}}});
}

HttpResponse no_job_type(std::string_view name) {
  return error_response(404, "no job type '" + std::string(name) + "'");
}

// GET /v1/job/types
HttpResponse job_types_list(const GroupView& view) {
  json list = json::array();
  for (const tiering::JobTypeSpec& spec : tiering::job_types()) {
    list.push_back(job_type_to_json(job_type_of(view, spec), unix_now()));
  }
  return reply(200, json{{"types", std::move(list)}});
}

HttpResponse job_type_view(const GroupView& view, std::string_view name) {
  const tiering::JobTypeSpec* spec = tiering::find_job_type(name);
  if (spec == nullptr) return no_job_type(name);
  return reply(200, job_type_to_json(job_type_of(view, *spec), unix_now()));
}

// PUT /v1/job/types/NAME. A new schedule counts from now: it does not start at once for the
// starts an older one would have made.
Plan write_job_type(const GroupView& view, const std::string& request_body, std::string_view name) {
  const tiering::JobTypeSpec* spec = tiering::find_job_type(name);
  if (spec == nullptr) return refuse(no_job_type(name));
  const Result<json> body = parse_body(request_body);
  if (!body.ok()) return refuse(body.status());
  StoredJobType stored = job_type_of(view, *spec);
  auto settings = job_type_settings_from_json(*body, stored.settings);
  if (!settings.ok()) return refuse(settings.status());
  const std::int64_t now = unix_now();
  if (settings->schedule != stored.settings.schedule) settings->last_scheduled = now;
  const cluster::Change change = job_type_update(stored, *settings);
  stored.settings = *settings;
  return change_then(change, reply(200, job_type_to_json(stored, now)));
}

json jobs_json(const std::vector<StoredJob>& jobs, bool ended, bool newest_first) {
  json list = json::array();
  for (const StoredJob& stored : jobs) {
    if (tiering::ended(stored.job.state) == ended) list.push_back(job_to_json(stored.job));
  }
  if (newest_first) std::reverse(list.begin(), list.end());
  return list;
}

// GET /v1/job/jobs/ID (`ended`: any) and /v1/job/reports/ID (`ended`: only an ended one).
HttpResponse job_view(const GroupView& view, std::string_view id_text, bool only_ended) {
  const std::optional<std::uint64_t> id = parse_id<std::uint64_t>(id_text);
  const std::optional<StoredJob> stored = id ? job_of(view, *id) : std::nullopt;
  if (!stored || (only_ended && !tiering::ended(stored->job.state))) {
    return error_response(404, std::string(only_ended ? "no report of job " : "no job ") +
                                   std::string(id_text));
  }
  return reply(200, job_to_json(stored->job));
}

// POST /v1/job/jobs
Plan start_job(const GroupView& view, const std::string& request_body) {
  const Result<json> body = parse_body(request_body);
  if (!body.ok()) return refuse(body.status());
  const auto request = start_request_from_json(*body);
  if (!request.ok()) return refuse(request.status());
  const tiering::JobTypeSpec& spec = *tiering::find_job_type(request->type);
  const std::vector<StoredJob> jobs = jobs_of(view);
  auto job = tiering::start_job(*request, tiering::settle(spec, job_type_of(view, spec).settings),
                                plain_jobs(jobs), next_job_id(jobs), unix_now());
  if (!job.ok()) return refuse(job.status());
  return change_then(job_create(*job), reply(201, job_to_json(*job)));
}

// PUT /v1/job/jobs/ID: pause, resume or cancel.
Plan change_job_state(const GroupView& view, const std::string& request_body,
                      std::string_view id_text) {
  const std::optional<std::uint64_t> id = parse_id<std::uint64_t>(id_text);
  const std::optional<StoredJob> stored = id ? job_of(view, *id) : std::nullopt;
  if (!stored) return refuse(error_response(404, "no job " + std::string(id_text)));
  const Result<json> body = parse_body(request_body);
  if (!body.ok()) return refuse(body.status());
  const auto wanted = wanted_state_from_json(*body);
  if (!wanted.ok()) return refuse(wanted.status());
  auto next = tiering::change_state(stored->job, *wanted, unix_now());
  if (!next.ok()) return refuse(next.status());
  return change_then(job_update(*stored, *next), reply(200, job_to_json(*next)));
}

// GET /v1/job/status: as `isi job status`.
HttpResponse job_status(Membership& m, const GroupView& view) {
  constexpr std::size_t kRecent = 5;
  const std::vector<StoredJob> jobs = jobs_of(view);
  json recent = jobs_json(jobs, true, true);
  if (recent.size() > kRecent) recent.erase(recent.begin() + kRecent, recent.end());
  const cluster::NodeId leader = m.group()->leader();
  return reply(200, json{{"coordinator", leader == 0 ? json(nullptr) : json(leader)},
                         {"active", jobs_json(jobs, false, false)},
                         {"recent", std::move(recent)}});
}

json status_json(Membership& m, const GroupView& view) {
  return json{{"name", m.identity()->name},
              {"id", m.identity()->id},
              {"epoch", view.epoch},
              {"leader", m.group()->leader()},
              {"namespace", namespace_json(view)},
              {"nodepools", nodepools_json(view)},
              {"tiers", tiers_json(view)},
              {"jobs", jobs_json(jobs_of(view), false, false)}};
}

asio::awaitable<HttpResponse> cluster_status(Membership& m) {
  json status = status_json(m, m.group()->view());
  const std::vector<cluster::NodeInfo> nodes = m.group()->view().nodes;
  const LostNodes lost = lost_nodes_of(m.group()->view());
  bool any_down = false;
  json list = json::array();
  for (const cluster::NodeInfo& node : nodes) {
    json entry = node_json(node);
    if (lost.nodes.contains(node.id)) entry["state"] = node.up ? "returning" : "lost";
    any_down = any_down || !node.up;
    if (node.up) {
      auto asking = m.stats_of(node.id, kStatsDeadline);
      Result<NodeStats> stats = co_await std::move(asking);
      if (stats.ok()) entry["stats"] = stats_json(*stats);
    }
    list.push_back(std::move(entry));
  }
  status["nodes"] = std::move(list);
  status["health"] = m.group()->leader() == 0 ? "no-quorum" : any_down ? "degraded" : "ok";
  co_return reply(200, status);
}

// Every node's report of one kind, gathered from each node up: the entries under `key` from
// all of them (a list from each, or one object each), the locks they left unlisted, and the
// nodes that did not answer.
asio::awaitable<Result<json>> gather(Membership& m, NodeReport report, json parameters,
                                     std::string key,
                                     std::chrono::milliseconds deadline = kStatsDeadline) {
  json entries = json::array();
  json unreachable = json::array();
  std::uint64_t unlisted = 0;
  for (const cluster::NodeInfo& node : m.group()->view().nodes) {
    if (!node.up) {
      unreachable.push_back(node.id);
      continue;
    }
    auto asking = m.report_of(node.id, report, parameters, deadline);
    Result<json> answer = co_await std::move(asking);
    if (!answer.ok()) {
      if (answer.status().code() == Errc::invalid_argument) co_return answer.status();
      unreachable.push_back(node.id);
      continue;
    }
    const json part = answer->value(key, json());
    if (part.is_array()) {
      for (const json& entry : part) entries.push_back(entry);
    } else if (part.is_object()) {
      entries.push_back(part);
    }
    unlisted += answer->value("unlisted", std::uint64_t{0});
  }
  json body{{key, std::move(entries)}, {"unreachable", std::move(unreachable)}};
  if (report == NodeReport::locks) body["unlisted"] = unlisted;
  co_return body;
}

asio::awaitable<HttpResponse> gather_reports(Membership& m, NodeReport report, json parameters,
                                             std::string key) {
  auto gathering = gather(m, report, std::move(parameters), std::move(key));
  Result<json> body = co_await std::move(gathering);
  co_return body.ok() ? reply(200, *body) : failure(body.status());
}

// GET /v1/statistics/cache and /v1/statistics/system: each node's statistics of one kind, and
// the cluster's total of them.
asio::awaitable<HttpResponse> statistics_with_total(Membership& m, NodeReport report,
                                                    json (*total_of)(const json& nodes)) {
  auto gathering = gather(m, report, json::object(), "statistics");
  Result<json> body = co_await std::move(gathering);
  if (!body.ok()) co_return failure(body.status());
  (*body)["total"] = total_of((*body)["statistics"]);
  co_return reply(200, *body);
}

// POST /v1/cache/flush {"l1": bool, "l2": bool, "node": N}: empties the levels named (both
// when neither is) on node N, or on every node without "node".
asio::awaitable<HttpResponse> flush_caches(Membership& m, std::string request_body) {
  // Dropping the page cache of every data file of a large namespace takes a while.
  constexpr std::chrono::milliseconds kFlushDeadline{60'000};
  const Result<json> body = parse_body(request_body.empty() ? "{}" : request_body);
  if (!body.ok()) co_return failure(body.status());
  const json l1 = body->value("l1", json(false));
  const json l2 = body->value("l2", json(false));
  if (!l1.is_boolean() || !l2.is_boolean()) {
    co_return error_response(400, "'l1' and 'l2' are true or false");
  }
  const bool both = !l1.get<bool>() && !l2.get<bool>();
  const json levels{{"l1", both || l1.get<bool>()}, {"l2", both || l2.get<bool>()}};
  if (!body->contains("node")) {
    auto gathering = gather(m, NodeReport::cache_flush, levels, "flushed", kFlushDeadline);
    Result<json> flushed = co_await std::move(gathering);
    co_return flushed.ok() ? reply(200, *flushed) : failure(flushed.status());
  }
  const json node = (*body)["node"];
  const std::uint64_t id = node.is_number_unsigned() ? node.get<std::uint64_t>() : 0;
  if (id > std::numeric_limits<cluster::NodeId>::max() ||
      m.group()->view().node(static_cast<cluster::NodeId>(id)) == nullptr) {
    co_return error_response(404, "no node " + node.dump() + " in the cluster");
  }
  auto asking = m.report_of(static_cast<cluster::NodeId>(id), NodeReport::cache_flush, levels,
                            kFlushDeadline);
  Result<json> answer = co_await std::move(asking);
  if (!answer.ok()) co_return failure(answer.status());
  co_return reply(200, json{{"flushed", json::array({answer->value("flushed", json())})},
                            {"unreachable", json::array()}});
}

// GET /v1/locks[?kind=K][&path=P][&waiters=true]; the route is a copy: the coroutine outlives
// the caller's.
asio::awaitable<HttpResponse> list_locks(store::Store& store, Membership& m, Route route) {
  LocksFilter filter;
  if (const auto kind = route.query("kind")) {
    filter.kind = parse_resource_kind(*kind);
    if (!filter.kind) {
      co_return error_response(
          400, "unknown lock kind '" + *kind + "' (data, attributes, advisory or share)");
    }
  }
  if (const auto path = route.query("path")) {
    // Already decoded as a query value: a '%' in a name is the name's.
    auto resolving = resolve_path(store, split_path(*path, false));
    const Result<store::Attributes> file = co_await std::move(resolving);
    if (!file.ok()) co_return failure(file.status());
    filter.file = file->inode;
  }
  if (const auto waiters = route.query("waiters")) {
    if (*waiters != "true" && *waiters != "false") {
      co_return error_response(400, "'waiters' is true or false");
    }
    filter.waiters_only = *waiters == "true";
  }
  auto gathering = gather_reports(m, NodeReport::locks, filter.to_json(), "locks");
  co_return co_await std::move(gathering);
}

json join_package(Membership& m, const std::string& certificate) {
  return json{{"cluster", {{"name", m.identity()->name}, {"id", m.identity()->id}}},
              {"ca_certificate", m.ca_certificate()},
              {"certificate", certificate}};
}

// The node a `GET /v1/node` answer describes, if it is a Tidepool node outside any cluster.
Result<std::pair<cluster::NodeInfo, std::string>> node_to_add(const std::string& address,
                                                             const HttpReply& answer) {
  const json node = json::parse(answer.body, nullptr, false);
  if (answer.status != 200 || !node.is_object() || !node.value("id", json()).is_number_unsigned() ||
      !node.value("certificate", json()).is_string()) {
    return error(Errc::unavailable, address + " did not answer as a Tidepool node");
  }
  if (!node.value("cluster", json()).is_null()) {
    return error(Errc::already_exists, address + " is already in cluster '" +
                                           node["cluster"].value("name", std::string()) + "'");
  }
  cluster::NodeInfo info{node["id"].get<cluster::NodeId>(),
                         node.value("name", std::string()),
                         node.value("backend_address", std::string()),
                         node.value("frontend_address", std::string()),
                         node.value("admin_address", std::string()),
                         node.value("pool", std::string()),
                         true};
  return std::pair{std::move(info), node["certificate"].get<std::string>()};
}

std::string refusal_of(const HttpReply& answer) {
  const json body = json::parse(answer.body, nullptr, false);
  return body.is_object() ? body.value("error", answer.body) : answer.body;
}

Result<std::string> new_node_address(const std::string& request_body) {
  TP_ASSIGN_OR_RETURN(json body, parse_body(request_body));
  if (!body.value("address", json()).is_string()) {
    return error(Errc::invalid_argument, "'address' must be the new node's admin address, IP:PORT");
  }
  return body["address"].get<std::string>();
}

asio::awaitable<HttpResponse> add_node(asio::any_io_executor strand, Membership& m,
                                       std::string request_body) {
  const Result<std::string> given = new_node_address(request_body);
  if (!given.ok()) co_return failure(given.status());
  const std::string address = *given;
  auto asking = https_request_unverified(strand, address, "GET", "/v1/node", "", kJoinTimeout);
  Result<HttpReply> answer = co_await std::move(asking);
  if (!answer.ok()) co_return failure(answer.status());
  auto candidate = node_to_add(address, *answer);
  if (!candidate.ok()) co_return failure(candidate.status());
  const cluster::NodeInfo& added = candidate->first;
  if (const cluster::NodeInfo* existing = m.group()->view().node(added.id); existing != nullptr) {
    co_return error_response(409, "node id " + std::to_string(added.id) +
                                      " is already in the cluster (" + existing->name + " at " +
                                      existing->admin_address + ")");
  }
  auto certificate = m.sign_node_certificate(added.id, candidate->second);
  if (!certificate.ok()) co_return failure(certificate.status());
  auto joining = https_request_unverified(strand, address, "POST", "/v1/cluster/join",
                                          join_package(m, *certificate).dump(), kJoinTimeout);
  Result<HttpReply> joined = co_await std::move(joining);
  if (!joined.ok()) co_return failure(joined.status());
  if (joined->status != 200) {
    co_return error_response(joined->status, address + " refused to join: " + refusal_of(*joined));
  }
  Plan plan = change_then(Change::add_node(added), HttpResponse{});
  plan.deadline = kAddNodeDeadline;
  auto adding = carry_out(m, std::move(plan));
  const HttpResponse outcome = co_await std::move(adding);
  if (outcome.status != 200) co_return outcome;
  spdlog::info("added node {} (pool {}) at {}", added.id, added.pool, added.admin_address);
  const cluster::NodeInfo* now = m.group()->view().node(added.id);
  co_return reply(201, node_json(now != nullptr ? *now : added));
}

Plan remove_node(const GroupView& view, std::string_view id_text) {
  const auto id = parse_id(id_text);
  if (!id || view.node(*id) == nullptr) {
    return refuse(error_response(404, "no node " + std::string(id_text) + " in the cluster"));
  }
  return change_then(Change::remove_node(*id), no_content());
}

HttpResponse nodepool(const GroupView& view, std::string_view name) {
  for (const json& pool : nodepools_json(view)) {
    if (pool["name"] == name) return reply(200, pool);
  }
  return error_response(404, "no node pool '" + std::string(name) + "'");
}

Plan write_tier(const GroupView& view, const std::string& request_body,
                std::optional<std::string_view> existing) {
  auto body = parse_body(request_body);
  if (!body.ok()) return refuse(body.status());
  const std::string name = existing ? std::string(*existing) : (*body).value("name", std::string());
  if (!is_valid_name(name)) {
    return refuse(error_response(400, "'" + name + "' is not a tier name (1-63 of A-Z a-z 0-9 - _)"));
  }
  const bool exists = view.object(kTierKind, name) != nullptr;
  if (existing && !exists) return refuse(error_response(404, "no tier '" + name + "'"));
  if (!existing && exists) return refuse(error_response(409, "tier '" + name + "' already exists"));
  auto children = tier_children_from(*body, view, name);
  if (!children.ok()) return refuse(children.status());
  const json tier{{"name", name}, {"children", *children}};
  const std::string stored = json{{"children", *children}}.dump();
  const std::string kind(kTierKind);
  return existing ? change_then(Change::update_object(kind, name, stored), reply(200, tier))
                  : change_then(Change::create_object(kind, name, stored), reply(201, tier));
}

Plan delete_object(const GroupView& view, std::string_view kind, std::string_view name,
                   const std::string& what) {
  if (view.object(kind, name) == nullptr) return refuse(error_response(404, "no " + what));
  return change_then(Change::delete_object(std::string(kind), std::string(name)), no_content());
}

HttpResponse sysctls(const GroupView& view, const NodeConfig& config) {
  json list = json::array();
  for (const SysctlSpec& spec : sysctl_specs()) list.push_back(sysctl_json(spec, view, config));
  return reply(200, json{{"sysctls", list}});
}

Plan write_sysctl(const GroupView& view, const NodeConfig& config, const SysctlSpec& spec,
                  const std::string& request_body) {
  auto body = parse_body(request_body);
  if (!body.ok()) return refuse(body.status());
  const json value = (*body).value("value", json());
  if (!value.is_string() && !value.is_boolean() && !value.is_number()) {
    return refuse(error_response(400, "'value' must be a string"));
  }
  auto normalized =
      normalize_sysctl(spec, value.is_string() ? value.get<std::string>() : value.dump());
  if (!normalized.ok()) return refuse(normalized.status());
  const std::string stored = json{{"value", *normalized}}.dump();
  const std::string kind(kSysctlKind);
  const std::string name(spec.name);
  json shown = sysctl_json(spec, view, config);
  shown["value"] = *normalized;
  return change_then(view.object(kind, name) != nullptr
                         ? Change::update_object(kind, name, stored)
                         : Change::create_object(kind, name, stored),
                     reply(200, shown));
}

// GET /v1/filepool/policies/NAME; "default" is the default policy.
HttpResponse policy_view(const GroupView& view, std::string_view name) {
  const policy::PolicySet set = policies_of(view).set;
  if (name == policy::kDefaultPolicy) return reply(200, defaults_to_json(set.defaults));
  for (std::size_t i = 0; i < set.policies.size(); ++i) {
    if (set.policies[i].name == name) return reply(200, policy_to_json(set.policies[i], i + 1));
  }
  return error_response(404, "no file pool policy '" + std::string(name) + "'");
}

// POST /v1/filepool/policies (`existing` none) or PUT /v1/filepool/policies/NAME: the whole list
// is written again, and only if nobody changed it since it was read.
Plan write_policy(const GroupView& view, const std::string& request_body,
                  std::optional<std::string_view> existing) {
  const Result<json> body = parse_body(request_body);
  if (!body.ok()) return refuse(body.status());
  const StoredPolicies stored = policies_of(view);
  policy::PolicySet next = stored.set;
  if (existing == policy::kDefaultPolicy) {
    auto defaults = defaults_from_json(*body, next.defaults, view);
    if (!defaults.ok()) return refuse(defaults.status());
    next.defaults = std::move(defaults).value();
    return change_then(policies_update(stored, next), reply(200, defaults_to_json(next.defaults)));
  }
  const json name_field = body->value("name", json());
  if (!existing && !name_field.is_string()) {
    return refuse(error_response(400, "a policy needs a 'name'"));
  }
  const std::string name = existing ? std::string(*existing) : name_field.get<std::string>();
  if (existing && !name_field.is_null() && name_field != name) {
    return refuse(error_response(400, "a policy keeps its name: delete it and create another"));
  }
  auto& list = next.policies;
  const auto found = std::find_if(list.begin(), list.end(),
                                  [&](const policy::Policy& p) { return p.name == name; });
  if (!existing) {
    if (Status valid = policy::check_policy_name(name); !valid.ok()) return refuse(valid);
    if (found != list.end()) {
      return refuse(error_response(409, "file pool policy '" + name + "' already exists"));
    }
    if (!body->contains("filter") && !body->contains("filter_flags")) {
      return refuse(error_response(400, "a policy needs a filter: 'filter' or 'filter_flags'"));
    }
  } else if (found == list.end()) {
    return refuse(error_response(404, "no file pool policy '" + name + "'"));
  }
  std::size_t position = found == list.end() ? list.size() : found - list.begin();
  const policy::Policy base = found == list.end() ? policy::Policy{name, {}, {}} : *found;
  auto made = policy_from_json(*body, base, view);
  if (!made.ok()) return refuse(made.status());
  if (found != list.end()) list.erase(found);
  const json order = body->value("apply_order", json());
  if (!order.is_null()) {
    if (!order.is_number_unsigned() || order.get<std::uint64_t>() < 1 ||
        order.get<std::uint64_t>() > list.size() + 1) {
      return refuse(
          error_response(400, "'apply_order' must be 1 to " + std::to_string(list.size() + 1)));
    }
    position = order.get<std::size_t>() - 1;
  }
  list.insert(list.begin() + static_cast<std::ptrdiff_t>(position), *made);
  return change_then(policies_update(stored, next),
                     reply(existing ? 200 : 201, policy_to_json(*made, position + 1)));
}

Plan delete_policy(const GroupView& view, std::string_view name) {
  if (name == policy::kDefaultPolicy) {
    return refuse(error_response(400, "the default policy cannot be deleted"));
  }
  const StoredPolicies stored = policies_of(view);
  policy::PolicySet next = stored.set;
  const auto erased =
      std::erase_if(next.policies, [&](const policy::Policy& p) { return p.name == name; });
  if (erased == 0)
    return refuse(error_response(404, "no file pool policy '" + std::string(name) + "'"));
  return change_then(policies_update(stored, next), no_content());
}

HttpResponse exports_list(const GroupView& view) {
  json list = json::array();
  for (const auto& [id, entry] : exports_of(view)) list.push_back(export_to_json(id, entry));
  return reply(200, json{{"exports", list}});
}

HttpResponse export_view(const GroupView& view, std::string_view id_text) {
  const auto exports = exports_of(view);
  const auto id = parse_id(id_text);
  if (!id || !exports.contains(*id)) {
    return error_response(404, "no export " + std::string(id_text));
  }
  return reply(200, export_to_json(*id, exports.at(*id)));
}

Plan write_export(const GroupView& view, const std::string& request_body,
                  std::optional<std::string_view> existing) {
  auto body = parse_body(request_body);
  if (!body.ok()) return refuse(body.status());
  const std::map<std::uint32_t, ExportConfig> exports = exports_of(view);
  std::uint32_t id = exports.empty() ? 1 : exports.rbegin()->first + 1;
  ExportConfig base;
  if (existing) {
    const auto parsed = parse_id(*existing);
    if (!parsed || !exports.contains(*parsed)) {
      return refuse(error_response(404, "no export " + std::string(*existing)));
    }
    id = *parsed;
    base = exports.at(id);
  } else if (!(*body).contains("path")) {
    return refuse(error_response(400, "'path' is required"));
  }
  auto entry = export_from_json(*body, base);
  if (!entry.ok()) return refuse(entry.status());
  for (const auto& [other_id, other] : exports) {
    if (other_id != id && other.path == entry->path) {
      return refuse(error_response(
          409, entry->path + " is already exported (export " + std::to_string(other_id) + ")"));
    }
  }
  const json shown = export_to_json(id, *entry);
  const std::string kind(kExportKind);
  return existing ? change_then(Change::update_object(kind, std::to_string(id), shown.dump()),
                                reply(200, shown))
                  : change_then(Change::create_object(kind, std::to_string(id), shown.dump()),
                                reply(201, shown));
}

HttpResponse unknown_route(const Route& route, const std::string& target) {
  for (const auto& parts : known_paths()) {
    if (route.matches(parts)) {
      return error_response(405, route.method() + " is not allowed on " + target);
    }
  }
  return error_response(404, "no such path: " + target);
}

// A read through a follower first waits until it has applied what the leader had, so that what
// was written through one node is read through any other. Without a leader it answers from
// what it has (status must still answer then).
asio::awaitable<void> catch_up(Membership& m) {
  cluster::GroupClient* client = m.client();
  if (client == nullptr) co_return;
  auto waiting = await_callback<Status>(
      [client](auto done) { client->catch_up(kCatchUpDeadline, done); });
  co_await std::move(waiting);
}

}  // namespace

asio::awaitable<HttpResponse> AdminApi::handle(HttpRequest request) {
  const bool authorized = membership_.token_valid(bearer_token(request.authorization));
  if (authorized && request.method == "GET" && request.target.starts_with("/v1/")) {
    auto waiting = catch_up(membership_);
    co_await std::move(waiting);
  }
  auto routed = route(std::move(request), authorized);
  co_return co_await std::move(routed);
}

asio::awaitable<HttpResponse> AdminApi::route(HttpRequest request, bool authorized) {
  const Route route(request.method, request.target);
  Membership& m = membership_;

  // Open to anyone: probes, scrapes, and the two steps of forming a cluster.
  if (route.is("GET", {"health"})) return ready(health(m));
  if (route.is("GET", {"metrics"})) {
    return ready(HttpResponse{200, metrics_(), "text/plain; version=0.0.4"});
  }
  if (route.is("GET", {"v1", "node"})) return ready(this_node(m));
  if (route.is("POST", {"v1", "cluster", "create"})) {
    auto body = parse_body(request.body);
    if (!body.ok()) return ready(failure(body.status()));
    if (!(*body).value("name", json()).is_string()) {
      return ready(error_response(400, "'name' must be a string"));
    }
    return create_cluster(m, joined_, (*body)["name"].get<std::string>());
  }
  if (route.is("POST", {"v1", "cluster", "join"})) {
    return ready(join_cluster(m, joined_, request.body));
  }

  if (route.at(0) != "v1") return ready(unknown_route(route, request.target));
  if (!authorized) {
    if (!m.identity()) {
      return ready(error_response(
          401, "this node is not in a cluster: create one or add it to one first"));
    }
    if (!m.admin_token_known() && !bearer_token(request.authorization).empty()) {
      return ready(error_response(
          503, "this node has not caught up with the cluster's configuration yet: retry shortly"));
    }
    return ready(error_response(401, "a valid bearer token is required"));
  }
  // Valid until the next change is applied; the coroutines below fetch it again after waiting.
  const GroupView& view = m.group()->view();
  const NodeConfig& config = m.config();

  if (route.is("GET", {"v1", "cluster"})) return cluster_status(m);
  if (route.method() == "GET" && route.at(1) == "namespace")
    return file_info(store_, m, route.from(2));
  if (route.method() == "PUT" && route.at(1) == "namespace") {
    return set_file(store_, m, route.from(2), request.body);
  }
  if (route.method() == "GET" && route.at(1) == "filepool" && route.at(2) == "explain") {
    return explain_file(store_, m, route.from(3));
  }
  if (route.is("GET", {"v1", "filepool", "policies"})) {
    return ready(reply(200, policies_to_json(policies_of(view).set)));
  }
  if (route.is("POST", {"v1", "filepool", "policies"})) {
    return change_config(m, [body = request.body](const GroupView& now) {
      return write_policy(now, body, std::nullopt);
    });
  }
  if (route.is("GET", {"v1", "filepool", "policies", "*"})) {
    return ready(policy_view(view, route.at(3)));
  }
  if (route.is("PUT", {"v1", "filepool", "policies", "*"})) {
    return change_config(m, [body = request.body, name = std::string(route.at(3))](
                                  const GroupView& now) { return write_policy(now, body, name); });
  }
  if (route.is("DELETE", {"v1", "filepool", "policies", "*"})) {
    return change_config(m, [name = std::string(route.at(3))](const GroupView& now) {
      return delete_policy(now, name);
    });
  }
  if (route.is("GET", {"v1", "job", "types"})) return ready(job_types_list(view));
  if (route.is("GET", {"v1", "job", "types", "*"})) return ready(job_type_view(view, route.at(3)));
  if (route.is("PUT", {"v1", "job", "types", "*"})) {
    return change_config(m, [body = request.body, name = std::string(route.at(3))](
                                const GroupView& now) { return write_job_type(now, body, name); });
  }
  if (route.is("GET", {"v1", "job", "jobs"})) {
    return ready(reply(200, json{{"jobs", jobs_json(jobs_of(view), false, false)}}));
  }
  if (route.is("POST", {"v1", "job", "jobs"})) {
    return change_config(m, [body = request.body](const GroupView& now) { return start_job(now, body); });
  }
  if (route.is("GET", {"v1", "job", "jobs", "*"})) return ready(job_view(view, route.at(3), false));
  if (route.is("PUT", {"v1", "job", "jobs", "*"})) {
    return change_config(m, [body = request.body, id = std::string(route.at(3))](
                                const GroupView& now) { return change_job_state(now, body, id); });
  }
  if (route.is("GET", {"v1", "job", "reports"})) {
    return ready(reply(200, json{{"reports", jobs_json(jobs_of(view), true, true)}}));
  }
  if (route.is("GET", {"v1", "job", "reports", "*"})) return ready(job_view(view, route.at(3), true));
  if (route.is("GET", {"v1", "job", "status"})) return ready(job_status(m, view));
  if (route.is("POST", {"v1", "cluster", "nodes"})) return add_node(strand_, m, request.body);
  if (route.is("DELETE", {"v1", "cluster", "nodes", "*"})) {
    return carry_out(m, remove_node(view, route.at(3)));
  }
  if (route.is("GET", {"v1", "locks"})) return list_locks(store_, m, route);
  if (route.is("GET", {"v1", "statistics", "locks"})) {
    return gather_reports(m, NodeReport::lock_statistics, json::object(), "statistics");
  }
  if (route.is("GET", {"v1", "statistics", "cache"})) {
    return statistics_with_total(m, NodeReport::cache_statistics, &cache_statistics_total);
  }
  if (route.is("GET", {"v1", "statistics", "system"})) {
    return statistics_with_total(m, NodeReport::system_statistics, &system_statistics_total);
  }
  if (route.is("GET", {"v1", "statistics", "clients"})) {
    return gather_reports(m, NodeReport::client_statistics, json::object(), "clients");
  }
  if (route.is("POST", {"v1", "cache", "flush"})) return flush_caches(m, request.body);
  if (route.is("GET", {"v1", "nfs", "nlm", "sessions"})) {
    return gather_reports(m, NodeReport::nlm_sessions, json::object(), "sessions");
  }
  if (route.is("GET", {"v1", "storagepool", "nodepools"})) {
    return ready(reply(200, json{{"nodepools", nodepools_json(view)}}));
  }
  if (route.is("GET", {"v1", "storagepool", "nodepools", "*"})) {
    return ready(nodepool(view, route.at(3)));
  }
  if (route.is("GET", {"v1", "storagepool", "tiers"})) {
    return ready(reply(200, json{{"tiers", tiers_json(view)}}));
  }
  if (route.is("POST", {"v1", "storagepool", "tiers"})) {
    return carry_out(m, write_tier(view, request.body, std::nullopt));
  }
  if (route.is("PUT", {"v1", "storagepool", "tiers", "*"})) {
    return carry_out(m, write_tier(view, request.body, route.at(3)));
  }
  if (route.is("GET", {"v1", "storagepool", "tiers", "*"})) {
    const cluster::ConfigObject* tier = view.object(kTierKind, route.at(3));
    return ready(tier != nullptr
                     ? reply(200, tier_json(*tier))
                     : error_response(404, "no tier '" + std::string(route.at(3)) + "'"));
  }
  if (route.is("DELETE", {"v1", "storagepool", "tiers", "*"})) {
    return carry_out(m, delete_object(view, kTierKind, route.at(3),
                                      "tier '" + std::string(route.at(3)) + "'"));
  }
  if (route.is("GET", {"v1", "sysctl"})) return ready(sysctls(view, config));
  if (route.matches({"v1", "sysctl", "*"}) && (route.method() == "GET" || route.method() == "PUT")) {
    const SysctlSpec* spec = find_sysctl(route.at(2));
    if (spec == nullptr) {
      return ready(error_response(404, "no sysctl '" + std::string(route.at(2)) + "'"));
    }
    if (route.method() == "GET") return ready(reply(200, sysctl_json(*spec, view, config)));
    return carry_out(m, write_sysctl(view, config, *spec, request.body));
  }
  if (route.is("GET", {"v1", "nfs", "exports"})) return ready(exports_list(view));
  if (route.is("POST", {"v1", "nfs", "exports"})) {
    return carry_out(m, write_export(view, request.body, std::nullopt));
  }
  if (route.is("GET", {"v1", "nfs", "exports", "*"})) return ready(export_view(view, route.at(3)));
  if (route.is("PUT", {"v1", "nfs", "exports", "*"})) {
    return carry_out(m, write_export(view, request.body, route.at(3)));
  }
  if (route.is("DELETE", {"v1", "nfs", "exports", "*"})) {
    return carry_out(m, delete_object(view, kExportKind, route.at(3),
                                      "export " + std::string(route.at(3))));
  }
  return ready(unknown_route(route, request.target));
}

}  // namespace tidepool::daemon
