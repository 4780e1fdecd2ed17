#include "nfsd/internal/service.h"

#include <spdlog/spdlog.h>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>

namespace tidepool::nfsd {

namespace {

// A lease comes back within a renewal or two once the node reaches the group's leader again,
// and after a restart once the node is recorded up.
constexpr std::chrono::milliseconds kLeaseWait{3000};
constexpr std::chrono::milliseconds kLeasePoll{20};
// Ports below it only root may bind.
constexpr std::uint16_t kFirstUnprivilegedPort = 1024;

}  // namespace

void Service::refused_for_want_of_lease() const {
  if (statistics.refuse(Refusal::no_lease)) {
    spdlog::warn("this node holds no lease from its group: calls are answered \"retry later\" "
                 "until it does (counted in tidepool_rpc_refused_total)");
  }
}

Status Service::admit(const Export& exported, const CallContext& context) const {
  if (!exported.allows(context.client)) {
    return error(Errc::access_denied, "client not allowed by the export");
  }
  if (exported.config().secure && context.client_port >= kFirstUnprivilegedPort) {
    if (statistics.refuse(Refusal::insecure_port)) {
      spdlog::warn("a call to secure export {} came from {}:{}, an unprivileged port: refused, "
                   "as are all such calls (counted in tidepool_rpc_refused_total; an export "
                   "with secure = false takes them)",
                   exported.path(), context.client.to_string(), context.client_port);
    }
    return error(Errc::not_permitted, "call from an unprivileged port to a secure export");
  }
  return {};
}

awaitable<std::optional<std::uint64_t>> Service::held_lease() const {
  const auto deadline = std::chrono::steady_clock::now() + kLeaseWait;
  const auto held = lease.load();
  const std::uint64_t fences = held ? held->fences() : 0;
  for (;;) {
    const std::uint64_t started = lease_clock();
    const bool fenced_meanwhile = held && held->fences() != fences;
    if (!fenced_meanwhile && lease_held_since(started)) co_return started;
    if (fenced_meanwhile || std::chrono::steady_clock::now() >= deadline) {
      refused_for_want_of_lease();
      co_return std::nullopt;
    }
    boost::asio::steady_timer poll(co_await boost::asio::this_coro::executor, kLeasePoll);
    co_await poll.async_wait(boost::asio::use_awaitable);
  }
}

awaitable<Result<store::Attributes>> Service::resolve(store::InodeId from,
                                                   std::vector<std::string> components) {
  const store::Caller root{0, 0, {}};
  auto at = co_await store.getattr(from);
  if (!at.ok()) co_return at.status();
  for (const std::string& name : components) {
    auto found = co_await store.lookup(at->inode, name, root);
    if (!found.ok()) co_return found.status();
    at = found->object;
  }
  if (at->type != store::FileType::directory) {
    co_return error(Errc::not_a_directory, "not a directory");
  }
  co_return at;
}

awaitable<Result<store::InodeId>> Service::export_root(const Export& e) {
  if (store::InodeId known = e.root_inode()) co_return known;
  auto root = co_await resolve(store::kRootInode, e.components());
  if (!root.ok()) co_return root.status();
  e.set_root_inode(root->inode);
  co_return root->inode;
}

}  // namespace tidepool::nfsd
