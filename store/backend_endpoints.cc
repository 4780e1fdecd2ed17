// The backend protocol of the namespace as this node answers it: store operations shipped to
// a shard's home, parts of changes across shards, unit messages to the nodes holding a pool's
// units, and a home's messages to its shard's mirror. Each is checked against this node's role
// by the last view it followed before anything runs.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <optional>
#include <span>
#include <vector>

#include "store/internal/backend_links.h"
#include "store/namespace_service.h"
#include "store/remote_store.h"

namespace tidepool::store {
namespace {

namespace asio = boost::asio;

asio::awaitable<Result<xdr::Buffer>> run_shipped(std::shared_ptr<Store> local, std::uint32_t method,
                                                 std::vector<std::uint8_t> request) {
  auto served = serve_store_call(*local, method, request);
  co_return co_await std::move(served);
}

// The shard a shipped message is for, and the message after its number.
struct ShardMessage {
  ShardId shard = 0;
  std::span<const std::uint8_t> body;
};
std::optional<ShardMessage> shard_message_of(std::span<const std::uint8_t> request) {
  xdr::Decoder in(request);
  const std::uint32_t shard = in.u32();
  if (!in.ok() || shard >= kMaxShards) return std::nullopt;
  return ShardMessage{static_cast<ShardId>(shard), in.rest()};
}

// Runs a shipped call on the store's threads and replies on the strand.
template <typename Run>
void run_and_reply(const asio::any_io_executor& store_executor, asio::any_io_executor strand,
                   Run run, cluster::RpcEndpoint::Reply reply) {
  asio::co_spawn(store_executor, std::move(run),
                 [strand = std::move(strand), reply](std::exception_ptr failure,
                                                     Result<xdr::Buffer> result) mutable {
                   if (failure) result = error(Errc::internal, "a shipped operation threw");
                   // Moved, not copied: a read's reply holds its data.
                   asio::post(strand,
                              [reply = std::move(reply), result = std::move(result)]() mutable {
                                reply(std::move(result));
                              });
                 });
}

asio::awaitable<Result<xdr::Buffer>> run_participant_call(std::shared_ptr<LocalStore> store,
                                                          std::uint32_t method,
                                                          std::vector<std::uint8_t> request) {
  auto served = serve_participant_call(store->participant(), method, request);
  co_return co_await std::move(served);
}

}  // namespace

void NamespaceService::serve(cluster::RpcEndpoint& rpc) {
  // A shipped call for a shard this node does not serve: the caller is behind (or ahead) of
  // this node's view, and retries later.
  auto served_shard = [this](std::span<const std::uint8_t> request,
                             cluster::RpcEndpoint::Reply& reply) -> std::optional<ShardMessage> {
    std::optional<ShardMessage> message = shard_message_of(request);
    if (!message) {
      reply(error(Errc::invalid_argument, "a shipped call for no shard"));
    } else if (message->shard >= shards_.size() || shards_[message->shard].routed_to != self_) {
      reply(error(Errc::unavailable, "node " + std::to_string(self_) + " is not shard " +
                                         std::to_string(message->shard) + "'s home"));
      message.reset();
    }
    return message;
  };
  for (std::uint32_t method = 1; method <= kLastStoreMethod; ++method) {
    rpc.handle(
        internal::kStoreMethodBase + method,
        [this, method, served_shard](cluster::NodeId, std::span<const std::uint8_t> request,
                                     cluster::RpcEndpoint::Reply reply) {
          std::optional<ShardMessage> message = served_shard(request, reply);
          if (!message) return;
          // A write or commit (of one inode of the shard) answers the shard's own write
          // verifier. The namespace's would fold in what this node last heard of the
          // other shards' — which the caller's fold feeds back, each changing the other
          // on every exchange, and clients would resend their writes without end.
          const auto called = static_cast<StoreMethod>(method);
          const bool own_verifier =
              called == StoreMethod::write || called == StoreMethod::record_write ||
              called == StoreMethod::commit || called == StoreMethod::write_verifier;
          run_and_reply(
              store_executor_, strand_,
              run_shipped(own_verifier ? shards_[message->shard].store : served(), method,
                          std::vector<std::uint8_t>(message->body.begin(), message->body.end())),
              std::move(reply));
        });
  }
  for (std::uint32_t method = 1; method <= kLastParticipantMethod; ++method) {
    rpc.handle(internal::kParticipantMethodBase + method,
               [this, method, served_shard](cluster::NodeId, std::span<const std::uint8_t> request,
                                            cluster::RpcEndpoint::Reply reply) {
                 std::optional<ShardMessage> message = served_shard(request, reply);
                 if (!message) return;
                 run_and_reply(store_executor_, strand_,
                               run_participant_call(shards_[message->shard].store, method,
                                                    std::vector<std::uint8_t>(message->body.begin(),
                                                                              message->body.end())),
                               std::move(reply));
               });
  }
  for (std::uint32_t method = 1; method <= kLastUnitMethod; ++method) {
    rpc.handle(
        internal::kUnitMethodBase + method,
        [this, method](cluster::NodeId, std::span<const std::uint8_t> request,
                       cluster::RpcEndpoint::Reply reply) {
          asio::post(blocking_, [this, method, strand = strand_, reply,
                                 body = std::vector<std::uint8_t>(request.begin(), request.end())] {
            Result<xdr::Buffer> answer = units_->serve(method, body);
            asio::post(strand,
                       [reply, answer = std::move(answer)]() mutable { reply(std::move(answer)); });
          });
        });
  }
  for (std::uint32_t method = 1; method <= kLastMirrorMethod; ++method) {
    rpc.handle(
        internal::kMirrorMethodBase + method,
        [this, method](cluster::NodeId from, std::span<const std::uint8_t> request,
                       cluster::RpcEndpoint::Reply reply) {
          std::optional<ShardMessage> message = shard_message_of(request);
          if (!message) {
            reply(error(Errc::invalid_argument, "a mirror message for no shard of the namespace"));
            return;
          }
          const ShardId shard = message->shard;
          // Only the home the view names may change the copy: a deposed one must not.
          if (role(shard) != Role::mirror || !shards_[shard].copy ||
              from != record_->places[shard].home) {
            reply(error(Errc::unavailable, "node " + std::to_string(self_) + " is not shard " +
                                               std::to_string(shard) + "'s mirror for node " +
                                               std::to_string(from)));
            return;
          }
          asio::post(blocking_, [copy = shards_[shard].copy, method, strand = strand_, reply,
                                 body = std::vector<std::uint8_t>(message->body.begin(),
                                                                  message->body.end())] {
            Result<xdr::Buffer> answer = xdr::Buffer{};
            if (method == static_cast<std::uint32_t>(MirrorMethod::read)) {
              answer = copy->read(body);
            } else if (Status applied = copy->apply(method, body); !applied.ok()) {
              answer = applied;
            }
            asio::post(strand,
                       [reply, answer = std::move(answer)]() mutable { reply(std::move(answer)); });
          });
        });
  }
}

}  // namespace tidepool::store
