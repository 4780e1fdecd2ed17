#include "store/unit_client.h"

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <functional>
#include <optional>
#include <vector>

#include "common/callback_awaitable.h"

namespace tidepool::store {
namespace {

namespace asio = boost::asio;

// Runs every call at once on the caller's executor; the first failure, once all are done.
asio::awaitable<Status> all_of(std::vector<std::function<asio::awaitable<Status>()>> calls) {
  if (calls.empty()) co_return Status{};
  struct Join {
    std::mutex mutex;
    std::size_t remaining;  // guarded by mutex
    Status failure;         // guarded by mutex
    std::function<void(Status)> done;
  };
  auto executor = co_await asio::this_coro::executor;
  auto joined = await_callback<Status>([&](auto done) {
    auto join = std::make_shared<Join>();
    join->remaining = calls.size();
    join->done = std::move(done);
    for (auto& call : calls) {
      asio::co_spawn(executor, std::move(call), [join](std::exception_ptr thrown, Status status) {
        if (thrown) status = error(Errc::internal, "a unit call threw");
        std::unique_lock guard(join->mutex);
        if (!status.ok() && join->failure.ok()) join->failure = status;
        if (--join->remaining > 0) return;
        const Status outcome = join->failure;
        guard.unlock();
        join->done(outcome);
      });
    }
  });
  co_return co_await std::move(joined);
}

}  // namespace

UnitClient::UnitClient(std::shared_ptr<PoolPeers> peers) : peers_(std::move(peers)) {}

bool UnitClient::serves(const Layout& layout) {
  return layout.pool != kWithShard && !layout.nodes.empty() && layout.stripe_unit > 0 &&
         layout.moving_to.empty() && !layout.copies_behind;
}

asio::awaitable<Result<xdr::Buffer>> UnitClient::read(const Layout& layout, InodeId inode,
                                                      std::uint64_t offset, std::uint32_t length) {
  const std::uint64_t unit = offset / layout.stripe_unit;
  if ((offset + length - 1) / layout.stripe_unit != unit && length > 0) {
    co_return error(Errc::invalid_argument, "a read of more than one unit");
  }
  std::vector<cluster::NodeId> owners = unit_owners(layout.nodes, inode, unit, layout.protection);
  std::stable_partition(owners.begin(), owners.end(),
                        [this](cluster::NodeId node) { return peers_->is_up(node); });
  std::size_t holding_nothing = 0;
  Status last = error(Errc::unavailable, "inode " + std::to_string(inode) + " has no owner");
  for (cluster::NodeId node : owners) {
    auto calling = peers_->call_async(node, UnitMethod::read,
                                      encode_unit_request({layout.pool, inode, offset, length, {}}));
    Result<xdr::Buffer> got = co_await std::move(calling);
    if (got.ok() && got->size() == length) co_return got;
    last = got.ok() ? error(Errc::io_error, "node " + std::to_string(node) + " answered short")
                    : got.status();
    // The home's way reads a good copy and puts the bad one back, counted.
    if (last.code() == Errc::corrupt) {
      co_return error(Errc::unavailable, "node " + std::to_string(node) +
                                             "'s copy fails its checksum: the home repairs it");
    }
    if (last.code() == Errc::not_found) ++holding_nothing;
  }
  if (!owners.empty() && holding_nothing == owners.size()) {
    xdr::Buffer hole(length);  // never written: zeros
    std::fill(hole.begin(), hole.end(), std::uint8_t{0});
    co_return hole;
  }
  co_return error(Errc::unavailable, "inode " + std::to_string(inode) + " at offset " +
                                         std::to_string(offset) + ": " + last.message());
}

asio::awaitable<Status> UnitClient::write(const Layout& layout, InodeId inode,
                                          std::uint64_t offset, std::span<const std::uint8_t> data,
                                          bool durable) {
  std::vector<std::function<asio::awaitable<Status>()>> calls;
  for (std::size_t done = 0; done < data.size();) {
    const std::uint64_t at = offset + done;
    const std::uint64_t unit = at / layout.stripe_unit;
    const std::size_t piece =
        std::min<std::uint64_t>(data.size() - done, (unit + 1) * layout.stripe_unit - at);
    for (cluster::NodeId node : unit_owners(layout.nodes, inode, unit, layout.protection)) {
      if (!peers_->is_up(node)) {
        co_return error(Errc::unavailable, "node " + std::to_string(node) + " is down");
      }
      calls.push_back([this, node, request = encode_unit_request(
                                       {layout.pool, inode, at, durable ? 1u : 0u,
                                        data.subspan(done, piece)})]() mutable {
        return call_counting_boots(node, UnitMethod::write, std::move(request));
      });
    }
    done += piece;
  }
  if (calls.empty() && !data.empty()) {
    co_return error(Errc::unavailable, "inode " + std::to_string(inode) + " has no owner");
  }
  auto writing = all_of(std::move(calls));
  co_return co_await std::move(writing);
}

asio::awaitable<std::vector<SyncedNode>> UnitClient::sync(const Layout& layout, InodeId inode) {
  // One slot per call, each written by its own call only; all_of returns once all are done.
  auto synced = std::make_shared<std::vector<std::optional<SyncedNode>>>();
  std::vector<std::function<asio::awaitable<Status>()>> calls;
  for (cluster::NodeId node : layout.nodes) {
    // The home's commit notes a node that is down behind; a call to it would only wait out
    // its deadline, on every COMMIT until the node is back or lost.
    if (!peers_->is_up(node)) continue;
    synced->emplace_back();
    calls.push_back([this, node, synced, slot = synced->size() - 1,
                     request = encode_unit_request({layout.pool, inode, 0, 0, {}})]() mutable {
      return sync_noting(node, std::move(request), std::move(synced), slot);
    });
  }
  auto syncing = all_of(std::move(calls));
  (void)co_await std::move(syncing);
  std::vector<SyncedNode> done;
  for (const std::optional<SyncedNode>& node : *synced) {
    if (node) done.push_back(*node);
  }
  co_return done;
}

asio::awaitable<Status> UnitClient::sync_noting(
    cluster::NodeId node, xdr::Buffer request,
    std::shared_ptr<std::vector<std::optional<SyncedNode>>> synced, std::size_t slot) {
  auto calling = peers_->call_async(node, UnitMethod::sync, std::move(request));
  Result<xdr::Buffer> reply = co_await std::move(calling);
  if (!reply.ok()) co_return reply.status();
  Result<std::uint64_t> boot = boot_ids_.note(node, *reply);
  if (!boot.ok()) co_return boot.status();
  (*synced)[slot] = SyncedNode{node, *boot};
  co_return Status{};
}

asio::awaitable<Status> UnitClient::call_counting_boots(cluster::NodeId node, UnitMethod method,
                                                        xdr::Buffer request) {
  auto calling = peers_->call_async(node, method, std::move(request));
  Result<xdr::Buffer> reply = co_await std::move(calling);
  if (!reply.ok()) co_return reply.status();
  co_return boot_ids_.note(node, *reply).status();
}

}  // namespace tidepool::store
