// ONC RPC (RFC 5531) messages: the call header, credentials, and reply headers.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/address_v4.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "common/piped_bytes.h"
#include "common/xdr.h"
#include "nfsd/call_statistics.h"

namespace tidepool::nfsd {

using boost::asio::awaitable;

inline constexpr std::uint32_t kRpcVersion = 2;
inline constexpr std::size_t kMaxAuthBytes = 400;
inline constexpr std::size_t kMaxAuthSysGroups = 16;

enum class AuthFlavor : std::uint32_t { none = 0, sys = 1 };

enum class AcceptStatus : std::uint32_t {
  success = 0,
  prog_unavail = 1,
  prog_mismatch = 2,
  proc_unavail = 3,
  garbage_args = 4,
  system_err = 5,
};

enum class AuthStatus : std::uint32_t {
  ok = 0,
  badcred = 1,
  rejectedcred = 2,
  badverf = 3,
  rejectedverf = 4,
  tooweak = 5,
};

// Who sent a call: the AUTH_SYS credential (or AUTH_NONE) and where it came from.
struct CallerIdentity {
  AuthFlavor flavor = AuthFlavor::none;
  std::uint32_t uid = 65534;
  std::uint32_t gid = 65534;
  std::vector<std::uint32_t> groups;
};

// Bytes a reply sends from where they lie instead of holding them (READ data in cache blocks):
// each piece goes before the reply buffer's byte `at` (never less than the last piece's; pieces
// at the same byte go in order), and its `keep` holds it until sent.
struct ReplyPieces {
  struct Piece {
    std::size_t at = 0;
    std::span<const std::uint8_t> bytes;
    std::shared_ptr<const void> keep;
    // Instead of `bytes`: all the bytes a pipe holds, spliced to the socket.
    std::shared_ptr<PipedBytes> piped;
    std::size_t size() const { return piped ? piped->size() : bytes.size(); }
  };
  std::vector<Piece> pieces;

  std::size_t bytes() const;
};

// Where a call came from.
struct RpcPeer {
  boost::asio::ip::address_v4 address;
  std::uint16_t port = 0;
  // Over UDP, where the source address is easily forged and a small call may draw a large
  // reply at someone else.
  bool datagram = false;
};

struct CallContext {
  std::uint32_t xid = 0;
  std::uint32_t program = 0;
  std::uint32_t version = 0;
  std::uint32_t procedure = 0;
  CallerIdentity identity;
  boost::asio::ip::address_v4 client;
  std::uint16_t client_port = 0;
  bool datagram = false;
  // Where a procedure may leave reply bytes by reference; null: it copies them into the reply.
  // Valid only while the call runs: work kept after it must not use it.
  ReplyPieces* pieces = nullptr;
};

// One RPC program (NFS, MOUNT, PMAP...). Thread-safe: calls run concurrently.
class RpcProgram {
 public:
  virtual ~RpcProgram() = default;
  virtual std::uint32_t number() const = 0;
  virtual std::uint32_t min_version() const = 0;
  virtual std::uint32_t max_version() const = 0;
  // Decodes the arguments, runs the procedure and appends its results. Any status but success
  // makes the server discard what was appended and send that status instead. An empty optional
  // means: send no reply at all (a retransmission of a call still in progress).
  virtual awaitable<std::optional<AcceptStatus>> call(const CallContext& context,
                                                      xdr::Decoder& arguments,
                                                      xdr::Encoder& results) = 0;
};

// The header of a call this server makes (AUTH_NONE credential and verifier); the arguments
// follow.
void encode_call(xdr::Encoder& out, std::uint32_t xid, std::uint32_t program, std::uint32_t version,
                 std::uint32_t procedure);

// Handles one call message and produces the reply message (without record marking) in `reply`,
// and in `pieces` when the caller can send bytes from where they lie. Returns false when no
// reply must be sent.
class RpcDispatcher {
 public:
  void add(RpcProgram* program) { programs_.push_back(program); }
  // Every call dispatched from now on is counted there.
  void count_in(CallStatistics* statistics) { statistics_ = statistics; }
  // `from` by value: a coroutine that kept a reference would outlive a temporary peer.
  awaitable<bool> dispatch(std::span<const std::uint8_t> message, RpcPeer from,
                           xdr::Buffer& reply, ReplyPieces* pieces = nullptr) const;

 private:
  // Fills `context` as far as the call's header decodes.
  awaitable<bool> answer(std::span<const std::uint8_t> message, CallContext& context,
                         xdr::Buffer& reply) const;
  RpcProgram* find(std::uint32_t number) const;
  std::vector<RpcProgram*> programs_;
  CallStatistics* statistics_ = nullptr;
};

}  // namespace tidepool::nfsd
