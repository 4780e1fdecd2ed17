// Function shipping: a Store on one node whose operations run on the store of another — the
// home of the shard they touch. The initiator encodes each operation (XDR), a channel carries it
// to the home, the home runs it on its own Store with serve_store_call() and the reply travels
// back. Errors cross as the Status the home's store returned, code and message intact.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <memory>
#include <span>

#include "common/status.h"
#include "common/xdr.h"
#include "store/cross_shard.h"
#include "store/store.h"

namespace tidepool::store {

// One method per Store operation; the numbers are part of the backend protocol.
enum class StoreMethod : std::uint32_t {
  getattr = 1,
  setattr,
  lookup,
  check_access,
  readlink,
  read,
  write,
  create,
  mkdir,
  symlink,
  mknod,
  remove,
  rmdir,
  rename,
  link,
  readdir,
  fsstat,
  commit,
  write_verifier,
  layout,
  set_access_pattern,
  record_reads,
  migrate,
  find_files,
  record_write,
};
inline constexpr std::uint32_t kLastStoreMethod =
    static_cast<std::uint32_t>(StoreMethod::record_write);
// A shipped operation is backend RPC method kStoreMethodBase + its StoreMethod, its request led
// by the number of the shard it is for (XDR unsigned int).
inline constexpr std::uint32_t kStoreMethodBase = 500;

// How an initiator reaches the home: sends `request` for `method` and resumes with the reply
// body, or the Status the home answered with, or why no answer came (unavailable, timed_out).
class ShardChannel {
 public:
  virtual ~ShardChannel() = default;
  virtual awaitable<Result<xdr::Buffer>> call(StoreMethod method, xdr::Buffer request) = 0;
};

// A Store whose every operation runs behind `channel`. Its write verifier is the home's, as the
// home last reported it, folded with a value drawn when this store is made, so that it changes
// when either the home or this initiator restarts. close() only stops using the channel.
std::unique_ptr<Store> make_remote_store(std::shared_ptr<ShardChannel> channel);

// Runs one shipped operation on `store` and encodes its reply. A request that does not decode
// (truncated, lying lengths, values out of range) is answered invalid_argument and never run; an
// unknown method, not_supported.
awaitable<Result<xdr::Buffer>> serve_store_call(Store& store, std::uint32_t method,
                                                std::span<const std::uint8_t> request);

// A shard's part in changes across shards (store/cross_shard.h), shipped the same way: the
// coordinating node reaches the shards that other nodes are home of.
enum class ParticipantMethod : std::uint32_t {
  prepare = 1,
  decide,
  commit,
  abort,
  finish,
  outcome,
  pending,
};
inline constexpr std::uint32_t kLastParticipantMethod =
    static_cast<std::uint32_t>(ParticipantMethod::pending);

class ParticipantChannel {
 public:
  virtual ~ParticipantChannel() = default;
  virtual awaitable<Result<xdr::Buffer>> call(ParticipantMethod method, xdr::Buffer request) = 0;
};

std::unique_ptr<ShardParticipant> make_remote_participant(
    std::shared_ptr<ParticipantChannel> channel);

// Runs one shipped participant call on `participant`; malformed requests and unknown methods
// are refused as serve_store_call refuses them.
awaitable<Result<xdr::Buffer>> serve_participant_call(ShardParticipant& participant,
                                                      std::uint32_t method,
                                                      std::span<const std::uint8_t> request);

}  // namespace tidepool::store
