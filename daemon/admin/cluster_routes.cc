// The cluster: probes, forming it (create, then join for each node a member adds), its status,
// adding and removing nodes, and handing on the group's lead.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>

#include "cluster/tls.h"
#include "common/callback_awaitable.h"
#include "common/fail_points.h"
#include "common/tls_identity.h"
#include "daemon/admin/config_change.h"
#include "daemon/admin/handlers.h"
#include "daemon/admin/replies.h"
#include "daemon/admin/view_json.h"
#include "daemon/config_objects.h"
#include "daemon/filepool.h"
#include "daemon/jobs.h"
#include "store/namespace_record.h"

namespace tidepool::daemon::admin {
namespace {

namespace asio = boost::asio;
using cluster::GroupView;
using nlohmann::json;

// Adding a node waits for it to catch up with the log before it votes.
constexpr std::chrono::milliseconds kAddNodeDeadline{30'000};
constexpr std::chrono::milliseconds kStatsDeadline{1'000};
constexpr std::chrono::milliseconds kJoinTimeout{10'000};
// A transfer takes an election; a leader not reached is looked for meanwhile.
constexpr std::chrono::milliseconds kTransferDeadline{10'000};

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

json created_json(const CreatedCluster& created) {
  return json{{"cluster", {{"name", created.identity.name}, {"id", created.identity.id}}},
              {"token", created.token},
              {"ca_certificate", created.ca_certificate}};
}

json stats_json(const NodeStats& stats) {
  return json{{"in_bytes_per_second", stats.in_bytes_per_second},
              {"out_bytes_per_second", stats.out_bytes_per_second},
              {"used_bytes", stats.used_bytes},
              {"size_bytes", stats.size_bytes}};
}

// The namespace as `tide status` shows it: where its root's shard lives, and every shard.
json namespace_json(const GroupView& view) {
  const std::optional<store::NamespaceRecord> record = store::namespace_of(view);
  json where = shard_json(view, record, 0);
  where.erase("id");
  json shards = json::array();
  for (store::ShardId shard = 0; record && shard < record->shards(); ++shard) {
    shards.push_back(shard_json(view, record, shard));
  }
  where["shards"] = std::move(shards);
  where["settled"] =
      record &&
      std::none_of(record->places.begin(), record->places.end(),
                   [](const store::ShardPlace& place) { return place.handing_over; }) &&
      !store::plan_namespace(*record, view, smartfailing_nodes(view));
  return where;
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

json join_package(Membership& m, const std::string& certificate) {
  return json{{"cluster", {{"name", m.identity()->name}, {"id", m.identity()->id}}},
              {"ca_certificate", m.ca_certificate()},
              {"certificate", certificate}};
}

cluster::NodeInfo node_info(const json& node) {
  return cluster::NodeInfo{node["id"].get<cluster::NodeId>(),
                           node.value("name", std::string()),
                           node.value("backend_address", std::string()),
                           node.value("frontend_address", std::string()),
                           node.value("admin_address", std::string()),
                           node.value("pool", std::string()),
                           true};
}

// A node added before as far as its join — the add cut short there, or its promotion to voter
// given up — that a `GET /v1/node` answer describes: a member of this cluster presenting the
// certificate this cluster issued to it. Its NodeInfo, with that certificate's fingerprint; none
// when the answer is not of such a node.
std::optional<Result<cluster::NodeInfo>> half_added_node(Membership& m, const std::string& address,
                                                         const json& node,
                                                         const HttpReply& answer) {
  const json member_of = node.value("cluster", json());
  if (!member_of.is_object() || member_of.value("id", std::string()) != m.identity()->id) {
    return std::nullopt;
  }
  cluster::NodeInfo info = node_info(node);
  const std::string issued = node.value("cluster_certificate", std::string());
  const Result<std::string> fingerprint = cluster::certificate_fingerprint(issued);
  if (!fingerprint.ok() || *fingerprint != answer.server_fingerprint) {
    return error(Errc::access_denied,
                 address + " names another certificate than the one it presented");
  }
  if (Status ours =
          cluster::check_issued_by(issued, m.ca_certificate(), cluster::node_common_name(info.id));
      !ours.ok()) {
    return error(Errc::access_denied, address +
                                          " holds no certificate this cluster issued to node " +
                                          std::to_string(info.id) + ": " + ours.message());
  }
  info.certificate = *fingerprint;
  return info;
}

// The node a `GET /v1/node` answer describes, if it is a Tidepool node outside any cluster that
// proved it knows `setup_secret` for the certificate it presented.
Result<std::pair<cluster::NodeInfo, std::string>> node_to_add(const std::string& address,
                                                              const std::string& setup_secret,
                                                              const json& node,
                                                              const HttpReply& answer) {
  if (!node.value("cluster", json()).is_null()) {
    return error(Errc::already_exists, address + " is already in cluster '" +
                                           node["cluster"].value("name", std::string()) + "'");
  }
  const std::string certificate = node["certificate"];
  const Result<std::string> fingerprint = cluster::certificate_fingerprint(certificate);
  if (!fingerprint.ok() || *fingerprint != answer.server_fingerprint) {
    return error(Errc::access_denied,
                 address + " names another certificate than the one it presented");
  }
  const std::string proof = node.value("setup_proof", std::string());
  if (proof != setup_proof(setup_secret, answer.server_fingerprint)) {
    return error(Errc::access_denied,
                 address + " did not prove it knows the setup secret given: the secret is not "
                           "that node's, or another machine answered at its address");
  }
  return std::pair{node_info(node), certificate};
}

std::string refusal_of(const HttpReply& answer) {
  const json body = json::parse(answer.body, nullptr, false);
  return body.is_object() ? body.value("error", answer.body) : answer.body;
}

struct NodeToAdd {
  std::string address;
  std::string setup_secret;
};

Result<NodeToAdd> add_node_request(const std::string& request_body) {
  TP_ASSIGN_OR_RETURN(json body, parse_body(request_body));
  if (!body.value("address", json()).is_string()) {
    return error(Errc::invalid_argument, "'address' must be the new node's admin address, IP:PORT");
  }
  if (!body.value("setup_secret", json()).is_string()) {
    return error(Errc::invalid_argument,
                 "'setup_secret' must be the new node's setup secret (the file its "
                 "cluster.setup_secret_file names, by default DATA_DIR/setup-secret)");
  }
  return NodeToAdd{body["address"], body["setup_secret"]};
}

Plan plan_token_rotation(const GroupView& view, const std::string& current_token) {
  const cluster::ConfigObject* identity = view.object(kClusterKind, kIdentityName);
  if (identity == nullptr) {
    return refuse(error_response(503, "this node has not caught up with the cluster's "
                                      "configuration yet: retry shortly"));
  }
  Result<RotatedToken> rotated = rotate_token(identity->body, current_token);
  if (!rotated.ok()) return refuse(rotated.status());
  return change_then(
      cluster::Change::update_object(std::string(kClusterKind), std::string(kIdentityName),
                                     rotated->identity_body, identity->changed),
      reply(200, json{{"token", rotated->token}}));
}

Plan plan_removal(const GroupView& view, const std::string& id_text) {
  const auto id = parse_id(id_text);
  if (!id || view.node(*id) == nullptr) {
    return refuse(error_response(404, "no node " + id_text + " in the cluster"));
  }
  return change_then(cluster::Change::remove_node(*id), no_content());
}

Plan plan_smartfail(const GroupView& view, const std::string& id_text) {
  const auto id = parse_id(id_text);
  if (!id || view.node(*id) == nullptr) {
    return refuse(error_response(404, "no node " + id_text + " in the cluster"));
  }
  const policy::PolicySet policies = policies_of(view).set;
  std::uint32_t copies = policies.defaults.protection;
  for (const policy::Policy& each : policies.policies) {
    copies = std::max(copies, each.actions.protection.value_or(0));
  }
  const LostNodes lost = lost_nodes_of(view);
  Result<LostNodes> next = daemon::plan_smartfail(lost, view, *id, copies);
  if (!next.ok()) return refuse(next.status());
  return change_then(lost_nodes_update(*next),
                     reply(202, json{{"node", *id}, {"state", "smartfailing"}}));
}

Plan plan_stopfail(const GroupView& view, const std::string& id_text) {
  const auto id = parse_id(id_text);
  if (!id) return refuse(error_response(404, "no node " + id_text + " in the cluster"));
  Result<LostNodes> next = daemon::plan_stopfail(lost_nodes_of(view), view, *id);
  if (!next.ok()) return refuse(next.status());
  return change_then(lost_nodes_update(*next),
                     reply(200, json{{"node", *id}, {"smartfailing", false}}));
}

// The node `POST /v1/cluster/leader` names: 0 for any voting member but the leader.
Result<cluster::NodeId> leader_to_be(const GroupView& view, const std::string& request_body) {
  if (request_body.empty()) return cluster::NodeId{0};
  TP_ASSIGN_OR_RETURN(json body, parse_body(request_body));
  const json node = body.value("node", json());
  if (node.is_null()) return cluster::NodeId{0};
  if (!node.is_number_unsigned() || view.node(node.get<cluster::NodeId>()) == nullptr) {
    return error(Errc::invalid_argument, "'node' must be the id of a node in the cluster");
  }
  return node.get<cluster::NodeId>();
}

// The add's last steps, once the node joined: it goes into the view and the group, and votes
// once it caught up. Each step repeated succeeds, so a node half added is finished by them.
asio::awaitable<HttpResponse> finish_add(Membership& m, cluster::NodeInfo added) {
  Plan plan = change_then(cluster::Change::add_node(added), HttpResponse{});
  plan.deadline = kAddNodeDeadline;
  auto adding = carry_out(m, std::move(plan));
  const HttpResponse outcome = co_await std::move(adding);
  if (outcome.status != 200) co_return outcome;
  spdlog::info("added node {} (pool {}) at {}", added.id, added.pool, added.admin_address);
  const cluster::NodeInfo* now = m.group()->view().node(added.id);
  co_return reply(201, node_json(now != nullptr ? *now : added));
}

}  // namespace

Reply get_health(Context& context, Request) {
  Membership& m = context.membership;
  json body{{"node", m.config().node_id},
            {"status", "ok"},
            {"cluster", nullptr},
            {"leader", 0},
            {"epoch", 0}};
  if (!m.identity()) co_return reply(200, body);
  body["cluster"] = m.identity()->name;
  if (m.removed()) {
    body["status"] = "removed";
    body["reason"] = *m.removed();
    co_return reply(503, body);
  }
  body["leader"] = m.group()->leader();
  body["epoch"] = m.group()->epoch();
  if (m.group()->leader() != 0) co_return reply(200, body);
  body["status"] = "no-quorum";
  co_return reply(503, body);
}

Reply get_metrics(Context& context, Request) {
  co_return HttpResponse{200, context.metrics(), "text/plain; version=0.0.4"};
}

Reply get_this_node(Context& context, Request) {
  Membership& m = context.membership;
  json node = node_json(m.self());
  node.erase("state");
  node.erase("stats");
  node["cluster"] =
      m.identity() ? json{{"name", m.identity()->name}, {"id", m.identity()->id}} : json(nullptr);
  node["certificate"] = m.self_signed_certificate();
  if (!m.identity()) node["setup_proof"] = m.own_setup_proof();
  // What a member's admin API presents: the certificate the cluster issued to it.
  if (m.identity()) node["cluster_certificate"] = m.admin_certificate().certificate;
  co_return reply(200, node);
}

Reply create_cluster(Context& context, Request request) {
  const Result<json> body = parse_body(request.body);
  if (!body.ok()) co_return failure(body.status());
  if (!body->value("name", json()).is_string()) {
    co_return error_response(400, "'name' must be a string");
  }
  auto creating = context.membership.create((*body)["name"].get<std::string>());
  Result<CreatedCluster> created = co_await std::move(creating);
  if (!created.ok()) co_return failure(created.status());
  context.joined();
  co_return reply(201, created_json(*created));
}

Reply join_cluster(Context& context, Request request) {
  const Result<json> body = parse_body(request.body);
  if (!body.ok()) co_return failure(body.status());
  const json& b = *body;
  const json cluster_field = b.value("cluster", json());
  if (!cluster_field.is_object() || !cluster_field.value("name", json()).is_string() ||
      !cluster_field.value("id", json()).is_string() ||
      !b.value("ca_certificate", json()).is_string() ||
      !b.value("certificate", json()).is_string()) {
    co_return error_response(400,
                             "a join needs cluster {name, id}, ca_certificate and certificate");
  }
  const Status status = context.membership.join(JoinPackage{
      {cluster_field["name"], cluster_field["id"]}, b["ca_certificate"], b["certificate"]});
  if (!status.ok()) co_return failure(status);
  context.joined();
  co_return reply(200, json::object());
}

Reply get_cluster_status(Context& context, Request) {
  Membership& m = context.membership;
  json status = status_json(m, m.group()->view());
  const std::vector<cluster::NodeInfo> nodes = m.group()->view().nodes;
  const LostNodes lost = lost_nodes_of(m.group()->view());
  bool any_down = false;
  json list = json::array();
  for (const cluster::NodeInfo& node : nodes) {
    json entry = node_json(node);
    if (lost.nodes.contains(node.id)) entry["state"] = node.up ? "returning" : "lost";
    entry["smartfailing"] = lost.smartfailing.contains(node.id);
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

Reply add_cluster_node(Context& context, Request request) {
  Membership& m = context.membership;
  const Result<NodeToAdd> given = add_node_request(request.body);
  if (!given.ok()) co_return failure(given.status());
  const std::string& address = given->address;
  auto asking = https_request_to_new_node(
      context.strand, NewNodeRequest{.address = address, .method = "GET", .target = "/v1/node"},
      kJoinTimeout);
  Result<HttpReply> answer = co_await std::move(asking);
  if (!answer.ok()) co_return failure(answer.status());
  const json node = json::parse(answer->body, nullptr, false);
  if (answer->status != 200 || !node.is_object() ||
      !node.value("id", json()).is_number_unsigned() ||
      !node.value("certificate", json()).is_string()) {
    co_return failure(error(Errc::unavailable, address + " did not answer as a Tidepool node"));
  }
  // Added as far as its join before: the add goes on from there.
  if (auto half_added = half_added_node(m, address, node, *answer)) {
    if (!half_added->ok()) co_return failure(half_added->status());
    spdlog::info("node {} at {} joined before: finishing its add", (*half_added)->id, address);
    auto finishing = finish_add(m, std::move(half_added->value()));
    co_return co_await std::move(finishing);
  }
  auto candidate = node_to_add(address, given->setup_secret, node, *answer);
  if (!candidate.ok()) co_return failure(candidate.status());
  cluster::NodeInfo& added = candidate->first;
  if (const cluster::NodeInfo* existing = m.group()->view().node(added.id); existing != nullptr) {
    co_return error_response(409, "node id " + std::to_string(added.id) +
                                      " is already in the cluster (" + existing->name + " at " +
                                      existing->admin_address + ")");
  }
  auto certificate =
      m.sign_node_certificate(added.id, candidate->second, added.admin_address, request.bearer);
  if (!certificate.ok()) co_return failure(certificate.status());
  auto fingerprint = cluster::certificate_fingerprint(*certificate);
  if (!fingerprint.ok()) co_return failure(fingerprint.status());
  added.certificate = *fingerprint;
  // Only to the node that proved it knows the secret: the join carries it.
  auto joining = https_request_to_new_node(
      context.strand,
      NewNodeRequest{.address = address,
                     .method = "POST",
                     .target = "/v1/cluster/join",
                     .body = join_package(m, *certificate).dump(),
                     .authorization = "Bearer " + given->setup_secret,
                     .pinned_fingerprint = answer->server_fingerprint},
      kJoinTimeout);
  Result<HttpReply> joined = co_await std::move(joining);
  if (!joined.ok()) co_return failure(joined.status());
  if (joined->status != 200) {
    co_return error_response(joined->status, address + " refused to join: " + refusal_of(*joined));
  }
  if (const auto pause = fail_points::pause_at(fail_points::kAddNodeAfterJoin); pause.count() > 0) {
    spdlog::info("fail point {}: node {} joined; its add waits {} ms",
                 fail_points::kAddNodeAfterJoin, added.id, pause.count());
    asio::steady_timer after_join(context.strand, pause);
    co_await after_join.async_wait(asio::use_awaitable);
  }
  auto adding = finish_add(m, std::move(added));
  co_return co_await std::move(adding);
}

Reply rotate_cluster_token(Context& context, Request request) {
  // The token the request showed unseals the CA's key, to seal it under the new one.
  return change_config(context.membership,
                       [token = std::move(request.bearer)](const GroupView& view) {
                         return plan_token_rotation(view, token);
                       });
}

Reply remove_cluster_node(Context& context, Request request) {
  return carry_out(context.membership, plan_removal(context.view(), request.param("id")));
}

Reply smartfail_cluster_node(Context& context, Request request) {
  return change_config(context.membership, [id = request.param("id")](const GroupView& now) {
    return plan_smartfail(now, id);
  });
}

Reply stopfail_cluster_node(Context& context, Request request) {
  return change_config(context.membership, [id = request.param("id")](const GroupView& now) {
    return plan_stopfail(now, id);
  });
}

Reply transfer_cluster_leadership(Context& context, Request request) {
  Membership& m = context.membership;
  const Result<cluster::NodeId> to = leader_to_be(context.view(), request.body);
  if (!to.ok()) co_return failure(to.status());
  cluster::GroupClient* client = m.client();
  auto transferring = await_callback<Status>(
      [client, to = *to](auto done) { client->transfer_leadership(to, kTransferDeadline, done); });
  const Status status = co_await std::move(transferring);
  if (!status.ok()) co_return failure(status);
  spdlog::info("the group's lead went to node {}", m.group()->leader());
  co_return reply(200, json{{"leader", m.group()->leader()}});
}

}  // namespace tidepool::daemon::admin
