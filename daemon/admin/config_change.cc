#include "daemon/admin/config_change.h"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/callback_awaitable.h"
#include "daemon/admin/replies.h"

namespace tidepool::daemon::admin {
namespace {

namespace asio = boost::asio;

asio::awaitable<Status> propose(Membership& membership, const Plan& plan) {
  cluster::GroupClient* client = membership.client();
  auto proposing =
      await_callback<Status>([client, change = plan.change, deadline = plan.deadline](auto done) {
        client->propose(change, deadline, done);
      });
  co_return co_await std::move(proposing);
}

}  // namespace

Plan refuse(HttpResponse response) {
  Plan plan;
  plan.now = std::move(response);
  return plan;
}

Plan refuse(const Status& status) { return refuse(failure(status)); }

Plan change_then(cluster::Change change, HttpResponse applied) {
  Plan plan;
  plan.change = std::move(change);
  plan.applied = std::move(applied);
  return plan;
}

asio::awaitable<HttpResponse> carry_out(Membership& membership, Plan plan) {
  if (plan.now) co_return std::move(*plan.now);
  auto proposing = propose(membership, plan);
  const Status status = co_await std::move(proposing);
  if (!status.ok()) co_return failure(status);
  co_return std::move(plan.applied);
}

asio::awaitable<HttpResponse> change_config(
    Membership& membership, std::function<Plan(const cluster::GroupView&)> plan_for) {
  constexpr int kAttempts = 20;
  constexpr auto kCatchUp = std::chrono::milliseconds(50);
  for (int attempt = 1;; ++attempt) {
    Plan plan = plan_for(membership.group()->view());
    if (plan.now) co_return std::move(*plan.now);
    auto proposing = propose(membership, plan);
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

Plan delete_object(const cluster::GroupView& view, std::string_view kind, std::string_view name,
                   const std::string& what) {
  if (view.object(kind, name) == nullptr) return refuse(error_response(404, "no " + what));
  return change_then(cluster::Change::delete_object(std::string(kind), std::string(name)),
                     no_content());
}

}  // namespace tidepool::daemon::admin
