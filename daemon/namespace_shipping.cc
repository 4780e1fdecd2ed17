#include "daemon/namespace_shipping.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <vector>

#include "daemon/callback_awaitable.h"
#include "daemon/membership.h"

namespace tidepool::daemon {
namespace {

namespace asio = boost::asio;

// Backend RPC methods 100 + StoreMethod carry shipped store operations.
constexpr std::uint32_t kStoreMethodBase = 100;
constexpr std::uint32_t kLastStoreMethod = static_cast<std::uint32_t>(store::StoreMethod::write_verifier);
// Long enough for a 1 MiB write under load; a home that died is given up on after this, and the
// client hears NFS3ERR_JUKEBOX and retries.
constexpr std::chrono::milliseconds kShippedCallDeadline{5'000};

asio::awaitable<Result<xdr::Buffer>> run_shipped(store::Store& local, std::uint32_t method,
                                                 std::vector<std::uint8_t> request) {
  auto served = store::serve_store_call(local, method, request);
  co_return co_await std::move(served);
}

}  // namespace

class NamespaceShipping::Channel final : public store::ShardChannel {
 public:
  Channel(NamespaceShipping& shipping, cluster::NodeId home) : shipping_(shipping), home_(home) {}

  asio::awaitable<Result<xdr::Buffer>> call(store::StoreMethod method,
                                            xdr::Buffer request) override {
    auto start = [this, method, request = std::move(request)](auto done) mutable {
      asio::post(shipping_.strand_, [this, method, request = std::move(request),
                                     done = std::move(done)]() mutable {
        cluster::RpcEndpoint* rpc = shipping_.rpc();
        if (rpc == nullptr) {
          done(Result<xdr::Buffer>(error(Errc::unavailable, "this node is not in a cluster")));
          return;
        }
        rpc->call(home_, kStoreMethodBase + static_cast<std::uint32_t>(method), request,
                  kShippedCallDeadline, std::move(done));
      });
    };
    auto reply = await_callback<Result<xdr::Buffer>>(std::move(start));
    co_return co_await std::move(reply);
  }

 private:
  NamespaceShipping& shipping_;
  const cluster::NodeId home_;
};

NamespaceShipping::NamespaceShipping(asio::any_io_executor strand,
                                     asio::any_io_executor store_executor, store::Store& local,
                                     cluster::NodeId self)
    : strand_(std::move(strand)),
      store_executor_(std::move(store_executor)),
      local_(local),
      self_(self),
      router_(local, self, [this](cluster::NodeId home) {
        return std::make_shared<Channel>(*this, home);
      }) {}

cluster::RpcEndpoint* NamespaceShipping::rpc() const {
  return membership_ ? membership_->rpc() : nullptr;
}

void NamespaceShipping::follow(const std::optional<NamespaceRecord>& record,
                               const cluster::GroupView& view) {
  cluster::NodeId home = 0;
  if (!record) {
    spdlog::warn("the group view has no namespace record yet: NFS answers 'retry later'");
  } else if (const cluster::NodeInfo* node = view.node(record->home); node && node->up) {
    home = record->home;
  }
  if (home != router_.home()) {
    if (home == 0) {
      spdlog::warn("the namespace's home is down: NFS answers 'retry later' until it returns");
    } else {
      spdlog::info("the namespace's home is node {}{}", home, home == self_ ? " (this node)" : "");
    }
  }
  router_.set_home(home);
}

void NamespaceShipping::serve(cluster::RpcEndpoint& rpc) {
  for (std::uint32_t method = 1; method <= kLastStoreMethod; ++method) {
    rpc.handle(kStoreMethodBase + method, [this, method](cluster::NodeId,
                                                         std::span<const std::uint8_t> request,
                                                         cluster::RpcEndpoint::Reply reply) {
      // A node that thinks we are the home while we do not is behind: it retries later.
      if (router_.home() != self_) {
        reply(error(Errc::unavailable, "node " + std::to_string(self_) +
                                           " is not the namespace's home"));
        return;
      }
      asio::co_spawn(store_executor_,
                     run_shipped(local_, method, std::vector<std::uint8_t>(request.begin(), request.end())),
                     [strand = strand_, reply](std::exception_ptr failure,
                                               Result<xdr::Buffer> result) mutable {
                       if (failure) result = error(Errc::internal, "a shipped operation threw");
                       asio::post(strand, [reply = std::move(reply), result = std::move(result)] {
                         reply(result);
                       });
                     });
    });
  }
}

}  // namespace tidepool::daemon
