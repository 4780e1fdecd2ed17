// How a handler changes the group view: it plans the change on the view it reads (or refuses
// the request there), proposes it, and answers once the change is applied.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "cluster/group.h"
#include "common/status.h"
#include "daemon/http.h"
#include "daemon/membership.h"

namespace tidepool::daemon::admin {

inline constexpr std::chrono::milliseconds kChangeDeadline{10'000};

// What a request that changes the configuration asks for: the change, and the answer to give
// once it is applied — or an answer at once when the request is refused before any change.
struct Plan {
  std::optional<HttpResponse> now;
  cluster::Change change;
  std::chrono::milliseconds deadline = kChangeDeadline;
  HttpResponse applied;
};

Plan refuse(HttpResponse response);
Plan refuse(const Status& status);
Plan change_then(cluster::Change change, HttpResponse applied);

// Proposes the plan's change: its answer once applied, the failure if refused.
boost::asio::awaitable<HttpResponse> carry_out(Membership& membership, Plan plan);

// Plans a change of objects written whole over what was read (the file pool policy list, a job,
// a job type's settings) on the node's view and carries it out. A node whose view is behind the
// group's (a change just made through another node) has its change refused; it then plans again
// once its view caught up, a bounded number of times.
boost::asio::awaitable<HttpResponse> change_config(
    Membership& membership, std::function<Plan(const cluster::GroupView&)> plan_for);

// Deletes object `kind`/`name`; 404 naming `what` when there is none.
Plan delete_object(const cluster::GroupView& view, std::string_view kind, std::string_view name,
                   const std::string& what);

}  // namespace tidepool::daemon::admin
