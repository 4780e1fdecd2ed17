// The admin API's route table: rows of {method, path pattern, who may call, handler}, the
// match of a request against them, and what a matched route hands its handler. Private to the
// daemon: admin_api.h is the API's public face.
//
// A pattern is a path of literal segments, `{name}` segments that match any one segment, and at
// most one trailing `{name...}` that matches the rest of the path, none or many segments. Paths
// are compared segment by segment after percent-decoding, empty segments dropped.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/http.h"
#include "daemon/membership.h"
#include "store/store.h"

namespace tidepool::daemon::admin {

// What the handlers reach. Owned by the AdminApi, which outlives every request it serves; used
// on the API's strand only.
struct Context {
  boost::asio::any_io_executor strand;
  Membership& membership;
  store::Store& store;  // the namespace as this node serves it
  std::function<std::string()> metrics;
  std::function<void()> joined;  // runs once this node became a member

  // The group view as this node applied it, for a member only: valid until the next change is
  // applied, so a handler reads it again after it waited.
  const cluster::GroupView& view() { return membership.group()->view(); }
};

// A request as its route's handler sees it.
struct Request {
  std::string method;
  std::string target;             // as sent, path and query: what error messages quote
  std::vector<std::string> path;  // the target's path segments, decoded
  std::map<std::string, std::string, std::less<>> params;  // by `{name}`, decoded
  std::vector<std::string> rest;  // the segments a trailing `{name...}` matched
  std::map<std::string, std::string, std::less<>> query;  // `?name=value&...`, decoded
  std::string body;
  // The bearer token the caller showed: on a route that needs the admin token, that token.
  std::string bearer;

  // The segment `{name}` matched; empty for a name the route's pattern does not have.
  const std::string& param(std::string_view name) const;
  std::optional<std::string> query_value(std::string_view name) const;
};

using Handler = boost::asio::awaitable<HttpResponse> (*)(Context& context, Request request);

enum class Access {
  open,   // anyone: probes and scrapes
  setup,  // forming a cluster: while in no cluster, only with the node's setup secret as the
          // bearer token; once in one, anyone (the handler refuses: the node is taken)
  token,  // only with the cluster's bearer token
};

struct Route {
  std::string_view method;
  std::string_view pattern;
  Access access;
  Handler handler;
};

// Every route the API serves; where two match a request, the first.
std::span<const Route> api_routes();

struct RouteMatch {
  const Route* route = nullptr;  // null: no route serves this method on this path
  // Some route serves the path with another method: 405 rather than 404.
  bool path_served = false;
  Request request;  // with what the matched route's pattern captured
};
RouteMatch match_route(std::span<const Route> table, HttpRequest request);

// The non-empty segments of a slash-separated path, each percent-decoded if `decode` (a query
// value is decoded already: a '%' left in it is part of a name).
std::vector<std::string> path_segments(std::string_view path, bool decode);

}  // namespace tidepool::daemon::admin
