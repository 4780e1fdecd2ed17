#include "daemon/admin_api.h"

#include <optional>

#include "common/callback_awaitable.h"

namespace tidepool::daemon {
namespace {

namespace asio = boost::asio;

constexpr std::chrono::milliseconds kCatchUpDeadline{2'000};

std::string bearer_token(std::string_view authorization) {
  constexpr std::string_view kBearer = "Bearer ";
  if (!authorization.starts_with(kBearer)) return {};
  return std::string(authorization.substr(kBearer.size()));
}

// A read through a follower first waits until it has applied what the leader had, so that what
// was written through one node is read through any other. Without a leader it answers from
// what it has (status must still answer then).
asio::awaitable<void> catch_up(Membership& m) {
  cluster::GroupClient* client = m.client();
  if (client == nullptr) co_return;
  auto waiting =
      await_callback<Status>([client](auto done) { client->catch_up(kCatchUpDeadline, done); });
  // Whether it caught up or not, the read goes ahead.
  static_cast<void>(co_await std::move(waiting));
}

// Why a request without the cluster's token is refused.
HttpResponse unauthorized(const Membership& m, const std::string& authorization) {
  if (!m.identity()) {
    return error_response(401, "this node is not in a cluster: create one or add it to one first");
  }
  if (!m.admin_token_known() && !bearer_token(authorization).empty()) {
    return error_response(
        503, "this node has not caught up with the cluster's configuration yet: retry shortly");
  }
  return error_response(401, "a valid bearer token is required");
}

// Why a request to form a cluster with a node in no cluster is refused, if it is.
std::optional<HttpResponse> setup_refusal(const Membership& m, const std::string& authorization) {
  if (m.identity()) return std::nullopt;
  const std::string secret = bearer_token(authorization);
  if (secret.empty()) {
    return error_response(
        401, "this node is in no cluster: making it a member needs its setup secret as the "
             "bearer token (the file its cluster.setup_secret_file names, by default "
             "DATA_DIR/setup-secret on the node)");
  }
  if (!m.setup_secret_valid(secret)) {
    return error_response(403, "that is not this node's setup secret");
  }
  return std::nullopt;
}

// No route serves the request: a path some route serves with another method, or none.
HttpResponse unrouted(const admin::RouteMatch& found) {
  const admin::Request& request = found.request;
  if (found.path_served) {
    return error_response(405, request.method + " is not allowed on " + request.target);
  }
  return error_response(404, "no such path: " + request.target);
}

asio::awaitable<HttpResponse> ready(HttpResponse response) { co_return response; }

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
    case Errc::fenced:
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
    : context_{std::move(strand), membership, store, std::move(metrics), std::move(joined)} {}

asio::awaitable<HttpResponse> AdminApi::handle(HttpRequest request) {
  // A node the cluster removed answers only whether it is healthy: it is not.
  const std::optional<std::string>& removed = context_.membership.removed();
  if (removed && request.target.substr(0, request.target.find('?')) != "/health") {
    co_return error_response(410, *removed);
  }
  const bool authorized = context_.membership.token_valid(bearer_token(request.authorization));
  if (authorized && request.method == "GET" && request.target.starts_with("/v1/")) {
    auto waiting = catch_up(context_.membership);
    co_await std::move(waiting);
  }
  auto dispatching = dispatch(std::move(request), authorized);
  co_return co_await std::move(dispatching);
}

asio::awaitable<HttpResponse> AdminApi::dispatch(HttpRequest request, bool authorized) {
  const std::string authorization = request.authorization;
  admin::RouteMatch found = admin::match_route(admin::api_routes(), std::move(request));
  found.request.bearer = bearer_token(authorization);
  const admin::Route* route = found.route;
  if (route != nullptr && route->access == admin::Access::open) {
    return route->handler(context_, std::move(found.request));
  }
  if (route != nullptr && route->access == admin::Access::setup) {
    if (auto refused = setup_refusal(context_.membership, authorization)) {
      return ready(*std::move(refused));
    }
    return route->handler(context_, std::move(found.request));
  }
  // Every path under /v1 but the open ones needs the token, whether it exists or not.
  const std::vector<std::string>& path = found.request.path;
  if (path.empty() || path.front() != "v1") return ready(unrouted(found));
  if (!authorized) return ready(unauthorized(context_.membership, authorization));
  if (route == nullptr) return ready(unrouted(found));
  return route->handler(context_, std::move(found.request));
}

}  // namespace tidepool::daemon
