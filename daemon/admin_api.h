// The admin REST API (daemon/admin_api.md) of one node: authentication, the dispatch of each
// request over the route table (daemon/admin/routes.h), and the one mapping of errors to HTTP.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <functional>
#include <string>

#include "daemon/admin/routes.h"
#include "daemon/http.h"
#include "daemon/membership.h"
#include "store/store.h"

namespace tidepool::daemon {

class AdminApi {
 public:
  // `store` answers what `tide get` asks of files; `metrics` renders /metrics; `joined` runs once
  // this node became a member (its admin certificate changed).
  AdminApi(boost::asio::any_io_executor strand, Membership& membership, store::Store& store,
           std::function<std::string()> metrics, std::function<void()> joined);

  boost::asio::awaitable<HttpResponse> handle(HttpRequest request);

 private:
  // `authorized`: the request carries the cluster's token.
  boost::asio::awaitable<HttpResponse> dispatch(HttpRequest request, bool authorized);

  admin::Context context_;
};

// The HTTP status that reports `code`: the one place the admin plane maps errors.
unsigned http_status_of(Errc code);

}  // namespace tidepool::daemon
