#include "nfsd/internal/rpc.h"

#include <chrono>

namespace tidepool::nfsd {
namespace {

constexpr std::uint32_t kCall = 0;
constexpr std::uint32_t kReply = 1;
constexpr std::uint32_t kMsgAccepted = 0;
constexpr std::uint32_t kMsgDenied = 1;
constexpr std::uint32_t kRpcMismatch = 0;
constexpr std::uint32_t kAuthError = 1;

void encode_reply_start(xdr::Encoder& out, std::uint32_t xid) {
  out.u32(xid);
  out.u32(kReply);
}

void encode_accepted(xdr::Encoder& out, std::uint32_t xid, AcceptStatus status) {
  encode_reply_start(out, xid);
  out.u32(kMsgAccepted);
  out.u32(static_cast<std::uint32_t>(AuthFlavor::none));  // verifier: AUTH_NONE, empty
  out.u32(0);
  out.u32(static_cast<std::uint32_t>(status));
}

void encode_auth_error(xdr::Encoder& out, std::uint32_t xid, AuthStatus why) {
  encode_reply_start(out, xid);
  out.u32(kMsgDenied);
  out.u32(kAuthError);
  out.u32(static_cast<std::uint32_t>(why));
}

// Parses an AUTH_SYS body; false when it is malformed.
bool parse_auth_sys(std::span<const std::uint8_t> body, CallerIdentity& identity) {
  xdr::Decoder d(body);
  d.u32();            // stamp
  d.string(255);      // machine name
  identity.uid = d.u32();
  identity.gid = d.u32();
  std::uint32_t n = d.array_count(kMaxAuthSysGroups);
  identity.groups.clear();
  for (std::uint32_t i = 0; i < n; ++i) identity.groups.push_back(d.u32());
  identity.flavor = AuthFlavor::sys;
  return d.ok() && d.remaining() == 0;
}

}  // namespace

void encode_call(xdr::Encoder& out, std::uint32_t xid, std::uint32_t program, std::uint32_t version,
                 std::uint32_t procedure) {
  out.u32(xid);
  out.u32(kCall);
  out.u32(kRpcVersion);
  out.u32(program);
  out.u32(version);
  out.u32(procedure);
  for (int auth = 0; auth < 2; ++auth) {  // credential, then verifier
    out.u32(static_cast<std::uint32_t>(AuthFlavor::none));
    out.u32(0);
  }
}

RpcProgram* RpcDispatcher::find(std::uint32_t number) const {
  for (RpcProgram* p : programs_) {
    if (p->number() == number) return p;
  }
  return nullptr;
}

std::size_t ReplyPieces::bytes() const {
  std::size_t total = 0;
  for (const Piece& piece : pieces) total += piece.size();
  return total;
}

awaitable<bool> RpcDispatcher::dispatch(std::span<const std::uint8_t> message, RpcPeer from,
                                        xdr::Buffer& reply, ReplyPieces* pieces) const {
  const auto arrived = std::chrono::steady_clock::now();
  const std::size_t start = reply.size();
  CallContext context;
  context.client = from.address;
  context.client_port = from.port;
  context.datagram = from.datagram;
  if (pieces) pieces->pieces.clear();
  context.pieces = pieces;
  auto answering = answer(message, context, reply);
  const bool send = co_await std::move(answering);
  if (statistics_ != nullptr) {
    const std::size_t sent = reply.size() - start + (pieces ? pieces->bytes() : 0);
    statistics_->record(context.program, context.version, context.procedure,
                        from.address.to_uint(), message.size(), send ? sent : 0,
                        std::chrono::steady_clock::now() - arrived);
  }
  co_return send;
}

awaitable<bool> RpcDispatcher::answer(std::span<const std::uint8_t> message, CallContext& context,
                                      xdr::Buffer& reply) const {
  xdr::Decoder in(message);
  xdr::Encoder out(reply);
  const std::size_t start = reply.size();

  context.xid = in.u32();
  std::uint32_t type = in.u32();
  // Not a call, or too short to answer: there is nobody to reply to.
  if (!in.ok() || type != kCall) co_return false;

  std::uint32_t rpc_version = in.u32();
  context.program = in.u32();
  context.version = in.u32();
  context.procedure = in.u32();
  auto cred_flavor = in.u32();
  auto cred_body = in.opaque(kMaxAuthBytes);
  in.u32();  // verifier flavor: AUTH_NONE and AUTH_SYS calls carry no verifier we check
  in.opaque(kMaxAuthBytes);
  if (!in.ok()) {
    encode_accepted(out, context.xid, AcceptStatus::garbage_args);
    co_return true;
  }
  if (rpc_version != kRpcVersion) {
    encode_reply_start(out, context.xid);
    out.u32(kMsgDenied);
    out.u32(kRpcMismatch);
    out.u32(kRpcVersion);
    out.u32(kRpcVersion);
    co_return true;
  }
  if (cred_flavor == static_cast<std::uint32_t>(AuthFlavor::sys)) {
    if (!parse_auth_sys(cred_body, context.identity)) {
      encode_auth_error(out, context.xid, AuthStatus::badcred);
      co_return true;
    }
  } else if (cred_flavor != static_cast<std::uint32_t>(AuthFlavor::none)) {
    encode_auth_error(out, context.xid, AuthStatus::badcred);
    co_return true;
  }

  RpcProgram* program = find(context.program);
  if (!program) {
    encode_accepted(out, context.xid, AcceptStatus::prog_unavail);
    co_return true;
  }
  if (context.version < program->min_version() || context.version > program->max_version()) {
    encode_accepted(out, context.xid, AcceptStatus::prog_mismatch);
    out.u32(program->min_version());
    out.u32(program->max_version());
    co_return true;
  }

  encode_accepted(out, context.xid, AcceptStatus::success);
  xdr::Decoder arguments(in.rest());
  auto status = co_await program->call(context, arguments, out);
  if (!status || *status != AcceptStatus::success) {
    reply.resize(start);
    if (context.pieces) context.pieces->pieces.clear();
  }
  if (!status) co_return false;
  if (*status != AcceptStatus::success) encode_accepted(out, context.xid, *status);
  co_return true;
}

}  // namespace tidepool::nfsd
