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

// Whether a shipped call only reads: its answer is good only if the lease held until it was
// ready.
bool only_reads(StoreMethod method) {
  switch (method) {
    case StoreMethod::getattr:
    case StoreMethod::lookup:
    case StoreMethod::check_access:
    case StoreMethod::readlink:
    case StoreMethod::read:
    case StoreMethod::readdir:
    case StoreMethod::fsstat:
    case StoreMethod::write_verifier:
    case StoreMethod::layout:
    case StoreMethod::find_files:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::optional<cluster::RpcEndpoint::Reply> NamespaceService::while_leased(
    cluster::RpcEndpoint::Reply reply, bool reads) const {
  cluster::GroupMember* group = cluster_ != nullptr ? cluster_->group() : nullptr;
  if (group == nullptr) return reply;
  std::shared_ptr<const cluster::Lease> lease = group->lease();
  const std::uint64_t started = lease->now_ms();
  auto lapsed = [self = self_] {
    return error(Errc::unavailable,
                 "node " + std::to_string(self) + " holds no lease from the group: retry later");
  };
  if (!lease->held_since(started)) {
    reply(lapsed());
    return std::nullopt;
  }
  if (!reads) return reply;
  return [lease, started, lapsed, reply = std::move(reply)](Result<xdr::Buffer> answer) {
    reply(lease->held_since(started) ? std::move(answer) : lapsed());
  };
}

void NamespaceService::serve(cluster::RpcEndpoint& rpc) {
  // A shipped call for a shard this node does not serve: the caller is behind (or ahead) of
  // this node's view, and retries later. One it serves is answered only under its lease.
  auto served_shard = [this](std::span<const std::uint8_t> request, cluster::RpcEndpoint::Reply& reply,
                             bool reads) -> std::optional<ShardMessage> {
    std::optional<cluster::RpcEndpoint::Reply> leased = while_leased(std::move(reply), reads);
    if (!leased) return std::nullopt;
    reply = std::move(*leased);
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
        kStoreMethodBase + method,
        [this, method, served_shard](cluster::NodeId, std::span<const std::uint8_t> request,
                                     cluster::RpcEndpoint::Reply reply) {
          std::optional<ShardMessage> message =
              served_shard(request, reply, only_reads(static_cast<StoreMethod>(method)));
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
                 std::optional<ShardMessage> message = served_shard(request, reply, false);
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
          // An owner that lapsed may have missed writes that went on without it.
          if (method == static_cast<std::uint32_t>(UnitMethod::read)) {
            std::optional<cluster::RpcEndpoint::Reply> leased =
                while_leased(std::move(reply), true);
            if (!leased) return;
            reply = std::move(*leased);
          }
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
          // A mirror that lapsed may have been replaced: its copy is not one to repair from.
          if (method == static_cast<std::uint32_t>(MirrorMethod::read)) {
            std::optional<cluster::RpcEndpoint::Reply> leased =
                while_leased(std::move(reply), true);
            if (!leased) return;
            reply = std::move(*leased);
          }
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
