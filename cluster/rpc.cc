#include "cluster/rpc.h"

#include <spdlog/spdlog.h>

#include <vector>

namespace tidepool::cluster {
namespace {

enum class Kind : std::uint32_t { call = 1, reply = 2 };
constexpr std::size_t kMaxErrorMessage = 4096;

void encode_trailer(xdr::Buffer& message, Kind kind, std::uint64_t id, Epoch epoch,
                    std::uint32_t method_or_status) {
  xdr::Encoder out(message);
  out.u32(static_cast<std::uint32_t>(kind));
  out.u64(id);
  out.u64(epoch);
  out.u32(method_or_status);
}

}  // namespace

RpcEndpoint::RpcEndpoint(EventLoop& loop, Transport& transport, std::function<Epoch()> epoch)
    : loop_(loop), transport_(transport), epoch_(std::move(epoch)) {
  transport_.set_receiver(Channel::rpc, [this](NodeId from, xdr::Buffer& m) { receive(from, m); });
}

RpcEndpoint::~RpcEndpoint() {
  *alive_ = false;
  transport_.set_receiver(Channel::rpc, nullptr);
  auto pending = std::move(pending_);
  for (auto& [id, call] : pending) {
    loop_.cancel(call.timer);
    call.done(error(Errc::unavailable, "the node is stopping"));
  }
}

void RpcEndpoint::handle(std::uint32_t method, Handler handler) {
  handlers_[method] = std::move(handler);
}

void RpcEndpoint::call(NodeId to, std::uint32_t method, std::span<const std::uint8_t> request,
                       std::chrono::milliseconds deadline, Reply done) {
  std::uint64_t id = next_id_++;
  xdr::Buffer message;
  message.reserve(request.size() + kRpcTrailerBytes);
  xdr::append(message, request);
  encode_trailer(message, Kind::call, id, epoch_(), method);
  EventLoop::TimerId timer = loop_.schedule(deadline, [this, id, to, method, deadline] {
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    Reply late = std::move(it->second.done);
    pending_.erase(it);
    late(error(Errc::timed_out, "no reply from node " + std::to_string(to) + " to call " +
                                    std::to_string(method) + " within " +
                                    std::to_string(deadline.count()) + " ms"));
  });
  pending_.emplace(id, Pending{to, std::move(done), timer});
  transport_.send(to, Channel::rpc, std::move(message));
}

void RpcEndpoint::abandon_calls_to(NodeId to, const std::string& why) {
  std::vector<Reply> abandoned;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.to != to) {
      ++it;
      continue;
    }
    loop_.cancel(it->second.timer);
    abandoned.push_back(std::move(it->second.done));
    it = pending_.erase(it);
  }
  // After the table is settled: a reply may make new calls.
  for (Reply& done : abandoned) {
    done(error(Errc::timed_out, "no reply from node " + std::to_string(to) + ": " + why));
  }
}

void RpcEndpoint::receive(NodeId from, xdr::Buffer& message) {
  if (message.size() < kRpcTrailerBytes) {
    spdlog::warn("backend rpc: dropped a malformed message from node {}", from);
    return;
  }
  const std::size_t body_bytes = message.size() - kRpcTrailerBytes;
  const std::span<const std::uint8_t> body(message.data(), body_bytes);
  xdr::Decoder in(std::span<const std::uint8_t>(message).subspan(body_bytes));
  auto kind = static_cast<Kind>(in.u32());
  std::uint64_t id = in.u64();
  Epoch epoch = in.u64();
  std::uint32_t method_or_status = in.u32();
  if (!in.ok() || (kind != Kind::call && kind != Kind::reply)) {
    spdlog::warn("backend rpc: dropped a malformed message from node {}", from);
    return;
  }
  if (kind == Kind::call) {
    serve(from, id, epoch, method_or_status, body);
    return;
  }
  auto it = pending_.find(id);
  if (it == pending_.end()) return;  // after its deadline, or a duplicate
  Pending call = std::move(it->second);
  pending_.erase(it);
  loop_.cancel(call.timer);
  if (method_or_status > static_cast<std::uint32_t>(Errc::internal)) {
    call.done(error(Errc::corrupt, "reply with an unknown status"));
    return;
  }
  auto status = static_cast<Errc>(method_or_status);
  if (status == Errc::ok) {
    message.resize(body_bytes);
    call.done(std::move(message));
    return;
  }
  xdr::Decoder why(body);
  std::string reason(why.string(kMaxErrorMessage));
  call.done(error(why.ok() ? status : Errc::corrupt, why.ok() ? reason : "malformed error reply"));
}

void RpcEndpoint::serve(NodeId from, std::uint64_t id, Epoch epoch, std::uint32_t method,
                        std::span<const std::uint8_t> body) {
  Epoch mine = epoch_();
  if (epoch < mine) {
    send_reply(from, id,
               error(Errc::behind, "request stamped with group epoch " +
                                                    std::to_string(epoch) + ", older than " +
                                                    std::to_string(mine) + " here"));
    return;
  }
  auto handler = handlers_.find(method);
  if (handler == handlers_.end()) {
    send_reply(from, id, error(Errc::not_supported, "no method " + std::to_string(method)));
    return;
  }
  handler->second(from, body, [this, alive = alive_, from, id](Result<xdr::Buffer> reply) {
    if (*alive) send_reply(from, id, std::move(reply));
  });
}

void RpcEndpoint::send_reply(NodeId to, std::uint64_t id, Result<xdr::Buffer> reply) {
  const auto status = static_cast<std::uint32_t>(reply.ok() ? Errc::ok : reply.code());
  xdr::Buffer message;
  if (reply.ok()) {
    message = std::move(*reply);
  } else {
    xdr::Encoder(message).string(reply.status().message().substr(0, kMaxErrorMessage));
  }
  encode_trailer(message, Kind::reply, id, epoch_(), status);
  transport_.send(to, Channel::rpc, std::move(message));
}

}  // namespace tidepool::cluster
