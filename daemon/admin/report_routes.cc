// What the nodes up report when asked, gathered into one answer: locks, NLM sessions,
// statistics. A cache flush is asked of the nodes the same way.
#include <limits>
#include <nlohmann/json.hpp>

#include "daemon/activity.h"
#include "daemon/admin/handlers.h"
#include "daemon/admin/namespace_paths.h"
#include "daemon/admin/replies.h"
#include "daemon/cache_reports.h"
#include "daemon/lock_reports.h"

namespace tidepool::daemon::admin {
namespace {

namespace asio = boost::asio;
using nlohmann::json;

constexpr std::chrono::milliseconds kReportDeadline{1'000};
// Dropping the page cache of every data file of a large namespace takes a while.
constexpr std::chrono::milliseconds kFlushDeadline{60'000};

// Every node's report of one kind, gathered from each node up: the entries under `key` from
// all of them (a list from each, or one object each), the locks they left unlisted, and the
// nodes that did not answer.
asio::awaitable<Result<json>> gather(Membership& m, NodeReport report, json parameters,
                                     std::string key,
                                     std::chrono::milliseconds deadline = kReportDeadline) {
  json entries = json::array();
  json unreachable = json::array();
  std::uint64_t unlisted = 0;
  // A copy: the view a reference would point into is replaced when a change is applied, which
  // may happen while a node is asked.
  const std::vector<cluster::NodeInfo> nodes = m.group()->view().nodes;
  for (const cluster::NodeInfo& node : nodes) {
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

// Each node's statistics of one kind, and the cluster's total of them.
asio::awaitable<HttpResponse> statistics_with_total(Membership& m, NodeReport report,
                                                    json (*total_of)(const json& nodes)) {
  auto gathering = gather(m, report, json::object(), "statistics");
  Result<json> body = co_await std::move(gathering);
  if (!body.ok()) co_return failure(body.status());
  (*body)["total"] = total_of((*body)["statistics"]);
  co_return reply(200, *body);
}

}  // namespace

// ?kind=K&path=P&waiters=true, every filter optional.
Reply list_locks(Context& context, Request request) {
  LocksFilter filter;
  if (const auto kind = request.query_value("kind")) {
    filter.kind = parse_resource_kind(*kind);
    if (!filter.kind) {
      co_return error_response(
          400, "unknown lock kind '" + *kind + "' (data, attributes, advisory or share)");
    }
  }
  if (const auto path = request.query_value("path")) {
    auto resolving = resolve_path(context.store, path_segments(*path, false));
    const Result<store::Attributes> file = co_await std::move(resolving);
    if (!file.ok()) co_return failure(file.status());
    filter.file = file->inode;
  }
  if (const auto waiters = request.query_value("waiters")) {
    if (*waiters != "true" && *waiters != "false") {
      co_return error_response(400, "'waiters' is true or false");
    }
    filter.waiters_only = *waiters == "true";
  }
  auto gathering = gather_reports(context.membership, NodeReport::locks, filter.to_json(), "locks");
  co_return co_await std::move(gathering);
}

Reply list_nlm_sessions(Context& context, Request) {
  return gather_reports(context.membership, NodeReport::nlm_sessions, json::object(), "sessions");
}

Reply get_lock_statistics(Context& context, Request) {
  return gather_reports(context.membership, NodeReport::lock_statistics, json::object(),
                        "statistics");
}

Reply get_cache_statistics(Context& context, Request) {
  return statistics_with_total(context.membership, NodeReport::cache_statistics,
                               &cache_statistics_total);
}

Reply get_system_statistics(Context& context, Request) {
  return statistics_with_total(context.membership, NodeReport::system_statistics,
                               &system_statistics_total);
}

Reply get_client_statistics(Context& context, Request) {
  return gather_reports(context.membership, NodeReport::client_statistics, json::object(),
                        "clients");
}

// {"l1": bool, "l2": bool, "node": N}: empties the levels named (both when neither is) on node
// N, or on every node without "node".
Reply flush_caches(Context& context, Request request) {
  Membership& m = context.membership;
  const Result<json> body = parse_body(request.body.empty() ? "{}" : request.body);
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
      context.view().node(static_cast<cluster::NodeId>(id)) == nullptr) {
    co_return error_response(404, "no node " + node.dump() + " in the cluster");
  }
  auto asking = m.report_of(static_cast<cluster::NodeId>(id), NodeReport::cache_flush, levels,
                            kFlushDeadline);
  Result<json> answer = co_await std::move(asking);
  if (!answer.ok()) co_return failure(answer.status());
  co_return reply(200, json{{"flushed", json::array({answer->value("flushed", json())})},
                            {"unreachable", json::array()}});
}

}  // namespace tidepool::daemon::admin
